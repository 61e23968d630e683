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
 *
 * The row-block form (ex_rb_kernel, CLOVER_CUDA_EXACT_RB=1; off by default: written 2026-12-05 without a device):
 * at many rows the form above is bound by L2 reads, not arithmetic: each warp takes 4 rows, so every weight row
 * is read once per 4 rows (a 512-row chunk: 128 times, 263 MB for the router's 2 MB) and every row once per 8
 * outputs (135 MB). Measured on the H200 (2026-12-18-stack25's trace): 107 us a layer for 512 rows, 4.3 ms of a
 * 16-sequence stacked preview; its arithmetic is ~8 us. Here a block of EXB_WARPS warps takes EXB_WARPS
 * neighbouring outputs and a block of rows; each warp keeps its weight slice in registers across all the block's
 * rows (4 at a time, the same sums in the same order as above), so the weights are read once per row block
 * (~15 at 512 rows: 31 MB) and each row once per 16 outputs (71 MB); row blocks are sized to fill ~2 waves of the
 * GPU's SMs. Every output's bits are the form above's (the same per-row code: only which warp computes a row
 * changes); test_cuda_matmul's exact_multi compares both with the decode products.
 */
#include "cuda_matmul.h"
#include "cuda_device.h"
#include "cuda_switch.h"
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

/* The row-block form: block (bx, by) takes outputs bx * EXB_WARPS .. + EXB_WARPS - 1 (a warp each) and rows
 * by * p.rw .. + p.rw - 1 (p.rw a multiple of EX_RW), 4 rows at a time. */
template <int T>
__global__ void __launch_bounds__(32 * EXB_WARPS) ex_rb_kernel(ex_params p) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int og = (int)blockIdx.x * EXB_WARPS + warp, rb0 = (int)blockIdx.y * p.rw;
    const int rb1 = min(rb0 + p.rw, p.n_rows);
    if (og >= p.tot || rb0 >= p.n_rows) { /* warp-uniform */
        pdl_wait();
        pdl_trigger();
        return;
    }
    float *y;
    int n_out, o;
    const uint8_t *wrow = ex_pick(p, og, y, n_out, o);
    const bool one_slice = p.n_in <= EX_NJ * 256; /* the weights stay in registers for every row of the block */
    float wv[EX_NJ][8];
    bool waited = false;
    for (int r0 = rb0; r0 < rb1; r0 += EX_RW) {
        const int nr = min(EX_RW, rb1 - r0);
        float acc[EX_RW];
#pragma unroll
        for (int i = 0; i < EX_RW; i++) acc[i] = 0.0f;
        for (int e0 = 0; e0 < p.n_in; e0 += EX_NJ * 256) {
            if (!one_slice || r0 == rb0) ex_load<T>(wv, wrow, e0, p.n_in, lane);
            if (!waited) {
                pdl_wait(); /* x is the previous kernel's output (cuda_pdl.cuh) */
                pdl_trigger();
                waited = true;
            }
            ex_dot(acc, wv, p.x, r0, nr, e0, p.n_in, lane);
        }
        ex_store<T>(acc, y, r0, nr, n_out, o, lane);
    }
}

static int g_exact_rb = -1;
extern "C" void cuda_exact_rb_set(int on) { cuda_switch_set(&g_exact_rb, on); }

/* The row-block form's launch: rows per block a multiple of EX_RW chosen so the grid is ~2 waves (fewer rows a
 * block, more weight re-reads; more, idle SMs), within grid.y's limit. */
template <int T>
static void ex_rb_launch(ex_params p, cudaStream_t st) {
    const long bx = (p.tot + EXB_WARPS - 1) / EXB_WARPS, target = 2L * cuda_sm_count();
    long rpb = ((long)p.n_rows * bx + target - 1) / target;
    const long cap = ((long)p.n_rows + 65534) / 65535; /* grid.y <= 65535 */
    if (rpb < cap) rpb = cap;
    if (rpb > p.n_rows) rpb = p.n_rows; /* one row block at most (and no int overflow in the kernel's rb0 + rw) */
    rpb = (rpb + EX_RW - 1) / EX_RW * EX_RW;
    p.rw = (int)rpb;
    const dim3 grid((unsigned)bx, (unsigned)((p.n_rows + rpb - 1) / rpb)), block(32 * EXB_WARPS);
    pdl_launch(ex_rb_kernel<T>, grid, block, 0, st, p);
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
    if (cuda_switch_on(&g_exact_rb, "CLOVER_CUDA_EXACT_RB", 0)) {
        switch (type) {
        case MM_F32: ex_rb_launch<MM_F32>(p, st); break;
        case MM_F16: ex_rb_launch<MM_F16>(p, st); break;
        case MM_BF16: ex_rb_launch<MM_BF16>(p, st); break;
        default: MM_FAIL("%s: weight type %u", op, (unsigned)type);
        }
        return mm_launch_status(op, why, why_len);
    }
    switch (type) {
    case MM_F32: pdl_launch(ex_rows_kernel<MM_F32>, grid, block, 0, st, p); break;
    case MM_F16: pdl_launch(ex_rows_kernel<MM_F16>, grid, block, 0, st, p); break;
    case MM_BF16: pdl_launch(ex_rows_kernel<MM_BF16>, grid, block, 0, st, p); break;
    default: MM_FAIL("%s: weight type %u", op, (unsigned)type);
    }
    return mm_launch_status(op, why, why_len);
}
