/*
 * attention_forward.cu: step 2 of cuda_attention.h. Two forms of the
 * attention proper, the split merges (attn_combine_kernel and its rows
 * variant; attn_merge_few_kernel), and the dispatch: a third form, the few
 * form for sequences of 2..64 rows (attention_few.cu; on unless
 * CLOVER_CUDA_ATTN_FEW=0), takes those sequences from the tile form.
 *
 * The tile form (attn_fwd_kernel): chunks (a sequence with n > 1 rows in the
 * pass), and decode rows too when the decode form is off. A block takes one
 * KV head, a tile of rows x query heads of its group (nq <= 32 query vectors,
 * held in shared memory) and one split of the keys; it streams the split's
 * K/V rows in tiles of 32 through shared memory once for all nq queries (the
 * GQA saving: the 8 query heads of a KV head share every K/V read) with an
 * online softmax: warp w owns queries w, w+8, ... (lane = key of the tile)
 * for the scores, thread d owns output column d of every query for P V. With
 * one split the block finishes the row (1/l and the sigmoid gate); with
 * several it writes (m, l, o) partials that attn_combine_kernel merges.
 *
 * The decode form (attn_dec_kernel; a sequence with n == 1 row, on unless
 * CLOVER_CUDA_ATTN_DECODE=0). Measured on the H200, the tile form spent
 * 22.8 us on a 512-token cache (2.15 MB: ~2% of the bandwidth): per 32-key
 * tile it has three block barriers, a 256-long dependent FMA chain per score
 * (one lane per key) and a 32-long one per output column, all serial behind
 * one 64 KB shared-memory load, and 2 x 132 blocks of which most had nothing
 * to do. The decode form instead:
 *  - a block = one KV head x up to DEC_GP = 8 query heads of its group x one
 *    split of the keys; its 8 warps own keys (warp w: keys s0 + 2w, +1, then
 *    + 16 ...), lanes own slices of head_dim (lane l: dims 4l..4l+3 and
 *    128 + 4l.. with 16-byte __ldg straight to registers, coalesced 512 B a
 *    warp instruction; 8 single dims when hd % 4 != 0). q (8 heads x 8 dims)
 *    and o (8 x 8) stay in registers, so one K row read serves the 8 dots of
 *    the group and one V row the 8 outputs;
 *  - a step is 2 keys a warp: 128 FMAs a lane, then the 16 (key, head) dots
 *    are summed over the 32 lanes by a transposing butterfly (8 + 4 + 2 + 1
 *    + 1 shuffles, lane pair 2i ends with dot i); a lane keeps the online
 *    softmax state of its dot's head (one shuffle pairs the step's two keys
 *    of a head: 2 expf a lane, not 24), and the 8 alphas and 16 weights are
 *    broadcast (24 shuffles), so the rescale of o is warp-uniform and
 *    skipped, exactly, when the head's max did not move; then 128 FMAs of
 *    P V. No block barrier in the key loop; the next step's K/V (4 KB a
 *    warp) are loaded before the current one is computed;
 *  - one barrier at the end: the 8 warps' (m, l, o) go through shared memory
 *    and are merged in warp order (fixed);
 *  - the split plan (dec_split) aims at ~1 block per SM (DEC_TARGET = 132,
 *    the block is register-bound to 1 per SM) with splits of 16 keys at
 *    least (one step of every warp): 513 keys over 2 KV heads = 33 splits of
 *    16 = 66 blocks of 32 KB each; 4097 keys = 65 splits of 64 = 130 blocks.
 *    The grid (fixed by max_kv for graph capture) is min(66, max_kv / 16)
 *    splits, so at max_kv 262144 a 512-token cache leaves 33 x 2 idle blocks,
 *    not the tile form's 2 x 111.
 * Estimate for the 35B-A3B (16/2/256) on the H200 at 513 keys: each block
 * has its whole 32 KB in flight after one issue round (8 x 16-byte loads a
 * lane), 66 blocks = the whole 2.15 MB at once, ~1.5 us of DRAM latency and
 * transfer; the step's ~400 instructions a warp (128 + 128 FMA, ~55
 * shuffles and ~45 selects / adds of the butterfly, 2 expf, the rescale when
 * the max moves) at 2 warps a scheduler ~ 0.45 us; the warp merge and
 * partial write ~0.3 us; the combine (33 splits, its loads issued before the
 * weights are known) ~1.5 us after the forward plus the kernel launch
 * overheads (PDL) ~1-2 us: ~5 us at max_kv 513, ~5.5 us at 262144 (132
 * blocks launched, half exit at once), ~8 us at 4097 keys (16.8 MB: ~4 us
 * of bandwidth, 4 steps a warp).
 *
 * Split plans: a sequence's splits depend only on its own kv = pos + n and
 * n (and on the form, a process-wide switch), never on the other sequences
 * of the pass, so a row's result does not depend on what else is batched
 * with it. The tile form gives ~2 blocks per SM for a single decode row;
 * chunks get their parallelism from row tiles and take few splits. Both
 * forms write partials with one stride (grid_stride: the most splits either
 * may take for max_kv), so one combine serves a pass that mixes them (a
 * decode row and a chunk: both kernels run, each skipping the other's
 * sequences). With the few form on, its sequences' rows, and the decode
 * rows, are merged by attn_merge_few_kernel (decode rows in the same order
 * as the other merges, so the same bits), the tile form's by the others:
 * a preview pass launches no 1024-thread merge that has nothing to do.
 *
 * Precision: f32 throughout (scores, exp, sums), like the CPU oracle; they
 * differ only in summation order and in the online rescaling.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_few.cuh"
#include "attention_lanes.cuh"
#include "cuda_pdl.cuh"
#include "cuda_attention.h"
#include "cuda_switch.h"

enum {
    FWD_THREADS = 256,
    FWD_WARPS = FWD_THREADS / 32,
    KEY_TILE = 32,
    MAX_NQ = 32,
    MAX_SPLITS = 128,
    TARGET_BLOCKS = 264, /* two per SM of an H200 (132 SMs) */
    LD_UNROLL = 2,
    COMB_THREADS = 1024,
    COMB_PRE = 17,       /* partials a combine thread loads before the split weights are known: all of
                          * a decode row's (<= 66 splits of the 35B-A3B over P = 1024 / 256 = 4 partitions) */
    DEC_THREADS = 256,
    DEC_WARPS = DEC_THREADS / 32,
    DEC_KB = 2,          /* keys a warp takes a step */
    DEC_STEP = DEC_WARPS * DEC_KB, /* keys a block takes a step; splits are multiples of it */
    DEC_GP = 8,          /* query heads a decode block holds */
    DEC_NE = 8,          /* head_dim elements a lane holds: 8 x 32 lanes = CUDA_ATTN_MAX_HEAD_DIM */
    DEC_TARGET = 132     /* one block per SM of an H200 (the block is register-bound to one) */
};

static_assert((int)DEC_KB == (int)LN_KB && (int)DEC_GP == (int)LN_GP && (int)DEC_NE == (int)LN_NE,
              "the decode form walks its keys by lanes_walk");
static_assert((int)FEW_MAX_SPLITS == (int)MAX_SPLITS, "the merges' weight arrays hold the few form's splits");

typedef struct fwd_shape {
    int gp;    /* query heads of the group per block */
    int hr;    /* head ranges per KV head: ceil(group / gp) */
    int rt;    /* rows per block */
    int nq;    /* rt * gp */
} fwd_shape;

static __host__ __device__ fwd_shape fwd_shape_of(const cuda_attn_dims &d) {
    fwd_shape s;
    int group = d.n_head / d.n_head_kv;
    s.gp = group < MAX_NQ ? group : MAX_NQ;
    s.hr = (group + s.gp - 1) / s.gp;
    s.rt = MAX_NQ / s.gp;
    s.nq = s.rt * s.gp;
    return s;
}

/* splits of a sequence with kv keys in view and n rows in the pass */
static __host__ __device__ int attn_split(int kv, int n, const cuda_attn_dims &d, const fwd_shape &s,
                                          int *split_len) {
    int tiles = (n + s.rt - 1) / s.rt;
    int base = tiles * d.n_head_kv * s.hr;
    if (base < 1) base = 1;
    int target = (TARGET_BLOCKS + base - 1) / base;
    if (target > MAX_SPLITS) target = MAX_SPLITS;
    if (target < 1) target = 1;
    int len = (kv + target - 1) / target;
    len = (len + KEY_TILE - 1) / KEY_TILE * KEY_TILE;
    if (len < KEY_TILE) len = KEY_TILE;
    *split_len = len;
    return kv > 0 ? (kv + len - 1) / len : 1;
}

/* the decode form's head ranges per KV head: ceil(group / DEC_GP) */
static __host__ __device__ int dec_hr(const cuda_attn_dims &d) {
    int group = d.n_head / d.n_head_kv;
    return (group + DEC_GP - 1) / DEC_GP;
}

/* the decode form's target splits: ~DEC_TARGET blocks for one row */
static __host__ __device__ int dec_target(const cuda_attn_dims &d) {
    int base = d.n_head_kv * dec_hr(d);
    if (base < 1) base = 1;
    int target = (DEC_TARGET + base - 1) / base;
    if (target > MAX_SPLITS) target = MAX_SPLITS;
    return target < 1 ? 1 : target;
}

/* splits of a decode row (n == 1) with kv keys in view: multiples of DEC_STEP keys */
static __host__ __device__ int dec_split(int kv, const cuda_attn_dims &d, int *split_len) {
    int target = dec_target(d);
    int len = (kv + target - 1) / target;
    len = (len + DEC_STEP - 1) / DEC_STEP * DEC_STEP;
    if (len < DEC_STEP) len = DEC_STEP;
    *split_len = len;
    return kv > 0 ? (kv + len - 1) / len : 1;
}

/* the decode form's shared memory: the 8 warps' o [warp][head][hd], m and l [warp][head],
 * the merge weights [warp][head], the merged M and denominator [head] */
static size_t dec_smem_bytes(int hd) {
    return sizeof(float) * ((size_t)DEC_WARPS * DEC_GP * (size_t)hd + 3 * DEC_WARPS * DEC_GP + 2 * DEC_GP);
}

/* 1 unless CLOVER_CUDA_ATTN_DECODE=0 (read once) or cuda_attn_decode_set said 0 */
static int g_dec_form = -1;
static int dec_form_on(void) {
    if (g_dec_form < 0) {
        const char *v = getenv("CLOVER_CUDA_ATTN_DECODE");
        g_dec_form = !(v && strcmp(v, "0") == 0);
    }
    return g_dec_form;
}

/* the dynamic shared memory of a block holding rt rows (nq = rt * gp query vectors) */
static size_t fwd_smem_bytes(const cuda_attn_dims &d, int rt) {
    fwd_shape s = fwd_shape_of(d);
    size_t hd = (size_t)d.head_dim, nq = (size_t)rt * (size_t)s.gp;
    return sizeof(float) * (nq * hd + KEY_TILE * (hd + 1) + KEY_TILE * hd + nq * KEY_TILE + 3 * nq);
}

static __device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void __launch_bounds__(FWD_THREADS, 2)
    attn_fwd_kernel(float *out, const float *qg, const cuda_attn_seq *seqs, int causal, cuda_attn_dims d,
                    float *part_o, float *part_ml, int grid_stride, int rt, int skip_dec, int few_max) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    /* sh (fixed by the dims) makes the split plan; rt <= sh.rt rows per block
     * (the pass's largest sequence, capped) only sets how many query vectors a
     * block holds: each query's arithmetic is the same either way (a key
     * masked for a query contributes exactly nothing), so a row's result does
     * not depend on the pass. */
    const fwd_shape sh = fwd_shape_of(d);
    const int nq = rt * sh.gp;
    const int nh = d.n_head, nkv = d.n_head_kv, hd = d.head_dim, group = nh / nkv;
    const int z = blockIdx.z, per_seq = nkv * sh.hr;
    const cuda_attn_seq sq = seqs[z / per_seq];
    const int kvh = (z % per_seq) / sh.hr, hrange = (z % per_seq) % sh.hr;
    const int tile = blockIdx.y, split = blockIdx.x;
    const int r_begin = tile * rt;
    if (r_begin >= sq.n || (skip_dec && sq.n == 1)) return; /* a decode row: attn_dec_kernel's */
    if (sq.n >= FEW_MIN_ROWS && sq.n <= few_max) return;    /* attn_few_kernel's (attention_few.cu) */
    const int kv_all = sq.pos + sq.n;
    int split_len;
    const int n_splits = attn_split(kv_all, sq.n, d, sh, &split_len);
    if (split >= n_splits) return;
    const int r_last = min(sq.n, r_begin + rt) - 1;
    const int kv_end_tile = causal ? sq.pos + r_last + 1 : kv_all; /* keys any query here sees */
    const int s0 = split * split_len, s1 = min(s0 + split_len, kv_end_tile);

    extern __shared__ float smem[];
    float *Qs = smem;                            /* [nq][hd] */
    float *Ks = Qs + nq * hd;                 /* [KEY_TILE][hd + 1] */
    float *Vs = Ks + KEY_TILE * (hd + 1);        /* [KEY_TILE][hd] */
    float *Ps = Vs + KEY_TILE * hd;              /* [nq][KEY_TILE] */
    float *al_s = Ps + nq * KEY_TILE;         /* [nq] */
    float *m_s = al_s + nq, *l_s = m_s + nq;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    /* query qi: row r_begin + qi / gp, head kvh * group + hrange * gp + qi % gp */
    for (int e = tid; e < nq * hd; e += FWD_THREADS) {
        int qi = e / hd, i = e % hd;
        int r = r_begin + qi / sh.gp, hg = hrange * sh.gp + qi % sh.gp;
        float val = 0.0f;
        if (r < sq.n && hg < group)
            val = qg[((size_t)(sq.row0 + r) * nh + kvh * group + hg) * 2 * hd + i];
        Qs[e] = val;
    }
    const float scale = (float)pow((double)hd, -0.5); /* as the CPU (torch's head_dim ** -0.5) */

    /* per-warp online softmax state of its queries (replicated over lanes) */
    float m_run[MAX_NQ / FWD_WARPS], l_run[MAX_NQ / FWD_WARPS];
#pragma unroll
    for (int k = 0; k < MAX_NQ / FWD_WARPS; k++) {
        m_run[k] = -INFINITY;
        l_run[k] = 0.0f;
    }
    float o[MAX_NQ];
#pragma unroll
    for (int k = 0; k < MAX_NQ; k++) o[k] = 0.0f;

    for (int t0 = s0; t0 < s1; t0 += KEY_TILE) {
        __syncthreads(); /* the previous tile's K/V/P are consumed (and Qs is written on the first) */
        if ((hd & 3) == 0) {
            /* 16-byte loads, issued in rounds of LD_UNROLL before their stores
             * (memory-level parallelism without many registers) */
            const int hd4 = hd >> 2, n4 = KEY_TILE * hd4;
            for (int e0 = 0; e0 < n4; e0 += LD_UNROLL * FWD_THREADS) {
                float4 kb[LD_UNROLL], vb[LD_UNROLL];
#pragma unroll
                for (int u = 0; u < LD_UNROLL; u++) {
                    int e = e0 + tid + u * FWD_THREADS, t = e / hd4, i4 = e % hd4, j = t0 + t;
                    float4 kk = make_float4(0.0f, 0.0f, 0.0f, 0.0f), vv = kk;
                    if (e < n4 && j < s1) {
                        size_t off = ((size_t)j * nkv + kvh) * hd4 + i4;
                        kk = __ldg((const float4 *)sq.k_cache + off);
                        vv = __ldg((const float4 *)sq.v_cache + off);
                    }
                    kb[u] = kk;
                    vb[u] = vv;
                }
#pragma unroll
                for (int u = 0; u < LD_UNROLL; u++) {
                    int e = e0 + tid + u * FWD_THREADS, t = e / hd4, i = (e % hd4) * 4;
                    if (e < n4) {
                        float *kd = Ks + t * (hd + 1) + i;
                        kd[0] = kb[u].x, kd[1] = kb[u].y, kd[2] = kb[u].z, kd[3] = kb[u].w;
                        *(float4 *)(Vs + t * hd + i) = vb[u];
                    }
                }
            }
        } else {
            for (int e = tid; e < KEY_TILE * hd; e += FWD_THREADS) {
                int t = e / hd, i = e % hd, j = t0 + t;
                float kk = 0.0f, vv = 0.0f;
                if (j < s1) {
                    size_t off = ((size_t)j * nkv + kvh) * hd + i;
                    kk = sq.k_cache[off];
                    vv = sq.v_cache[off];
                }
                Ks[t * (hd + 1) + i] = kk;
                Vs[t * hd + i] = vv;
            }
        }
        __syncthreads();
        const int j = t0 + lane;
        float acc[MAX_NQ / FWD_WARPS];
#pragma unroll
        for (int k = 0; k < MAX_NQ / FWD_WARPS; k++) acc[k] = 0.0f;
        const float *kr = Ks + lane * (hd + 1);
        for (int i = 0; i < hd; i++) {
            float kv = kr[i];
#pragma unroll
            for (int k = 0; k < MAX_NQ / FWD_WARPS; k++) {
                int qi = warp + FWD_WARPS * k;
                if (qi < nq) acc[k] += Qs[qi * hd + i] * kv;
            }
        }
#pragma unroll
        for (int k = 0; k < MAX_NQ / FWD_WARPS; k++) {
            int qi = warp + FWD_WARPS * k;
            if (qi >= nq) break; /* uniform over the warp */
            int r = r_begin + qi / sh.gp;
            int lim = causal ? sq.pos + r + 1 : kv_all;
            bool ok = j < s1 && j < lim && r < sq.n;
            float s = ok ? acc[k] * scale : -INFINITY;
            float mt = s;
            for (int sh_ = 16; sh_ > 0; sh_ >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, sh_));
            float m_new = fmaxf(m_run[k], mt);
            float alpha, p;
            if (m_new == -INFINITY) {
                alpha = 1.0f;
                p = 0.0f;
            } else {
                alpha = expf(m_run[k] - m_new);
                p = ok ? expf(s - m_new) : 0.0f;
            }
            float ps = p;
            for (int sh_ = 16; sh_ > 0; sh_ >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, sh_);
            l_run[k] = l_run[k] * alpha + ps;
            m_run[k] = m_new;
            Ps[qi * KEY_TILE + lane] = p;
            if (lane == 0) al_s[qi] = alpha;
        }
        __syncthreads();
        if (tid < hd) {
#pragma unroll
            for (int qi = 0; qi < MAX_NQ; qi++) {
                if (qi < nq) {
                    float a = o[qi] * al_s[qi];
                    const float *pr = Ps + qi * KEY_TILE;
                    for (int t = 0; t < KEY_TILE; t++) a += pr[t] * Vs[t * hd + tid];
                    o[qi] = a;
                }
            }
        }
    }
    /* publish m and l of each query */
    if (lane == 0) {
#pragma unroll
        for (int k = 0; k < MAX_NQ / FWD_WARPS; k++) {
            int qi = warp + FWD_WARPS * k;
            if (qi < nq) {
                m_s[qi] = m_run[k];
                l_s[qi] = l_run[k];
            }
        }
    }
    __syncthreads();
    if (tid >= hd) return;
#pragma unroll
    for (int qi = 0; qi < MAX_NQ; qi++) {
        if (qi >= nq) break;
        int r = r_begin + qi / sh.gp, hg = hrange * sh.gp + qi % sh.gp;
        if (r >= sq.n || hg >= group) continue;
        size_t rh = (size_t)(sq.row0 + r) * nh + kvh * group + hg;
        if (n_splits == 1) {
            float gate = qg[rh * 2 * hd + hd + tid];
            out[rh * hd + tid] = (o[qi] / l_s[qi]) * sigmoidf_(gate);
        } else {
            size_t ps = rh * grid_stride + split;
            part_o[ps * hd + tid] = o[qi];
            if (tid == 0) {
                part_ml[ps * 2] = m_s[qi];
                part_ml[ps * 2 + 1] = l_s[qi];
            }
        }
    }
}

/* The decode form (design comment above): grid (decode splits of max_kv, 1,
 * n_seq x n_head_kv x dec_hr); blocks of sequences with n != 1 and past their
 * sequence's splits exit at once. */
template <int VEC>
__global__ void __launch_bounds__(DEC_THREADS, 1)
    attn_dec_kernel(float *out, const float *qg, const cuda_attn_seq *seqs, cuda_attn_dims d, float *part_o,
                    float *part_ml, int grid_stride) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    constexpr int NCH = DEC_NE / VEC;
    const int nh = d.n_head, nkv = d.n_head_kv, hd = d.head_dim, group = nh / nkv, hr = dec_hr(d);
    const int z = blockIdx.z, per_seq = nkv * hr;
    const cuda_attn_seq sq = seqs[z / per_seq];
    if (sq.n != 1) return; /* a chunk (or a sequence sitting out): the tile form's */
    const int kvh = (z % per_seq) / hr, hrange = (z % per_seq) % hr;
    const int kv = sq.pos + 1; /* one row: causal or not, it sees every key 0..pos */
    int split_len;
    const int n_splits = dec_split(kv, d, &split_len);
    const int split = blockIdx.x;
    if (split >= n_splits) return;
    const int s0 = split * split_len, s1 = min(s0 + split_len, kv);
    const int h0 = kvh * group + hrange * DEC_GP; /* the block's first query head */
    const int gq = min(DEC_GP, group - hrange * DEC_GP);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float scale = (float)pow((double)hd, -0.5); /* as the CPU (torch's head_dim ** -0.5) */

    /* the group's queries, lane's slice (zeros past gq / hd) */
    float q[DEC_GP][DEC_NE];
    const float *qrow = qg + ((size_t)sq.row0 * nh + h0) * 2 * hd;
#pragma unroll
    for (int h = 0; h < DEC_GP; h++)
#pragma unroll
        for (int c = 0; c < NCH; c++)
#pragma unroll
            for (int v = 0; v < VEC; v++) {
                const int i = (c * 32 + lane) * VEC + v;
                q[h][c * VEC + v] = h < gq && i < hd ? qrow[(size_t)h * 2 * hd + i] : 0.0f;
            }

    /* the online softmax state of head my_h (after the butterfly a lane holds one (key, head) score) */
    const int my_h = (lane >> 1) & (DEC_GP - 1);
    float m_mine = -INFINITY, l_mine = 0.0f, o[DEC_GP][DEC_NE];
#pragma unroll
    for (int h = 0; h < DEC_GP; h++)
#pragma unroll
        for (int e = 0; e < DEC_NE; e++) o[h][e] = 0.0f;
    const size_t row_stride = (size_t)nkv * hd;
    const float *kbase = sq.k_cache + (size_t)kvh * hd, *vbase = sq.v_cache + (size_t)kvh * hd;
    lanes_walk<VEC>(o, m_mine, l_mine, q, kbase, vbase, row_stride, s0 + warp * DEC_KB, s1, DEC_STEP, s1,
                    my_h < gq, gq, hd, scale, lane);

    /* merge the warps in warp order */
    extern __shared__ float dsm[];
    float *wo = dsm;                                  /* [DEC_WARPS][DEC_GP][hd] */
    float *wm = wo + (size_t)DEC_WARPS * DEC_GP * hd; /* [DEC_WARPS][DEC_GP] */
    float *wl = wm + DEC_WARPS * DEC_GP;              /* [DEC_WARPS][DEC_GP] */
    float *ww = wl + DEC_WARPS * DEC_GP;              /* [DEC_WARPS][DEC_GP]: merge weights */
    float *Mh = ww + DEC_WARPS * DEC_GP, *Dh = Mh + DEC_GP;
    lanes_stash<VEC>(wo, wm, wl, o, m_mine, l_mine, warp, gq, hd, lane);
    __syncthreads();
    if (tid < gq) { /* head tid: the warps' weights e^(m_w - M) (0 for a warp with no keys) and the denominator */
        float M = -INFINITY;
        for (int w = 0; w < DEC_WARPS; w++) M = fmaxf(M, wm[w * DEC_GP + tid]);
        float den = 0.0f;
        for (int w = 0; w < DEC_WARPS; w++) {
            const float m = wm[w * DEC_GP + tid];
            const float wt = m == -INFINITY ? 0.0f : expf(m - M);
            ww[w * DEC_GP + tid] = wt;
            den += wt * wl[w * DEC_GP + tid];
        }
        Mh[tid] = M;
        Dh[tid] = den;
    }
    __syncthreads();
    for (int e = tid; e < gq * hd; e += DEC_THREADS) {
        const int h = e / hd, i = e % hd;
        float num = 0.0f;
#pragma unroll
        for (int w = 0; w < DEC_WARPS; w++) num += ww[w * DEC_GP + h] * wo[((size_t)w * DEC_GP + h) * hd + i];
        const size_t rh = (size_t)sq.row0 * nh + h0 + h;
        if (n_splits == 1) {
            out[rh * hd + i] = (num / Dh[h]) * sigmoidf_(qg[rh * 2 * hd + hd + i]);
        } else {
            const size_t ps = rh * grid_stride + split;
            part_o[ps * hd + i] = num;
            if (i == 0) {
                part_ml[ps * 2] = Mh[h];
                part_ml[ps * 2 + 1] = Dh[h];
            }
        }
    }
}

/* the forms a merge kernel takes (its `forms` mask) */
enum { FORM_TILE = 1, FORM_DEC = 2, FORM_FEW = 4 };

/* The merge's plan for row `row` of the pass: its sequence's splits (a pass has few sequences), 0 when the row is
 * in none or its sequence's form is not in `forms`; *form: the form. dec: the decode form is on (rows of
 * sequences with n == 1 have its plan); fc: the few form's knobs (sequences of FEW_MIN_ROWS..fc.max_rows rows). */
__device__ __forceinline__ int comb_splits(int row, const cuda_attn_seq *seqs, int n_seq, const cuda_attn_dims &d,
                                           int dec, const few_cfg &fc, int forms, int *form) {
    for (int s = 0; s < n_seq; s++) {
        const cuda_attn_seq sq = seqs[s];
        if (row >= sq.row0 && row < sq.row0 + sq.n) {
            const int kv = sq.pos + sq.n, n = sq.n;
            int split_len;
            if (dec && n == 1) {
                *form = FORM_DEC;
                return forms & FORM_DEC ? dec_split(kv, d, &split_len) : 0;
            }
            if (n >= FEW_MIN_ROWS && n <= fc.max_rows) {
                *form = FORM_FEW;
                return forms & FORM_FEW ? few_plan_of(n, kv, d, fc).n_splits : 0;
            }
            *form = FORM_TILE;
            if (!(forms & FORM_TILE)) return 0;
            const fwd_shape sh = fwd_shape_of(d);
            return attn_split(kv, n, d, sh, &split_len);
        }
    }
    return 0;
}

/* Warp 0 of the block (tid < 32): the split weights e^(m_s - M) into w_s and their denominator into *den_s, in a
 * fixed order (the max and the sum by the same shuffle trees), for both merge kernels. */
__device__ __forceinline__ void comb_weights(float *w_s, float *den_s, const float *ml, int n_splits, int tid) {
    float M = -INFINITY;
    for (int s = tid; s < n_splits; s += 32) M = fmaxf(M, ml[2 * s]);
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    float den = 0.0f;
    for (int s = tid; s < n_splits; s += 32) {
        float m = ml[2 * s];
        float w = m == -INFINITY ? 0.0f : expf(m - M); /* no visible key for this row in split s */
        w_s[s] = w;
        den += w * ml[2 * s + 1];
    }
    for (int o = 16; o > 0; o >>= 1) den += __shfl_xor_sync(0xffffffffu, den, o);
    if (tid == 0) *den_s = den;
}

/* Merges the splits of one (row, head): blockIdx.x = row of the pass, y = head.
 * Each thread first loads up to COMB_PRE of its partials (they do not need
 * the weights, so their latency overlaps warp 0's); the split weights
 * e^(m_s - M) and the denominator are made once in shared memory (warp 0, a
 * fixed order); then COMB_THREADS / hd partitions of the splits sum each
 * column (an empty split has weight 0 and a zero partial), and the
 * partitions are added in a fixed order. dec: the decode form is on (rows of
 * sequences with n == 1 have its plan). */
__global__ void __launch_bounds__(COMB_THREADS)
    attn_combine_kernel(float *out, const float *qg, const cuda_attn_seq *seqs, int n_seq, cuda_attn_dims d,
                        const float *part_o, const float *part_ml, int grid_stride, int dec, few_cfg fc, int forms) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const int row = blockIdx.x, h = blockIdx.y, nh = d.n_head, hd = d.head_dim, tid = threadIdx.x;
    int form = 0;
    const int n_splits = comb_splits(row, seqs, n_seq, d, dec, fc, forms, &form);
    if (n_splits <= 1) return; /* in no sequence, another merge's, or finished by the forward kernel */
    const size_t rh = (size_t)row * nh + h;
    const float *ml = part_ml + rh * grid_stride * 2;
    const int P = COMB_THREADS / hd; /* >= 4: hd <= 256 */
    const int i = tid % hd, p = tid / hd;
    const float *po = part_o + rh * grid_stride * hd + i;
    const float gate = tid < hd ? qg[rh * 2 * hd + hd + tid] : 0.0f; /* in flight with the partials */
    float pre[COMB_PRE];
#pragma unroll
    for (int u = 0; u < COMB_PRE; u++) {
        const int s = p + u * P;
        pre[u] = p < P && s < n_splits ? po[(size_t)s * hd] : 0.0f;
    }
    __shared__ float w_s[MAX_SPLITS];
    __shared__ float red[COMB_THREADS];
    __shared__ float den_s;
    if (tid < 32) comb_weights(w_s, &den_s, ml, n_splits, tid);
    __syncthreads();
    if (p < P) {
        float num = 0.0f;
        /* splits p, p + P, ... in order: the first COMB_PRE from registers */
#pragma unroll
        for (int u = 0; u < COMB_PRE; u++) {
            const int s = p + u * P;
            if (s < n_splits) num += w_s[s] * pre[u];
        }
#pragma unroll 8
        for (int s = p + COMB_PRE * P; s < n_splits; s += P) num += w_s[s] * po[(size_t)s * hd];
        red[tid] = num;
    }
    __syncthreads();
    if (tid < hd) {
        float num = 0.0f;
        for (int q = 0; q < P; q++) num += red[q * hd + tid];
        out[rh * hd + tid] = (num / den_s) * sigmoidf_(gate);
    }
}

/* Column tid's weighted sum of the splits in attn_combine_kernel's order (partitions p of the splits p, p + P,
 * ..., each summed in order, then added in partition order): attn_combine_rows_kernel and, for decode rows,
 * attn_merge_few_kernel, so that a decode row's bits do not depend on which of the three merges it. */
__device__ __forceinline__ float comb_rows_sum(const float *po, const float *w_s, int n_splits, int P, int hd) {
    float tot = 0.0f;
    for (int p = 0; p < P; p++) {
        float num = 0.0f;
        for (int s = p; s < n_splits; s += P) num += w_s[s] * po[(size_t)s * hd];
        tot += num;
    }
    return tot;
}

/* attn_combine_kernel's merge with a block of hd threads (rounded up to a warp) a (row, head) instead of
 * COMB_THREADS: thread i walks column i's COMB_THREADS / hd partitions one after another, each summed over its
 * splits in order, and adds them in partition order: the same fmas and adds in the same order as the 1024-thread
 * block's threads and its reduction, so the same bits (test_cuda_attention compares them on every case). Why: a
 * stacked preview of 16 blocks has 512 rows x 16 heads = 8,192 merges of a few splits each, and at 1024 threads a
 * block only two fit an SM (31 waves, ~320 us a layer on the H200); here eight do. */
__global__ void __launch_bounds__(256)
    attn_combine_rows_kernel(float *out, const float *qg, const cuda_attn_seq *seqs, int n_seq, cuda_attn_dims d,
                             const float *part_o, const float *part_ml, int grid_stride, int dec, few_cfg fc,
                             int forms) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const int row = blockIdx.x, h = blockIdx.y, nh = d.n_head, hd = d.head_dim, tid = threadIdx.x;
    int form = 0;
    const int n_splits = comb_splits(row, seqs, n_seq, d, dec, fc, forms, &form);
    if (n_splits <= 1) return; /* in no sequence, another merge's, or finished by the forward kernel */
    const size_t rh = (size_t)row * nh + h;
    const float *ml = part_ml + rh * grid_stride * 2;
    const int P = COMB_THREADS / hd; /* attn_combine_kernel's partitions */
    const float *po = part_o + rh * grid_stride * hd + tid;
    const float gate = tid < hd ? qg[rh * 2 * hd + hd + tid] : 0.0f;
    __shared__ float w_s[MAX_SPLITS];
    __shared__ float den_s;
    if (tid < 32) comb_weights(w_s, &den_s, ml, n_splits, tid);
    __syncthreads();
    if (tid < hd) out[rh * hd + tid] = (comb_rows_sum(po, w_s, n_splits, P, hd) / den_s) * sigmoidf_(gate);
}

/* The merge of the few form's rows (attention_few.cu) and, when the few form runs in a pass, of its decode rows:
 * blockIdx.x = row of the pass, y = head, a block of head_dim threads (rounded up to a warp). Why not the two
 * merges above: a 32-row preview has 512 (row, head) merges of ~8 splits; at 1024 threads a block (2 an SM, two
 * waves) that took ~20 us a layer on the H200 (share24's trace), and attn_combine_rows_kernel's loads go one
 * after another. Here each thread loads its first FEW_MERGE_PRE partials before the weights are known and the
 * rest eight at a time, and all 512 blocks fit one wave (8 an SM). A few row's column is summed over the splits
 * in split order; a decode row's in attn_combine_kernel's order (comb_rows_sum), so its bits do not depend on
 * whether the few form ran in its pass. */
enum { FEW_MERGE_PRE = 16 };
__global__ void __launch_bounds__(256)
    attn_merge_few_kernel(float *out, const float *qg, const cuda_attn_seq *seqs, int n_seq, cuda_attn_dims d,
                          const float *part_o, const float *part_ml, int grid_stride, int dec, few_cfg fc) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const int row = blockIdx.x, h = blockIdx.y, nh = d.n_head, hd = d.head_dim, tid = threadIdx.x;
    int form = 0;
    const int n_splits = comb_splits(row, seqs, n_seq, d, dec, fc, FORM_FEW | FORM_DEC, &form);
    if (n_splits <= 1) return; /* in no sequence, another merge's, or finished by the forward kernel */
    const size_t rh = (size_t)row * nh + h;
    const float *ml = part_ml + rh * grid_stride * 2;
    const float *po = part_o + rh * grid_stride * hd + tid;
    const bool col = tid < hd;
    const float gate = col ? qg[rh * 2 * hd + hd + tid] : 0.0f;
    float pre[FEW_MERGE_PRE];
#pragma unroll
    for (int u = 0; u < FEW_MERGE_PRE; u++) pre[u] = col && u < n_splits ? po[(size_t)u * hd] : 0.0f;
    __shared__ float w_s[MAX_SPLITS];
    __shared__ float den_s;
    if (tid < 32) comb_weights(w_s, &den_s, ml, n_splits, tid);
    __syncthreads();
    if (!col) return;
    float num = 0.0f;
    if (form == FORM_FEW) {
#pragma unroll
        for (int u = 0; u < FEW_MERGE_PRE; u++)
            if (u < n_splits) num += w_s[u] * pre[u];
#pragma unroll 1
        for (int s0 = FEW_MERGE_PRE; s0 < n_splits; s0 += 8) { /* eight loads in flight, then their sums in order */
            float v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) v[u] = s0 + u < n_splits ? po[(size_t)(s0 + u) * hd] : 0.0f;
#pragma unroll
            for (int u = 0; u < 8; u++)
                if (s0 + u < n_splits) num += w_s[s0 + u] * v[u];
        }
    } else {
        num = comb_rows_sum(po, w_s, n_splits, COMB_THREADS / hd, hd);
    }
    out[rh * hd + tid] = (num / den_s) * sigmoidf_(gate);
}

/* The few form's knobs (attention_few.cuh), read once: CLOVER_CUDA_ATTN_FEW (0: off; 1 or unset: sequences of
 * FEW_MIN_ROWS..FEW_MAX_ROWS rows, the default since its H100 run, bench/device-runs/2026-12-22-on24: a 32-row
 * preview 9.18-9.20 -> 8.50-8.52 ms; N in 2..64: of 2..N rows), cuda_attn_few_set overriding it;
 * CLOVER_CUDA_ATTN_FEW_NG (1, 2, 4, 8: the most query groups a block holds; default 2),
 * CLOVER_CUDA_ATTN_FEW_TARGET (blocks a sequence aims at, default 132) and CLOVER_CUDA_ATTN_FEW_MIN_SPLIT (the
 * fewest keys a split, a multiple of 16 up to 4,096; default FEW_DEF_MIN_SPLIT = 64), for tuning on the device. */
static int g_few_rows = INT_MIN, g_few_ng = INT_MIN, g_few_target = INT_MIN, g_few_min_split = INT_MIN;
static few_cfg few_cfg_get(void) {
    const int v = cuda_env_int(&g_few_rows, "CLOVER_CUDA_ATTN_FEW", 1);
    const int ng = cuda_env_int(&g_few_ng, "CLOVER_CUDA_ATTN_FEW_NG", FEW_DEF_NG);
    const int t = cuda_env_int(&g_few_target, "CLOVER_CUDA_ATTN_FEW_TARGET", FEW_DEF_TARGET);
    const int ms = cuda_env_int(&g_few_min_split, "CLOVER_CUDA_ATTN_FEW_MIN_SPLIT", FEW_DEF_MIN_SPLIT);
    few_cfg c;
    c.max_rows = v <= 0 ? 0 : v == 1 || v > FEW_MAX_ROWS ? FEW_MAX_ROWS : v;
    c.ng = ng == 1 || ng == 2 || ng == 4 || ng == 8 ? ng : FEW_DEF_NG;
    c.target = t >= 1 && t <= 4096 ? t : FEW_DEF_TARGET;
    c.min_split = ms >= FEW_MIN_SPLIT && ms <= 4096 && ms % FEW_MIN_SPLIT == 0 ? ms : FEW_DEF_MIN_SPLIT;
    return c;
}
extern "C" void cuda_attn_few_set(int max_rows) {
    __atomic_store_n(&g_few_rows, max_rows < 0 ? INT_MIN : max_rows, __ATOMIC_RELAXED); /* negative: the env again */
}
extern "C" int cuda_attn_few_on(void) { return few_cfg_get().max_rows; }

/* The rows from which a pass's merge takes attn_combine_rows_kernel: 0 never, N: passes of N rows or more;
 * CLOVER_CUDA_ATTN_COMB_ROWS (read once; default 64: a stacked preview or a 64+-row chunk, while a lone 32-row
 * preview and decode keep the 1024-thread blocks, which have more loads in flight for their few merges),
 * cuda_attn_comb_rows_set. H200 (bench/device-runs/2026-12-19-igw25): 16 stacked blocks 243 -> 255 tok/s. */
static int g_comb_rows = -1;
static int comb_rows_min(void) {
    int v = __atomic_load_n(&g_comb_rows, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("CLOVER_CUDA_ATTN_COMB_ROWS");
        v = e ? atoi(e) : 64;
        if (v < 0) v = 0;
        __atomic_store_n(&g_comb_rows, v, __ATOMIC_RELAXED);
    }
    return v;
}
extern "C" void cuda_attn_comb_rows_set(int min_rows) {
    __atomic_store_n(&g_comb_rows, min_rows < 0 ? -1 : min_rows, __ATOMIC_RELAXED);
}

/* the most splits any sequence can take in the tile form: a sequence's splits
 * are at most its target (largest for one row) and at most ceil(kv / KEY_TILE) */
static int tile_grid_splits(const cuda_attn_dims &d, int max_kv) {
    fwd_shape sh = fwd_shape_of(d);
    int base = d.n_head_kv * sh.hr;
    int target = (TARGET_BLOCKS + base - 1) / base;
    if (target > MAX_SPLITS) target = MAX_SPLITS;
    if (target < 1) target = 1;
    int by_len = (max_kv + KEY_TILE - 1) / KEY_TILE;
    if (by_len < 1) by_len = 1;
    return target < by_len ? target : by_len;
}

/* the same for the decode form */
static int dec_grid_splits(const cuda_attn_dims &d, int max_kv) {
    int target = dec_target(d);
    int by_len = (max_kv + DEC_STEP - 1) / DEC_STEP;
    if (by_len < 1) by_len = 1;
    return target < by_len ? target : by_len;
}

/* the same for the few form, whether on or not (for any n of 2..FEW_MAX_ROWS): for groups of <= 8 query heads it
 * never exceeds the decode form's (a sequence's blocks aim at the decode form's target) */
static int few_grid_splits(const cuda_attn_dims &d, int max_kv) {
    few_cfg c = few_cfg_get();
    c.max_rows = FEW_MAX_ROWS;
    int most = 1;
    few_grid_blocks(d, c, FEW_MAX_ROWS, max_kv, &most);
    return most;
}

/* the partials' stride (splits per (row, head)): any form may run, whatever the switches
 * say now, so the workspace does not depend on them */
static int grid_stride_of(const cuda_attn_dims &d, int max_kv) {
    int a = tile_grid_splits(d, max_kv), b = dec_grid_splits(d, max_kv), c = few_grid_splits(d, max_kv);
    a = a > b ? a : b;
    return a > c ? a : c;
}

extern "C" void cuda_attn_decode_set(int on) { g_dec_form = on ? 1 : 0; }

extern "C" int cuda_attn_decode_on(void) { return dec_form_on(); }

extern "C" cuda_attn_plan_t cuda_attn_plan(const cuda_attn_dims *d, int n, int kv) {
    cuda_attn_plan_t p;
    const few_cfg fc = few_cfg_get();
    if (n == 1 && dec_form_on()) {
        p.n_splits = dec_split(kv, *d, &p.split_len);
    } else if (n >= FEW_MIN_ROWS && n <= fc.max_rows) {
        const few_plan fp = few_plan_of(n, kv, *d, fc);
        p.n_splits = fp.n_splits;
        p.split_len = fp.split_len;
    } else {
        fwd_shape sh = fwd_shape_of(*d);
        p.n_splits = attn_split(kv, n, *d, sh, &p.split_len);
    }
    return p;
}

extern "C" size_t cuda_attn_workspace_bytes(const cuda_attn_dims *d, int n_rows, int max_rows, int max_kv) {
    (void)max_rows;
    size_t gs = (size_t)grid_stride_of(*d, max_kv);
    if (gs <= 1) return 0;
    return sizeof(float) * (size_t)n_rows * (size_t)d->n_head * gs * ((size_t)d->head_dim + 2);
}

extern "C" int cuda_attn_init(void) {
    cuda_attn_dims big = {MAX_NQ, 1, CUDA_ATTN_MAX_HEAD_DIM, 0, 0.0f}; /* gp 32, rt 1: nq = MAX_NQ */
    cudaError_t e = cudaFuncSetAttribute(attn_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)fwd_smem_bytes(big, fwd_shape_of(big).rt));
    const int ds = (int)dec_smem_bytes(CUDA_ATTN_MAX_HEAD_DIM);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(attn_dec_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, ds);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(attn_dec_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, ds);
    if (e == cudaSuccess) e = (cudaError_t)attn_few_init();
    return (int)e;
}

extern "C" int cuda_attn_forward(float *out, const float *qg, const cuda_attn_seq *seqs, int n_seq, int n_rows,
                                 int max_rows, int max_kv, int causal, const cuda_attn_dims *d, void *workspace,
                                 void *stream) {
    if (cuda_attn_dims_check(d, NULL, 0) != 0 || n_seq < 0 || n_rows < 0 || max_rows < 0 || max_kv < 0)
        return CUDA_ATTN_EINVAL;
    if (n_seq == 0 || n_rows == 0 || max_rows == 0) return 0;
    /* every sequence's n <= n_rows (their sum): a caller sizing max_rows for its
     * longest chunk (the backend's decode passes) would otherwise launch
     * max_rows / rt row tiles that all exit, tens of microseconds of empty
     * blocks for one decode row. rt never changes a query's arithmetic. */
    if (max_rows > n_rows) max_rows = n_rows;
    const int dec = dec_form_on();
    const few_cfg fc = few_cfg_get();
    const int few_max = fc.max_rows >= FEW_MIN_ROWS ? fc.max_rows : 0;
    /* which kernels can have work: the decode form takes the sequences of one row, the few form (when on) those of
     * 2..few_max rows, the tile form the rest (the host does not know the sequences' n, only that none exceeds
     * max_rows) */
    const bool run_dec = dec, run_few = few_max > 0 && max_rows >= FEW_MIN_ROWS;
    const bool run_tile = !dec || max_rows > (few_max > 0 ? few_max : 1);
    fwd_shape sh = fwd_shape_of(*d);
    const int gstride = grid_stride_of(*d, max_kv);
    const int gs_tile = tile_grid_splits(*d, max_kv), gs_dec = dec_grid_splits(*d, max_kv);
    int gs_few = 1;
    if (run_few) few_grid_blocks(*d, fc, max_rows, max_kv, &gs_few);
    const long long gz = (long long)n_seq * d->n_head_kv * sh.hr, gz_dec = (long long)n_seq * d->n_head_kv * dec_hr(*d);
    const int rt = max_rows < sh.rt ? max_rows : sh.rt;
    int tiles = (max_rows + rt - 1) / rt;
    const bool split_tile = run_tile && gs_tile > 1, split_dec = run_dec && gs_dec > 1;
    const bool split_few = run_few && gs_few > 1;
    const bool may_split = split_tile || split_dec || split_few;
    if (gz > 65535 || gz_dec > 65535 || tiles > 65535 || (may_split && workspace == NULL)) return CUDA_ATTN_EINVAL;
    float *part_o = (float *)workspace;
    float *part_ml = gstride > 1 && workspace ? part_o + (size_t)n_rows * d->n_head * gstride * d->head_dim : NULL;
    cudaStream_t st = (cudaStream_t)stream;
    cudaError_t e = cudaSuccess;
    if (run_tile) {
        dim3 grid((unsigned)gs_tile, (unsigned)tiles, (unsigned)gz);
        pdl_launch(attn_fwd_kernel, grid, FWD_THREADS, fwd_smem_bytes(*d, rt), st, out, qg, seqs, causal ? 1 : 0, *d,
                   part_o, part_ml, gstride, rt, dec, few_max);
        if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
    }
    if (run_dec) {
        dim3 grid((unsigned)gs_dec, 1u, (unsigned)gz_dec);
        if ((d->head_dim & 3) == 0)
            pdl_launch(attn_dec_kernel<4>, grid, DEC_THREADS, dec_smem_bytes(d->head_dim), st, out, qg, seqs, *d,
                       part_o, part_ml, gstride);
        else
            pdl_launch(attn_dec_kernel<1>, grid, DEC_THREADS, dec_smem_bytes(d->head_dim), st, out, qg, seqs, *d,
                       part_o, part_ml, gstride);
        if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
    }
    if (run_few) {
        if ((e = (cudaError_t)attn_few_launch(out, qg, seqs, n_seq, max_rows, max_kv, causal ? 1 : 0, *d, fc, part_o,
                                              part_ml, gstride, st)) != cudaSuccess)
            return (int)e;
    }
    if (!may_split) return 0;
    dim3 cgrid((unsigned)n_rows, (unsigned)d->n_head);
    const unsigned hd_threads = (unsigned)((d->head_dim + 31) / 32 * 32);
    /* where the few form runs, its merge takes the decode rows too (the same bits as the others' merge): a
     * preview pass then launches no merge for decode rows it does not have */
    if (run_few && (split_few || split_dec)) {
        pdl_launch(attn_merge_few_kernel, cgrid, hd_threads, 0, st, out, qg, seqs, n_seq, *d, part_o, part_ml, gstride,
                   dec, fc);
        if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
    }
    const int forms = run_few ? FORM_TILE : FORM_TILE | FORM_DEC;
    if (!(split_tile || (!run_few && split_dec))) return 0;
    const int cr = comb_rows_min();
    if (cr > 0 && n_rows >= cr)
        pdl_launch(attn_combine_rows_kernel, cgrid, hd_threads, 0, st, out, qg, seqs, n_seq, *d, part_o, part_ml,
                   gstride, dec, fc, forms);
    else
        pdl_launch(attn_combine_kernel, cgrid, COMB_THREADS, 0, st, out, qg, seqs, n_seq, *d, part_o, part_ml,
                   gstride, dec, fc, forms);
    return (int)cudaGetLastError();
}
