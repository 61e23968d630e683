/*
 * attention_few.cu: the few-row form of the attention forward (cuda_attention.h step 2) for sequences of
 * FEW_MIN_ROWS..FEW_MAX_ROWS (2..64) rows in the pass: a preview's block (bidirectional) and short commit chunks
 * (causal). On by default since its H100 run (bench/device-runs/2026-12-22-on24: a 32-row preview 9.18-9.20 ->
 * 8.50-8.52 ms, block diffusion 103.6-103.9 -> 110.5-110.8 tok/s); CLOVER_CUDA_ATTN_FEW=0 or cuda_attn_few_set(0)
 * gives back the tile form.
 *
 * Why: the tile form (attention_forward.cu, attn_fwd_kernel) took 85 us a layer on the H200 for the 35B-A3B's
 * 32-row preview over 544 keys (16/2/256; ~143 M FMAs and ~2 MB of K/V a layer), plus a 20 us merge: three block
 * barriers per 32-key tile, a 256-long dependent FMA chain per score with one lane per key, 1,024 blocks. The
 * decode form (attn_dec_kernel) fixed the same for one row; this is that form generalised to query vectors of
 * several rows:
 *  - a block = one KV head x ng groups of 8 query vectors (the sequence's (row, head) pairs of that KV head,
 *    row-major: a group is one row's 8 heads for the 35B-A3B) x one split of the keys (few_plan_of,
 *    attention_few.cuh). Its 8 warps are ng groups x kw = 8 / ng key lanes: warp w holds group w % ng (q and o in
 *    registers: 8 vectors x 8 dims a lane) and walks keys s0 + 2 (w / ng), +1, then + 2 kw ...; lanes own slices
 *    of head_dim (16-byte __ldg of K/V rows straight to registers), so one K row read serves the 8 dots of the
 *    group and one V row its 8 outputs, and the ng warps of the same keys find the rows in L1;
 *  - a step is the decode form's: 2 keys a warp, 128 FMAs a lane, the transposing butterfly (lane pair 2i ends
 *    with dot i), a lane keeps the online softmax state of one query vector, the alphas and weights broadcast,
 *    128 FMAs of P V; no block barrier in the key loop, the next step's K/V in flight. Causal rows mask by their
 *    own limit (pos + r + 1), and a warp stops at its group's last visible key;
 *  - one barrier at the end: the 8 warps' (m, l, o) go through shared memory and each group's kw key lanes are
 *    merged in lane order (fixed); the block writes the finished rows (one split) or (m, l, o) partials, merged
 *    by attn_merge_few_kernel (attention_forward.cu) in split order.
 * The plan is a function of the sequence's own n and kv (and the dims, and knobs read once), and the grid (fixed
 * by max_rows and max_kv, for graph capture) only bounds it: blocks past the plan exit, so a row's bits do not
 * depend on the other sequences of the pass.
 *
 * Estimate, 35B-A3B, 32 rows over 544 keys on the H200: 8 query sets x 8 splits x 2 KV heads = 128 blocks (one
 * per SM, ~243 registers a thread as the decode form); a warp does 34 keys = 17 steps of ~400 instructions
 * (256 FMAs), 2 warps a scheduler: ~13.6 k issue cycles ~ 7 us at 1.98 GHz, a little more with the stalls of
 * 2 warps a scheduler; L2 -> SM traffic 8 query sets x 2.2 MB of K/V = 18 MB (~2.5 us of L2 bandwidth, in the
 * shadow of the FMAs); the partials 512 (row, head) x 8 splits x 1 KB = 4.2 MB written and read back by the
 * merge (~2-3 us with its launch). ~10-12 us forward + merge against the tile form's 105 us. At 4097 keys the
 * same blocks take 8 splits of 516 keys: ~7.5x the FMAs, ~50-60 us. A 32-row commit chunk (causal) is the same
 * less the masked keys. (That estimate is at ng 4, the default until 2027-01-05; at 2 a block has 4 key lanes and
 * 32 rows over 544 keys take 16 query sets x 4 splits of 136: bench/device-runs/2027-01-05-fewng27.)
 *
 * Precision: f32 throughout, as the decode form; a row's result differs from the tile form's only in summation
 * order and online rescaling (tests/unit/test_cuda_attention.c bounds both against the CPU).
 */
#include <cuda_runtime.h>
#include <math.h>

#include "attention_few.cuh"
#include "attention_lanes.cuh"

static_assert((int)FEW_KB == (int)LN_KB && (int)FEW_GP == (int)LN_GP && (int)FEW_NE == (int)LN_NE,
              "the few form walks its keys by lanes_walk");
#include "cuda_pdl.cuh"

static __device__ __forceinline__ float few_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

static size_t few_smem_bytes(int hd) {
    return sizeof(float) * ((size_t)FEW_WARPS * FEW_GP * (size_t)hd + 5 * FEW_WARPS * FEW_GP);
}

/* The few form (design comment above): grid (few_grid_blocks, 1, n_seq x n_head_kv). */
template <int VEC>
__global__ void __launch_bounds__(FEW_THREADS, 1)
    attn_few_kernel(float *out, const float *qg, const cuda_attn_seq *seqs, int causal, cuda_attn_dims d,
                    few_cfg cfg, float *part_o, float *part_ml, int grid_stride) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    constexpr int NCH = FEW_NE / VEC;
    const int nh = d.n_head, nkv = d.n_head_kv, hd = d.head_dim, group = nh / nkv;
    const int kvh = blockIdx.z % nkv;
    const cuda_attn_seq sq = seqs[blockIdx.z / nkv];
    if (sq.n < FEW_MIN_ROWS || sq.n > cfg.max_rows) return; /* another form's */
    const int kv = sq.pos + sq.n;
    const few_plan pl = few_plan_of(sq.n, kv, d, cfg);
    if ((int)blockIdx.x >= pl.qsets * pl.n_splits) return;
    const int qset = blockIdx.x / pl.n_splits, split = blockIdx.x % pl.n_splits;
    const int s0 = split * pl.split_len, s1 = min(s0 + pl.split_len, kv);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = warp % pl.ng, kl = warp / pl.ng;
    const int nqv = sq.n * group;                    /* the sequence's query vectors of this KV head */
    const int qv0 = (qset * pl.ng + g) * FEW_GP;     /* the warp's first */
    const int gq = max(0, min(FEW_GP, nqv - qv0));   /* and how many it has */
    const float scale = (float)pow((double)hd, -0.5); /* as the CPU (torch's head_dim ** -0.5) */

    /* the group's queries, lane's slice (zeros past gq / hd); vector qv = (row, head) (qv / group, qv % group) */
    float q[FEW_GP][FEW_NE];
#pragma unroll
    for (int h = 0; h < FEW_GP; h++) {
        const int qv = qv0 + h;
        const float *qrow = qg + ((size_t)(sq.row0 + qv / group) * nh + kvh * group + qv % group) * 2 * hd;
#pragma unroll
        for (int c = 0; c < NCH; c++)
#pragma unroll
            for (int v = 0; v < VEC; v++) {
                const int i = (c * 32 + lane) * VEC + v;
                q[h][c * VEC + v] = h < gq && i < hd ? qrow[i] : 0.0f;
            }
    }

    /* the online softmax state of vector my_h (after the butterfly a lane holds one (key, vector) score); the
     * keys it sees end at lim_mine (its row's causal limit, the split's end; none past gq) */
    const int my_h = (lane >> 1) & (FEW_GP - 1);
    const int lim_row = causal ? sq.pos + (qv0 + my_h) / group + 1 : kv;
    const int lim_mine = my_h < gq ? min(s1, lim_row) : 0;
    /* the warp's keys end at its last vector's limit */
    const int we = gq == 0 ? s0 : min(s1, causal ? sq.pos + (qv0 + gq - 1) / group + 1 : kv);
    float m_mine = -INFINITY, l_mine = 0.0f, o[FEW_GP][FEW_NE];
#pragma unroll
    for (int h = 0; h < FEW_GP; h++)
#pragma unroll
        for (int e = 0; e < FEW_NE; e++) o[h][e] = 0.0f;
    const size_t row_stride = (size_t)nkv * hd;
    const float *kbase = sq.k_cache + (size_t)kvh * hd, *vbase = sq.v_cache + (size_t)kvh * hd;
    const int wstep = pl.kw * FEW_KB;
    lanes_walk<VEC>(o, m_mine, l_mine, q, kbase, vbase, row_stride, s0 + kl * FEW_KB, we, wstep, lim_mine, true,
                    gq, hd, scale, lane);

    /* merge each group's key lanes in lane order */
    extern __shared__ float fsm[];
    float *wo = fsm;                                  /* [FEW_WARPS][FEW_GP][hd] */
    float *wm = wo + (size_t)FEW_WARPS * FEW_GP * hd; /* [FEW_WARPS][FEW_GP] */
    float *wl = wm + FEW_WARPS * FEW_GP;              /* [FEW_WARPS][FEW_GP] */
    float *ww = wl + FEW_WARPS * FEW_GP;              /* [FEW_WARPS][FEW_GP]: merge weights */
    float *Mh = ww + FEW_WARPS * FEW_GP;              /* [ng * FEW_GP]: slot g * 8 + h */
    float *Dh = Mh + FEW_WARPS * FEW_GP;
    lanes_stash<VEC>(wo, wm, wl, o, m_mine, l_mine, warp, gq, hd, lane);
    __syncthreads();
    const int slots = pl.ng * FEW_GP;
    if (tid < slots) { /* slot (g, h): its lanes' weights e^(m_w - M) (0 for a lane with no keys), the denominator */
        const int sg = tid / FEW_GP, sh = tid % FEW_GP;
        float M = -INFINITY;
        for (int k = 0; k < pl.kw; k++) M = fmaxf(M, wm[(sg + pl.ng * k) * FEW_GP + sh]);
        float den = 0.0f;
        for (int k = 0; k < pl.kw; k++) {
            const int w = (sg + pl.ng * k) * FEW_GP + sh;
            const float m = wm[w];
            const float wt = m == -INFINITY ? 0.0f : expf(m - M);
            ww[w] = wt;
            den += wt * wl[w];
        }
        Mh[tid] = M;
        Dh[tid] = den;
    }
    __syncthreads();
    for (int e = tid; e < slots * hd; e += FEW_THREADS) {
        const int slot = e / hd, i = e % hd, sg = slot / FEW_GP, sh = slot % FEW_GP;
        const int qv = (qset * pl.ng + sg) * FEW_GP + sh;
        if (qv >= nqv) continue;
        float num = 0.0f;
        for (int k = 0; k < pl.kw; k++) {
            const int w = sg + pl.ng * k;
            num += ww[w * FEW_GP + sh] * wo[((size_t)w * FEW_GP + sh) * hd + i];
        }
        const size_t rh = (size_t)(sq.row0 + qv / group) * nh + kvh * group + qv % group;
        if (pl.n_splits == 1) {
            out[rh * hd + i] = (num / Dh[slot]) * few_sigmoidf(qg[rh * 2 * hd + hd + i]);
        } else {
            const size_t ps = rh * grid_stride + split;
            part_o[ps * hd + i] = num;
            if (i == 0) {
                part_ml[ps * 2] = Mh[slot];
                part_ml[ps * 2 + 1] = Dh[slot];
            }
        }
    }
}

int attn_few_init(void) {
    const int sm = (int)few_smem_bytes(CUDA_ATTN_MAX_HEAD_DIM);
    cudaError_t e = cudaFuncSetAttribute(attn_few_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, sm);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(attn_few_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, sm);
    return (int)e;
}

int attn_few_launch(float *out, const float *qg, const cuda_attn_seq *seqs, int n_seq, int max_rows, int max_kv,
                    int causal, const cuda_attn_dims &d, const few_cfg &c, float *part_o, float *part_ml,
                    int grid_stride, cudaStream_t st) {
    const int bx = few_grid_blocks(d, c, max_rows, max_kv, NULL);
    if (bx <= 0) return 0;
    dim3 grid((unsigned)bx, 1u, (unsigned)(n_seq * d.n_head_kv));
    const size_t sm = few_smem_bytes(d.head_dim);
    if ((d.head_dim & 3) == 0)
        pdl_launch(attn_few_kernel<4>, grid, FEW_THREADS, sm, st, out, qg, seqs, causal, d, c, part_o, part_ml,
                   grid_stride);
    else
        pdl_launch(attn_few_kernel<1>, grid, FEW_THREADS, sm, st, out, qg, seqs, causal, d, c, part_o, part_ml,
                   grid_stride);
    return (int)cudaGetLastError();
}
