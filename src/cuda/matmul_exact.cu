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
 * slices in a register), which keeps the element order. That form's code is matmul_exact.cuh's (ex_rows_warp), so
 * moe_router.cu's routing past 8 rows runs the same warps.
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
 *
 * The register-tile form (ex_tile_kernel, CLOVER_CUDA_EXACT_TILE): both forms above dot ONE output per warp, so
 * every 16-byte load of a row feeds 8 multiply-adds and the rows stream through L1 once per output (257 times
 * for the router): at 512 rows 1.08 GB of L1 reads a layer, which at ~30 TB/s of L1 is ~36 us before any
 * latency (the 113 us above). Here a warp holds 4 rows x 8 outputs of running sums (32 registers): a row's 8
 * values of a step feed 8 outputs and an output's 8 weights feed 4 rows (each load 32 multiply-adds), 8x less
 * L1 traffic; a block is 4 x 2 warps (16 rows x 16 outputs), so each row is read from L2 by ~17 blocks and each
 * weight row by n_rows / 16 (~140 MB at 512 rows, ~25 us at L2 speed). Bits: lane L of the warp is still lane L
 * of the decode dot (elements 8 L + 256 j .. + 7 for j = 0, 1, ... in order, the same eight fmaf a step in
 * element order, ex_dot8r), and each sum goes through the same mmv_reduce tree: only which warp holds a
 * (row, output) pair changes. A warp-row lane holds 32 sums instead of 4, so the pass has fewer warps: at few
 * rows the forms above (more warps in flight) stay faster, hence the row threshold. Measured (H100,
 * bench/device-runs/2027-01-03-xtile25, the router 257 x 2048 in graphs over 80 MB of weights, warp an output /
 * tiles): 16 rows 4.96 / 23.84 us, 32 7.57 / 23.95, 64 14.60 / 23.88, 128 27.92 / 25.71, 512 102.81 / 54.25: the
 * tiles cost ~24 us at any row count up to 128 (each warp's 8 steps wait on their loads in turn: latency, not
 * bytes), so AUTO takes them from 128 rows. A 16-sequence stacked diffusion pass (512 rows) +4% (bench_batch
 * n 16: 283.3 / 285.9 -> 295.8 / 296.1 tok/s), prompt 512 +2.7% (7,485 -> 7,686 tok/s); the same ids.
 *
 * A staged form (a block's 4 rows copied once into shared memory with cp.async, 1 or 2 outputs a warp; the same
 * bits) was built and timed (bench/device-runs/2027-01-10-xstage32, H100, router 257 x 2048, warp an output /
 * staged 1 / staged 2): 16 rows 5.00 / 7.45 / 6.18 us, 32 7.61 / 11.67 / 9.89, 64 14.72 / 18.80 / 14.50, the
 * coreset preview 5.40 -> 5.63 / 5.53 ms: the copy and the block barrier cost more than the L1 reads they save,
 * so it was removed.
 */
#include "cuda_matmul.h"
#include "cuda_device.h"
#include "cuda_switch.h"
#include "matmul_exact.cuh"

/* the tile form: a warp 4 rows x 8 outputs, a block 4 row warps x 2 output warps; AUTO from XT_MIN_ROWS rows */
enum { XT_R = 4, XT_O = 8, XT_WR = 4, XT_WO = 2, XT_MIN_ROWS = 128 };

template <int T>
__global__ void __launch_bounds__(32 * EX_WARPS) ex_rows_kernel(ex_params p) {
    const int lane = threadIdx.x & 31;
    const long gw = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    ex_rows_warp<T>(p, gw, lane);
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

/* mmv_vec_dot8 on a row's 8 values already in registers: the same eight fmaf in the same order. */
__device__ __forceinline__ float ex_dot8r(const float (&wv)[8], const float (&xv)[8], float t) {
#pragma unroll
    for (int i = 0; i < 8; i++) t = fmaf(wv[i], xv[i], t);
    return t;
}

/* The warp tree of each (row, output) sum of a warp's R x O tile (outputs og0 .., rows r0 ..; no and nr of them
 * live), lane 0 writing them: the tile form's end. */
template <int T, int R, int O>
__device__ __forceinline__ void ex_store_tile(const float (&acc)[R][O], const ex_params &p, int og0, int no, int r0,
                                              int nr, int lane) {
#pragma unroll
    for (int o = 0; o < O; o++) {
        if (o >= no) break;
        float *y;
        int n_out, oo;
        (void)ex_pick(p, og0 + o, y, n_out, oo);
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r >= nr) break;
            const float v = mmv_reduce<T>(acc[r][o]);
            if (lane == 0) y[(size_t)(r0 + r) * n_out + oo] = v;
        }
    }
}

/* The register-tile form: warp (wo, wr) of block (bx, by) takes outputs (bx XT_WO + wo) XT_O .. + 7 and rows
 * (by XT_WR + wr) XT_R .. + 3; lane L runs the decode dot's lane-L chain of each of its 32 (row, output) sums. */
template <int T>
__global__ void __launch_bounds__(32 * XT_WR * XT_WO, 2) ex_tile_kernel(ex_params p) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int og0 = ((int)blockIdx.x * XT_WO + warp % XT_WO) * XT_O;
    const int r0 = ((int)blockIdx.y * XT_WR + warp / XT_WO) * XT_R;
    if (og0 >= p.tot || r0 >= p.n_rows) { /* warp-uniform; the block's other warps may still work */
        pdl_wait();
        pdl_trigger();
        return;
    }
    const int nr = min(XT_R, p.n_rows - r0), no = min(XT_O, p.tot - og0);
    const uint8_t *wr[XT_O];
#pragma unroll
    for (int o = 0; o < XT_O; o++) {
        float *y;
        int n_out, oo;
        wr[o] = ex_pick(p, og0 + (o < no ? o : 0), y, n_out, oo);
        /* the weights are never a predecessor's output: into L2 before the wait, by the first row warp only */
        if (warp < XT_WO && o < no)
            for (size_t off = (size_t)lane * 128; off < p.row_bytes; off += 32 * 128)
                asm volatile("prefetch.global.L2 [%0];" ::"l"(wr[o] + off));
    }
    pdl_wait(); /* x is the previous kernel's output (cuda_pdl.cuh) */
    pdl_trigger();
    float acc[XT_R][XT_O];
#pragma unroll
    for (int r = 0; r < XT_R; r++)
#pragma unroll
        for (int o = 0; o < XT_O; o++) acc[r][o] = 0.0f;
    for (int e = 8 * lane; e < p.n_in; e += 256) { /* the lane's steps in the decode dot's order */
        float xv[XT_R][8];
#pragma unroll
        for (int r = 0; r < XT_R; r++) {
            if (r >= nr) break;
            const float *xr = p.x + (size_t)(r0 + r) * p.n_in + e;
            const float4 a = *(const float4 *)xr, b = *(const float4 *)(xr + 4);
            xv[r][0] = a.x, xv[r][1] = a.y, xv[r][2] = a.z, xv[r][3] = a.w;
            xv[r][4] = b.x, xv[r][5] = b.y, xv[r][6] = b.z, xv[r][7] = b.w;
        }
#pragma unroll
        for (int o = 0; o < XT_O; o++) {
            if (o >= no) break;
            float wv[8];
            mmv_vec_weights<T>(wr[o], e, wv);
#pragma unroll
            for (int r = 0; r < XT_R; r++)
                if (r < nr) acc[r][o] = ex_dot8r(wv, xv[r], acc[r][o]);
        }
    }
    ex_store_tile<T>(acc, p, og0, no, r0, nr, lane);
}

static int g_exact_rb = -1, g_exact_tile = INT_MIN;
extern "C" void cuda_exact_rb_set(int on) { cuda_switch_set(&g_exact_rb, on); }
extern "C" void cuda_exact_tile_set(int on) {
    __atomic_store_n(&g_exact_tile, on < 0 ? INT_MIN : on, __ATOMIC_RELAXED);
}

/* Whether a pass of n_rows takes the tile form: CLOVER_CUDA_EXACT_TILE=1 always, 0 never, unset (or 2) from
 * XT_MIN_ROWS rows (AUTO); a grid past grid.y's limit never. */
static bool ex_tile_takes(size_t n_rows) {
    const int v = cuda_env_int(&g_exact_tile, "CLOVER_CUDA_EXACT_TILE", 2);
    if ((n_rows + XT_R * XT_WR - 1) / (XT_R * XT_WR) > 65535) return false;
    return v == 1 || (v != 0 && n_rows >= XT_MIN_ROWS);
}

template <int T>
static void ex_tile_launch(const ex_params &p, cudaStream_t st) {
    const unsigned ow = (unsigned)((p.tot + XT_O - 1) / XT_O), rw = (unsigned)((p.n_rows + XT_R - 1) / XT_R);
    const dim3 grid((ow + XT_WO - 1) / XT_WO, (rw + XT_WR - 1) / XT_WR), block(32 * XT_WR * XT_WO);
    pdl_launch(ex_tile_kernel<T>, grid, block, 0, st, p);
}

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

enum { EXF_ROWS, EXF_TILE, EXF_RB }; /* the forms of a launch */
template <int T>
static void ex_launch(const ex_params &p, int form, dim3 grid, dim3 block, cudaStream_t st) {
    switch (form) {
    case EXF_TILE: ex_tile_launch<T>(p, st); break;
    case EXF_RB: ex_rb_launch<T>(p, st); break;
    default: pdl_launch(ex_rows_kernel<T>, grid, block, 0, st, p);
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
    /* the form, picked once (the tiles from XT_MIN_ROWS rows, then the row blocks, a warp an output) */
    const bool tile = ex_tile_takes(n_rows);
    const bool rb = !tile && cuda_switch_on(&g_exact_rb, "CLOVER_CUDA_EXACT_RB", 0);
    const int form = tile ? EXF_TILE : rb ? EXF_RB : EXF_ROWS;
    cudaStream_t st = (cudaStream_t)stream;
    switch (type) {
    case MM_F32: ex_launch<MM_F32>(p, form, grid, block, st); break;
    case MM_F16: ex_launch<MM_F16>(p, form, grid, block, st); break;
    case MM_BF16: ex_launch<MM_BF16>(p, form, grid, block, st); break;
    default: MM_FAIL("%s: weight type %u", op, (unsigned)type);
    }
    return mm_launch_status(op, why, why_len);
}
