/*
 * result_text.c: the text of a generation result. It is decoded once the
 * request ends (not token by token: streaming callers have their own
 * clover_text_stream), with invalid UTF-8 as U+FFFD exactly as the stream
 * decoder releases it, so the text equals the concatenated stream. The
 * final stop id is not part of the answer. Ids past the tokenizer's last
 * token (the padding rows of an embedding) have no text, as in Hugging
 * Face's decode.
 */
#include "engine/result_text.h"

#include "base/alloc.h"
#include "base/error.h"
#include "model/model.h"

int engine_result_text(const clover_model *m, clover_generate_result *res, int skip_special, clover_error *err) {
    res->text = NULL;
    res->text_len = 0;
    const tokenizer *t = m->tokenizer;
    if (!t) return CLOVER_OK;
    size_t n = res->n_generated;
    if (n && res->finish == CLOVER_FINISH_STOP) n--; /* the stop id ends the ids (SPEC.md 3 item 3) */
    const unsigned flags = TOKENIZER_REPLACE_INVALID | (skip_special ? TOKENIZER_SKIP_SPECIAL : 0u);
    const int32_t n_tokens = tokenizer_n_tokens(t);
    int32_t *ids = mem_alloc((n ? n : 1) * sizeof *ids); /* [n] the ids that have text */
    if (!ids) return error_set(err, CLOVER_E_NOMEM, "decoding the answer: no memory for %zu ids", n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (res->ids[i] < n_tokens) ids[k++] = res->ids[i];
    text_bytes out = {0};
    int rc = text_bytes_append(&out, "", 0, err);
    if (!rc) rc = tokenizer_decode(t, ids, k, flags, &out, err);
    mem_free(ids);
    if (rc) {
        text_bytes_free(&out);
        return error_prefix(err, "decoding the answer");
    }
    res->text = out.v;
    res->text_len = out.n;
    return CLOVER_OK;
}
