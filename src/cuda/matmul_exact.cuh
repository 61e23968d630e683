/*
 * matmul_exact.cuh: the warp-an-output form of the exact float products (matmul_exact.cu): its parameters, the
 * lane's loads, dots and warp tree, and one warp's whole share (ex_rows_warp). A header so that a kernel that
 * must write exactly these logits and then do more with them (moe_router.cu's routing past 8 rows) runs the same
 * code, not a copy of it.
 */
#ifndef CLOVER_CUDA_MATMUL_EXACT_CUH
#define CLOVER_CUDA_MATMUL_EXACT_CUH

#include "cuda_matmul.h"
#include "matmul_mmv.cuh"

enum { EX_NJ = 8, EX_RW = 4, EX_WARPS = 8, EXB_WARPS = 16 };

typedef struct {
    const uint8_t *w[CUDA_MATMUL_MAX_SEG];
    float *y[CUDA_MATMUL_MAX_SEG];
    int n_out[CUDA_MATMUL_MAX_SEG];
    int n_seg, tot, n_in, n_rows, rw; /* tot: the segments' outputs together */
    size_t row_bytes;
    const float *x;
} ex_params;

/* This warp's matrix, output and weight row for global output og (constant indices only: a dynamic index into
 * the parameters would copy them to local memory). */
__device__ __forceinline__ const uint8_t *ex_pick(const ex_params &p, int og, float *&y, int &n_out, int &o) {
    const uint8_t *W = p.w[0];
    y = p.y[0];
    n_out = p.n_out[0], o = og;
#pragma unroll
    for (int i = 1; i < CUDA_MATMUL_MAX_SEG; i++)
        if (i < p.n_seg && o >= n_out) o -= n_out, W = p.w[i], y = p.y[i], n_out = p.n_out[i];
    return W + (size_t)o * p.row_bytes;
}

/* The lane's weights of the slice from e0: elements 8 lane + 256 j .. + 7, j < EX_NJ (those past n_in unread). */
template <int T>
__device__ __forceinline__ void ex_load(float (&wv)[EX_NJ][8], const uint8_t *wrow, int e0, int n_in, int lane) {
#pragma unroll
    for (int j = 0; j < EX_NJ; j++) {
        const int e = e0 + 8 * lane + 256 * j;
        if (e < n_in) mmv_vec_weights<T>(wrow, e, wv[j]);
    }
}

/* The slice's products into nr rows' sums from row r0: j outer, rows inner, so each row's sum still takes its
 * elements in j order (the decode order) and the row index stays a constant (acc in registers). */
__device__ __forceinline__ void ex_dot(float (&acc)[EX_RW], const float (&wv)[EX_NJ][8], const float *x, int r0,
                                       int nr, int e0, int n_in, int lane) {
#pragma unroll
    for (int j = 0; j < EX_NJ; j++) {
        const int e = e0 + 8 * lane + 256 * j;
        if (e >= n_in) break;
#pragma unroll
        for (int i = 0; i < EX_RW; i++)
            if (i < nr) acc[i] = mmv_vec_dot8(wv[j], x + (size_t)(r0 + i) * n_in + e, acc[i]);
    }
}

/* The warp tree of each of the nr rows' sums, lane 0 writing them. */
template <int T>
__device__ __forceinline__ void ex_store(const float (&acc)[EX_RW], float *y, int r0, int nr, int n_out, int o,
                                         int lane) {
#pragma unroll
    for (int i = 0; i < EX_RW; i++) {
        if (i >= nr) break;
        const float v = mmv_reduce<T>(acc[i]);
        if (lane == 0) y[(size_t)(r0 + i) * n_out + o] = v;
    }
}

/* One warp of the warp-an-output form: global warp gw takes output gw % p.tot of rows (gw / p.tot) * p.rw ..
 * (at most p.rw of them); a warp past the rows only takes part in PDL. Shared with moe_router.cu's routing
 * form past 8 rows (k_router_rows), whose warps run exactly this, so its logits are these bits. */
template <int T>
__device__ __forceinline__ void ex_rows_warp(const ex_params &p, long gw, int lane) {
    const long og = gw % p.tot, rg = gw / p.tot;
    const int r0 = (int)rg * p.rw;
    if (r0 >= p.n_rows) { /* warp-uniform; the block's other warps may still work */
        pdl_wait();
        pdl_trigger();
        return;
    }
    const int nr = min(p.rw, p.n_rows - r0);
    float *y;
    int n_out, o;
    const uint8_t *wrow = ex_pick(p, (int)og, y, n_out, o);
    float acc[EX_RW];
#pragma unroll
    for (int i = 0; i < EX_RW; i++) acc[i] = 0.0f;
    bool waited = false;
    for (int e0 = 0; e0 < p.n_in; e0 += EX_NJ * 256) {
        float wv[EX_NJ][8];
        ex_load<T>(wv, wrow, e0, p.n_in, lane);
        if (!waited) {
            pdl_wait(); /* x is the previous kernel's output (cuda_pdl.cuh) */
            pdl_trigger();
            waited = true;
        }
        ex_dot(acc, wv, p.x, r0, nr, e0, p.n_in, lane);
    }
    ex_store<T>(acc, y, r0, nr, n_out, o, lane);
}

#endif
