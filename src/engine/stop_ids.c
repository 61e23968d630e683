/*
 * stop_ids.c: the model's stop set. A GGUF carries one eos_token_id (and
 * perhaps an eot_token_id) while Qwen's checkpoints end a turn with either
 * <|im_end|> or <|endoftext|>, so the two are also looked up by name.
 */
#include "engine/stop_ids.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/model.h"

static const char *const eos_names[] = {"<|endoftext|>", "<|im_end|>"};

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void add_id(int32_t *v, size_t *n, int64_t id, uint32_t n_vocab) {
    if (id < 0 || id >= (int64_t)n_vocab) return;
    v[(*n)++] = (int32_t)id;
}

int engine_stop_ids_build(const clover_model *m, int32_t **out, size_t *n, clover_error *err) {
    *out = NULL;
    *n = 0;
    const uint32_t n_vocab = m->hp.n_vocab;
    size_t n_rec = m->has_record ? m->record.n_stop_token_ids : 0;
    size_t cap = n_rec + 2 + sizeof eos_names / sizeof eos_names[0];
    int32_t *v = mem_calloc(cap, sizeof *v);
    if (!v) return error_set(err, CLOVER_E_NOMEM, "stop ids: no memory for %zu ids", cap);
    size_t k = 0;
    for (size_t i = 0; i < n_rec; i++)
        add_id(v, &k, m->record.stop_token_ids[i], n_vocab);
    add_id(v, &k, m->tok.eos_id, n_vocab);
    add_id(v, &k, m->tok.eot_id, n_vocab);
    for (size_t j = 0; j < sizeof eos_names / sizeof eos_names[0]; j++) {
        size_t len = strlen(eos_names[j]);
        for (uint64_t t = 0; m->tok.tokens && t < m->tok.n_tokens; t++)
            if (m->tok.tokens[t].len == len && !memcmp(m->tok.tokens[t].str, eos_names[j], len)) {
                add_id(v, &k, (int64_t)t, n_vocab);
                break;
            }
    }
    qsort(v, k, sizeof *v, cmp_i32);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || v[u - 1] != v[i]) v[u++] = v[i];
    if (u == 0) {
        mem_free(v);
        return CLOVER_OK;
    }
    *out = v;
    *n = u;
    return CLOVER_OK;
}
