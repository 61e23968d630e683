/*
 * logprobs.h: the log-probabilities of emitted tokens (clover.h,
 * clover_generate_params.logprobs) on their way from the backend's pick to
 * the result. The backend computes them with each pick (backend.h); the
 * engine only points the pick's outputs at rows of these buffers, copies a
 * row when a block row is fixed or a token is carried to the next step, and
 * appends the emitted token's row to the result. Rows are BACKEND_MAX_TOP
 * wide for alternatives, whatever a request's N, so one allocation per
 * session serves every request; a request uses stride N (the backend's).
 */
#ifndef CLOVER_ENGINE_LOGPROBS_H
#define CLOVER_ENGINE_LOGPROBS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "clover.h"

/* Rows of log-probabilities: lp[row], top_id/top_lp[row * n_top + j]. */
typedef struct lp_rows {
    float *lp;
    int32_t *top_id;
    float *top_lp;
} lp_rows;

/* Allocates rows of BACKEND_MAX_TOP alternatives each. */
int lp_rows_alloc(lp_rows *r, size_t rows, clover_error *err);
void lp_rows_free(lp_rows *r);

/* Row si of src to row di of dst (n_top alternatives). */
void lp_rows_copy(const lp_rows *dst, size_t di, const lp_rows *src, size_t si, size_t n_top);

/* Points a pick's log-probability outputs at rows [row0, ...) of r. */
void lp_rows_out(const lp_rows *r, size_t row0, size_t n_top, backend_pick_out *out);

/* Grows the result's log-probability arrays to cap tokens, keeping n. */
int lp_result_grow(clover_generate_result *res, size_t n, size_t cap, clover_error *err);

/* Appends row si of src as the result's token n (room reserved). */
void lp_result_put(clover_generate_result *res, size_t n, const lp_rows *src, size_t si);

#endif
