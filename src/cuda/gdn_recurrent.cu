/*
 * gdn_recurrent.cu: the decode form of step 2 of cuda_gdn.h, with the q/k
 * L2 norm, the gates and the gated output norm (step 3) fused in. Three
 * kernels, one block per (value head, sequence) but the pair form:
 *
 * gdn_rec_reg_kernel (dv % 8 == 0, dv <= 128; every real geometry): S
 * [dk][dv] lives in registers. Thread (j, p) = (tid % dv, tid / dv) owns column
 * j of S at rows 32p .. 32p + 31 (dk <= 128), so both column sums over dk
 * (kv_mem = S^T k, o = S^T q) are 32 sequential FMAs plus the 4 row groups'
 * partials added in shared memory, and the update S += k delta^T is
 * register-local; the row's k and q are staged once in shared memory and
 * read as float4 (contiguous rows per thread). Four block barriers per row
 * (the staging; the two partial sums; the gated norm's sum over the head's dv outputs). The update
 * and the read-out o = S^T q share one pass over S (each S[i][j] is final
 * once updated). First version (rows p + 4r, k and q re-read from L1 five
 * times): 2,100 instructions a warp a row, ~11 us on the H200. The state is loaded BEFORE pdl_wait: its last writer is
 * this layer's kernel of an earlier pass, and at least the conv kernel
 * (cuda_gdn_mix) lies between, so when this grid may start (its predecessor
 * has passed its own pdl_wait) every kernel before that predecessor has
 * completed: the 64 KB a head reads overlaps the conv instead of following it
 * (cuda_pdl.cuh's rule, constant data only before the wait, is kept for
 * everything the pass writes; the state is written only by this kernel and
 * the chunked form, never by the conv). H200, 35B-A3B (32 heads of 128 x
 * 128): the shared-memory kernel below took ~13 us a layer (conv + it
 * 15.2 us), 32 blocks each walking 64 KB through shared memory in ~10
 * barrier-separated phases.
 *
 * gdn_rec_pair_kernel (dk = dv = 128; CLOVER_CUDA_GDN_REC_PAIR): the register
 * form with two sequences a block, the second's state copied into shared
 * memory while the first computes (its comment says why).
 *
 * gdn_rec_smem_kernel (any dims, the fallback; CLOVER_CUDA_GDN_REC=smem
 * forces it for A/B): S in shared memory for all the block's rows, the two
 * column sums split over P = threads / dv partitions added in a fixed order.
 *
 * Order, as src/cpu/gdn.c (HF): decay S, kv_mem = S^T k, delta = beta (v -
 * kv_mem), S += k delta^T, o = S^T q. Both kernels are deterministic and
 * equal to the CPU's sequential sums up to reassociation (the bound of
 * tests/unit/test_cuda_gdn.c).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_device.h"
#include "cuda_gdn.h"
#include "cuda_pdl.cuh"
#include "cuda_switch.h"

enum { REC_THREADS = 512 };

#include "gdn_internal.h"

size_t gdn_recurrent_smem_bytes(const cuda_gdn_dims *d) {
    size_t dk = (size_t)d->k_dim, dv = (size_t)d->v_dim, P = REC_THREADS / dv;
    return sizeof(float) * (dk * dv + 2 * dk + 3 * dv + P * dv + 64);
}

static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* sum_i S[i][j] * x[i] for every j < dv into col[j] (all threads call it) */
static __device__ void col_dot(float *col, const float *S, const float *x, float *red, int dk, int dv) {
    const int P = REC_THREADS / dv, t = threadIdx.x;
    if (t < P * dv) {
        const int j = t % dv, p = t / dv;
        float acc = 0.0f;
        for (int i = p; i < dk; i += P) acc += S[i * dv + j] * x[i];
        red[p * dv + j] = acc;
    }
    __syncthreads();
    if (t < dv) {
        float acc = 0.0f;
        for (int p = 0; p < P; p++) acc += red[p * dv + t];
        col[t] = acc;
    }
    __syncthreads();
}

__global__ void __launch_bounds__(REC_THREADS)
    gdn_rec_smem_kernel(float *y, const float *qkv, const float *z, const float *b, const float *a,
                         cuda_gdn_weights w, const cuda_gdn_seq *seqs, cuda_gdn_dims d) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const cuda_gdn_seq sq = seqs[blockIdx.y];
    if (sq.n <= 0) return;
    const int h = blockIdx.x, nk = d.n_k_heads, nv = d.n_v_heads, dk = d.k_dim, dv = d.v_dim;
    const int cd = 2 * nk * dk + nv * dv;
    const int kh = d.tiled ? h % nk : h / (nv / nk);
    const int P = REC_THREADS / dv, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    extern __shared__ float smem[];
    float *S = smem;          /* [dk][dv] */
    float *q = S + dk * dv;   /* [dk] */
    float *k = q + dk;        /* [dk] */
    float *v = k + dk;        /* [dv] */
    float *col = v + dv;      /* [dv]: kv_mem then delta, then o */
    float *zz = col + dv;     /* [dv] */
    float *red = zz + dv;     /* [P][dv] */
    float *sc = red + P * dv; /* scalars: inv_q, inv_k, beta, decay, inv_o; [32] warp partials */
    float *wred = sc + 32;

    float *Sg = sq.state + (size_t)h * dk * dv;
    const int n4 = (dk * dv) % 4 == 0 ? dk * dv / 4 : 0; /* 16-byte copies where the size allows */
#pragma unroll 4
    for (int e = tid; e < n4; e += REC_THREADS) ((float4 *)S)[e] = __ldg((const float4 *)Sg + e);
    for (int e = 4 * n4 + tid; e < dk * dv; e += REC_THREADS) S[e] = Sg[e];
    const float scale = (float)pow((double)dk, -0.5);

    for (int t = 0; t < sq.n; t++) {
        const size_t row = (size_t)sq.row0 + t;
        const float *xr = qkv + row * cd;
        for (int i = tid; i < dk; i += REC_THREADS) {
            q[i] = xr[kh * dk + i];
            k[i] = xr[nk * dk + kh * dk + i];
        }
        for (int j = tid; j < dv; j += REC_THREADS) {
            v[j] = xr[2 * nk * dk + h * dv + j];
            zz[j] = z[row * nv * dv + (size_t)h * dv + j];
        }
        __syncthreads();
        if (warp < 2) { /* warp 0: |q|^2, warp 1: |k|^2 */
            const float *x = warp == 0 ? q : k;
            float ss = 0.0f;
            for (int i = lane; i < dk; i += 32) ss += x[i] * x[i];
            ss = warp_sum(ss);
            if (lane == 0) sc[warp] = 1.0f / sqrtf(ss + 1e-6f);
        } else if (tid == 64) {
            const float bb = b[row * nv + h], aa = a[row * nv + h] + w.dt_bias[h];
            const float sp = aa > 20.0f ? aa : log1pf(expf(aa));
            sc[2] = 1.0f / (1.0f + expf(-bb));
            sc[3] = expf(w.ssm_a[h] * sp);
        }
        __syncthreads();
        const float inv_q = sc[0], inv_k = sc[1], beta = sc[2], decay = sc[3];
        for (int i = tid; i < dk; i += REC_THREADS) {
            q[i] = (q[i] * inv_q) * scale;
            k[i] = k[i] * inv_k;
        }
        for (int e = tid; e < dk * dv; e += REC_THREADS) S[e] *= decay;
        __syncthreads();
        col_dot(col, S, k, red, dk, dv);
        for (int j = tid; j < dv; j += REC_THREADS) col[j] = (v[j] - col[j]) * beta;
        __syncthreads();
        for (int e = tid; e < dk * dv; e += REC_THREADS) S[e] += k[e / dv] * col[e % dv];
        __syncthreads();
        col_dot(col, S, q, red, dk, dv);
        /* gated RMS norm over the head's dv outputs */
        float ss = 0.0f;
        for (int j = tid; j < dv; j += REC_THREADS) ss += col[j] * col[j];
        ss = warp_sum(ss);
        if (lane == 0) wred[warp] = ss;
        __syncthreads();
        if (tid == 0) {
            float tot = 0.0f;
            for (int i = 0; i < REC_THREADS / 32; i++) tot += wred[i];
            sc[4] = 1.0f / sqrtf(tot / (float)dv + d.eps);
        }
        __syncthreads();
        const float inv_o = sc[4];
        for (int j = tid; j < dv; j += REC_THREADS) {
            float zj = zz[j];
            y[row * nv * dv + (size_t)h * dv + j] = (w.norm_w[j] * (col[j] * inv_o)) * (zj / (1.0f + expf(-zj)));
        }
        __syncthreads(); /* q, k, v, col, sc are rewritten by the next row */
    }
    __syncthreads();
    for (int e = tid; e < n4; e += REC_THREADS) ((float4 *)Sg)[e] = ((const float4 *)S)[e];
    for (int e = 4 * n4 + tid; e < dk * dv; e += REC_THREADS) Sg[e] = S[e];
    (void)P;
}

enum { REG_ROWS = 32 }; /* rows of S a thread holds: dk <= 4 * REG_ROWS = CUDA_GDN_MAX_DK */

/* sum of x[i]^2 over i < 128 (x zero-padded), by one warp in a fixed order: every warp gets the same bits */
static __device__ __forceinline__ float warp_sq128(const float *x, int lane) {
    float s = 0.0f;
#pragma unroll
    for (int m = 0; m < 4; m++) s += x[lane + 32 * m] * x[lane + 32 * m];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

/* One sequence's rows with its state in S (gdn_rec_reg_kernel's row loop), then S back to the state: the body of
 * both kernel forms below, inlined, so each sequence gets the same instructions in the same order. */
template <bool FULL>
__device__ __forceinline__ void gdn_rec_rows(float (&S)[REG_ROWS], float *y, const float *qkv, const float *z,
                                             const float *b, const float *a, const cuda_gdn_weights &w,
                                             const cuda_gdn_seq *seqs, int si, const cuda_gdn_seq &sq,
                                             const cuda_gdn_dims &d, float scale, float (&kq)[2][4 * REG_ROWS],
                                             float (&wred)[2][16], float (&part)[2][4][128]) {
    const int h = blockIdx.x, nk = d.n_k_heads, nv = d.n_v_heads, dk = d.k_dim, dv = d.v_dim;
    const int cd = 2 * nk * dk + nv * dv;
    const int kh = d.tiled ? h % nk : h / (nv / nk);
    const int tid = threadIdx.x, lane = tid & 31, nwarps = dv >> 3;
    const int j = tid % dv, p = tid / dv;
    const int i0 = p * REG_ROWS; /* this thread's rows of S: i0 .. i0 + 31 (those < dk) */

    for (int t = 0; t < sq.n; t++) {
        const size_t row = (size_t)sq.row0 + t;
        const float *xr = qkv + row * cd;
        const float *kr = xr + nk * dk + kh * dk, *qr = xr + kh * dk;
        /* k and q once a row into shared memory (the previous row's readers passed its barrier below) */
        for (int e = tid; e < 8 * REG_ROWS; e += blockDim.x) {
            const int i = e & (4 * REG_ROWS - 1);
            kq[e >> 7][i] = i < dk ? (e < 4 * REG_ROWS ? kr[i] : qr[i]) : 0.0f;
        }
        /* the head's constants read each row (L1 hits), not held over the loop: at MINB 2 every register counts */
        const float bb = b[row * nv + h], aa = a[row * nv + h] + w.dt_bias[h], vj = xr[2 * nk * dk + h * dv + j];
        __syncthreads();
        const float inv_k = 1.0f / sqrtf(warp_sq128(kq[0], lane) + 1e-6f);
        const float inv_q = 1.0f / sqrtf(warp_sq128(kq[1], lane) + 1e-6f);
        const float sp = aa > 20.0f ? aa : log1pf(expf(aa));
        const float beta = 1.0f / (1.0f + expf(-bb)), decay = expf(w.ssm_a[h] * sp);
        const float4 *k4 = (const float4 *)(kq[0] + i0), *q4 = (const float4 *)(kq[1] + i0);
        float kv = 0.0f;
#pragma unroll
        for (int m = 0; m < REG_ROWS / 4; m++) {
            const float4 kk = k4[m];
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int r = 4 * m + c;
                const float kc = c == 0 ? kk.x : c == 1 ? kk.y : c == 2 ? kk.z : kk.w;
                if (FULL || i0 + r < dk) {
                    S[r] *= decay;
                    kv += S[r] * (kc * inv_k);
                }
            }
        }
        part[0][p][j] = kv;
        __syncthreads();
        kv = (part[0][0][j] + part[0][1][j]) + (part[0][2][j] + part[0][3][j]);
        const float delta = (vj - kv) * beta;
        float o = 0.0f;
#pragma unroll
        for (int m = 0; m < REG_ROWS / 4; m++) {
            const float4 kk = k4[m], qq = q4[m];
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int r = 4 * m + c;
                const float kc = c == 0 ? kk.x : c == 1 ? kk.y : c == 2 ? kk.z : kk.w;
                const float qc = c == 0 ? qq.x : c == 1 ? qq.y : c == 2 ? qq.z : qq.w;
                if (FULL || i0 + r < dk) { /* rows past dk stay 0 (a NaN delta must not reach them) */
                    S[r] += (kc * inv_k) * delta;
                    o += S[r] * ((qc * inv_q) * scale);
                }
            }
        }
        /* gated RMS norm over the head's dv outputs: one lane of each column, a fixed tree */
        part[1][p][j] = o;
        __syncthreads();
        o = (part[1][0][j] + part[1][1][j]) + (part[1][2][j] + part[1][3][j]);
        /* lanes 8g .. 8g + 7 hold 8 consecutive columns (dv % 8 == 0): xor 4, 2, 1 pair the columns the first form's
         * xor 16, 8, 4 paired over its p == 0 lanes (its xor 2, 1 added zeros: exact) */
        float s2 = o * o;
        for (int m = 4; m > 0; m >>= 1) s2 += __shfl_xor_sync(0xffffffffu, s2, m);
        if (p == 0 && (j & 7) == 0) wred[t & 1][j >> 3] = s2;
        __syncthreads(); /* also: every k/q read of this row is done before the next row rewrites kq */
        float tot = 0.0f;
        for (int i = 0; i < nwarps; i++) tot += wred[t & 1][i];
        const float inv_o = 1.0f / sqrtf(tot / (float)dv + d.eps);
        if (p == 0) {
            const float zj = z[row * nv * dv + (size_t)h * dv + j];
            y[row * nv * dv + (size_t)h * dv + j] = (w.norm_w[j] * (o * inv_o)) * (zj / (1.0f + expf(-zj)));
        }
    }
    /* the state's address again from the descriptor (its pointer not held in two registers over the row loop:
     * at MINB 2 that pair was ptxas's spill) */
    float *Sw = seqs[si].state + (size_t)h * dk * dv + j;
#pragma unroll
    for (int r = 0; r < REG_ROWS; r++)
        if (FULL || i0 + r < dk) Sw[(i0 + r) * dv] = S[r];
}

/* FULL: dk == 128, every row of every thread real: no per-row guards (as branches they serialised the shared
 * loads behind them: 128 branches a row in the first build). MINB: blocks an SM. At 1 the kernel took 96 registers
 * a thread, so one 512-thread block an SM: a stacked step of 16 sequences (512 blocks) ran in 4 waves of ~10 us
 * (45.4 us a layer, H100 step25). At 2 ptxas fits it in 64 (a few bytes of spill outside the row loop) and the
 * waves halve; the arithmetic is the same instructions in the same order, so the same bits.
 * Thread (j, p) = (tid % dv, tid / dv): a warp is 32 consecutive columns of one row group, so each of its state
 * loads and stores is one 128-byte line. The first form put a warp on 8 columns x 4 row groups (tid / 4, tid % 4:
 * the 4 partials met by two shuffles), so each request touched four 32-byte pieces of rows 4 KB apart: ncu of the
 * 16-sequence AR step (bench/device-runs/2027-01-20-arstep41, H100) had the L1's LSU wavefronts at 64% the top unit,
 * DRAM 33%, 43.2 us; this form 29.2 us, DRAM 47%, the step +4.6% (1,859.5 -> 1,945.2 agg tok/s over three rounds,
 * a lone sequence unchanged). The 4 partials meet in shared memory, added in the shuffles' order ((p0 + p1) +
 * (p2 + p3)), and the gated norm's square sum keeps the shuffles' tree over each 8 columns and the 8-column parts
 * added in column order: the first form's operations on the same values, so its bits. */
template <bool FULL, int MINB>
__global__ void __launch_bounds__(4 * 128, MINB)
    gdn_rec_reg_kernel(float *y, const float *qkv, const float *z, const float *b, const float *a,
                       cuda_gdn_weights w, const cuda_gdn_seq *seqs, cuda_gdn_dims d) {
    const cuda_gdn_seq sq = seqs[blockIdx.y]; /* written by a host copy before the pass */
    const int h = blockIdx.x, dk = d.k_dim, dv = d.v_dim;
    const int tid = threadIdx.x, j = tid % dv, i0 = tid / dv * REG_ROWS; /* this thread's rows: i0 .. i0 + 31 */
    float S[REG_ROWS];
    const float *Sg = sq.state + (size_t)h * dk * dv + j;
    if (sq.n > 0) { /* before the wait: see the file's comment */
#pragma unroll
        for (int r = 0; r < REG_ROWS; r++) S[r] = FULL || i0 + r < dk ? Sg[(i0 + r) * dv] : 0.0f;
    }
    pdl_wait(); /* qkv, z, b, a are the previous kernels' outputs (cuda_pdl.cuh) */
    pdl_trigger();
    if (sq.n <= 0) return;
    __shared__ __align__(16) float kq[2][4 * REG_ROWS]; /* the row's raw k and q, zero past dk */
    __shared__ float wred[2][16];
    __shared__ float part[2][4][128]; /* the row groups' partial sums of kv and of o */
    const float scale = (float)pow((double)dk, -0.5);
    gdn_rec_rows<FULL>(S, y, qkv, z, b, a, w, seqs, blockIdx.y, sq, d, scale, kq, wred, part);
}

/* PAIR (cuda_gdn_rec_pair_set / CLOVER_CUDA_GDN_REC_PAIR): block y takes sequences 2y and 2y + 1 of one head, one
 * after the other. Why: at 16 sequences the one-a-block grid (32 heads x 16) is ~2 waves at two blocks an SM, each
 * block loading its 64 KB state, computing, storing, with nothing of its own in flight while it computes (ncu at 16
 * sequences, H100 bench/device-runs/2027-01-20-arstep41: 29 us, DRAM 47%; the tracer 25.7 us, 2027-01-24-wr45).
 * Here the second sequence's state is copied into shared memory (cp.async, each thread its own 32 values, so no
 * barrier) before the wait, beside the first's register loads: one wave, every state read in flight while the
 * previous kernel ends, the second's never behind the first's compute. Each sequence's rows are gdn_rec_rows, as
 * in gdn_rec_reg_kernel: the same bits (test_cuda_gdn). Measured (H100, bench/device-runs/2027-01-25-gdnp46, four
 * rounds against one a block): the 16-sequence AR step +0.3, +2.3, +0.5, +0.5%; under ncu, where nothing overlaps
 * the previous kernel, 29.7 -> 29.2 us (DRAM 46%): the row loop's barriers, not the state's read, bound the kernel
 * itself, so the gain is the read issued early. */
__global__ void __launch_bounds__(4 * 128, 2)
    gdn_rec_pair_kernel(float *y, const float *qkv, const float *z, const float *b, const float *a,
                        cuda_gdn_weights w, const cuda_gdn_seq *seqs, int n_seq, cuda_gdn_dims d) {
    const int s0 = 2 * (int)blockIdx.y, h = blockIdx.x, dk = d.k_dim, dv = d.v_dim;
    const int tid = threadIdx.x, j = tid % dv, i0 = tid / dv * REG_ROWS;
    extern __shared__ float Sn[]; /* the second sequence's state [dk][dv], as it lies in global memory */
    float S[REG_ROWS];
    {
        const cuda_gdn_seq sq = seqs[s0]; /* written by a host copy before the pass */
        const float *Sg = sq.state + (size_t)h * dk * dv + j;
        if (sq.n > 0) { /* before the wait: see the file's comment */
#pragma unroll
            for (int r = 0; r < REG_ROWS; r++) S[r] = Sg[(i0 + r) * dv]; /* dk = 128: every row real */
        }
    }
    if (s0 + 1 < n_seq) { /* the second sequence's state, also before the wait */
        const cuda_gdn_seq s1 = seqs[s0 + 1];
        if (s1.n > 0) {
            const float *Sg = s1.state + (size_t)h * dk * dv + j;
            const unsigned dst = (unsigned)__cvta_generic_to_shared(Sn + j);
#pragma unroll
            for (int r = 0; r < REG_ROWS; r++)
                asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst + 4u * (unsigned)((i0 + r) * dv)),
                             "l"(Sg + (i0 + r) * dv)
                             : "memory");
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    pdl_wait(); /* qkv, z, b, a are the previous kernels' outputs (cuda_pdl.cuh) */
    pdl_trigger();
    __shared__ __align__(16) float kq[2][4 * REG_ROWS]; /* the row's raw k and q, zero past dk */
    __shared__ float wred[2][16];
    __shared__ float part[2][4][128]; /* the row groups' partial sums of kv and of o */
    /* (float)pow(128, -0.5), as gdn_rec_reg_kernel computes it at dk 128: 2^-3.5 lies 0.2 of a float ulp from this
     * float, so any double pow of it rounds here (a pow call beside the two states' registers spilled) */
    const float scale = 0.0883883461356163025f;
    {
        const cuda_gdn_seq sq = seqs[s0];
        if (sq.n > 0) gdn_rec_rows<true>(S, y, qkv, z, b, a, w, seqs, s0, sq, d, scale, kq, wred, part);
    }
    if (s0 + 1 >= n_seq) return;
    const cuda_gdn_seq sq = seqs[s0 + 1];
    if (sq.n <= 0) return; /* uniform over the block */
    asm volatile("cp.async.wait_all;" ::: "memory"); /* this thread's own copies: no barrier */
#pragma unroll
    for (int r = 0; r < REG_ROWS; r++) S[r] = Sn[(i0 + r) * dv + j];
    gdn_rec_rows<true>(S, y, qkv, z, b, a, w, seqs, s0 + 1, sq, d, scale, kq, wred, part);
}

/* CLOVER_CUDA_GDN_REC (read once): "smem" forces gdn_rec_smem_kernel, "reg1" the register form at one block an
 * SM (the form before MINB 2, for A/B); otherwise the register form at two. */
static int gdn_rec_forced(void) {
    static int forced = -1;
    if (forced < 0) {
        const char *e = getenv("CLOVER_CUDA_GDN_REC");
        forced = !e ? 0 : strcmp(e, "smem") == 0 ? 1 : strcmp(e, "reg1") == 0 ? 2 : 0;
    }
    return forced;
}

/* PAIR (gdn_rec_pair_kernel): 2 AUTO, the default: where one sequence a block would be over one wave at two blocks
 * an SM; 1 every call of two or more sequences; 0 never. cuda_gdn_rec_pair_set overrides CLOVER_CUDA_GDN_REC_PAIR
 * (negative: the environment again). */
static int g_rec_pair = INT_MIN;
extern "C" void cuda_gdn_rec_pair_set(int mode) {
    __atomic_store_n(&g_rec_pair, mode < 0 ? INT_MIN : mode, __ATOMIC_RELAXED);
}
static bool gdn_rec_pair_takes(int n_seq, int n_heads) {
    const int m = cuda_env_int(&g_rec_pair, "CLOVER_CUDA_GDN_REC_PAIR", 2);
    if (n_seq < 2 || (m != 1 && m != 2)) return false;
    return m == 1 || (long)n_seq * n_heads > 2L * cuda_sm_count();
}

/* The register form's dims (gdn_rec_reg_kernel's comment), unless CLOVER_CUDA_GDN_REC=smem. */
static bool gdn_rec_reg_takes(const cuda_gdn_dims *d) {
    return gdn_rec_forced() != 1 && d->v_dim % 8 == 0 && d->v_dim <= 128 && d->k_dim <= 4 * REG_ROWS;
}

extern "C" int cuda_gdn_recurrent(float *y, const float *qkv, const float *z, const float *b, const float *a,
                                  const cuda_gdn_weights *w, const cuda_gdn_seq *seqs, int n_seq,
                                  const cuda_gdn_dims *d, void *stream) {
    if (cuda_gdn_dims_check(d, NULL, 0) != 0 || n_seq < 0 || n_seq > 65535) return CUDA_GDN_EINVAL;
    if (n_seq == 0) return 0;
    const cudaStream_t st = (cudaStream_t)stream;
    if (gdn_rec_reg_takes(d)) {
        const bool one = gdn_rec_forced() == 2, full = d->k_dim == 4 * REG_ROWS;
        if (full && !one && gdn_rec_pair_takes(n_seq, d->n_v_heads)) { /* the real heads (128 x 128) only */
            const dim3 grid((unsigned)d->n_v_heads, (unsigned)(n_seq + 1) / 2);
            const size_t smem = sizeof(float) * (size_t)d->k_dim * (size_t)d->v_dim;
            pdl_launch(gdn_rec_pair_kernel, grid, 4 * d->v_dim, smem, st, y, qkv, z, b, a, *w, seqs, n_seq, *d);
            return (int)cudaGetLastError();
        }
        void (*k)(float *, const float *, const float *, const float *, const float *, cuda_gdn_weights,
                  const cuda_gdn_seq *, cuda_gdn_dims) =
            full ? (one ? gdn_rec_reg_kernel<true, 1> : gdn_rec_reg_kernel<true, 2>)
                 : (one ? gdn_rec_reg_kernel<false, 1> : gdn_rec_reg_kernel<false, 2>);
        pdl_launch(k, dim3((unsigned)d->n_v_heads, (unsigned)n_seq), 4 * d->v_dim, 0, st, y, qkv, z, b, a, *w, seqs,
                   *d);
        return (int)cudaGetLastError();
    }
    pdl_launch(gdn_rec_smem_kernel, dim3((unsigned)d->n_v_heads, (unsigned)n_seq), REC_THREADS,
               gdn_recurrent_smem_bytes(d), st, y, qkv, z, b, a, *w, seqs, *d);
    return (int)cudaGetLastError();
}

extern "C" int gdn_recurrent_init(size_t max_smem) {
    /* PAIR's second state: up to CUDA_GDN_MAX_DK x 128 floats (64 KB), over the 48 KB default */
    const int pair_smem = (int)(sizeof(float) * 4 * REG_ROWS * 128);
    cudaError_t e = cudaFuncSetAttribute(gdn_rec_pair_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         pair_smem);
    if (e != cudaSuccess) return (int)e;
    return (int)cudaFuncSetAttribute(gdn_rec_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)max_smem);
}
