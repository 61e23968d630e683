/* json_util.c: bounded whole-file reads and jansson parsing with one-line errors. */
#include "convert/json_util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

int json_util_read_file(const char *path, size_t max_bytes, char **buf, size_t *len, clover_error *err) {
    *buf = NULL;
    *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return error_set(err, CLOVER_E_IO, "%s: cannot open: %s", path, strerror(errno));
    char *b = NULL;
    size_t n = 0, cap = 0;
    int rc = CLOVER_OK;
    for (;;) {
        if (n + 1 >= cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            if (cap > max_bytes) {
                rc = error_set(err, CLOVER_E_FORMAT, "%s: larger than %zu bytes", path, max_bytes);
                break;
            }
            char *nb = mem_alloc(ncap);
            if (!nb) {
                rc = error_set(err, CLOVER_E_NOMEM, "%s: out of memory reading it", path);
                break;
            }
            if (n) memcpy(nb, b, n);
            mem_free(b);
            b = nb;
            cap = ncap;
        }
        size_t got = fread(b + n, 1, cap - 1 - n, fp);
        n += got;
        if (got == 0) {
            if (ferror(fp)) rc = error_set(err, CLOVER_E_IO, "%s: read error", path);
            break;
        }
    }
    fclose(fp);
    if (rc == CLOVER_OK && n > max_bytes)
        rc = error_set(err, CLOVER_E_FORMAT, "%s: larger than %zu bytes", path, max_bytes);
    if (rc) {
        mem_free(b);
        return rc;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return CLOVER_OK;
}

int json_util_load(const char *path, size_t max_bytes, json_t **out, clover_error *err) {
    *out = NULL;
    char *buf;
    size_t len;
    int rc = json_util_read_file(path, max_bytes, &buf, &len, err);
    if (rc) return rc;
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    mem_free(buf);
    if (!root)
        return error_set(err, CLOVER_E_FORMAT, "%s: not valid JSON: %s (line %d, column %d)", path, jerr.text,
                         jerr.line, jerr.column);
    *out = root;
    return CLOVER_OK;
}

const char *json_util_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}
