/*
 * logprobs.c: buffers and copies of emitted tokens' log-probabilities
 * (logprobs.h). Nothing here computes one: the backend's pick does
 * (backend/pick.c on the host), so the engine's figures are the backend's.
 */
#include "engine/logprobs.h"

#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

int lp_rows_alloc(lp_rows *r, size_t rows, clover_error *err) {
    size_t n = rows ? rows : 1;
    r->lp = mem_calloc(n, sizeof *r->lp);
    r->top_id = mem_calloc(n * BACKEND_MAX_TOP, sizeof *r->top_id);
    r->top_lp = mem_calloc(n * BACKEND_MAX_TOP, sizeof *r->top_lp);
    if (r->lp && r->top_id && r->top_lp) return CLOVER_OK;
    lp_rows_free(r);
    return error_set(err, CLOVER_E_NOMEM, "session: no memory for the log-probabilities of %zu rows", n);
}

void lp_rows_free(lp_rows *r) {
    mem_free(r->lp);
    mem_free(r->top_id);
    mem_free(r->top_lp);
    memset(r, 0, sizeof *r);
}

void lp_rows_copy(const lp_rows *dst, size_t di, const lp_rows *src, size_t si, size_t n_top) {
    dst->lp[di] = src->lp[si];
    if (!n_top) return;
    memcpy(dst->top_id + di * n_top, src->top_id + si * n_top, n_top * sizeof *dst->top_id);
    memcpy(dst->top_lp + di * n_top, src->top_lp + si * n_top, n_top * sizeof *dst->top_lp);
}

void lp_rows_out(const lp_rows *r, size_t row0, size_t n_top, backend_pick_out *out) {
    out->logprob = r->lp + row0;
    out->top_id = n_top ? r->top_id + row0 * n_top : NULL;
    out->top_logprob = n_top ? r->top_lp + row0 * n_top : NULL;
}

int lp_result_grow(clover_generate_result *res, size_t n, size_t cap, clover_error *err) {
    const size_t k = res->n_top_logprobs;
    size_t bytes;
    if (!mem_mul_ok(cap, (k + 1) * 8, &bytes)) return error_set(err, CLOVER_E_NOMEM, "generate: result too large");
    float *lp = mem_alloc(cap * sizeof *lp);
    int32_t *ti = k ? mem_alloc(cap * k * sizeof *ti) : NULL;
    float *tl = k ? mem_alloc(cap * k * sizeof *tl) : NULL;
    if (!lp || (k && (!ti || !tl))) {
        mem_free(lp), mem_free(ti), mem_free(tl);
        return error_set(err, CLOVER_E_NOMEM, "generate: no memory for the log-probabilities of %zu tokens", cap);
    }
    if (n) {
        memcpy(lp, res->logprobs, n * sizeof *lp);
        if (k) memcpy(ti, res->top_ids, n * k * sizeof *ti), memcpy(tl, res->top_logprobs, n * k * sizeof *tl);
    }
    mem_free(res->logprobs), mem_free(res->top_ids), mem_free(res->top_logprobs);
    res->logprobs = lp;
    res->top_ids = ti;
    res->top_logprobs = tl;
    return CLOVER_OK;
}

void lp_result_put(clover_generate_result *res, size_t n, const lp_rows *src, size_t si) {
    const lp_rows dst = {res->logprobs, res->top_ids, res->top_logprobs};
    lp_rows_copy(&dst, n, src, si, res->n_top_logprobs);
}
