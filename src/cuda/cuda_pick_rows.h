/*
 * cuda_pick_rows.h: the pick of backend.h on the device, for rows of logits
 * that stay on the GPU (pick_rows.cu): each picked row is copied, its
 * forbidden ids set to -inf, SPEC.md 3.1's penalties applied in the seed's
 * float32 order (engine/penalties.c is the oracle), then cuda_pick
 * (ops_pick.cu: greedy, or the sampler with the request's draw) gives the
 * id and the T = 1 confidence. Only those two numbers per row need to come
 * back to the host.
 *
 * The causal form (autoregressive decode, a drafted block's verification)
 * is the same call with pen = NULL: rows[i] names the row of logits, no
 * penalties, forbidden ids as given.
 *
 * The grouped form (cuda_pick_rows_group) takes a descriptor per row, so
 * the picks of every sequence of a stacked pass are one set of launches
 * instead of one per sequence (CLOVER_CUDA_PICK_EACH: per sequence, as
 * before).
 *
 * Rules as cuda_ops.h (device pointers, enqueue only, capturable); 0 or -1
 * with the reason in cuda_preview_last_error().
 */
#ifndef CLOVER_CUDA_PICK_ROWS_H
#define CLOVER_CUDA_PICK_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The penalties of one request, device arrays; the ramps are per picked row
 * (penalty_ramp on the host at the row's response position: a float each),
 * applied only when the flag says so (length_penalty != 0; </think> open
 * and think_end_bias != 0). */
typedef struct cuda_pick_pen {
    const int32_t *count_ids; /* [n_counts] distinct */
    const uint32_t *counts;   /* [n_counts] */
    int n_counts;
    float frequency, presence, repetition;
    const int32_t *stop_ids;  /* [n_stop] */
    int n_stop;
    const float *ramp_len;    /* [n] per picked row */
    int apply_len;
    int32_t think_id;         /* apply_think: the id receiving ramp_think */
    const float *ramp_think;  /* [n] */
    int apply_think;
} cuda_pick_pen;

/* dst[i] = the penalised copy of src row rows[i] ([n][V] each). */
int cuda_pick_prepare(float *dst, const float *src, const int32_t *rows, size_t n, size_t V, const int32_t *forbid,
                      size_t n_forbid, const cuda_pick_pen *pen, void *stream);

/* prepare + cuda_pick: id[i], conf[i] for row i (id -1: no finite logit;
 * -2: the caller picks that row on the host, see cuda_pick). u: [n] draws
 * (double, device) when sampling, else NULL. */
int cuda_pick_rows(int32_t *id, float *conf, float *work,  // work: [n][V]
                   const float *src, const int32_t *rows, size_t n, size_t V, const int32_t *forbid, size_t n_forbid,
                   const cuda_pick_pen *pen, const cuda_pick_params *p, const double *u, void *stream);

/* One picked row of a grouped pick: where its logits are, its forbidden ids
 * and its request's penalties (device pointers; the ramps at this row's own
 * entries, ramp_len[0] and ramp_think[0]). */
typedef struct cuda_pick_row {
    int32_t src;            /* row of src */
    int32_t n_forbid;
    const int32_t *forbid;  /* [n_forbid] */
    int has_pen;
    cuda_pick_pen pen;
} cuda_pick_row;

/* cuda_pick_rows for rows of many requests in one set of launches (copy,
 * patch, cuda_pick_each): row i from rows[i] (device [n]) with parameters
 * par[i] (device [n]) and draw u[i] (device [n], read only when sampling);
 * each row's bits are those of cuda_pick_rows over that row alone. */
int cuda_pick_rows_group(int32_t *id, float *conf, float *work,  // work: [n][V]
                         const float *src, const cuda_pick_row *rows, const cuda_pick_params *par, size_t n, size_t V,
                         const double *u, void *stream);

#ifdef __cplusplus
}
#endif

#endif
