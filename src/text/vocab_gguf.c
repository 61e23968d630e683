/*
 * vocab_gguf.c: loading the tokenizer from a GGUF's tokenizer.ggml.*
 * metadata, as llama.cpp's converter writes it.
 *
 * A GGUF names its pre-tokenizer instead of carrying it, so the names we
 * run are mapped here to the Split pattern of their Hugging Face
 * tokenizer.json ("qwen2": Qwen2/Qwen3; "qwen35": Qwen3.5, where \p{M}
 * joins the letters). Those files also normalize to NFC, which llama.cpp
 * skips; we follow the Hugging Face files, so a GGUF and its
 * tokenizer.json give the same ids.
 * Token types: NORMAL/BYTE/UNKNOWN/UNDEFINED tokens are the BPE vocabulary
 * (byte-level form); CONTROL tokens are special added tokens,
 * USER_DEFINED are non-special added tokens (both stored as plain text);
 * UNUSED tokens (the padding rows of an embedding) are no token at all.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/error.h"
#include "text/tok_internal.h"

enum {
    GGUF_TOKEN_UNDEFINED = 0,
    GGUF_TOKEN_NORMAL = 1,
    GGUF_TOKEN_UNKNOWN = 2,
    GGUF_TOKEN_CONTROL = 3,
    GGUF_TOKEN_USER_DEFINED = 4,
    GGUF_TOKEN_UNUSED = 5,
    GGUF_TOKEN_BYTE = 6,
};

static const char QWEN2_PATTERN[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN35_PATTERN[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
                                     "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static int get_string_array(const gguf_file *f, const char *key, bool required, const gguf_value **out,
                            clover_error *err) {
    *out = NULL;
    if (!gguf_kv_find(f, key)) {
        if (!required) return CLOVER_OK;
        return error_set(err, CLOVER_E_FORMAT, "%s: missing key %s", gguf_name(f), key);
    }
    int rc = gguf_get_array(f, key, out, err);
    if (rc) return rc;
    if ((*out)->v.arr.type != GGUF_VT_STRING)
        return error_set(err, CLOVER_E_FORMAT, "%s: %s is an array of %s, expected strings", gguf_name(f), key,
                         gguf_value_type_name((*out)->v.arr.type));
    return CLOVER_OK;
}

static int token_type_at(const gguf_value *types, uint64_t i, int64_t *out) {
    const void *d = types->v.arr.data;
    switch (types->v.arr.type) {
    case GGUF_VT_I32: *out = ((const int32_t *)d)[i]; return 0;
    case GGUF_VT_U32: *out = ((const uint32_t *)d)[i]; return 0;
    case GGUF_VT_I8: *out = ((const int8_t *)d)[i]; return 0;
    case GGUF_VT_U8: *out = ((const uint8_t *)d)[i]; return 0;
    case GGUF_VT_I16: *out = ((const int16_t *)d)[i]; return 0;
    case GGUF_VT_U16: *out = ((const uint16_t *)d)[i]; return 0;
    default: return -1;
    }
}

/* An optional id key; absent leaves *slot alone. */
static int get_id(const tokenizer *t, const gguf_file *f, const char *key, int32_t *slot, clover_error *err) {
    if (!gguf_kv_find(f, key)) return CLOVER_OK;
    uint32_t v;
    int rc = gguf_get_u32(f, key, &v, err);
    if (rc) return rc;
    if (v >= (uint32_t)t->n_tokens)
        return error_set(err, CLOVER_E_FORMAT, "%s: %s is %u, outside the vocabulary (0..%ld)", gguf_name(f), key, v,
                         (long)t->n_tokens - 1);
    *slot = (int32_t)v;
    return CLOVER_OK;
}

/* Both parts and the merged text are tokens of the vocabulary. */
static bool merge_is_known(const tokenizer *t, const char *a, size_t alen, const char *b, size_t blen) {
    if (tok_vocab_find_text(t, a, alen) < 0 || tok_vocab_find_text(t, b, blen) < 0) return false;
    char small[512];
    char *joined = alen + blen <= sizeof small ? small : malloc(alen + blen);
    if (!joined) return true; /* let tok_add_merge report the memory */
    memcpy(joined, a, alen);
    memcpy(joined + alen, b, blen);
    bool ok = tok_vocab_find_text(t, joined, alen + blen) >= 0;
    if (joined != small) free(joined);
    return ok;
}

static int load(tokenizer *t, const gguf_file *f, clover_error *err) {
    const char *name = gguf_name(f);
    const gguf_string *model, *pre;
    int rc = gguf_get_string(f, "tokenizer.ggml.model", &model, err);
    if (rc) return rc;
    if (strcmp(model->str, "gpt2") != 0)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "%s: tokenizer.ggml.model is \"%s\"; only \"gpt2\" (byte-level BPE) is supported", name,
                         model->str);
    rc = gguf_get_string(f, "tokenizer.ggml.pre", &pre, err);
    if (rc) return rc;
    const char *pattern;
    size_t plen;
    if (strcmp(pre->str, "qwen35") == 0) {
        pattern = QWEN35_PATTERN;
        plen = sizeof QWEN35_PATTERN - 1;
    } else if (strcmp(pre->str, "qwen2") == 0) {
        pattern = QWEN2_PATTERN;
        plen = sizeof QWEN2_PATTERN - 1;
    } else {
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "%s: tokenizer.ggml.pre is \"%s\"; supported: \"qwen35\", \"qwen2\"", name, pre->str);
    }

    const gguf_value *tokens, *merges, *types = NULL;
    rc = get_string_array(f, "tokenizer.ggml.tokens", true, &tokens, err);
    if (!rc) rc = get_string_array(f, "tokenizer.ggml.merges", true, &merges, err);
    if (rc) return rc;
    uint64_t n = tokens->v.arr.len;
    if (n == 0 || n > TOK_MAX_ID)
        return error_set(err, CLOVER_E_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries, expected 1..%d", name,
                         (unsigned long long)n, TOK_MAX_ID);
    if (gguf_kv_find(f, "tokenizer.ggml.token_type")) {
        rc = gguf_get_array(f, "tokenizer.ggml.token_type", &types, err);
        if (rc) return rc;
        int64_t probe;
        if (token_type_at(types, 0, &probe) != 0 && types->v.arr.len > 0)
            return error_set(err, CLOVER_E_FORMAT, "%s: tokenizer.ggml.token_type is an array of %s, expected integers",
                             name, gguf_value_type_name(types->v.arr.type));
        if (types->v.arr.len != n)
            return error_set(err, CLOVER_E_FORMAT, "%s: tokenizer.ggml.token_type has %llu entries, tokens has %llu",
                             name, (unsigned long long)types->v.arr.len, (unsigned long long)n);
    }

    const gguf_string *tok = (const gguf_string *)tokens->v.arr.data;
    for (uint64_t i = 0; i < n; i++) {
        int64_t ty = GGUF_TOKEN_NORMAL;
        if (types) token_type_at(types, i, &ty);
        if (tok[i].len == 0 || tok[i].len > UINT32_MAX) {
            if (ty == GGUF_TOKEN_UNUSED) continue;
            return error_set(err, CLOVER_E_FORMAT, "%s: tokenizer.ggml.tokens[%llu] is empty", name,
                             (unsigned long long)i);
        }
        switch (ty) {
        case GGUF_TOKEN_UNUSED: break;
        case GGUF_TOKEN_CONTROL:
            rc = tok_add_added(t, (int32_t)i, tok[i].str, (size_t)tok[i].len, TOK_ADDED_SPECIAL, err);
            break;
        case GGUF_TOKEN_USER_DEFINED: rc = tok_add_added(t, (int32_t)i, tok[i].str, (size_t)tok[i].len, 0, err); break;
        case GGUF_TOKEN_UNDEFINED:
        case GGUF_TOKEN_NORMAL:
        case GGUF_TOKEN_UNKNOWN:
        case GGUF_TOKEN_BYTE: rc = tok_add_vocab(t, (int32_t)i, tok[i].str, (size_t)tok[i].len, err); break;
        default:
            return error_set(err, CLOVER_E_FORMAT, "%s: tokenizer.ggml.token_type[%llu] is %lld, expected 0..6", name,
                             (unsigned long long)i, (long long)ty);
        }
        if (rc) return rc;
    }

    rc = tok_index_vocab(t, (size_t)merges->v.arr.len, err);
    if (rc) return rc;
    const gguf_string *mg = (const gguf_string *)merges->v.arr.data;
    for (uint64_t i = 0; i < merges->v.arr.len; i++) {
        /* llama.cpp splits at the first space after the first byte */
        const char *s = mg[i].str;
        size_t len = (size_t)mg[i].len;
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp || sp + 1 == s + len)
            return error_set(err, CLOVER_E_FORMAT,
                             "%s: tokenizer.ggml.merges[%llu] is \"%.*s\", expected \"left right\"", name,
                             (unsigned long long)i, (int)(len < 64 ? len : 64), s);
        size_t alen = (size_t)(sp - s), blen = (size_t)(s + len - sp - 1);
        /* llama.cpp takes a merge whose parts or result are not tokens (it
         * never checks), so a GGUF may carry one: a Hugging Face merge with
         * a space inside a part, which the converters spell with U+0120,
         * names a token that does not exist. No symbol of a text can ever
         * be such a token here, so the merge is dropped, not refused. */
        if (!merge_is_known(t, s, alen, sp + 1, blen)) continue;
        rc = tok_add_merge(t, s, alen, sp + 1, blen, (uint32_t)i, err);
        if (rc) return rc;
    }

    t->norm_opts = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    t->norm_min_byte = 0xCC;
    char where[64];
    snprintf(where, sizeof where, "tokenizer.ggml.pre \"%s\"", pre->str);
    rc = tok_add_split(t, pattern, plen, false, where, err);
    if (!rc) rc = tok_finish(t, err);
    if (rc) return rc;

    /* the ids of the roles */
    tokenizer_specials *sp = &t->specials;
    int32_t eot = -1, eom = -1;
    rc = get_id(t, f, "tokenizer.ggml.bos_token_id", &sp->bos, err);
    if (!rc) rc = get_id(t, f, "tokenizer.ggml.eos_token_id", &sp->eos, err);
    if (!rc) rc = get_id(t, f, "tokenizer.ggml.padding_token_id", &sp->pad, err);
    if (!rc) rc = get_id(t, f, "tokenizer.ggml.unknown_token_id", &sp->unk, err);
    if (!rc) rc = get_id(t, f, "tokenizer.ggml.eot_token_id", &eot, err);
    if (!rc) rc = get_id(t, f, "tokenizer.ggml.eom_token_id", &eom, err);
    if (!rc) rc = get_id(t, f, "tokenizer.ggml.mask_token_id", &sp->mask, err);
    if (!rc && gguf_kv_find(f, "tokenizer.ggml.add_bos_token"))
        rc = gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &sp->add_bos, err);
    if (rc) return rc;
    tok_add_eos(t, sp->eos);
    tok_add_eos(t, eot);
    tok_add_eos(t, eom);
    tok_add_eos(t, sp->im_end);
    tok_add_eos(t, sp->endoftext);
    return CLOVER_OK;
}

int tokenizer_load_gguf(tokenizer **out, const gguf_file *f, clover_error *err) {
    *out = NULL;
    if (!f) return error_set(err, CLOVER_E_INVALID, "tokenizer_load_gguf: NULL file");
    tokenizer *t;
    int rc = tok_create(&t, gguf_name(f), err);
    if (rc) return rc;
    rc = load(t, f, err);
    if (rc) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return CLOVER_OK;
}
