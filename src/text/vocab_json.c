/*
 * vocab_json.c: loading a Hugging Face tokenizer.json (jansson).
 *
 * Only what byte-level BPE models use is accepted, and anything else is
 * refused by name rather than approximated: a tokenizer that encodes
 * differently from its reference is worse than one that does not load.
 * Accepted: model BPE (optionally ignore_merges, unk_token, fuse_unk; no
 * byte fallback, no subword prefix/suffix, no dropout); normalizer null,
 * NFC, NFD, NFKC, NFKD or a Sequence of them; pre_tokenizer ByteLevel
 * (add_prefix_space false; use_regex adds GPT-2's pattern), optionally
 * after Split stages (behaviour Isolated, not inverted) in a Sequence;
 * decoder ByteLevel. post_processor is ignored: encoding never adds BOS or
 * EOS (tokenizer_specials.add_bos tells the caller when to).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/error.h"
#include "text/tok_internal.h"

/* GPT-2's pattern, what ByteLevel(use_regex=true) splits with. */
static const char GPT2_PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const char *type_of(json_t *obj) {
    json_t *ty = json_object_get(obj, "type");
    return json_is_string(ty) ? json_string_value(ty) : NULL;
}

static int get_bool(const tokenizer *t, json_t *obj, const char *key, bool dflt, bool *out, const char *where,
                    clover_error *err) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return CLOVER_OK;
    }
    if (!json_is_boolean(v))
        return error_set(err, CLOVER_E_FORMAT, "%s: %s.%s: expected true or false", t->name, where, key);
    *out = json_is_true(v);
    return CLOVER_OK;
}

/* A string field that must be absent, null or equal to allowed. */
static int check_string_is(const tokenizer *t, json_t *obj, const char *key, const char *allowed, const char *where,
                           clover_error *err) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return CLOVER_OK;
    if (!json_is_string(v)) return error_set(err, CLOVER_E_FORMAT, "%s: %s.%s: expected a string", t->name, where, key);
    if (strcmp(json_string_value(v), allowed) != 0)
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: %s.%s is \"%s\"; only \"%s\" is supported", t->name, where,
                         key, json_string_value(v), allowed);
    return CLOVER_OK;
}

/* ---- normalizer ---- */

static int add_normalizer(tokenizer *t, json_t *n, const char *where, clover_error *err) {
    if (!n || json_is_null(n)) return CLOVER_OK;
    const char *ty = type_of(n);
    if (!ty) return error_set(err, CLOVER_E_FORMAT, "%s: %s: expected an object with a \"type\"", t->name, where);
    if (strcmp(ty, "Sequence") == 0) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list))
            return error_set(err, CLOVER_E_FORMAT, "%s: %s.normalizers: expected an array", t->name, where);
        for (size_t i = 0; i < json_array_size(list); i++) {
            char sub[128];
            snprintf(sub, sizeof sub, "%s.normalizers[%zu]", where, i);
            int rc = add_normalizer(t, json_array_get(list, i), sub, err);
            if (rc) return rc;
        }
        return CLOVER_OK;
    }
    /* A sequence of forms equals one: compatibility if any asks for it,
     * composed or not as the last one says. */
    unsigned compat = t->norm_opts & UTF8PROC_COMPAT;
    if (strcmp(ty, "NFC") == 0)
        t->norm_opts = UTF8PROC_STABLE | UTF8PROC_COMPOSE | compat;
    else if (strcmp(ty, "NFD") == 0)
        t->norm_opts = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | compat;
    else if (strcmp(ty, "NFKC") == 0)
        t->norm_opts = UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    else if (strcmp(ty, "NFKD") == 0)
        t->norm_opts = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    else
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "%s: %s: normalizer \"%s\" is not supported (NFC, NFD, NFKC, NFKD or a Sequence of them)",
                         t->name, where, ty);
    /* below U+0300 NFC changes nothing; the other forms touch Latin-1 (and NFK* even NBSP) */
    t->norm_min_byte = (t->norm_opts == (UTF8PROC_STABLE | UTF8PROC_COMPOSE)) ? 0xCC : 0x80;
    return CLOVER_OK;
}

/* ---- pre-tokenizer ---- */

static int add_pretokenizer(tokenizer *t, json_t *p, const char *where, bool *saw_bytelevel, clover_error *err) {
    const char *ty = type_of(p);
    if (!ty) return error_set(err, CLOVER_E_FORMAT, "%s: %s: expected an object with a \"type\"", t->name, where);
    if (*saw_bytelevel)
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: %s: a pre-tokenizer after ByteLevel is not supported", t->name,
                         where);
    if (strcmp(ty, "Sequence") == 0) {
        json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list))
            return error_set(err, CLOVER_E_FORMAT, "%s: %s.pretokenizers: expected an array", t->name, where);
        for (size_t i = 0; i < json_array_size(list); i++) {
            char sub[128];
            snprintf(sub, sizeof sub, "%s.pretokenizers[%zu]", where, i);
            int rc = add_pretokenizer(t, json_array_get(list, i), sub, saw_bytelevel, err);
            if (rc) return rc;
        }
        return CLOVER_OK;
    }
    if (strcmp(ty, "Split") == 0) {
        int rc = check_string_is(t, p, "behavior", "Isolated", where, err);
        if (rc) return rc;
        bool invert = false;
        rc = get_bool(t, p, "invert", false, &invert, where, err);
        if (rc) return rc;
        if (invert)
            return error_set(err, CLOVER_E_UNSUPPORTED, "%s: %s.invert: only false is supported", t->name, where);
        json_t *pat = json_object_get(p, "pattern");
        json_t *re = pat ? json_object_get(pat, "Regex") : NULL;
        json_t *lit = pat ? json_object_get(pat, "String") : NULL;
        json_t *s = json_is_string(re) ? re : lit;
        if (!json_is_string(s))
            return error_set(err, CLOVER_E_FORMAT, "%s: %s.pattern: expected {\"Regex\": ...} or {\"String\": ...}",
                             t->name, where);
        char sub[160];
        snprintf(sub, sizeof sub, "%s.pattern", where);
        return tok_add_split(t, json_string_value(s), json_string_length(s), s == lit, sub, err);
    }
    if (strcmp(ty, "ByteLevel") == 0) {
        bool aps = false, use_regex = false;
        int rc = get_bool(t, p, "add_prefix_space", true, &aps, where, err);
        if (!rc) rc = get_bool(t, p, "use_regex", true, &use_regex, where, err);
        if (rc) return rc;
        if (aps)
            return error_set(err, CLOVER_E_UNSUPPORTED, "%s: %s.add_prefix_space: only false is supported", t->name,
                             where);
        *saw_bytelevel = true;
        if (use_regex) return tok_add_split(t, GPT2_PATTERN, sizeof GPT2_PATTERN - 1, false, where, err);
        return CLOVER_OK;
    }
    return error_set(err, CLOVER_E_UNSUPPORTED,
                     "%s: %s: pre-tokenizer \"%s\" is not supported (Split, ByteLevel or a Sequence of them)", t->name,
                     where, ty);
}

/* ---- model ---- */

static int load_vocab(tokenizer *t, json_t *model, clover_error *err) {
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab)) return error_set(err, CLOVER_E_FORMAT, "%s: model.vocab: expected an object", t->name);
    const char *key;
    size_t key_len;
    json_t *v;
    json_object_keylen_foreach(vocab, key, key_len, v) {
        if (!json_is_integer(v))
            return error_set(err, CLOVER_E_FORMAT, "%s: model.vocab[\"%.*s\"]: expected an integer id", t->name,
                             (int)(key_len < 64 ? key_len : 64), key);
        json_int_t id = json_integer_value(v);
        if (id < 0 || id >= TOK_MAX_ID)
            return error_set(err, CLOVER_E_FORMAT, "%s: model.vocab[\"%.*s\"]: id %lld, expected 0..%d", t->name,
                             (int)(key_len < 64 ? key_len : 64), key, (long long)id, TOK_MAX_ID - 1);
        int rc = tok_add_vocab(t, (int32_t)id, key, key_len, err);
        if (rc) return rc;
    }
    return CLOVER_OK;
}

static int load_merges(tokenizer *t, json_t *merges, clover_error *err) {
    uint32_t rank = 0;
    for (size_t i = 0; i < json_array_size(merges); i++) {
        json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t alen, blen;
        if (json_is_string(m)) {
            const char *s = json_string_value(m);
            size_t len = json_string_length(m);
            if (len >= 8 && strncmp(s, "#version", 8) == 0) continue;
            const char *sp = memchr(s, ' ', len);
            if (!sp || sp == s || sp + 1 == s + len || memchr(sp + 1, ' ', (size_t)(s + len - sp - 1)))
                return error_set(err, CLOVER_E_FORMAT,
                                 "%s: model.merges[%zu]: expected \"left right\" (one space), got \"%.*s\"", t->name, i,
                                 (int)(len < 64 ? len : 64), s);
            a = s;
            alen = (size_t)(sp - s);
            b = sp + 1;
            blen = len - alen - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            alen = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            blen = json_string_length(json_array_get(m, 1));
        } else {
            return error_set(err, CLOVER_E_FORMAT, "%s: model.merges[%zu]: expected \"left right\" or [left, right]",
                             t->name, i);
        }
        int rc = tok_add_merge(t, a, alen, b, blen, rank++, err);
        if (rc) return rc;
    }
    return CLOVER_OK;
}

static int load_model(tokenizer *t, json_t *model, clover_error *err) {
    if (!json_is_object(model)) return error_set(err, CLOVER_E_FORMAT, "%s: \"model\": expected an object", t->name);
    const char *ty = type_of(model);
    if (ty && strcmp(ty, "BPE") != 0)
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: model.type is \"%s\"; only \"BPE\" is supported", t->name, ty);
    bool byte_fallback = false;
    int rc = get_bool(t, model, "byte_fallback", false, &byte_fallback, "model", err);
    if (!rc) rc = get_bool(t, model, "fuse_unk", false, &t->fuse_unk, "model", err);
    if (!rc) rc = get_bool(t, model, "ignore_merges", false, &t->ignore_merges, "model", err);
    if (!rc) rc = check_string_is(t, model, "continuing_subword_prefix", "", "model", err);
    if (!rc) rc = check_string_is(t, model, "end_of_word_suffix", "", "model", err);
    if (rc) return rc;
    if (byte_fallback)
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: model.byte_fallback: only false is supported", t->name);
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0.0))
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: model.dropout: only null is supported", t->name);
    json_t *merges = json_object_get(model, "merges");
    if (!json_is_array(merges)) return error_set(err, CLOVER_E_FORMAT, "%s: model.merges: expected an array", t->name);

    rc = load_vocab(t, model, err);
    if (!rc) rc = tok_index_vocab(t, json_array_size(merges), err);
    if (!rc) rc = load_merges(t, merges, err);
    if (rc) return rc;
    json_t *unk = json_object_get(model, "unk_token");
    if (json_is_string(unk)) {
        t->unk_id = tok_vocab_find_text(t, json_string_value(unk), json_string_length(unk));
        if (t->unk_id < 0)
            return error_set(err, CLOVER_E_FORMAT, "%s: model.unk_token \"%s\" is not in the vocabulary", t->name,
                             json_string_value(unk));
    } else if (unk && !json_is_null(unk)) {
        return error_set(err, CLOVER_E_FORMAT, "%s: model.unk_token: expected a string or null", t->name);
    }
    return CLOVER_OK;
}

static int load_added(tokenizer *t, json_t *list, clover_error *err) {
    if (!list || json_is_null(list)) return CLOVER_OK;
    if (!json_is_array(list)) return error_set(err, CLOVER_E_FORMAT, "%s: added_tokens: expected an array", t->name);
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *a = json_array_get(list, i);
        json_t *id = json_object_get(a, "id"), *content = json_object_get(a, "content");
        if (!json_is_integer(id) || !json_is_string(content))
            return error_set(err, CLOVER_E_FORMAT,
                             "%s: added_tokens[%zu]: expected an integer \"id\" and a string \"content\"", t->name, i);
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
        int rc = get_bool(t, a, "special", false, &special, where, err);
        if (!rc) rc = get_bool(t, a, "lstrip", false, &lstrip, where, err);
        if (!rc) rc = get_bool(t, a, "rstrip", false, &rstrip, where, err);
        if (!rc) rc = get_bool(t, a, "single_word", false, &single_word, where, err);
        if (!rc) rc = get_bool(t, a, "normalized", !special, &normalized, where, err);
        if (rc) return rc;
        json_int_t v = json_integer_value(id);
        if (v < 0 || v >= TOK_MAX_ID)
            return error_set(err, CLOVER_E_FORMAT, "%s: %s.id is %lld, expected 0..%d", t->name, where, (long long)v,
                             TOK_MAX_ID - 1);
        if (json_string_length(content) == 0) continue; /* Hugging Face ignores empty added tokens */
        uint32_t flags = (special ? TOK_ADDED_SPECIAL : 0) | (lstrip ? TOK_ADDED_LSTRIP : 0) |
                         (rstrip ? TOK_ADDED_RSTRIP : 0) | (single_word ? TOK_ADDED_SINGLE_WORD : 0) |
                         (normalized ? TOK_ADDED_NORMALIZED : 0);
        rc = tok_add_added(t, (int32_t)v, json_string_value(content), json_string_length(content), flags, err);
        if (rc) return rc;
    }
    return CLOVER_OK;
}

static int load_root(tokenizer *t, json_t *root, clover_error *err) {
    if (!json_is_object(root)) return error_set(err, CLOVER_E_FORMAT, "%s: expected a JSON object", t->name);
    json_t *model = json_object_get(root, "model");
    int rc = load_model(t, model, err);
    if (rc) return rc;
    rc = add_normalizer(t, json_object_get(root, "normalizer"), "normalizer", err);
    if (rc) return rc;
    json_t *pre = json_object_get(root, "pre_tokenizer");
    bool saw_bytelevel = false;
    if (pre && !json_is_null(pre)) {
        rc = add_pretokenizer(t, pre, "pre_tokenizer", &saw_bytelevel, err);
        if (rc) return rc;
    }
    if (!saw_bytelevel)
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: pre_tokenizer has no ByteLevel step: not a byte-level BPE",
                         t->name);
    json_t *dec = json_object_get(root, "decoder");
    const char *dty = dec ? type_of(dec) : NULL;
    if (!dty || strcmp(dty, "ByteLevel") != 0)
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: decoder is %s; only ByteLevel is supported", t->name,
                         dty ? dty : "missing");
    rc = load_added(t, json_object_get(root, "added_tokens"), err);
    if (rc) return rc;
    return tok_finish(t, err);
}

static int parse_json(json_t **out, const char *buf, size_t len, const char *name, clover_error *err) {
    json_error_t je;
    *out = json_loadb(buf, len, JSON_ALLOW_NUL, &je);
    if (!*out)
        return error_set(err, CLOVER_E_FORMAT, "%s: JSON error at line %d, column %d: %s", name, je.line, je.column,
                         je.text);
    return CLOVER_OK;
}

int tokenizer_load_json_memory(tokenizer **out, const char *json, size_t len, const char *name, clover_error *err) {
    *out = NULL;
    tokenizer *t;
    int rc = tok_create(&t, name, err);
    if (rc) return rc;
    json_t *root;
    rc = parse_json(&root, json, len, t->name, err);
    if (!rc) {
        rc = load_root(t, root, err);
        json_decref(root);
    }
    if (!rc) {
        tok_add_eos(t, t->specials.im_end);
        tok_add_eos(t, t->specials.endoftext);
        *out = t;
    } else {
        tokenizer_free(t);
    }
    return rc;
}

static int read_file(const char *path, char **buf, size_t *len, clover_error *err) {
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return error_set(err, CLOVER_E_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *nb = cap <= SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!b) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory reading the file", path);
    if (bad) {
        free(b);
        return error_set(err, CLOVER_E_IO, "%s: read error", path);
    }
    *buf = b;
    *len = n;
    return CLOVER_OK;
}

/* A token named in tokenizer_config.json: "text" or {"content": "text"}. */
static int32_t config_token(const tokenizer *t, json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) return -1;
    return tokenizer_find(t, json_string_value(v), json_string_length(v));
}

/* tokenizer_config.json beside the file, if present: eos/bos/pad/unk, add_bos_token. */
static int load_config(tokenizer *t, const char *path, clover_error *err) {
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path + 1) : 0;
    char *cpath = malloc(dir + sizeof "tokenizer_config.json");
    if (!cpath) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", path);
    memcpy(cpath, path, dir);
    memcpy(cpath + dir, "tokenizer_config.json", sizeof "tokenizer_config.json");
    FILE *probe = fopen(cpath, "rb");
    if (!probe) {
        free(cpath);
        return CLOVER_OK;
    }
    fclose(probe);
    char *buf;
    size_t len;
    int rc = read_file(cpath, &buf, &len, err);
    json_t *cfg = NULL;
    if (!rc) {
        rc = parse_json(&cfg, buf, len, cpath, err);
        free(buf);
    }
    if (!rc && !json_is_object(cfg)) rc = error_set(err, CLOVER_E_FORMAT, "%s: expected a JSON object", cpath);
    if (!rc) {
        tokenizer_specials *s = &t->specials;
        s->eos = config_token(t, cfg, "eos_token");
        s->bos = config_token(t, cfg, "bos_token");
        s->pad = config_token(t, cfg, "pad_token");
        s->unk = config_token(t, cfg, "unk_token");
        json_t *ab = json_object_get(cfg, "add_bos_token");
        s->add_bos = json_is_true(ab);
        s->n_eos = 0;
        tok_add_eos(t, s->eos);
        tok_add_eos(t, s->im_end);
        tok_add_eos(t, s->endoftext);
    }
    json_decref(cfg);
    free(cpath);
    return rc;
}

int tokenizer_load_json(tokenizer **out, const char *path, clover_error *err) {
    *out = NULL;
    if (!path) return error_set(err, CLOVER_E_INVALID, "tokenizer_load_json: NULL path");
    char *buf;
    size_t len;
    int rc = read_file(path, &buf, &len, err);
    if (rc) return rc;
    tokenizer *t;
    rc = tokenizer_load_json_memory(&t, buf, len, path, err);
    free(buf);
    if (rc) return rc;
    rc = load_config(t, path, err);
    if (rc) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return CLOVER_OK;
}
