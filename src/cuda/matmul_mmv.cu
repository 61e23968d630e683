/*
 * matmul_mmv.cu: the decode products (1..8 rows): dense cuda_matmul_decode
 * and the grouped expert form cuda_moe_decode, one kernel for both.
 *
 * One warp per output row (8 per thread block); the warp streams the
 * weight row once and dots it with every activation row that uses it (all
 * rows for a dense product; for an expert, every slot routed to it), so
 * weights are read once per step. The 8-bit rows are made inside the
 * product's own thread block, into shared memory (one launch per product,
 * and the codes are matmul_act.cu's, byte for byte); only when they would
 * not fit in 48 KB does a separate quantiser kernel write them to `work`. Q8_0/K-quant weights are dotted with the
 * 8-bit rows of matmul_act.cu through __dp4a: a lane takes a 16-value (K)
 * or 8-value (Q8_0) piece of a block, the block's lanes add their exact
 * integer sums, the block's term is formed as act_scalar.c forms it, and
 * the terms are added in the canonical order that matmul_igemm.cu states
 * (interleaved partials, then a fixed tree), so decode and chunk products
 * give a row the same bits at any row count.
 * Float weights use f32
 * activations. Each row's arithmetic is the same whatever the other rows,
 * so a row's bits do not depend on the batch.
 *
 * MoE: grid.y is the slot; the block of slot s runs only when s is the
 * first slot routed to its expert, and then does every slot routed there.
 * No host synchronisation: the routing is read on the device.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "matmul_mmv.cuh"

template <int T, bool FUSE, bool GLU>
__global__ void __launch_bounds__(32 * MMV_WARPS, MMV_MIN_BLOCKS(T, FUSE, GLU)) mmv_kernel(mmv_params p) {
    extern __shared__ __align__(16) uint8_t xsm[]; /* FUSE: the group's 8-bit rows */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    /* several matrices in one launch (dense only): this block's segment */
    const uint8_t *W = p.w;
    int NOUT = p.n_out, BX = blockIdx.x, VEC = p.vec;
    float *Y = p.y;
    if (p.n_seg > 1) {
        int sg = 0;
        while (sg + 1 < p.n_seg && BX >= p.seg_blk0[sg + 1]) sg++;
        W = p.seg_w[sg], NOUT = p.seg_n_out[sg], Y = p.seg_y[sg], VEC = p.seg_vec[sg];
        BX -= p.seg_blk0[sg];
    }
    /* the block's rows o0 .. o0 + nrow - 1; warp w does rows o0 + w*RPW .. + RPW - 1 */
    const int RPW = GLU ? 1 : p.rpw, RB = MMV_WARPS * RPW; /* GLU: 1 (registers; its rows are long) */
    const int o0 = BX * RB, nrow = NOUT - o0 < RB ? NOUT - o0 : RB, ow = o0 + warp * RPW;
    /* dense: this block's weight rows are known before the inputs are (cuda_pdl.cuh): start them towards L2
     * while the previous kernel finishes; then wait for it (a no-op unless launched with PDL) */
    uint8_t *ws = xsm + p.x_smem; /* stage: the block's rows (then the up rows) */
    const size_t span = (size_t)nrow * p.row_bytes;
    if (p.ids == NULL) {
        if (p.stage) {
            mmv_stage(ws, W + (size_t)o0 * p.row_bytes, span);
            if (GLU) mmv_stage(ws + span, p.w2 + (size_t)o0 * p.row_bytes, span);
        } else {
            pdl_prefetch_l2(W + (size_t)o0 * p.row_bytes, span);
            if (GLU) pdl_prefetch_l2(p.w2 + (size_t)o0 * p.row_bytes, span);
        }
    }
    pdl_wait();
    pdl_trigger();
    int slots[MMV_MAX];
    int ns = 0, e = 0, first = 0;
    if (p.ids == NULL) { /* dense: the rows */
        ns = p.n_slots;
        for (int i = 0; i < MMV_MAX; i++) slots[i] = i;
    } else {
        const int s = blockIdx.y;
        e = p.ids[s];
        if (e < 0 || e >= p.n_expert) { /* a bad id: its outputs are NaN, no memory outside W is read */
            for (int j = 0; j < RPW; j++)
                if (ow + j < NOUT && lane == 0) Y[(size_t)s * NOUT + ow + j] = __int_as_float(0x7fc00000);
            return;
        }
        for (int t = 0; t < s; t++)
            if (p.ids[t] == e) return; /* an earlier slot's block does this expert */
        first = s;
        /* the expert's rows of this block, in flight while the rows are quantised */
        const size_t eo = (size_t)e * p.expert_stride + (size_t)o0 * p.row_bytes;
        if (p.stage) {
            mmv_stage(ws, W + eo, span);
            if (GLU) mmv_stage(ws + span, p.w2 + eo, span);
        } else {
            pdl_prefetch_l2(W + eo, span);
            if (GLU) pdl_prefetch_l2(p.w2 + eo, span);
        }
    }
    /* MoE: the slots routed to e, from `first` on, in groups of up to 8 (one
     * group unless a row routes to the same expert twice). Block-uniform. */
    int next = first;
    for (;;) {
        if (p.ids != NULL) {
            ns = 0;
            for (; next < p.n_slots && ns < p.group_cap; next++)
                if (p.ids[next] == e) slots[ns++] = next;
            if (ns == 0) break;
        }
        const uint8_t *xr[MMV_MAX];
        if (FUSE) { /* quantise the group's rows into shared memory */
            mmv_fuse_rows<T>(p, slots, ns, xsm);
#pragma unroll
            for (int i = 0; i < MMV_MAX; i++) xr[i] = xsm + (size_t)(i < ns ? i : 0) * p.x_bytes;
        } else {
#pragma unroll
            for (int i = 0; i < MMV_MAX; i++) {
                const int xs = i < ns ? (p.x_per_slot ? slots[i] : slots[i] / p.k) : 0;
                xr[i] = (const uint8_t *)p.x + (size_t)xs * p.x_bytes;
            }
        }
        if (p.stage) asm volatile("cp.async.wait_all;" ::: "memory"); /* this thread's copies landed */
        if (FUSE || p.stage) __syncthreads(); /* everyone's copies and rows */
#pragma unroll 1
        for (int j = 0; j < RPW; j++) {
            const int o = ow + j;
            if (o >= NOUT) break;
            const size_t woff = (size_t)e * p.expert_stride + (size_t)o * p.row_bytes;
            const size_t soff = (size_t)(o - o0) * p.row_bytes;
            const uint8_t *wrow = p.stage ? ws + soff : W + woff;
            const uint8_t *wrow2 = p.stage ? ws + span + soff : p.w2 + woff;
            float acc[MMV_MAX], acc2[GLU ? MMV_MAX : 1];
#pragma unroll
            for (int i = 0; i < MMV_MAX; i++) acc[i] = 0.0f;
#pragma unroll
            for (int i = 0; i < (GLU ? MMV_MAX : 1); i++) acc2[i] = 0.0f;
            mmv_row_any<T>(p.lane_q8, wrow, p.n_in, xr, ns, VEC, acc);
            if (GLU) mmv_row_any<T>(p.lane_q8, wrow2, p.n_in, xr, ns, VEC, acc2);
#pragma unroll
            for (int i = 0; i < MMV_MAX; i++) {
                if (i >= ns) break; /* ns is the same for the whole block: no lane leaves a shuffle */
                float v = mmv_reduce_any<T>(p.lane_q8, acc[i]);
                if (GLU) {
                    float u = mmv_reduce_any<T>(p.lane_q8, acc2[i]);
                    v = mmv_swiglu(v, u);
                }
                if (lane == 0) Y[(size_t)slots[i] * NOUT + o] = v;
            }
        }
        if (p.ids == NULL) break;
        if (FUSE) __syncthreads(); /* the next group overwrites the shared rows (staged weights stay) */
    }
}

/* Float weights at 2+ rows, dense (the router's 256 x 2048 F32 over 8 rows of a block, 4 launches a layer; a
 * shared expert's 1-output F32 gate over 32 rows): mmv_kernel gives a warp one output and every row, so the
 * router's 8 rows run on only 256 warps, each walking 8 rows one after another. Here a warp takes one
 * (row, output) pair: 8x the warps, 1/8 of the chain. Its arithmetic is mmv_row's vec path for one row and
 * mmv_reduce, the very same operations in the same order, so the bits equal mmv_kernel's (tested: the
 * rows alone vs together in test_cuda_matmul); warps of a block share the row (o-major). */
template <int T>
__global__ void __launch_bounds__(256) mmv_thin_kernel(const uint8_t *w, size_t row_bytes, int n_out, int n_in,
                                                       const float *x, int n_rows, float *y) {
    const int lane = threadIdx.x & 31;
    const size_t gw = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    pdl_wait(); /* x is the previous kernel's output (cuda_pdl.cuh) */
    pdl_trigger();
    if (gw >= (size_t)n_rows * (size_t)n_out) return; /* warp-uniform */
    const size_t r = gw / (size_t)n_out, o = gw % (size_t)n_out;
    const uint8_t *xr[MMV_MAX];
#pragma unroll
    for (int i = 0; i < MMV_MAX; i++) xr[i] = (const uint8_t *)(x + r * (size_t)n_in);
    float acc[MMV_MAX];
#pragma unroll
    for (int i = 0; i < MMV_MAX; i++) acc[i] = 0.0f;
    mmv_row<T>(w + o * row_bytes, n_in, xr, 1, 1, acc);
    const float v = mmv_reduce<T>(acc[0]);
    if (lane == 0) y[r * (size_t)n_out + o] = v;
}

/* The thin form applies to float weights on the 16-byte path (mmv_x's vec rule). */
bool mmv_thin_ok(uint32_t type, const void *w, size_t n_in, const float *x) {
    return !mm_is_int(type) && n_in % 8 == 0 && (((uintptr_t)x | (uintptr_t)w) & 15) == 0;
}

/* y [n_rows][n_out] = x W^T for float weights, a warp per (row, output); the caller checked the shape. */
void mmv_thin_launch(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows, float *y,
                     cudaStream_t st) {
    const size_t warps = n_rows * n_out, rb = mm_row_bytes(type, n_in);
    const dim3 grid((unsigned)((warps + 7) / 8)), block(256);
    const uint8_t *W = (const uint8_t *)w;
    switch (type) {
    case MM_F32: pdl_launch(mmv_thin_kernel<MM_F32>, grid, block, 0, st, W, rb, (int)n_out, (int)n_in, x, (int)n_rows, y); break;
    case MM_F16: pdl_launch(mmv_thin_kernel<MM_F16>, grid, block, 0, st, W, rb, (int)n_out, (int)n_in, x, (int)n_rows, y); break;
    case MM_BF16: pdl_launch(mmv_thin_kernel<MM_BF16>, grid, block, 0, st, W, rb, (int)n_out, (int)n_in, x, (int)n_rows, y); break;
    default: break;
    }
}

/* Shared memory of the fused 8-bit rows (up to 8 rows of the group), or
 * more than MMV_SMEM_MAX when the product should not fuse: the rows do not
 * fit, or each warp would quantise more than 2 pieces one after the other
 * (a chain of dependent round trips that costs more than the separate,
 * fully parallel quantiser launch: measured in run 2, bench/device-runs/cuda-matmul-notes.md). */
static size_t mmv_smem(uint32_t type, size_t n_in, size_t n_group) {
    if (!mm_is_int(type)) return 0;
    const size_t pieces = n_group * (type == MM_Q8_0 && n_in % 256 ? n_in / 32 : n_in / 256);
    if (pieces > 2 * MMV_WARPS) return MMV_SMEM_MAX + 1;
    return mm_act_row_bytes(type, n_in) * n_group;
}

#define MMV_CASE(TY)                                                                \
    case TY:                                                                       \
        if (p->fused)                                                              \
            pdl_launch(glu ? mmv_kernel<TY, true, true> : mmv_kernel<TY, true, false>, grid, block, smem, st, *p); \
        else                                                                       \
            pdl_launch(glu ? mmv_kernel<TY, false, true> : mmv_kernel<TY, false, false>, grid, block, smem, st, *p); \
        break

#define MMVF_CASE(TY) /* float weights: never fused (f32 rows are read as they are) */ \
    case TY: pdl_launch(glu ? mmv_kernel<TY, false, true> : mmv_kernel<TY, false, false>, grid, block, smem, st, *p); break

/* Output rows per warp: short rows (the experts' down products, 512 wide)
 * give a warp one step of work per row, so a warp takes 4 of them: 4x fewer
 * blocks, each paying its fixed part (inputs, quantised rows, barrier) once
 * for 32 rows. A function of the row length only, so batch-invariant. */
static int mmv_rpw(size_t row_bytes) { return row_bytes <= 640 ? 4 : 1; }

/* The staging switch: on unless CLOVER_CUDA_MMV_STAGE=0; cuda_mmv_stage_set
 * overrides (bench_cuda_matmul times both). */
/* A switch on unless the variable is "0", read once into *cache (-1: not yet); a _set function overrides it. */
static int switch_on_unless_0(int *cache, const char *name) {
    int v = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv(name);
        v = !(e && strcmp(e, "0") == 0);
        __atomic_store_n(cache, v, __ATOMIC_RELAXED);
    }
    return v;
}

static int g_stage = -1;
static int cuda_mmv_stage_enabled(void) { return switch_on_unless_0(&g_stage, "CLOVER_CUDA_MMV_STAGE"); }
extern "C" void cuda_mmv_stage_set(int on) { __atomic_store_n(&g_stage, on ? 1 : 0, __ATOMIC_RELAXED); }

/* The lane-a-block Q8_0 dot (mmv_row_q8l): on unless CLOVER_CUDA_MMV_LANE=0; cuda_mmv_lane_set overrides. It reads
 * staged rows only: a lane's 34-byte stride over global memory would scatter a warp's loads. */
static int g_lane = -1;
int mmv_lane_enabled(void) { return switch_on_unless_0(&g_lane, "CLOVER_CUDA_MMV_LANE"); }
extern "C" void cuda_mmv_lane_set(int on) { __atomic_store_n(&g_lane, on ? 1 : 0, __ATOMIC_RELAXED); }

/* Staging (mmv_stage) when the rows are 16-byte aligned and the block's rows
 * fit beside the fused 8-bit rows in 48 KB; sets p->stage, p->x_smem and
 * returns the block's shared memory. */
static size_t mmv_plan_smem(mmv_params *p, size_t x_smem) {
    const size_t rb = (size_t)MMV_WARPS * p->rpw, rows = (size_t)p->n_out < rb ? (size_t)p->n_out : rb;
    const size_t span = rows * p->row_bytes * (p->w2 ? 2 : 1), xs = (x_smem + 15) / 16 * 16;
    uintptr_t al = (uintptr_t)p->w | (uintptr_t)p->w2 | (uintptr_t)p->expert_stride | (uintptr_t)p->row_bytes;
    for (int i = 0; i < p->n_seg; i++) al |= (uintptr_t)p->seg_w[i];
    p->stage = cuda_mmv_stage_enabled() && (al & 15) == 0 && xs + span <= MMV_SMEM_MAX;
    p->lane_q8 = p->stage && mmv_lane_enabled();
    p->x_smem = (unsigned)xs;
    return p->stage ? xs + span : x_smem;
}

static void mmv_launch(uint32_t type, mmv_params *p, unsigned grid_y, size_t x_smem, cudaStream_t st) {
    if (p->w2) p->rpw = 1; /* the kernel's GLU form keeps one row a warp */
    const int rb = MMV_WARPS * p->rpw;
    const unsigned gx = p->n_seg > 1 ? (unsigned)p->n_blocks : (unsigned)((p->n_out + rb - 1) / rb);
    const dim3 grid(gx, grid_y), block(32 * MMV_WARPS);
    const bool glu = p->w2 != NULL;
    /* the persistent form stages too: CLOVER_CUDA_MMV_STAGE=0 (weights read where they lie) turns both off */
    if (grid_y == 1 && p->ids == NULL && cuda_mmv_stage_enabled() && mmv_stream_launch(type, p, x_smem, st)) return;
    const size_t smem = mmv_plan_smem(p, x_smem);
    switch (type) {
        MMVF_CASE(MM_F32);
        MMVF_CASE(MM_F16);
        MMVF_CASE(MM_BF16);
        MMV_CASE(MM_Q8_0);
        MMV_CASE(MM_Q4_K);
        MMV_CASE(MM_Q5_K);
        MMV_CASE(MM_Q6_K);
    default: break;
    }
}

/* Where the kernel finds its activation rows: x itself for float types;
 * fused (smem > 0, returned through *smem): quantised per block from x;
 * else quantised into work (n_x rows) by the separate kernel first. */
static void mmv_x(mmv_params *p, uint32_t type, const float *x, size_t n_x, size_t n_in, size_t n_group, void *work,
                  size_t *smem, cudaStream_t st) {
    *smem = 0;
    p->vec = 0;
    p->group_cap = MMV_MAX;
    if (!mm_is_int(type)) {
        p->x_bytes = n_in * sizeof(float);
        p->x = x;
        p->vec = n_in % 8 == 0 && (((uintptr_t)x | (uintptr_t)p->w | (uintptr_t)p->w2 | (uintptr_t)p->expert_stride) & 15) == 0;
        return;
    }
    p->x_bytes = mm_act_row_bytes(type, n_in);
    const size_t sm = mmv_smem(type, n_in, n_group);
    if (sm <= MMV_SMEM_MAX) {
        *smem = sm;
        p->fused = 1;
        p->group_cap = (int)n_group;
        p->xf = x;
        p->x = NULL;
        return;
    }
    mm_act_quantize(type, x, n_x, n_in, (uint8_t *)work, st);
    p->x = work;
}

extern "C" size_t cuda_matmul_decode_work_bytes(uint32_t type, size_t n_in, size_t n_rows) {
    if (mmv_smem(type, n_in, n_rows) <= MMV_SMEM_MAX) return 0; /* fused: no scratch */
    return mm_align256(mm_act_row_bytes(type, n_in) * n_rows);
}

static int matmul_decode(const char *op, uint32_t type, const void *w, const void *w2, size_t n_out, size_t n_in,
                         const float *x, size_t n_rows, float *y, void *work, void *stream, char *why, size_t why_len) {
    if (mm_check_shape(op, type, n_out, n_in, why, why_len)) return -1;
    if (n_rows < 1 || n_rows > MMV_MAX) MM_FAIL("%s: %zu rows (1..%d)", op, n_rows, MMV_MAX);
    if (!w || !x || !y || (mm_is_int(type) && !work && cuda_matmul_decode_work_bytes(type, n_in, n_rows)))
        MM_FAIL("%s: a NULL pointer", op);
    if (((uintptr_t)w | (uintptr_t)w2) & (mm_align(type) - 1))
        MM_FAIL("%s: weights not %zu-byte aligned", op, mm_align(type));
    cudaStream_t st = (cudaStream_t)stream;
    mmv_params p = {};
    p.w = (const uint8_t *)w;
    p.w2 = (const uint8_t *)w2;
    p.row_bytes = mm_row_bytes(type, n_in);
    p.rpw = mmv_rpw(p.row_bytes);
    p.n_out = (int)n_out;
    p.n_in = (int)n_in;
    p.n_slots = (int)n_rows;
    p.k = 1;
    p.x_per_slot = 1;
    p.n_expert = 1;
    p.y = y;
    if (!w2 && n_rows >= 2 && mmv_thin_ok(type, w, n_in, x)) { /* float weights, several rows: a warp per pair */
        mmv_thin_launch(type, w, n_out, n_in, x, n_rows, y, st);
        return mm_launch_status(op, why, why_len);
    }
    size_t smem;
    mmv_x(&p, type, x, n_rows, n_in, n_rows, work, &smem, st);
    mmv_launch(type, &p, 1, smem, st);
    return mm_launch_status(op, why, why_len);
}

extern "C" int cuda_matmul_decode(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x,
                                  size_t n_rows, float *y, void *work, void *stream, char *why, size_t why_len) {
    return matmul_decode("cuda_matmul_decode", type, w, NULL, n_out, n_in, x, n_rows, y, work, stream, why, why_len);
}

extern "C" int cuda_matmul_exact(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x,
                                 size_t n_rows, float *y, void *stream, char *why, size_t why_len) {
    const char *op = "cuda_matmul_exact";
    if (mm_check_shape(op, type, n_out, n_in, why, why_len)) return -1;
    if (mm_is_int(type)) MM_FAIL("%s: weight type %u is not a float type", op, (unsigned)type);
    if (n_rows < 1 || n_rows > (1u << 24)) MM_FAIL("%s: %zu rows", op, n_rows);
    if (!w || !x || !y) MM_FAIL("%s: a NULL pointer", op);
    if ((uintptr_t)w & (mm_align(type) - 1)) MM_FAIL("%s: weights not %zu-byte aligned", op, mm_align(type));
    /* one launch: mmv_kernel's bits (matmul_exact.cu: a warp an output, its weights in registers for 4 rows) */
    if (n_rows >= 2 && mmv_thin_ok(type, w, n_in, x)) {
        const cuda_matmul_seg seg = {w, n_out, y};
        return cuda_matmul_exact_multi(type, &seg, 1, n_in, x, n_rows, stream, why, why_len);
    }
    for (size_t r0 = 0; r0 < n_rows; r0 += MMV_MAX) {
        const size_t nr = n_rows - r0 < MMV_MAX ? n_rows - r0 : MMV_MAX;
        if (matmul_decode(op, type, w, NULL, n_out, n_in, x + r0 * n_in, nr, y + r0 * n_out, NULL, stream, why,
                          why_len))
            return -1;
    }
    return 0;
}

extern "C" int cuda_matmul_decode_glu(uint32_t type, const void *w_gate, const void *w_up, size_t n_out, size_t n_in,
                                      const float *x, size_t n_rows, float *y, void *work, void *stream, char *why,
                                      size_t why_len) {
    if (!w_up) MM_FAIL("cuda_matmul_decode_glu: a NULL pointer");
    return matmul_decode("cuda_matmul_decode_glu", type, w_gate, w_up, n_out, n_in, x, n_rows, y, work, stream, why,
                         why_len);
}

extern "C" int cuda_matmul_decode_multi(uint32_t type, const cuda_matmul_seg *seg, size_t n_seg, size_t n_in,
                                        const float *x, size_t n_rows, void *work, void *stream, char *why,
                                        size_t why_len) {
    const char *op = "cuda_matmul_decode_multi";
    if (n_seg < 1 || n_seg > CUDA_MATMUL_MAX_SEG) MM_FAIL("%s: %zu matrices (1..%d)", op, n_seg, CUDA_MATMUL_MAX_SEG);
    if (n_seg == 1)
        return matmul_decode(op, type, seg[0].w, NULL, seg[0].n_out, n_in, x, n_rows, seg[0].y, work, stream, why,
                             why_len);
    if (n_rows < 1 || n_rows > MMV_MAX) MM_FAIL("%s: %zu rows (1..%d)", op, n_rows, MMV_MAX);
    if (!x || (mm_is_int(type) && !work && cuda_matmul_decode_work_bytes(type, n_in, n_rows)))
        MM_FAIL("%s: a NULL pointer", op);
    mmv_params p = {};
    size_t blocks = 0, max_out = 0;
    for (size_t i = 0; i < n_seg; i++) {
        if (mm_check_shape(op, type, seg[i].n_out, n_in, why, why_len)) return -1;
        if (!seg[i].w || !seg[i].y) MM_FAIL("%s: a NULL pointer", op);
        if ((uintptr_t)seg[i].w & (mm_align(type) - 1)) MM_FAIL("%s: weights not %zu-byte aligned", op, mm_align(type));
        p.seg_blk0[i] = (int)blocks;
        p.seg_n_out[i] = (int)seg[i].n_out;
        p.seg_w[i] = (const uint8_t *)seg[i].w;
        p.seg_y[i] = seg[i].y;
        p.seg_vec[i] = !mm_is_int(type) && n_in % 8 == 0 && (((uintptr_t)x | (uintptr_t)seg[i].w) & 15) == 0;
        const size_t rb = (size_t)MMV_WARPS * mmv_rpw(mm_row_bytes(type, n_in));
        blocks += (seg[i].n_out + rb - 1) / rb;
        if (seg[i].n_out > max_out) max_out = seg[i].n_out;
    }
    if (blocks > (1u << 30)) MM_FAIL("%s: %zu output rows in all", op, blocks * MMV_WARPS);
    cudaStream_t st = (cudaStream_t)stream;
    p.n_seg = (int)n_seg;
    p.n_blocks = (int)blocks;
    p.w = p.seg_w[0];
    p.y = p.seg_y[0];
    p.row_bytes = mm_row_bytes(type, n_in);
    p.rpw = mmv_rpw(p.row_bytes);
    p.n_out = (int)max_out; /* the staging plan: a block's rows are min(8, n_out) at most */
    p.n_in = (int)n_in;
    p.n_slots = (int)n_rows;
    p.k = 1;
    p.x_per_slot = 1;
    p.n_expert = 1;
    size_t smem;
    mmv_x(&p, type, x, n_rows, n_in, n_rows, work, &smem, st);
    mmv_launch(type, &p, 1, smem, st);
    return mm_launch_status(op, why, why_len);
}

/* Slots per group when fused: one per row (a row's experts are distinct;
 * should a row repeat one, the kernel splits the group at this cap). */
static size_t moe_group(const cuda_moe_args *a) { return a->n_rows < MMV_MAX ? a->n_rows : MMV_MAX; }

extern "C" size_t cuda_moe_decode_work_bytes(const cuda_moe_args *a) {
    const size_t n_x = a->x_per_slot ? a->n_rows * a->k : a->n_rows;
    if (mmv_smem(a->type, a->n_in, moe_group(a)) <= MMV_SMEM_MAX) return 0;
    return mm_align256(mm_act_row_bytes(a->type, a->n_in) * n_x);
}

static int moe_decode(const char *op, const cuda_moe_args *a, const void *w2, void *work, void *stream, char *why,
                      size_t why_len) {
    if (mm_check_shape(op, a->type, a->n_out, a->n_in, why, why_len)) return -1;
    if (a->n_rows < 1 || a->n_rows > MMV_MAX) MM_FAIL("%s: %zu rows (1..%d)", op, a->n_rows, MMV_MAX);
    if (a->k < 1 || a->k > CUDA_MOE_MAX_K) MM_FAIL("%s: k = %zu (1..%d)", op, a->k, CUDA_MOE_MAX_K);
    if (a->n_expert < 1 || a->n_expert > (1u << 30)) MM_FAIL("%s: %zu experts", op, a->n_expert);
    if (a->expert_stride < mm_row_bytes(a->type, a->n_in) * a->n_out)
        MM_FAIL("%s: expert stride %zu < an expert's %zu bytes", op, a->expert_stride,
                mm_row_bytes(a->type, a->n_in) * a->n_out);
    if (!a->w || !a->x || !a->y || !a->ids || (mm_is_int(a->type) && !work && cuda_moe_decode_work_bytes(a)))
        MM_FAIL("%s: a NULL pointer", op);
    if (((uintptr_t)a->w | (uintptr_t)w2 | a->expert_stride) & (mm_align(a->type) - 1))
        MM_FAIL("%s: weights or expert stride not %zu-byte aligned", op, mm_align(a->type));
    cudaStream_t st = (cudaStream_t)stream;
    if (moef_launch(a->type, a, w2, st)) return mm_launch_status(op, why, why_len); /* off unless switched on */
    const size_t n_slots = a->n_rows * a->k, n_x = a->x_per_slot ? n_slots : a->n_rows;
    mmv_params p = {};
    p.w = (const uint8_t *)a->w;
    p.w2 = (const uint8_t *)w2;
    p.row_bytes = mm_row_bytes(a->type, a->n_in);
    p.rpw = mmv_rpw(p.row_bytes);
    p.expert_stride = a->expert_stride;
    p.n_out = (int)a->n_out;
    p.n_in = (int)a->n_in;
    p.ids = a->ids;
    p.n_slots = (int)n_slots;
    p.k = (int)a->k;
    p.x_per_slot = a->x_per_slot != 0;
    p.n_expert = (int)a->n_expert;
    p.y = a->y;
    size_t smem;
    mmv_x(&p, a->type, a->x, n_x, a->n_in, moe_group(a), work, &smem, st);
    mmv_launch(a->type, &p, (unsigned)n_slots, smem, st);
    return mm_launch_status(op, why, why_len);
}

extern "C" int cuda_moe_decode(const cuda_moe_args *a, void *work, void *stream, char *why, size_t why_len) {
    return moe_decode("cuda_moe_decode", a, NULL, work, stream, why, why_len);
}

extern "C" int cuda_moe_decode_glu(const cuda_moe_args *gate, const void *w_up, void *work, void *stream, char *why,
                                   size_t why_len) {
    if (!w_up) MM_FAIL("cuda_moe_decode_glu: a NULL pointer");
    return moe_decode("cuda_moe_decode_glu", gate, w_up, work, stream, why, why_len);
}
