/*
 * json_wide.c: the second reading, for a body jansson refused with a
 * numeric overflow. A small scanner walks the bytes (strings and their
 * escapes skipped, depth counted) and copies them, rewriting each integer
 * literal outside int64. It does not validate: the copy goes back to
 * jansson, which does. The copy grows by at most 2 bytes per literal.
 */
#include "json_wide.h"

#include <stdlib.h>
#include <string.h>

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The integer literal [p, p + n) ("-"? digits): 1 when it is outside int64; *u its value when it fits 64 unsigned
 * bits and is not negative (*fits = 1). */
static int outside_int64(const char *p, size_t n, uint64_t *u, int *fits) {
    int neg = *p == '-';
    size_t i = neg;
    uint64_t x = 0;
    int over = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned)(p[i] - '0');
        if (x > (UINT64_MAX - d) / 10) over = 1;
        else x = 10 * x + d;
    }
    *u = x;
    *fits = !over && !neg;
    if (over) return 1;
    return neg ? x > (uint64_t)INT64_MAX + 1 : x > (uint64_t)INT64_MAX;
}

json_t *json_wide_load(const char *body, size_t len, uint64_t *wide_seed, int *has_wide_seed, json_error_t *err) {
    *has_wide_seed = 0;
    json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, err);
    if (root || json_error_code(err) != json_error_numeric_overflow) return root;
    size_t literals = 0;
    for (size_t i = 0; i < len; i++)
        literals += is_digit(body[i]);
    char *copy = malloc(len + 2 * literals + 1);
    if (!copy) return NULL; /* err still says what jansson said */
    size_t o = 0;
    int depth = 0, seed_key = 0; /* seed_key: the last token was the top-level key "seed" and its ':' */
    int key_was_seed = 0;
    for (size_t i = 0; i < len;) {
        char c = body[i];
        if (c == '"') { /* a string, copied whole */
            size_t s = i++;
            while (i < len && body[i] != '"')
                i += body[i] == '\\' ? 2 : 1;
            i = i < len ? i + 1 : len;
            memcpy(copy + o, body + s, i - s);
            o += i - s;
            key_was_seed = depth == 1 && i - s == 6 && !memcmp(body + s, "\"seed\"", 6);
            seed_key = 0;
            continue;
        }
        if (c == '-' || is_digit(c)) {
            size_t s = i++;
            while (i < len && is_digit(body[i]))
                i++;
            int integer = i == len || (body[i] != '.' && body[i] != 'e' && body[i] != 'E');
            uint64_t u;
            int fits;
            memcpy(copy + o, body + s, i - s);
            o += i - s;
            if (integer && i - s > (body[s] == '-') && outside_int64(body + s, i - s, &u, &fits)) {
                if (seed_key && fits) {
                    *wide_seed = u;
                    *has_wide_seed = 1;
                    o -= i - s;
                    copy[o++] = '0';
                } else {
                    memcpy(copy + o, ".0", 2);
                    o += 2;
                }
            }
            while (i < len && (is_digit(body[i]) || strchr(".eE+-", body[i]))) /* the rest of a real */
                copy[o++] = body[i++];
            seed_key = key_was_seed = 0;
            continue;
        }
        if (c == '{' || c == '[') depth++;
        if (c == '}' || c == ']') depth--;
        if (c == ':') seed_key = key_was_seed;
        else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') seed_key = key_was_seed = 0;
        copy[o++] = c;
        i++;
    }
    root = json_loadb(copy, o, JSON_ALLOW_NUL, err);
    free(copy);
    if (!root) *has_wide_seed = 0;
    return root;
}
