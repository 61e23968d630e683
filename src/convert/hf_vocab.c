/*
 * hf_vocab.c: tokenizer.json and its companions -> tokenizer.ggml.* values.
 *
 * Strings are not copied: tokens and merges point into the parsed JSON,
 * which lives as long as the hf_vocab; only what must be built (padding
 * names, joined merge pairs, the chat template file) goes to a block arena,
 * so a 248k-token vocabulary costs a few allocations.
 */
#include "convert/hf_vocab.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/log.h"
#include "convert/json_util.h"

enum { ARENA_BLOCK = 1 << 20, JSON_MAX = 1u << 30 };

/* ---- arena: blocks chained through their first pointer ---- */

static char *arena_alloc(hf_vocab *v, size_t n) {
    if (!v->arena || v->arena_used + n > v->arena_cap) {
        size_t cap = n + sizeof(char *) > ARENA_BLOCK ? n + sizeof(char *) : ARENA_BLOCK;
        char *b = mem_alloc(cap);
        if (!b) return NULL;
        memcpy(b, &v->arena, sizeof(char *));
        v->arena = b;
        v->arena_used = sizeof(char *);
        v->arena_cap = cap;
    }
    char *p = v->arena + v->arena_used;
    v->arena_used += n;
    return p;
}

static void arena_free(hf_vocab *v) {
    char *b = v->arena;
    while (b) {
        char *next;
        memcpy(&next, b, sizeof next);
        mem_free(b);
        b = next;
    }
    v->arena = NULL;
}

static char *path_in(char *buf, size_t n, const char *dir, const char *name) {
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Loads an optional JSON file into v->json[slot]; NULL when absent. */
static int load_optional(hf_vocab *v, int slot, const char *path, json_t **out, clover_error *err) {
    *out = NULL;
    if (!exists(path)) return CLOVER_OK;
    int rc = json_util_load(path, JSON_MAX, out, err);
    if (rc) return rc;
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return error_set(err, CLOVER_E_FORMAT, "%s: expected a JSON object", path);
    }
    v->json[slot] = *out;
    return CLOVER_OK;
}

/* ---- tokens ---- */

static bool looks_special(const char *s) {
    size_t n = strlen(s);
    if (!strcmp(s, "<pad>") || !strcmp(s, "<mask>") || !strcmp(s, "<2mass>") || !strcmp(s, "[@BOS@]")) return true;
    if (n >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + n - 2, "|>")) return true;
    /* "<｜" ... "｜>" with U+FF5C FULLWIDTH VERTICAL LINE (EF BD 9C) */
    if (n >= 8 && !strncmp(s, "<\xef\xbd\x9c", 4) && !strcmp(s + n - 4, "\xef\xbd\x9c>")) return true;
    if (n >= 8 && !strncmp(s, "<unused", 7) && s[n - 1] == '>') return true;
    return false;
}

static int read_tokens(hf_vocab *v, json_t *tok, const char *path, const hf_config *cfg, clover_error *err) {
    json_t *model = json_object_get(tok, "model");
    if (!json_is_object(model)) return error_set(err, CLOVER_E_FORMAT, "%s: 'model' is missing or not an object", path);
    json_t *type = json_object_get(model, "type");
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "BPE")))
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: model.type '%s' is not supported (BPE expected)", path,
                         json_is_string(type) ? json_string_value(type) : json_util_kind(type));
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab))
        return error_set(err, CLOVER_E_FORMAT, "%s: model.vocab is missing or not an object", path);

    v->n_tokens = cfg->vocab_size;
    v->tokens = mem_calloc(v->n_tokens, sizeof *v->tokens);
    v->types = mem_calloc(v->n_tokens, sizeof *v->types);
    if (!v->tokens || !v->types)
        return error_set(err, CLOVER_E_NOMEM, "%s: out of memory for %u tokens", path, v->n_tokens);

    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0)
            return error_set(err, CLOVER_E_FORMAT, "%s: model.vocab['%s'] is not a non-negative integer id", path, key);
        json_int_t id = json_integer_value(val);
        if (id >= (json_int_t)v->n_tokens)
            return error_set(err, CLOVER_E_FORMAT, "%s: token '%s' has id %lld, but config.json's vocab_size is %u",
                             path, key, (long long)id, v->n_tokens);
        if (v->tokens[id])
            return error_set(err, CLOVER_E_FORMAT, "%s: tokens '%s' and '%s' share id %lld", path, v->tokens[id], key,
                             (long long)id);
        v->tokens[id] = key;
        v->types[id] = HF_TOKEN_NORMAL;
    }

    json_t *added = json_object_get(tok, "added_tokens");
    if (added && !json_is_array(added))
        return error_set(err, CLOVER_E_FORMAT, "%s: added_tokens is %s, expected an array", path,
                         json_util_kind(added));
    size_t i;
    json_array_foreach(added, i, val) {
        json_t *jid = json_object_get(val, "id"), *jc = json_object_get(val, "content");
        json_t *js = json_object_get(val, "special");
        if (!json_is_integer(jid) || json_integer_value(jid) < 0 || !json_is_string(jc))
            return error_set(err, CLOVER_E_FORMAT, "%s: added_tokens[%zu] lacks an integer 'id' or a string 'content'",
                             path, i);
        json_int_t id = json_integer_value(jid);
        if (id >= (json_int_t)v->n_tokens)
            return error_set(err, CLOVER_E_FORMAT,
                             "%s: added token '%s' has id %lld, but config.json's vocab_size is %u",
                             path, json_string_value(jc), (long long)id, v->n_tokens);
        const char *content = json_string_value(jc);
        v->tokens[id] = content;
        v->types[id] = (json_is_true(js) || looks_special(content)) ? HF_TOKEN_CONTROL : HF_TOKEN_USER_DEFINED;
    }

    for (uint32_t t = 0; t < v->n_tokens; t++) {
        if (v->tokens[t]) continue;
        char *s = arena_alloc(v, 24);
        if (!s) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", path);
        snprintf(s, 24, "[PAD%u]", t);
        v->tokens[t] = s;
        v->types[t] = HF_TOKEN_UNUSED;
    }
    return CLOVER_OK;
}

/* ---- merges ---- */

/* Appends s to dst, a space written as U+0120 (llama.cpp's encoding). */
static char *put_part(char *dst, const char *s) {
    for (; *s; s++) {
        if (*s == ' ') {
            *dst++ = (char)0xC4;
            *dst++ = (char)0xA0;
        } else {
            *dst++ = *s;
        }
    }
    return dst;
}

static int read_merges(hf_vocab *v, json_t *tok, const char *path, clover_error *err) {
    json_t *merges = json_object_get(json_object_get(tok, "model"), "merges");
    if (!merges) return CLOVER_OK;
    if (!json_is_array(merges)) return error_set(err, CLOVER_E_FORMAT, "%s: model.merges is not an array", path);
    v->n_merges = json_array_size(merges);
    if (!v->n_merges) return CLOVER_OK;
    v->merges = mem_calloc(v->n_merges, sizeof *v->merges);
    if (!v->merges) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory for %llu merges", path,
                                     (unsigned long long)v->n_merges);
    size_t i;
    json_t *m;
    json_array_foreach(merges, i, m) {
        if (json_is_string(m)) {
            const char *s = json_string_value(m);
            if (!strchr(s, ' '))
                return error_set(err, CLOVER_E_FORMAT, "%s: model.merges[%zu] '%s' is not 'left right'", path, i, s);
            v->merges[i] = s;
            continue;
        }
        json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
        if (!json_is_array(m) || json_array_size(m) != 2 || !json_is_string(a) || !json_is_string(b))
            return error_set(err, CLOVER_E_FORMAT, "%s: model.merges[%zu] is neither 'left right' nor [left, right]",
                             path, i);
        const char *sa = json_string_value(a), *sb = json_string_value(b);
        char *d = arena_alloc(v, 2 * (strlen(sa) + strlen(sb)) + 2);
        if (!d) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", path);
        v->merges[i] = d;
        d = put_part(d, sa);
        *d++ = ' ';
        d = put_part(d, sb);
        *d = '\0';
    }
    return CLOVER_OK;
}

/* ---- pre-tokenizer ---- */

static const char *const qwen2_regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

static const char *find_split_regex(json_t *pt) {
    if (!json_is_object(pt)) return NULL;
    const char *type = json_string_value(json_object_get(pt, "type"));
    if (type && !strcmp(type, "Split"))
        return json_string_value(json_object_get(json_object_get(pt, "pattern"), "Regex"));
    json_t *list = json_object_get(pt, "pretokenizers");
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        const char *r = find_split_regex(e);
        if (r) return r;
    }
    return NULL;
}

/* "qwen35" for Qwen3.5's regex (letters join \p{M}), "qwen2" for Qwen2/3's. */
static const char *detect_pre(json_t *tok, const char *path) {
    const char *re = find_split_regex(json_object_get(tok, "pre_tokenizer"));
    if (re && strstr(re, "\\p{M}")) return "qwen35";
    if (re && !strcmp(re, qwen2_regex)) return "qwen2";
    log_line(LOG_WARN, "%s: pre-tokenizer regex not recognised; writing tokenizer.ggml.pre = qwen35", path);
    return "qwen35";
}

/* ---- special tokens ---- */

static int64_t find_token(json_t *tok, const char *content) {
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(tok, "added_tokens"), i, a) {
        const char *c = json_string_value(json_object_get(a, "content"));
        if (c && !strcmp(c, content)) return json_integer_value(json_object_get(a, "id"));
    }
    json_t *id = json_object_get(json_object_get(json_object_get(tok, "model"), "vocab"), content);
    return json_is_integer(id) ? json_integer_value(id) : -1;
}

/* tokenizer_config.json's "<x>_token": a string or {"content": ...}. */
static int64_t config_token(json_t *tok, json_t *tc, const char *field) {
    json_t *e = tc ? json_object_get(tc, field) : NULL;
    const char *s = json_is_string(e) ? json_string_value(e) : json_string_value(json_object_get(e, "content"));
    return s ? find_token(tok, s) : -1;
}

/* generation_config.json's "<x>_token_id": an integer or a list (first entry). */
static int64_t gen_token(json_t *gc, const char *field) {
    json_t *e = gc ? json_object_get(gc, field) : NULL;
    if (json_is_array(e)) e = json_array_get(e, 0);
    return json_is_integer(e) && json_integer_value(e) >= 0 ? json_integer_value(e) : -1;
}

static int64_t first_valid(const hf_vocab *v, int64_t a, int64_t b, int64_t c) {
    int64_t ids[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (ids[i] >= 0 && ids[i] < (int64_t)v->n_tokens) return ids[i];
    return -1;
}

static int read_chat_template(hf_vocab *v, const char *dir, json_t *tc, clover_error *err) {
    const char *t = tc ? json_string_value(json_object_get(tc, "chat_template")) : NULL;
    if (t) {
        v->chat_template = t;
        return CLOVER_OK;
    }
    char path[4096];
    if (exists(path_in(path, sizeof path, dir, "chat_template.jinja"))) {
        char *buf;
        size_t len;
        int rc = json_util_read_file(path, 16u << 20, &buf, &len, err);
        if (rc) return rc;
        char *d = arena_alloc(v, len + 1);
        if (!d) {
            mem_free(buf);
            return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", path);
        }
        memcpy(d, buf, len + 1);
        mem_free(buf);
        v->chat_template = d;
        return CLOVER_OK;
    }
    json_t *ct;
    int rc = load_optional(v, 3, path_in(path, sizeof path, dir, "chat_template.json"), &ct, err);
    if (rc) return rc;
    if (ct) v->chat_template = json_string_value(json_object_get(ct, "chat_template"));
    return CLOVER_OK;
}

int hf_vocab_load(hf_vocab *v, const char *dir, const hf_config *cfg, clover_error *err) {
    memset(v, 0, sizeof *v);
    char path[4096];
    json_t *tok, *tc, *gc;
    path_in(path, sizeof path, dir, "tokenizer.json");
    int rc = json_util_load(path, JSON_MAX, &tok, err);
    if (rc) return rc;
    v->json[0] = tok;
    if (!json_is_object(tok)) {
        rc = error_set(err, CLOVER_E_FORMAT, "%s: expected a JSON object", path);
        goto fail;
    }
    if ((rc = read_tokens(v, tok, path, cfg, err)) || (rc = read_merges(v, tok, path, err))) goto fail;
    v->pre = detect_pre(tok, path);

    if ((rc = load_optional(v, 1, path_in(path, sizeof path, dir, "tokenizer_config.json"), &tc, err))) goto fail;
    if ((rc = load_optional(v, 2, path_in(path, sizeof path, dir, "generation_config.json"), &gc, err))) goto fail;

    v->eos_id = first_valid(v, config_token(tok, tc, "eos_token"), gen_token(gc, "eos_token_id"), cfg->eos_token_id);
    v->pad_id = first_valid(v, config_token(tok, tc, "pad_token"), gen_token(gc, "pad_token_id"), cfg->pad_token_id);
    v->bos_id = first_valid(v, config_token(tok, tc, "bos_token"), cfg->bos_token_id, gen_token(gc, "bos_token_id"));
    json_t *ab = tc ? json_object_get(tc, "add_bos_token") : NULL;
    v->add_bos = json_is_true(ab);
    if ((rc = read_chat_template(v, dir, tc, err))) goto fail;
    return CLOVER_OK;
fail:
    hf_vocab_free(v);
    return rc;
}

void hf_vocab_free(hf_vocab *v) {
    if (!v) return;
    mem_free(v->tokens);
    mem_free(v->types);
    mem_free(v->merges);
    for (int i = 0; i < 4; i++) json_decref(v->json[i]);
    arena_free(v);
    memset(v, 0, sizeof *v);
}
