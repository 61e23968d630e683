/*
 * moe_decode.cu: the grouped expert products of 1..32 rows in the decode form
 * (cuda_moe_dec32, cuda_moe_dec32_glu; CLOVER_CUDA_MOE_DEC32=1 routes the
 * backend's MoE here, off by default).
 *
 * Why: matmul_mmv.cu's decode form stops at 8 rows (its block of slot s scans
 * the routing for an earlier slot of its expert, and launches a block for
 * every slot), and a stacked AR step of 9..32 requests then took the chunk
 * form, whose tensor-core tiles of up to 32 slots of one expert are ~1/25
 * full at ~1.3 rows an expert (16 rows, 256 experts). Here each routed
 * expert's weights are read once, for all its rows, by warps that do one
 * weight row each (the decode arithmetic), like the 8-row form, at any row
 * count up to 32.
 *
 * Two launches a product:
 *  1. prep: block 0 builds the per-expert slot lists on the device (each
 *     slot compares its expert with every slot's in shared memory: its
 *     group's first slot, its rank, the group's size; prefix sums over the
 *     first slots give the entries, in order of first slot, and the lists);
 *     the other blocks round the activation rows to 8 bits into work (one
 *     warp per 256- or 32-value block, the device functions matmul_act.cu
 *     and mmv_fuse_rows use: the same bytes).
 *  2. product: grid (out-tile, list entry); a block copies its expert's tile
 *     of weight rows and its group's 8-bit rows to shared memory (cp.async,
 *     all bytes in flight at once), then each warp dots its row with every
 *     slot of the list, 8 at a time, through mmv_row / mmv_reduce /
 *     mmv_swiglu of matmul_mmv.cuh.
 * Bits: a slot's output is mmv_row of its own 8-bit row and the weight row,
 * reduced by mmv_reduce, exactly the operations of mmv_kernel (decode form)
 * and in the one canonical order the chunk form also keeps; which other slots
 * share the group change nothing.
 * Measured (H200, 2026-12-04, bench/device-runs/2026-12-09-moe24): bits as
 * above, but slower than the chunk form at 16 rows (2x) and than the 8-row
 * form at 1 row: the dot (mmv_block) is instruction-bound (~0.5
 * warp-instructions a weight byte a slot; ncu: SM 58%, DRAM 11%), not
 * latency- or grid-bound. Off by default for that reason. Since 2026-12-04
 * (not yet measured) Q4_K / Q5_K products go to moe_fast.cu's kernel
 * instead, whose dot costs about a third of mmv_block's instructions a
 * weight byte; this file's kernels keep the other types.
 * A bad id (outside 0..n_expert-1): the prep block writes NaN to its slot's
 * outputs and the slot is in no list.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "matmul_mmv.cuh"

enum { MOED_PREP_THREADS = 512, MOED_MAX_SLOTS = CUDA_MOE_DECODE_MAX_ROWS * CUDA_MOE_MAX_K };

typedef struct moed_params {
    const uint8_t *w, *w2; /* w2: GLU's up weights */
    size_t row_bytes, expert_stride;
    int n_out, n_in, n_expert, n_slots, k, x_per_slot, rpw, vec, stage, xstage;
    const int32_t *ids;
    const float *xf;  /* the f32 rows (prep's input; the product's for float types) */
    const uint8_t *x; /* the rows the product reads: 8-bit in work, or xf */
    size_t x_bytes;
    int n_x, n_act_blocks; /* prep: rows to round, and 8-bit blocks a row (0: none, float types) */
    int4 *ents;            /* work: list entry j = {expert, first index in slots, slot count, 0}; count 0: unused */
    int *slots;            /* work: the slots of entry 0, then entry 1's, ... */
    int cap;               /* list entries: min(n_slots, n_expert) */
    float *y;
} moed_params;

/* The lists (block 0) and the 8-bit rows (blocks 1..). */
template <int T>
__global__ void __launch_bounds__(MOED_PREP_THREADS) moed_prep_kernel(moed_params p) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    pdl_wait(); /* ids and x are the previous kernels' outputs (cuda_pdl.cuh) */
    pdl_trigger();
    if (blockIdx.x > 0) {
        if (!mm_int_t(T)) return;
        const int q8 = T == MM_Q8_0, qb = q8 ? 32 : 256, bb = q8 ? MM_ACT32_BYTES : MM_ACTK_BYTES;
        const int g = (blockIdx.x - 1) * (MOED_PREP_THREADS / 32) + warp;
        if (g >= p.n_x * p.n_act_blocks) return;
        const int r = g / p.n_act_blocks, b = g % p.n_act_blocks;
        const float *src = p.xf + (size_t)r * p.n_in + (size_t)b * qb;
        uint8_t *dst = (uint8_t *)p.x + (size_t)r * p.x_bytes + (size_t)b * bb;
        if (q8)
            mm_act_block_32(src, dst, lane);
        else
            mm_act_block_k(src, dst, lane);
        return;
    }
    /* every slot compares its expert with all slots' (shared memory, broadcast reads): its group's first slot,
     * its rank in the group (slots before it there), the group's size. No atomics: the lists are in slot order. */
    __shared__ int sid[MOED_MAX_SLOTS], off_of[MOED_MAX_SLOTS], wtot[MOED_PREP_THREADS / 32], wcnt[MOED_PREP_THREADS / 32];
    const int s = tid, in = s < p.n_slots;
    const int e = in ? p.ids[s] : -1;
    const int ok = in && e >= 0 && e < p.n_expert;
    if (in && !ok) /* a bad id: NaN outputs, no memory outside W read */
        for (int o = 0; o < p.n_out; o++) p.y[(size_t)s * p.n_out + o] = __int_as_float(0x7fc00000);
    sid[s] = ok ? e : -1;
    __syncthreads();
    int first = s, rank = 0, total = 0;
    if (warp * 32 < p.n_slots) /* warp-uniform: warps past the slots skip the walk */
        for (int t = 0; t < p.n_slots; t++) {
            const int m = ok && sid[t] == e;
            total += m;
            rank += m && t < s;
            first = m && t < first ? t : first;
        }
    const int is_first = ok && first == s;
    /* entry j of a first slot: first slots before it; its list starts at the sizes of the groups before it */
    const unsigned bal = __ballot_sync(0xffffffffu, is_first);
    const int v = is_first ? total : 0;
    int inc = v;
    for (int d = 1; d < 32; d <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, inc, d);
        if (lane >= d) inc += u;
    }
    if (lane == 31) wtot[warp] = inc;
    if (lane == 0) wcnt[warp] = __popc(bal);
    __syncthreads();
    int j = __popc(bal & ((1u << lane) - 1u)), base = 0, n_ent = 0;
    for (int w = 0; w < MOED_PREP_THREADS / 32; w++) {
        if (w < warp) j += wcnt[w], base += wtot[w];
        n_ent += wcnt[w];
    }
    const int off = base + inc - v;
    if (is_first) {
        p.ents[j] = make_int4(e, off, total, 0);
        off_of[s] = off;
    }
    if (s >= n_ent && s < p.cap) p.ents[s] = make_int4(0, 0, 0, 0);
    __syncthreads();
    if (ok) p.slots[off_of[first] + rank] = s;
}

/* One block: output rows o0 .. o0 + 8*rpw - 1 of list entry blockIdx.y's expert, for every slot of its list, in
 * groups of 8: the block stages its weight rows (and, xstage, each group's 8-bit rows) in shared memory. */
template <int T, bool GLU>
__global__ void __launch_bounds__(32 * MMV_WARPS, 2) moed_kernel(moed_params p) {
    extern __shared__ __align__(16) uint8_t ws[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    pdl_wait(); /* the prep kernel's lists and rows */
    pdl_trigger();
    const int4 en = p.ents[blockIdx.y];
    const int e = en.x, ns_all = en.z;
    if (ns_all == 0) return;
    const int *sl = p.slots + en.y;
    const int RPW = p.rpw, RB = MMV_WARPS * RPW;
    const int o0 = blockIdx.x * RB, nrow = p.n_out - o0 < RB ? p.n_out - o0 : RB, ow = o0 + warp * RPW;
    const size_t span = (size_t)nrow * p.row_bytes, eo = (size_t)e * p.expert_stride + (size_t)o0 * p.row_bytes;
    uint8_t *xsm = ws + (p.stage ? span * (GLU ? 2 : 1) : 0);
    if (p.stage) {
        mmv_copy(ws, p.w + eo, span);
        if (GLU) mmv_copy(ws + span, p.w2 + eo, span);
    } else {
        pdl_prefetch_l2(p.w + eo, span);
        if (GLU) pdl_prefetch_l2(p.w2 + eo, span);
    }
#pragma unroll 1
    for (int g = 0; g < ns_all; g += MMV_MAX) {
        const int ns = ns_all - g < MMV_MAX ? ns_all - g : MMV_MAX; /* block-uniform */
        int slot[MMV_MAX];
        const uint8_t *xr[MMV_MAX];
#pragma unroll
        for (int i = 0; i < MMV_MAX; i++) {
            slot[i] = i < ns ? sl[g + i] : sl[g];
            const int xs = p.x_per_slot ? slot[i] : slot[i] / p.k;
            xr[i] = p.x + (size_t)xs * p.x_bytes;
        }
        if (p.xstage) { /* the group's 8-bit rows beside the weights, in flight with them */
            if (g > 0) __syncthreads(); /* the previous group's rows are no longer read */
#pragma unroll
            for (int i = 0; i < MMV_MAX; i++) {
                if (i >= ns) break;
                mmv_copy(xsm + (size_t)i * p.x_bytes, xr[i], p.x_bytes);
                xr[i] = xsm + (size_t)i * p.x_bytes;
            }
        }
        if (p.stage || p.xstage) {
            asm volatile("cp.async.commit_group;" ::: "memory");
            asm volatile("cp.async.wait_all;" ::: "memory");
            __syncthreads();
        }
#pragma unroll 1
        for (int jr = 0; jr < RPW; jr++) {
            const int o = ow + jr;
            if (o >= p.n_out) break;
            const size_t soff = (size_t)(o - o0) * p.row_bytes;
            const uint8_t *wrow = p.stage ? ws + soff : p.w + eo + soff;
            const uint8_t *wrow2 = p.stage ? ws + span + soff : p.w2 + eo + soff;
            float acc[MMV_MAX], acc2[GLU ? MMV_MAX : 1];
#pragma unroll
            for (int i = 0; i < MMV_MAX; i++) acc[i] = 0.0f;
#pragma unroll
            for (int i = 0; i < (GLU ? MMV_MAX : 1); i++) acc2[i] = 0.0f;
            mmv_row<T>(wrow, p.n_in, xr, ns, p.vec, acc);
            if (GLU) mmv_row<T>(wrow2, p.n_in, xr, ns, p.vec, acc2);
#pragma unroll
            for (int i = 0; i < MMV_MAX; i++) {
                if (i >= ns) break;
                float v = mmv_reduce<T>(acc[i]);
                if (GLU) v = mmv_swiglu(v, mmv_reduce<T>(acc2[i]));
                if (lane == 0) p.y[(size_t)slot[i] * p.n_out + o] = v;
            }
        }
    }
}

/* The switch: off unless CLOVER_CUDA_MOE_DEC32=1 (read once); cuda_moe_dec32_set overrides (tests, benches). */
static int g_dec32 = -1;
extern "C" int cuda_moe_dec32_enabled(void) {
    int v = __atomic_load_n(&g_dec32, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *s = getenv("CLOVER_CUDA_MOE_DEC32"); /* 1: 2..32 rows, 2: 1..32 (the backend's choice) */
        v = s && strcmp(s, "1") == 0 ? 1 : s && strcmp(s, "2") == 0 ? 2 : 0;
        __atomic_store_n(&g_dec32, v, __ATOMIC_RELAXED);
    }
    return v;
}
extern "C" void cuda_moe_dec32_set(int on) { __atomic_store_n(&g_dec32, on < 0 ? 0 : on > 2 ? 2 : on, __ATOMIC_RELAXED); }

static size_t moed_cap(const cuda_moe_args *a) {
    const size_t n_slots = a->n_rows * a->k;
    return n_slots < a->n_expert ? n_slots : a->n_expert;
}

/* work: the list entries, the slots, then the 8-bit rows (each part 256-aligned). */
extern "C" size_t cuda_moe_dec32_work_bytes(const cuda_moe_args *a) {
    const size_t n_slots = a->n_rows * a->k, n_x = a->x_per_slot ? n_slots : a->n_rows;
    size_t b = mm_align256(moed_cap(a) * 16) + mm_align256(n_slots * sizeof(int));
    if (mm_is_int(a->type)) b += mm_align256(mm_act_row_bytes(a->type, a->n_in) * n_x);
    return b;
}

#define MOED_CASE(TY)                                                                                        \
    case TY:                                                                                                 \
        pdl_launch(moed_prep_kernel<TY>, dim3(prep_blocks), dim3(MOED_PREP_THREADS), 0, st, p);              \
        pdl_launch(glu ? moed_kernel<TY, true> : moed_kernel<TY, false>, grid, dim3(32 * MMV_WARPS), smem, st, p); \
        break

static int moe_dec32(const char *op, const cuda_moe_args *a, const void *w2, void *work, void *stream, char *why,
                     size_t why_len) {
    if (mm_check_shape(op, a->type, a->n_out, a->n_in, why, why_len)) return -1;
    if (a->n_rows < 1 || a->n_rows > CUDA_MOE_DECODE_MAX_ROWS)
        MM_FAIL("%s: %zu rows (1..%d)", op, a->n_rows, CUDA_MOE_DECODE_MAX_ROWS);
    if (a->k < 1 || a->k > CUDA_MOE_MAX_K) MM_FAIL("%s: k = %zu (1..%d)", op, a->k, CUDA_MOE_MAX_K);
    if (a->n_expert < 1 || a->n_expert > (1u << 30)) MM_FAIL("%s: %zu experts", op, a->n_expert);
    if (a->n_out > (1u << 24) || a->n_in > (1u << 24)) MM_FAIL("%s: %zu x %zu too large", op, a->n_out, a->n_in);
    if (a->expert_stride < mm_row_bytes(a->type, a->n_in) * a->n_out)
        MM_FAIL("%s: expert stride %zu < an expert's %zu bytes", op, a->expert_stride,
                mm_row_bytes(a->type, a->n_in) * a->n_out);
    if (!a->w || !a->x || !a->y || !a->ids || !work) MM_FAIL("%s: a NULL pointer", op);
    if (((uintptr_t)a->w | (uintptr_t)w2 | a->expert_stride) & (mm_align(a->type) - 1))
        MM_FAIL("%s: weights or expert stride not %zu-byte aligned", op, mm_align(a->type));
    if ((uintptr_t)work & 255) MM_FAIL("%s: work not 256-byte aligned", op);
    cudaStream_t st = (cudaStream_t)stream;
    /* Q4_K / Q5_K: moe_fast.cu's kernel, one launch at any row count here (its groups of <= 8 slots an expert,
     * the same bits; its dot costs about a third of mmv_block's instructions a weight byte) */
    if (moef_launch(a->type, a, w2, st)) return mm_launch_status(op, why, why_len);
    const uint32_t type = a->type;
    const size_t n_slots = a->n_rows * a->k, n_x = a->x_per_slot ? n_slots : a->n_rows, cap = moed_cap(a);
    moed_params p = {};
    p.w = (const uint8_t *)a->w;
    p.w2 = (const uint8_t *)w2;
    p.row_bytes = mm_row_bytes(type, a->n_in);
    p.expert_stride = a->expert_stride;
    p.n_out = (int)a->n_out;
    p.n_in = (int)a->n_in;
    p.n_expert = (int)a->n_expert;
    p.n_slots = (int)n_slots;
    p.k = (int)a->k;
    p.x_per_slot = a->x_per_slot != 0;
    p.ids = a->ids;
    p.xf = a->x;
    p.y = a->y;
    p.cap = (int)cap;
    uint8_t *wk = (uint8_t *)work;
    p.ents = (int4 *)wk;
    wk += mm_align256(cap * 16);
    p.slots = (int *)wk;
    wk += mm_align256(n_slots * sizeof(int));
    size_t prep_blocks = 1;
    if (mm_is_int(type)) {
        p.x_bytes = mm_act_row_bytes(type, a->n_in);
        p.x = wk;
        p.n_x = (int)n_x;
        p.n_act_blocks = (int)(a->n_in / (type == MM_Q8_0 ? 32 : 256));
        prep_blocks += (n_x * (size_t)p.n_act_blocks + MOED_PREP_THREADS / 32 - 1) / (MOED_PREP_THREADS / 32);
    } else {
        p.x_bytes = a->n_in * sizeof(float);
        p.x = (const uint8_t *)a->x;
        p.vec = a->n_in % 8 == 0 &&
                (((uintptr_t)a->x | (uintptr_t)a->w | (uintptr_t)w2 | a->expert_stride) & 15) == 0;
    }
    /* output rows a warp: one for gate + up (two long rows); short rows (the down product's 512) 4 a warp above 8
     * rows (fewer blocks, each paying its staging once for 32 rows), 2 at 1..8 rows (more blocks for one wave of
     * few experts). Only the blocking: a row's arithmetic is the same either way. */
    p.rpw = w2 ? 1 : p.row_bytes <= 640 ? (a->n_rows > 8 ? 4 : 2) : 1;
    const size_t rb = (size_t)MMV_WARPS * p.rpw, rows = a->n_out < rb ? a->n_out : rb;
    const size_t span = rows * p.row_bytes * (w2 ? 2 : 1);
    const uintptr_t al = (uintptr_t)a->w | (uintptr_t)w2 | (uintptr_t)a->expert_stride | (uintptr_t)p.row_bytes;
    p.stage = (al & 15) == 0 && span <= MMV_SMEM_MAX;
    /* each group's 8-bit rows staged too where they are whole 16-byte pieces and fit beside the weights (read
     * from shared memory, not L2: the dots' chain of L2 round trips was the block's time, 2026-12-04 run 1) */
    const size_t wsm = p.stage ? span : 0, xsm = (size_t)MMV_MAX * p.x_bytes;
    p.xstage = mm_is_int(type) && p.x_bytes % 16 == 0 && wsm + xsm <= MMV_SMEM_MAX;
    const size_t smem = wsm + (p.xstage ? xsm : 0);
    const dim3 grid((unsigned)((a->n_out + rb - 1) / rb), (unsigned)cap);
    const bool glu = w2 != NULL;
    switch (type) {
        MOED_CASE(MM_F32);
        MOED_CASE(MM_F16);
        MOED_CASE(MM_BF16);
        MOED_CASE(MM_Q8_0);
        MOED_CASE(MM_Q4_K);
        MOED_CASE(MM_Q5_K);
        MOED_CASE(MM_Q6_K);
    default: MM_FAIL("%s: weight type %u", op, (unsigned)type);
    }
    return mm_launch_status(op, why, why_len);
}

extern "C" int cuda_moe_dec32(const cuda_moe_args *a, void *work, void *stream, char *why, size_t why_len) {
    return moe_dec32("cuda_moe_dec32", a, NULL, work, stream, why, why_len);
}

extern "C" int cuda_moe_dec32_glu(const cuda_moe_args *gate, const void *w_up, void *work, void *stream, char *why,
                                  size_t why_len) {
    if (!w_up) MM_FAIL("cuda_moe_dec32_glu: a NULL pointer");
    return moe_dec32("cuda_moe_dec32_glu", gate, w_up, work, stream, why, why_len);
}
