/*
 * matmul_exact.cu: float-weight products (F32/F16/BF16) of MANY rows with the decode product's bits
 * (cuda_matmul_exact / _multi): the router's logits and the shared expert's gate logit of a stacked step, a
 * preview, a commit or a prompt chunk. Each output of each row is the value cuda_matmul_decode gives that row:
 * the same 16-byte path (mmv_vec_weights + mmv_vec_dot8 of matmul_mmv.cuh, the lane's elements 8(lane + 32j) ..
 * +7 in j order) and the same warp tree (mmv_reduce), so the routing a row gets never depends on the pass.
 *
 * Why a form of its own (2026-12-14-trace24, one H200, a 32-row preview of the 35B-A3B file): the router at 32
 * rows ran as 4 decode-kernel launches of 8 rows (mmv_thin_kernel: a warp per (row, output), each warp reading
 * the 8 KB weight row and the 8 KB row again) plus a 1-output launch for the shared expert's gate: 42 us a
 * layer, 1.7 ms of a 10.2 ms preview; in the 16-sequence step 2 decode launches of 8 rows, 46 us a layer, 1.85 ms
 * of 11.8. The weights are 2 MB a layer (0.5 us of bandwidth). Here a warp owns one output: its weight row's
 * lane slice (n_in / 32 floats) is loaded into registers once, before pdl_wait (weights are never a
 * predecessor's output), then dotted with EX_RW (4) rows; the 8 warps of a block take 8 neighbouring outputs of
 * the same rows, so each row's 16-byte loads are shared through L1.
 *
 * Weights longer than EX_NJ x 256 elements are taken in slices of EX_NJ x 256 (every row's sum carried across
 * slices in a register), which keeps the element order.
 */
#include "cuda_matmul.h"
#include "matmul_mmv.cuh"

enum { EX_NJ = 8, EX_RW = 4, EX_WARPS = 8 };

typedef struct {
    const uint8_t *w[CUDA_MATMUL_MAX_SEG];
    float *y[CUDA_MATMUL_MAX_SEG];
    int n_out[CUDA_MATMUL_MAX_SEG];
    int n_seg, tot, n_in, n_rows, rw; /* tot: the segments' outputs together */
    size_t row_bytes;
    const float *x;
} ex_params;

template <int T>
__global__ void __launch_bounds__(32 * EX_WARPS) ex_rows_kernel(ex_params p) {
    const int lane = threadIdx.x & 31;
    const long gw = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long og = gw % p.tot, rg = gw / p.tot;
    const int r0 = (int)rg * p.rw;
    if (r0 >= p.n_rows) { /* warp-uniform; the block's other warps may still work */
        pdl_wait();
        pdl_trigger();
        return;
    }
    const int nr = min(p.rw, p.n_rows - r0);
    /* this warp's matrix (constant indices only: a dynamic index into the parameters would copy them to local
     * memory) */
    const uint8_t *W = p.w[0];
    float *y = p.y[0];
    int n_out = p.n_out[0], o = (int)og;
#pragma unroll
    for (int i = 1; i < CUDA_MATMUL_MAX_SEG; i++)
        if (i < p.n_seg && o >= n_out) o -= n_out, W = p.w[i], y = p.y[i], n_out = p.n_out[i];
    const uint8_t *wrow = W + (size_t)o * p.row_bytes;
    float acc[EX_RW];
#pragma unroll
    for (int i = 0; i < EX_RW; i++) acc[i] = 0.0f;
    bool waited = false;
    for (int e0 = 0; e0 < p.n_in; e0 += EX_NJ * 256) {
        float wv[EX_NJ][8];
#pragma unroll
        for (int j = 0; j < EX_NJ; j++) {
            const int e = e0 + 8 * lane + 256 * j;
            if (e < p.n_in) mmv_vec_weights<T>(wrow, e, wv[j]);
        }
        if (!waited) {
            pdl_wait(); /* x is the previous kernel's output (cuda_pdl.cuh) */
            pdl_trigger();
            waited = true;
        }
        /* j outer, rows inner: each row's sum still takes its elements in j order (the decode order), and the
         * row index stays a constant (acc in registers) */
#pragma unroll
        for (int j = 0; j < EX_NJ; j++) {
            const int e = e0 + 8 * lane + 256 * j;
            if (e >= p.n_in) break;
#pragma unroll
            for (int i = 0; i < EX_RW; i++)
                if (i < nr) acc[i] = mmv_vec_dot8(wv[j], p.x + (size_t)(r0 + i) * p.n_in + e, acc[i]);
        }
    }
#pragma unroll
    for (int i = 0; i < EX_RW; i++) {
        if (i >= nr) break;
        const float v = mmv_reduce<T>(acc[i]);
        if (lane == 0) y[(size_t)(r0 + i) * n_out + o] = v;
    }
}

extern "C" int cuda_matmul_exact_multi(uint32_t type, const cuda_matmul_seg *seg, size_t n_seg, size_t n_in,
                                       const float *x, size_t n_rows, void *stream, char *why, size_t why_len) {
    const char *op = "cuda_matmul_exact_multi";
    if (n_seg < 1 || n_seg > CUDA_MATMUL_MAX_SEG) MM_FAIL("%s: %zu matrices", op, n_seg);
    if (mm_is_int(type)) MM_FAIL("%s: weight type %u is not a float type", op, (unsigned)type);
    if (n_rows < 1 || n_rows > (1u << 24)) MM_FAIL("%s: %zu rows", op, n_rows);
    if (!x) MM_FAIL("%s: a NULL pointer", op);
    size_t tot = 0;
    for (size_t i = 0; i < n_seg; i++) {
        if (mm_check_shape(op, type, seg[i].n_out, n_in, why, why_len)) return -1;
        if (!seg[i].w || !seg[i].y) MM_FAIL("%s: a NULL pointer", op);
        if ((uintptr_t)seg[i].w & (mm_align(type) - 1)) MM_FAIL("%s: weights not %zu-byte aligned", op, mm_align(type));
        tot += seg[i].n_out;
    }
    if (tot > (1u << 30)) MM_FAIL("%s: %zu outputs", op, tot);
    bool vec = true;
    for (size_t i = 0; i < n_seg; i++) vec = vec && mmv_thin_ok(type, seg[i].w, n_in, x);
    if (!vec) { /* the scalar path's layout: one matrix at a time through the decode kernel's 8-row calls */
        for (size_t i = 0; i < n_seg; i++)
            if (cuda_matmul_exact(type, seg[i].w, seg[i].n_out, n_in, x, n_rows, seg[i].y, stream, why, why_len))
                return -1;
        return 0;
    }
    ex_params p = {};
    for (size_t i = 0; i < n_seg; i++) {
        p.w[i] = (const uint8_t *)seg[i].w;
        p.y[i] = seg[i].y;
        p.n_out[i] = (int)seg[i].n_out;
    }
    p.tot = (int)tot;
    p.n_seg = (int)n_seg;
    p.n_in = (int)n_in;
    p.n_rows = (int)n_rows;
    /* 4 rows a warp: 64 weight registers and 8 rows' sums would pass ptxas's 128 registers here (spills) */
    p.rw = EX_RW;
    p.row_bytes = mm_row_bytes(type, n_in);
    p.x = x;
    const size_t warps = tot * ((n_rows + p.rw - 1) / p.rw);
    if (warps / EX_WARPS + 1 > 2147483647u) MM_FAIL("%s: %zu rows x %zu outputs", op, n_rows, tot);
    const dim3 grid((unsigned)((warps + EX_WARPS - 1) / EX_WARPS)), block(32 * EX_WARPS);
    cudaStream_t st = (cudaStream_t)stream;
    switch (type) {
    case MM_F32: pdl_launch(ex_rows_kernel<MM_F32>, grid, block, 0, st, p); break;
    case MM_F16: pdl_launch(ex_rows_kernel<MM_F16>, grid, block, 0, st, p); break;
    case MM_BF16: pdl_launch(ex_rows_kernel<MM_BF16>, grid, block, 0, st, p); break;
    default: MM_FAIL("%s: weight type %u", op, (unsigned)type);
    }
    return mm_launch_status(op, why, why_len);
}
