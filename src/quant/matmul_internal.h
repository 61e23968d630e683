/*
 * matmul_internal.h: what matmul.c (the split into tasks) shares with the
 * tiled multi-row kernel of matmul_avx2.c.
 */
#ifndef CLOVER_QUANT_MATMUL_INTERNAL_H
#define CLOVER_QUANT_MATMUL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "quant/quant.h"

typedef struct matmul_job {
    uint32_t type;
    const uint8_t *w; /* [n_out] rows of row_bytes */
    size_t row_bytes;
    size_t n_out, n_in;
    const float *x; /* [n_rows][n_in] */
    size_t n_rows;
    float *y; /* [n_rows][n_out] */
    size_t rows_per_task;
    const uint8_t *xq; /* [n_rows] rows of xq_bytes: x in 8 bits (quant_act_*), or NULL */
    size_t xq_bytes;
    quant_act_dot_fn act_dot; /* with xq: the type's integer dot */
    quant_act_dot4_fn act_dot4; /* with xq: its 4-row form (the same bits a row), or NULL */
    int avx512;               /* with xq: the multi-row kernel of gemm_avx512.c rather than gemm_avx2.c */
    int amx;                  /* with xq (Q8_0, 3+ rows): gemm_amx.c's kernel, xq in gemm_amx.h's layout */
    /* with amx, Q4_K: the weight's repacked panels (gemm_amx_pack.h), or NULL; q4k_pipe (Q4_K, Q5_K): the
     * panels' kernel, on repacked or freshly unpacked panels, overlaps one step's tile work with the last step's
     * float steps (CLOVER_AMX_Q4K_PIPE=0 turns it off) */
    const struct gemm_amx_q4k_pack *q4k;
    int q4k_pipe;
} matmul_job;

/* Outputs o0..o1-1 of n_rows 8-bit rows (xq, xq_bytes apart) against the weight rows w (row_bytes apart): four
 * weight rows a call through dot4 where given (each output the one-row dot's bits), the rest through dot, a weight
 * row staying in L1 across the activation rows. matmul.c's and matmul_group.c's per-row paths. */
static inline void matmul_act_outputs(quant_act_dot_fn dot, quant_act_dot4_fn dot4, const uint8_t *w, size_t row_bytes,
                                      const uint8_t *xq, size_t xq_bytes, size_t n_in, size_t n_rows, float *y,
                                      size_t n_out, size_t o0, size_t o1) {
    size_t o = o0;
    if (dot4)
        for (; o + 4 <= o1; o += 4)
            for (size_t r = 0; r < n_rows; r++)
                dot4(w + o * row_bytes, row_bytes, xq + r * xq_bytes, n_in, y + r * n_out + o);
    for (; o < o1; o++)
        for (size_t r = 0; r < n_rows; r++) y[r * n_out + o] = dot(w + o * row_bytes, xq + r * xq_bytes, n_in);
}

/* Output rows [o0, o1) of the job for every activation row, through weight
 * tiles dequantised once per block of activation rows (AVX2 CPUs only). */
void matmul_rows_tiled_avx2(const matmul_job *job, size_t o0, size_t o1);

/* matmul_thread_seconds' accounting, around each public entry point: the
 * outermost call of a thread adds its wall time (enter returns its start). */
double matmul_time_enter(void);
void matmul_time_leave(double t0);

/* The same with the rows in 8 bits (job->xq set, Q8_0 or K-quant weights):
 * the integer tile kernel of gemm_avx2.c, each output bit-identical to
 * job->act_dot on its row (AVX2 CPUs only). */
void matmul_rows_gemm_avx2(const matmul_job *j, size_t o0, size_t o1);
/* The same on AVX-512 VNNI (gemm_avx512.c), bit-identical to the AVX2
 * kernel and the one-row dot (quant_avx512_active CPUs only). */
void matmul_rows_gemm_avx512(const matmul_job *j, size_t o0, size_t o1);
/* Q8_0 on AMX (gemm_amx.c), xq staged by gemm_amx_stage: bit-identical to
 * the AMX level's one-row dot, quant_act_dot_q8_0_bsum_avx2 (quant_amx_active
 * CPUs only). */
void matmul_rows_gemm_amx(const matmul_job *j, size_t o0, size_t o1);

#endif
