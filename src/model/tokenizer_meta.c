/*
 * tokenizer_meta.c: the tokenizer.ggml.* metadata, checked for consistency
 * (array lengths agree, special ids index the token list, the list fits the
 * embedding) and kept raw in the model. Building the encoder (merge ranks,
 * the pre-tokeniser regex, special-token matching) is src/text's job; doing
 * the checks here means it only ever sees consistent arrays.
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/model.h"

static int get_opt_string(const gguf_file *f, const char *key, const char **out, clover_error *err) {
    *out = NULL;
    if (!gguf_kv_find(f, key)) return CLOVER_OK;
    const gguf_string *s;
    int rc = gguf_get_string(f, key, &s, err);
    if (rc) return rc;
    *out = s->str;
    return CLOVER_OK;
}

/* A string array's entries (NULL when absent); *n its length. */
static int get_string_array(const gguf_file *f, const char *key, const gguf_string **out, uint64_t *n,
                            clover_error *err) {
    *out = NULL;
    *n = 0;
    if (!gguf_kv_find(f, key)) return CLOVER_OK;
    const gguf_value *v;
    int rc = gguf_get_array(f, key, &v, err);
    if (rc) return rc;
    if (v->v.arr.type != GGUF_VT_STRING)
        return error_set(err, CLOVER_E_FORMAT, "%s is an array of %s (expected strings)", key,
                         gguf_value_type_name(v->v.arr.type));
    *out = v->v.arr.data;
    *n = v->v.arr.len;
    return CLOVER_OK;
}

/* An optional special id: -1 when absent, else < n_tokens. */
static int get_special_id(const gguf_file *f, const char *key, uint64_t n_tokens, int32_t *out, clover_error *err) {
    *out = -1;
    if (!gguf_kv_find(f, key)) return CLOVER_OK;
    uint32_t id;
    int rc = gguf_get_u32(f, key, &id, err);
    if (rc) return rc;
    if (id >= n_tokens)
        return error_set(err, CLOVER_E_FORMAT, "%s = %u is not a token id (the list has %llu tokens)", key, id,
                         (unsigned long long)n_tokens);
    *out = (int32_t)id;
    return CLOVER_OK;
}

static int get_opt_bool(const gguf_file *f, const char *key, bool *out, clover_error *err) {
    *out = false;
    if (!gguf_kv_find(f, key)) return CLOVER_OK;
    return gguf_get_bool(f, key, out, err);
}

static int read_token_types(const gguf_file *f, model_tokenizer *tok, clover_error *err) {
    const char *key = "tokenizer.ggml.token_type";
    if (!gguf_kv_find(f, key)) return CLOVER_OK;
    const gguf_value *v;
    int rc = gguf_get_array(f, key, &v, err);
    if (rc) return rc;
    if (v->v.arr.len != tok->n_tokens)
        return error_set(err, CLOVER_E_FORMAT, "%s has %llu entries, tokenizer.ggml.tokens %llu (expected equal)", key,
                         (unsigned long long)v->v.arr.len, (unsigned long long)tok->n_tokens);
    uint32_t et = v->v.arr.type;
    if (et != GGUF_VT_I32 && et != GGUF_VT_U32 && et != GGUF_VT_I8 && et != GGUF_VT_U8)
        return error_set(err, CLOVER_E_FORMAT, "%s is an array of %s (expected i32)", key, gguf_value_type_name(et));
    int32_t *types = mem_calloc((size_t)tok->n_tokens, sizeof *types);
    if (!types)
        return error_set(err, CLOVER_E_NOMEM, "%s: out of memory for %llu entries", key,
                         (unsigned long long)tok->n_tokens);
    for (uint64_t i = 0; i < tok->n_tokens; i++) {
        int64_t t;
        if (et == GGUF_VT_I32)
            t = ((const int32_t *)v->v.arr.data)[i];
        else if (et == GGUF_VT_U32)
            t = ((const uint32_t *)v->v.arr.data)[i];
        else if (et == GGUF_VT_I8)
            t = ((const int8_t *)v->v.arr.data)[i];
        else
            t = ((const uint8_t *)v->v.arr.data)[i];
        if (t < MODEL_TOKEN_NORMAL || t > MODEL_TOKEN_BYTE) {
            mem_free(types);
            return error_set(err, CLOVER_E_FORMAT, "%s: token %llu has type %lld (expected 1..6)", key,
                             (unsigned long long)i, (long long)t);
        }
        types[i] = (int32_t)t;
    }
    tok->token_types = types;
    return CLOVER_OK;
}

static int read_all(const gguf_file *f, uint32_t n_vocab, model_tokenizer *tok, clover_error *err) {
    int rc;
    if ((rc = get_opt_string(f, "tokenizer.ggml.model", &tok->model, err))) return rc;
    if (!tok->model) {
        if (gguf_kv_find(f, "tokenizer.ggml.tokens"))
            return error_set(err, CLOVER_E_FORMAT,
                             "tokenizer.ggml.tokens is present but tokenizer.ggml.model is missing");
        return CLOVER_OK;
    }
    if ((rc = get_opt_string(f, "tokenizer.ggml.pre", &tok->pre, err))) return rc;
    if ((rc = get_string_array(f, "tokenizer.ggml.tokens", &tok->tokens, &tok->n_tokens, err))) return rc;
    if (!tok->tokens || tok->n_tokens == 0)
        return error_set(err, CLOVER_E_FORMAT,
                         "tokenizer.ggml.tokens is missing or empty (tokenizer.ggml.model = '%s')", tok->model);
    if (tok->n_tokens > n_vocab)
        return error_set(err, CLOVER_E_FORMAT,
                         "tokenizer.ggml.tokens has %llu tokens but token_embd.weight only %u rows (expected at most "
                         "one token per row)",
                         (unsigned long long)tok->n_tokens, n_vocab);
    if ((rc = read_token_types(f, tok, err))) return rc;

    if (gguf_kv_find(f, "tokenizer.ggml.scores")) {
        const gguf_value *v;
        if ((rc = gguf_get_array(f, "tokenizer.ggml.scores", &v, err))) return rc;
        if (v->v.arr.type != GGUF_VT_F32 || v->v.arr.len != tok->n_tokens)
            return error_set(err, CLOVER_E_FORMAT,
                             "tokenizer.ggml.scores: %llu entries of %s (expected %llu f32, one per token)",
                             (unsigned long long)v->v.arr.len, gguf_value_type_name(v->v.arr.type),
                             (unsigned long long)tok->n_tokens);
        tok->scores = v->v.arr.data;
    }

    if ((rc = get_string_array(f, "tokenizer.ggml.merges", &tok->merges, &tok->n_merges, err))) return rc;
    if (!strcmp(tok->model, "gpt2") && !gguf_kv_find(f, "tokenizer.ggml.merges"))
        return error_set(err, CLOVER_E_FORMAT, "tokenizer.ggml.merges is missing (required by the gpt2 BPE tokenizer)");
    for (uint64_t i = 0; i < tok->n_merges; i++) {
        const gguf_string *m = &tok->merges[i];
        const char *sp = memchr(m->str, ' ', (size_t)m->len);
        if (!sp || sp == m->str || sp == m->str + m->len - 1)
            return error_set(err, CLOVER_E_FORMAT, "tokenizer.ggml.merges: entry %llu '%.64s' is not 'left right'",
                             (unsigned long long)i, m->str);
    }

    if ((rc = get_special_id(f, "tokenizer.ggml.bos_token_id", tok->n_tokens, &tok->bos_id, err))) return rc;
    if ((rc = get_special_id(f, "tokenizer.ggml.eos_token_id", tok->n_tokens, &tok->eos_id, err))) return rc;
    if ((rc = get_special_id(f, "tokenizer.ggml.eot_token_id", tok->n_tokens, &tok->eot_id, err))) return rc;
    if ((rc = get_special_id(f, "tokenizer.ggml.padding_token_id", tok->n_tokens, &tok->pad_id, err))) return rc;
    if ((rc = get_special_id(f, "tokenizer.ggml.unknown_token_id", tok->n_tokens, &tok->unk_id, err))) return rc;
    if ((rc = get_special_id(f, "tokenizer.ggml.mask_token_id", tok->n_tokens, &tok->mask_id, err))) return rc;
    if ((rc = get_opt_bool(f, "tokenizer.ggml.add_bos_token", &tok->add_bos, err))) return rc;
    if ((rc = get_opt_bool(f, "tokenizer.ggml.add_eos_token", &tok->add_eos, err))) return rc;
    if ((rc = get_opt_string(f, "tokenizer.chat_template", &tok->chat_template, err))) return rc;
    return CLOVER_OK;
}

int model_tokenizer_read(const gguf_file *f, uint32_t n_vocab, model_tokenizer *tok, clover_error *err) {
    memset(tok, 0, sizeof *tok);
    tok->bos_id = tok->eos_id = tok->eot_id = tok->pad_id = tok->unk_id = tok->mask_id = -1;
    int rc = read_all(f, n_vocab, tok, err);
    if (rc) model_tokenizer_free(tok);
    return rc;
}

void model_tokenizer_free(model_tokenizer *tok) {
    mem_free(tok->token_types);
    memset(tok, 0, sizeof *tok);
    tok->bos_id = tok->eos_id = tok->eot_id = tok->pad_id = tok->unk_id = tok->mask_id = -1;
}
