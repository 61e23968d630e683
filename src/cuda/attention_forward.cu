/*
 * attention_forward.cu: step 2 of cuda_attention.h, one kernel for decode
 * and chunks. A block takes one KV head, a tile of rows x query heads of its
 * group (nq <= 32 query vectors, held in shared memory) and one split of the
 * keys; it streams the split's K/V rows in tiles of 32 through shared memory
 * once for all nq queries (the GQA saving: the 8 query heads of a KV head
 * share every K/V read) with an online softmax: warp w owns queries w, w+8,
 * ... (lane = key of the tile) for the scores, thread d owns output column d
 * of every query for P V. With one split the block finishes the row (1/l and
 * the sigmoid gate); with several it writes (m, l, o) partials that
 * attn_combine_kernel merges.
 *
 * Split plan (attn_split): a sequence's splits depend only on its own
 * kv = pos + n and n, never on the other sequences of the pass, so a row's
 * result does not depend on what else is batched with it. Enough splits to
 * give ~2 blocks per SM for a single decode row; chunks get their
 * parallelism from row tiles and take few splits.
 *
 * Precision: f32 throughout (scores, exp, sums), like the CPU oracle; they
 * differ only in summation order and in the online rescaling.
 */
#include <cuda_runtime.h>
#include <math.h>

#include "cuda_pdl.cuh"
#include "cuda_attention.h"

enum {
    FWD_THREADS = 256,
    FWD_WARPS = FWD_THREADS / 32,
    KEY_TILE = 32,
    MAX_NQ = 32,
    MAX_SPLITS = 128,
    TARGET_BLOCKS = 264, /* two per SM of an H200 (132 SMs) */
    LD_UNROLL = 2,
    COMB_THREADS = 1024
};

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

/* the dynamic shared memory of a block holding rt rows (nq = rt * gp query vectors) */
static size_t fwd_smem_bytes(const cuda_attn_dims &d, int rt) {
    fwd_shape s = fwd_shape_of(d);
    size_t hd = (size_t)d.head_dim, nq = (size_t)rt * (size_t)s.gp;
    return sizeof(float) * (nq * hd + KEY_TILE * (hd + 1) + KEY_TILE * hd + nq * KEY_TILE + 3 * nq);
}

static __device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void __launch_bounds__(FWD_THREADS, 2)
    attn_fwd_kernel(float *out, const float *qg, const cuda_attn_seq *seqs, int causal, cuda_attn_dims d,
                    float *part_o, float *part_ml, int grid_splits, int rt) {
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
    if (r_begin >= sq.n) return;
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
            size_t ps = rh * grid_splits + split;
            part_o[ps * hd + tid] = o[qi];
            if (tid == 0) {
                part_ml[ps * 2] = m_s[qi];
                part_ml[ps * 2 + 1] = l_s[qi];
            }
        }
    }
}

/* Merges the splits of one (row, head): blockIdx.x = row of the pass, y = head.
 * The split weights e^(m_s - M) and the denominator are made once in shared
 * memory (warp 0, a fixed order); then COMB_THREADS / hd partitions of the
 * splits sum each column with independent loads (an empty split has weight 0
 * and a zero partial), and the partitions are added in a fixed order. */
__global__ void __launch_bounds__(COMB_THREADS)
    attn_combine_kernel(float *out, const float *qg, const cuda_attn_seq *seqs, int n_seq, cuda_attn_dims d,
                        const float *part_o, const float *part_ml, int grid_splits) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const int row = blockIdx.x, h = blockIdx.y, nh = d.n_head, hd = d.head_dim, tid = threadIdx.x;
    /* the row's sequence (a pass has few): its plan says how many splits it has */
    int kv = 0, n = 0;
    bool found = false;
    for (int s = 0; s < n_seq; s++) {
        cuda_attn_seq sq = seqs[s];
        if (row >= sq.row0 && row < sq.row0 + sq.n) {
            kv = sq.pos + sq.n;
            n = sq.n;
            found = true;
            break;
        }
    }
    if (!found) return;
    const fwd_shape sh = fwd_shape_of(d);
    int split_len;
    const int n_splits = attn_split(kv, n, d, sh, &split_len);
    if (n_splits == 1) return; /* finished by attn_fwd_kernel */
    const size_t rh = (size_t)row * nh + h;
    const float *ml = part_ml + rh * grid_splits * 2;
    __shared__ float w_s[MAX_SPLITS];
    __shared__ float red[COMB_THREADS];
    __shared__ float den_s;
    if (tid < 32) {
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
        if (tid == 0) den_s = den;
    }
    __syncthreads();
    const int P = COMB_THREADS / hd; /* >= 4: hd <= 256 */
    const int i = tid % hd, p = tid / hd;
    if (p < P) {
        float num = 0.0f;
        const float *po = part_o + rh * grid_splits * hd + i;
#pragma unroll 8
        for (int s = p; s < n_splits; s += P) num += w_s[s] * po[(size_t)s * hd];
        red[tid] = num;
    }
    __syncthreads();
    if (tid < hd) {
        float num = 0.0f;
        for (int q = 0; q < P; q++) num += red[q * hd + tid];
        out[rh * hd + tid] = (num / den_s) * sigmoidf_(qg[rh * 2 * hd + hd + tid]);
    }
}

static int grid_splits_of(const cuda_attn_dims &d, int max_kv) {
    /* the most splits any sequence can take: a sequence's splits are at most
     * its target (largest for one row) and at most ceil(kv / KEY_TILE) */
    fwd_shape sh = fwd_shape_of(d);
    int base = d.n_head_kv * sh.hr;
    int target = (TARGET_BLOCKS + base - 1) / base;
    if (target > MAX_SPLITS) target = MAX_SPLITS;
    if (target < 1) target = 1;
    int by_len = (max_kv + KEY_TILE - 1) / KEY_TILE;
    if (by_len < 1) by_len = 1;
    return target < by_len ? target : by_len;
}

extern "C" cuda_attn_plan_t cuda_attn_plan(const cuda_attn_dims *d, int n, int kv) {
    cuda_attn_plan_t p;
    fwd_shape sh = fwd_shape_of(*d);
    p.n_splits = attn_split(kv, n, *d, sh, &p.split_len);
    return p;
}

extern "C" size_t cuda_attn_workspace_bytes(const cuda_attn_dims *d, int n_rows, int max_rows, int max_kv) {
    (void)max_rows;
    size_t gs = (size_t)grid_splits_of(*d, max_kv);
    if (gs <= 1) return 0;
    return sizeof(float) * (size_t)n_rows * (size_t)d->n_head * gs * ((size_t)d->head_dim + 2);
}

extern "C" int cuda_attn_init(void) {
    cuda_attn_dims big = {MAX_NQ, 1, CUDA_ATTN_MAX_HEAD_DIM, 0, 0.0f}; /* gp 32, rt 1: nq = MAX_NQ */
    return (int)cudaFuncSetAttribute(attn_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)fwd_smem_bytes(big, fwd_shape_of(big).rt));
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
    fwd_shape sh = fwd_shape_of(*d);
    int gs = grid_splits_of(*d, max_kv);
    long long gz = (long long)n_seq * d->n_head_kv * sh.hr;
    const int rt = max_rows < sh.rt ? max_rows : sh.rt;
    int tiles = (max_rows + rt - 1) / rt;
    if (gz > 65535 || tiles > 65535 || (gs > 1 && workspace == NULL)) return CUDA_ATTN_EINVAL;
    float *part_o = (float *)workspace;
    float *part_ml = gs > 1 ? part_o + (size_t)n_rows * d->n_head * gs * d->head_dim : NULL;
    cudaStream_t st = (cudaStream_t)stream;
    dim3 grid((unsigned)gs, (unsigned)tiles, (unsigned)gz);
    pdl_launch(attn_fwd_kernel, grid, FWD_THREADS, fwd_smem_bytes(*d, rt), st, out, qg, seqs, causal ? 1 : 0, *d, part_o,
                                                                     part_ml, gs, rt);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || gs <= 1) return (int)e;
    dim3 cgrid((unsigned)n_rows, (unsigned)d->n_head);
    pdl_launch(attn_combine_kernel, cgrid, COMB_THREADS, 0, st, out, qg, seqs, n_seq, *d, part_o, part_ml, gs);
    return (int)cudaGetLastError();
}
