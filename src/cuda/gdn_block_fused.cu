/*
 * gdn_block_fused.cu: the GDN block operator of SPEC.md 2.1 in two launches
 * instead of gdn_block.cu's four (conv, L2 norm, heads, gated norm), the
 * same float operations in the same order, so the outputs are its bits
 * (CLOVER_CUDA_GDN_BLOCK=0 runs the four-launch form):
 *  1. k_block_conv_l2: a warp per (row, q or k head): the conv of its dk
 *     channels (gdn_block_ops.cuh), their squares summed per lane in channel
 *     order and by the same xor tree as k_block_l2, scaled in registers; a
 *     warp per (row, 128 value channels) for the rest of the conv.
 *  2. k_block_head_fused: a block per (value head, tile of 8 rows), as
 *     k_block_head_s, with every operand in shared memory before its use:
 *     the tile's q rows and the block's k rows, then the head's state
 *     [dk][dv] and the block's v rows, all by cp.async issued at the start so
 *     the state's 64 KiB arrive while the scores and the softmax run (the
 *     staged form read S and v from L2 in the read-out, a dependent load per
 *     4 steps: the ~40 us a layer measured for the operator). The softmax a
 *     warp per row (max and exps in parallel; the max of a set is the same
 *     value in any order, and where a NaN makes the orders differ every
 *     output is NaN either way; the sum by one lane in slot order, as the
 *     oracle), then the read-out, then the gated RMSNorm of each row as
 *     gdn_mix.cu's kernel computes it (its 128-thread tree replayed by a warp).
 * Taken when the shapes allow (dk, dv, conv_dim multiples of 4; dv divides
 * 256; 16-byte aligned state and scratch; shared memory <= 200 KiB), else
 * gdn_block.cu runs its own form.
 * 2'. k_block_head_once<G> (CLOVER_CUDA_GDN_HEAD_ONCE: AUTO takes it in
 *    stacked passes of 2+ sequences only, =1 everywhere, =0 never;
 *    issues 24, 25): in 2 each of a head's ceil(b / 8) tiles copies the
 *    head's 64 KiB state (35B-A3B, b 32: 4 tiles, ~100 KB a block; a lone
 *    preview 128 blocks, 12.8 MB through L2 for 2 MiB of state; 16 stacked
 *    sequences 2,048 blocks, 205 MB, measured 194 us a GDN layer). Here a
 *    block takes a (sequence, value head): the state, k, v and all b q rows
 *    copied once (112 KB: 3.6 MB lone, 57 MB for 16), then G groups of 256
 *    threads, group g the tiles g, g + G, ..., each tile by the same step
 *    functions as 2 (tile_scores, tile_softmax, tile_readout, tile_norm)
 *    with the group's barrier for the block's: every output the same float
 *    operations in the same order (the tile kernel's PTX keeps its float
 *    operations and their order), only the block that runs a row changes.
 *    G is 4 from 3 tiles up (152 KB, 1,024 threads x 64 registers: one
 *    block an SM), halved while shared memory does not fit.
 *    Estimate (H200, not measured): 16 stacked sequences run 512 blocks in
 *    3.9 waves instead of 2,048 in 7.75 (two 112 KB blocks an SM) or 15.5
 *    (one, if the default carveout gives less: asked at its most here); a
 *    tile wave's ~25 us is inferred latency (128-step dot chains, lane 0's
 *    sum, the norm's loads), not bytes (205 MB at L2 speed is ~30 of the
 *    194 us), and a wave here issues 4 tiles' read-outs on one SM where
 *    there were 2 or 1: ~30-35 us a wave, ~100-130 us a layer. A lone
 *    preview gets 32 blocks on 32 SMs instead of 128 on 128: its 4 tiles'
 *    read-outs (~1,000 instructions a thread, 8 warps a tile) share one
 *    SM's 4 schedulers, ~4 us of issue where the tile form had ~1, against
 *    ~1.5 us of L2 traffic saved: equal to ~3 us slower is expected.
 *    Splitting dv over a cluster of 2 blocks (64 columns each, scores and
 *    softmax computed twice with the same bits, the o halves swapped
 *    through DSMEM before the norm so its sum runs over the whole row in
 *    the same order) gives the lone preview 64 blocks of 2 tiles' issue
 *    each: still fewer SMs and more issue an SM than the tile form's 128,
 *    for bytes that are not its limit; and the stacked form gains no waves
 *    (1,024 blocks, two an SM). Not built: the device run decides first
 *    whether the stacked gain is real.
 *    Measured (H200, bench/device-runs/2027-01-07-tall29 h1 / h2): 16
 *    stacked diffusion sequences 297 -> 308.6 agg tok/s (+3.6%); a lone
 *    preview 5.42 -> 5.94 ms. Hence AUTO: stacked passes only (still so with
 *    the steps below: 2027-01-21-k128w42 k, H100, lone 5.24 -> 5.55 ms).
 * At dk = dv = 128 (every real geometry) both forms' scores and read-out run
 * with the head dims unrolled (tile_readout<RT, 128>), the same operations in the
 * same order.
 */
#include <math.h>
#include <stdint.h>

#include "cuda_check.h"
#include "cuda_pdl.cuh"
#include "cuda_preview.h"
#include "cuda_device.h"
#include "cuda_switch.h"
#include "gdn_block_ops.cuh"

enum { F_RT = 8, F_THREADS = 256, F_WARPS = F_THREADS / 32, F_VCH = 128, F_SMEM_MAX = 200 * 1024, GN_THREADS = 128 };
/* GN_THREADS: gdn_mix.cu's NORM_THREADS, the shape of its sum of squares (replayed below) */

/* ---- 1. conv + L2 norm ---- */
/* Row i of a b-row block (the kernel's body; k_block_conv_l2_multi runs it on each sequence's rows). */
__device__ __forceinline__ static void conv_l2_row(float *y, const float *x, const float *ring, const float *w,
                                                   const float *wr, int cd, int K, int b, int nk, int dk, int i) {
    pdl_wait(); /* the block's rows are the previous products' outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const int lane = threadIdx.x & 31, u = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int uqk = 2 * nk, uv = (cd - uqk * dk + F_VCH - 1) / F_VCH;
    if (u >= uqk + uv) return;
    float *yr = y + (size_t)i * cd;
    if (u >= uqk) { /* value channels: the conv only */
        const int c0 = uqk * dk + (u - uqk) * F_VCH, c1 = c0 + F_VCH < cd ? c0 + F_VCH : cd;
        for (int c = c0 + lane; c < c1; c += 32) yr[c] = block_conv_at(x, ring, w, wr, cd, K, b, i, c);
        return;
    }
    /* a q or k head: k_block_l2's sum (lane order t = lane, lane + 32, ...; then the xor tree) */
    const int base = u * dk;
    float v[4];
    float ss = 0.0f;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const int t = lane + 32 * q;
        v[q] = t < dk ? block_conv_at(x, ring, w, wr, cd, K, b, i, base + t) : 0.0f;
        if (t < dk) ss += v[q] * v[q];
    }
    for (int t = lane + 128; t < dk; t += 32) { /* heads wider than 128: stored, read back below */
        const float c = block_conv_at(x, ring, w, wr, cd, K, b, i, base + t);
        yr[base + t] = c;
        ss += c * c;
    }
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = 1.0f / sqrtf(ss + 1e-6f); /* CPU_GDN_L2_EPS */
#pragma unroll
    for (int q = 0; q < 4; q++)
        if (lane + 32 * q < dk) yr[base + lane + 32 * q] = v[q] * inv;
    for (int t = lane + 128; t < dk; t += 32) yr[base + t] *= inv;
}

__global__ void __launch_bounds__(256)
    k_block_conv_l2(float *y, const float *x, const float *ring, const float *w, const float *wr, int cd, int K, int b,
                    int nk, int dk) {
    conv_l2_row(y, x, ring, w, wr, cd, K, b, nk, dk, (int)blockIdx.y);
}

/* Every sequence of a stacked preview (grid z): its rows from row0 of x and y, its own committed ring. */
__global__ void __launch_bounds__(256)
    k_block_conv_l2_multi(float *y, const float *x, const float *w, const float *wr, int cd, int K, int nk, int dk,
                          cuda_gdn_block_seqs m) {
    const cuda_gdn_block_seq q = m.seq[blockIdx.z];
    if ((int)blockIdx.y >= q.b) return; /* the whole block */
    conv_l2_row(y + (size_t)q.row0 * cd, x + (size_t)q.row0 * cd, q.ring, w, wr, cd, K, q.b, nk, dk,
                (int)blockIdx.y);
}

/* ---- 2. heads + gated norm ---- */
struct fused_args {
    float *y;
    const float *qkv, *z, *a, *state;
    cuda_gdn_block_weights w;
    int nk, nv, dk, dv, cd, b, tiled;
    float ln_ratio, scale, eps;
    int k128; /* dk == dv == 128: score_dots<128> and tile_readout<RT, 128> */
};

/* shared memory layout (floats): p [RT][pst], q [RT][dk], q * scale [RT][dk], k [b][dk + 1], (pad to 4),
 * S [dk][dv], v [b][dv], o [RT][dv] */
struct fused_layout {
    int pst, kp;
    size_t q, qs, k, s, v, o, total;
};

__host__ __device__ static inline fused_layout fused_layout_of(int b, int dk, int dv, int rt) {
    fused_layout L;
    L.pst = (b + 1 + 3) / 4 * 4;
    L.kp = dk + 1;
    L.q = (size_t)rt * L.pst;
    L.qs = L.q + (size_t)rt * dk;
    L.k = L.qs + (size_t)rt * dk;
    L.s = (L.k + (size_t)b * L.kp + 3) / 4 * 4;
    L.v = L.s + (size_t)dk * dv;
    L.o = L.v + (size_t)b * dv;
    L.total = L.o + (size_t)rt * dv;
    return L;
}

__device__ static inline void cp_async4(float *dst, const float *src) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(sa), "l"(src) : "memory");
}
__device__ static inline void cp_async16(float *dst, const float *src) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(src) : "memory");
}

/* ---- a tile's steps: k_block_head_fused runs them a block a tile, k_block_head_once a group of F_THREADS threads
 * a tile; the same code, so every output is the same float operations in the same order in both. t, lane and warp
 * are the thread's place in its group; the barriers between the steps are the caller's. ---- */
struct tile_bufs {
    float *p, *qsc, *os;           /* the group's: scores [RT][pst], q * scale [RT][dk], o [RT][dv] */
    const float *q, *ks, *Ss, *Vs; /* the tile's first q row [RT][dk]; the block's k [b][kp], S [dk][dv], v [b][dv] */
    int pst, kp;
};

/* The scores of rows 0 .. rows - 1 (each dot sequential over dk, as the oracle); DK: dk when a constant (128), 0 when
 * only known at run time. */
template <int DK>
__device__ __forceinline__ static void score_dots(const tile_bufs &T, int b, int dk_rt, int rows, int t, unsigned nt,
                                                  float ls) {
    const int dk = DK ? DK : dk_rt, pst = T.pst, kp = T.kp;
    for (int idx = t; idx < rows * b; idx += nt) {
        const int ii = idx / b, j = idx % b;
        const float *qi = T.q + ii * dk, *kj = T.ks + j * kp;
        float dot = 0.0f;
#pragma unroll(DK ? 8 : 1)
        for (int u = 0; u < dk; u += 4) {
            const float4 q4 = *(const float4 *)(qi + u);
            dot += q4.x * kj[u];
            dot += q4.y * kj[u + 1];
            dot += q4.z * kj[u + 2];
            dot += q4.w * kj[u + 3];
        }
        T.p[ii * pst + j] = ls * dot;
    }
}

/* q * scale, the scores, the history slot of rows i0 .. i0 + rows - 1 */
__device__ __forceinline__ static void tile_scores(const fused_args &A, const tile_bufs &T, int h, int i0, int rows,
                                                   int t, unsigned nt) {
    const int b = A.b, dk = A.dk, pst = T.pst;
    const float ls = A.w.logit_scale[h];
    for (int idx = t; idx < rows * dk; idx += nt) T.qsc[idx] = T.q[idx] * A.scale;
    if (A.k128) /* the same dots with dk = 128 unrolled: constant shared-memory offsets, no loop arithmetic */
        score_dots<128>(T, b, dk, rows, t, nt, ls);
    else
        score_dots<0>(T, b, dk, rows, t, nt, ls);
    for (int ii = t; ii < rows; ii += nt) {
        const int i = i0 + ii;
        const float g = A.w.ssm_a[h] * softplus_f(A.a[(size_t)i * A.nv + h] + A.w.dt_bias[h]);
        T.p[ii * pst + b] = (A.w.history_bias[h] + A.w.history_c[h] * g) + A.ln_ratio;
    }
}

/* the softmax over b + 1 slots, a warp a row (max and exps in parallel; the sum by one lane in slot order) */
__device__ __forceinline__ static void tile_softmax(const tile_bufs &T, int bp, int rows, int lane, int warp) {
    for (int ii = warp; ii < rows; ii += F_WARPS) {
        float *s = T.p + ii * T.pst;
        float mx = -INFINITY;
        for (int j = lane; j < bp; j += 32) mx = fmaxf(mx, s[j]);
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        for (int j = lane; j < bp; j += 32) s[j] = expf(s[j] - mx);
        __syncwarp();
        float sum = 0.0f;
        if (lane == 0) { /* slot order; loads batched ahead of the dependent adds */
            int j = 0;
            for (; j + 4 <= bp; j += 4) {
                const float a0 = s[j], a1 = s[j + 1], a2 = s[j + 2], a3 = s[j + 3];
                sum += a0;
                sum += a1;
                sum += a2;
                sum += a3;
            }
            for (; j < bp; j++) sum += s[j];
        }
        const float inv = 1.0f / __shfl_sync(0xffffffffu, sum, 0);
        __syncwarp();
        for (int j = lane; j < bp; j += 32) s[j] *= inv;
    }
}

/* read-out: a thread owns column c for the rows rg, rg + NR, ... of a tile of RT rows (k_block_head_s's split and
 * sums: each output's operations and their order do not depend on RT). DIM: dk = dv = 128 known (every real
 * geometry: NR = 2, RT / 2 rows a thread, dk unrolled by 4 steps), or 0 (both at run time: the r loop walks all RT
 * rows and predicates off those r * NR >= RT, issued all the same). The generic form alone at 128 x 128 had the
 * stacked pass's head-once kernel issue-bound (arstep41 seq2, H100: 77% of issue slots busy, the ALU pipe 42%
 * against FMA 22%). The same operations per output in the same order (u over k, acc over j, then acc + p_hist u),
 * so the same bits. Measured with score_dots<128> (H100, bench/device-runs/2027-01-21-k128w42, three rounds against
 * the generic steps): the head-once kernel 164 -> 111 us under ncu (ALU 42% -> 26%), the stacked 16-sequence
 * diffusion pass 310.2 -> 316.1 agg tok/s (its denoise figure 378.3 -> 391.0), the lone coreset preview 5.277 ->
 * 5.246 ms. */
template <int RT, int DIM>
__device__ __forceinline__ static void tile_readout(const tile_bufs &T, int b, int dk_rt, int dv_rt, int rows, int t) {
    constexpr int R = DIM ? RT / (F_THREADS / DIM) : RT; /* rows a thread (the unrolled r loop) */
    static_assert(!DIM || RT % (F_THREADS / DIM) == 0, "rows a thread");
    const int dk = DIM ? DIM : dk_rt, dv = DIM ? DIM : dv_rt, NR = F_THREADS / dv, c = t % dv, rg = t / dv;
    const int pst = T.pst;
    if (!DIM && rg >= NR) return;
    const float *Ss = T.Ss + c, *Vs = T.Vs + c;
    float u[R], acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) u[r] = 0.0f, acc[r] = 0.0f;
#pragma unroll(DIM ? 4 : 1)
    for (int k = 0; k < dk; k += 4) {
        const float s0 = Ss[k * dv], s1 = Ss[(k + 1) * dv], s2 = Ss[(k + 2) * dv], s3 = Ss[(k + 3) * dv];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int ii = rg + r * NR;
            if ((DIM || r * NR < RT) && ii < rows) {
                const float4 q4 = *(const float4 *)(T.qsc + ii * dk + k);
                u[r] += s0 * q4.x;
                u[r] += s1 * q4.y;
                u[r] += s2 * q4.z;
                u[r] += s3 * q4.w;
            }
        }
    }
    int j = 0;
    for (; j + 4 <= b; j += 4) {
        const float v0 = Vs[j * dv], v1 = Vs[(j + 1) * dv], v2 = Vs[(j + 2) * dv], v3 = Vs[(j + 3) * dv];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int ii = rg + r * NR;
            if ((DIM || r * NR < RT) && ii < rows) {
                const float4 p4 = *(const float4 *)(T.p + ii * pst + j);
                acc[r] += p4.x * v0;
                acc[r] += p4.y * v1;
                acc[r] += p4.z * v2;
                acc[r] += p4.w * v3;
            }
        }
    }
    for (; j < b; j++) {
        const float vv = Vs[j * dv];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int ii = rg + r * NR;
            if ((DIM || r * NR < RT) && ii < rows) acc[r] += T.p[ii * pst + j] * vv;
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int ii = rg + r * NR;
        if ((DIM || r * NR < RT) && ii < rows) T.os[ii * dv + c] = acc[r] + T.p[ii * pst + b] * u[r];
    }
}

/* gated RMSNorm, a warp a row: gdn_gated_norm_kernel's sums (GN_THREADS threads: per thread its columns in order, a
 * xor tree per warp, the warps' sums in order) and its output expression */
__device__ __forceinline__ static void tile_norm(const fused_args &A, const tile_bufs &T, int h, int i0, int rows,
                                                 int lane, int warp) {
    const int dv = A.dv;
    for (int ii = warp; ii < rows; ii += F_WARPS) {
        const float *o = T.os + ii * dv;
        float tsum = 0.0f;
        for (int vw = 0; vw < GN_THREADS / 32; vw++) {
            float ss = 0.0f;
            for (int q = vw * 32 + lane; q < dv; q += GN_THREADS) ss += o[q] * o[q];
            for (int s = 16; s > 0; s >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, s);
            tsum += ss;
        }
        const float inv = 1.0f / sqrtf(tsum / (float)dv + A.eps);
        const size_t base = ((size_t)(i0 + ii) * A.nv + h) * dv;
        for (int q = lane; q < dv; q += 32) {
            float zi = A.z[base + q];
            A.y[base + q] = (A.w.norm_w[q] * (o[q] * inv)) * (zi / (1.0f + expf(-zi)));
        }
    }
}

/* cp.async of q rows i0 .. i0 + rows - 1 of key head kh into qs [rows][dk]; of the block's k rows into ks [b][kp];
 * of the head's state and the block's v rows into Ss, Vs: thread t of nt (unsigned, as blockDim.x was in the tile
 * kernel's loops, so its code is unchanged). */
__device__ __forceinline__ static void load_q(float *qs, const fused_args &A, int kh, int i0, int rows, int t,
                                              unsigned nt) {
    const int dk = A.dk;
    for (int idx = t; idx < rows * dk / 4; idx += nt) {
        const int ii = idx / (dk / 4), u = idx % (dk / 4) * 4;
        cp_async16(qs + ii * dk + u, A.qkv + (size_t)(i0 + ii) * A.cd + (size_t)kh * dk + u);
    }
}
__device__ __forceinline__ static void load_k(float *ks, int kp, const fused_args &A, int kh, int t, unsigned nt) {
    const int dk = A.dk;
    for (int idx = t; idx < A.b * dk; idx += nt) {
        const int j = idx / dk, u = idx % dk;
        cp_async4(ks + j * kp + u, A.qkv + (size_t)j * A.cd + (size_t)A.nk * dk + (size_t)kh * dk + u);
    }
}
__device__ __forceinline__ static void load_sv(float *Ss, float *Vs, const fused_args &A, int h, int t, unsigned nt) {
    const int dk = A.dk, dv = A.dv;
    const float *S = A.state + (size_t)h * dk * dv;
    for (int idx = t; idx < dk * dv / 4; idx += nt) cp_async16(Ss + idx * 4, S + (size_t)idx * 4);
    for (int idx = t; idx < A.b * dv / 4; idx += nt) {
        const int j = idx / (dv / 4), c = idx % (dv / 4) * 4;
        cp_async16(Vs + j * dv + c, A.qkv + (size_t)j * A.cd + 2 * (size_t)A.nk * dk + (size_t)h * dv + c);
    }
}

__device__ __forceinline__ static int head_key(const fused_args &A, int h) {
    return A.tiled ? h % A.nk : h / (A.nv / A.nk);
}

/* Value head h, rows i0 .. i0 + RT - 1 of A's block (k_block_head_fused's body). */
template <int RT>
__device__ __forceinline__ static void head_fused_tile(const fused_args &A, int h, int i0) {
    extern __shared__ __align__(16) float sh[];
    const int b = A.b, rows = b - i0 < RT ? b - i0 : RT, kh = head_key(A, h);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
    const fused_layout L = fused_layout_of(b, A.dk, A.dv, RT);
    const tile_bufs T = {sh, sh + L.qs, sh + L.o, sh + L.q, sh + L.k, sh + L.s, sh + L.v, L.pst, L.kp};
    pdl_wait(); /* q, k, v are the conv kernel's output */
    pdl_trigger();
    /* group 0: the tile's q rows, the block's k rows (for the scores) */
    load_q(sh + L.q, A, kh, i0, rows, tid, blockDim.x);
    load_k(sh + L.k, L.kp, A, kh, tid, blockDim.x);
    asm volatile("cp.async.commit_group;" ::: "memory");
    /* group 1: the head's state and the block's v rows (for the read-out), in flight during the scores */
    load_sv(sh + L.s, sh + L.v, A, h, tid, blockDim.x);
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    __syncthreads();
    tile_scores(A, T, h, i0, rows, tid, blockDim.x);
    __syncthreads();
    tile_softmax(T, b + 1, rows, lane, warp);
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    if (A.k128)
        tile_readout<RT, 128>(T, b, 128, 128, rows, tid);
    else
        tile_readout<RT, 0>(T, b, A.dk, A.dv, rows, tid);
    __syncthreads();
    tile_norm(A, T, h, i0, rows, lane, warp);
}

template <int RT>
__global__ void __launch_bounds__(F_THREADS) k_block_head_fused(fused_args A) {
    head_fused_tile<RT>(A, (int)blockIdx.x, (int)blockIdx.y * RT);
}

/* A stacked preview's sequence z: A's pointers at the pass's row 0 moved to its rows; its own state, row count and
 * ln_ratio (both forms' multi kernels). */
__device__ __forceinline__ static void seq_args(fused_args &A, const cuda_gdn_block_seq &q) {
    const size_t zw = (size_t)A.nv * A.dv;
    A.y += (size_t)q.row0 * zw;
    A.qkv += (size_t)q.row0 * A.cd;
    A.z += (size_t)q.row0 * zw;
    A.a += (size_t)q.row0 * A.nv;
    A.state = q.state;
    A.b = q.b;
    A.ln_ratio = q.ln_ratio;
}

/* Every sequence of a stacked preview (grid z). Shared memory is sized for the largest block; a smaller one's layout
 * (fused_layout_of of its own b) fits inside it, and the arithmetic does not depend on where. */
template <int RT>
__global__ void __launch_bounds__(F_THREADS) k_block_head_fused_multi(fused_args A, cuda_gdn_block_seqs m) {
    const cuda_gdn_block_seq q = m.seq[blockIdx.z];
    const int i0 = (int)blockIdx.y * RT;
    if (i0 >= q.b) return; /* the whole block */
    seq_args(A, q);
    head_fused_tile<RT>(A, (int)blockIdx.x, i0);
}

/* ---- 2'. the head-once form (CLOVER_CUDA_GDN_HEAD_ONCE=1): a block a value head (and sequence), G groups of
 * F_THREADS threads, group g taking the tiles g, g + G, ...; the state, k, v and every q row loaded once ---- */

/* shared memory (floats): q [b][dk], k [b][kp], (pad to 4), S [dk][dv], v [b][dv], then per group p [RT][pst],
 * q * scale [RT][dk], o [RT][dv] */
struct once_layout {
    int pst, kp;
    size_t q, k, s, v, g, gsz, gqs, go, total;
};

__host__ __device__ static inline once_layout once_layout_of(int b, int dk, int dv, int G) {
    once_layout L;
    L.pst = (b + 1 + 3) / 4 * 4;
    L.kp = dk + 1;
    L.q = 0;
    L.k = (size_t)b * dk;
    L.s = (L.k + (size_t)b * L.kp + 3) / 4 * 4;
    L.v = L.s + (size_t)dk * dv;
    L.g = L.v + (size_t)b * dv;
    L.gqs = (size_t)F_RT * L.pst;
    L.go = L.gqs + (size_t)F_RT * dk;
    L.gsz = L.go + (size_t)F_RT * dv;
    L.total = L.g + (size_t)G * L.gsz;
    return L;
}

/* a group's barrier (ids 1 .. G; __syncthreads is 0): the groups walk their tiles independently. Constant ids (a
 * branch uniform in each warp): with an id in a register ptxas reserves all 16 barriers for the block. */
template <int ID>
__device__ __forceinline__ static void bar_named(void) {
    asm volatile("bar.sync %0, %1;" ::"n"(ID), "n"((int)F_THREADS) : "memory");
}
template <int G>
__device__ __forceinline__ static void group_sync(int g) {
    if (G == 1 || g == 0) bar_named<1>();
    else if (G == 2 || g == 1) bar_named<2>();
    else if (g == 2) bar_named<3>();
    else bar_named<4>();
}

template <int G>
__device__ __forceinline__ static void head_once(const fused_args &A, int h) {
    extern __shared__ __align__(16) float sh[];
    const int b = A.b, dk = A.dk, kh = head_key(A, h), tiles = (b + F_RT - 1) / F_RT;
    const int tid = threadIdx.x, g = tid / F_THREADS, t = tid % F_THREADS, lane = t & 31, warp = t / 32;
    const once_layout L = once_layout_of(b, dk, A.dv, G);
    float *gb = sh + L.g + (size_t)g * L.gsz;
    tile_bufs T = {gb, gb + L.gqs, gb + L.go, sh + L.q, sh + L.k, sh + L.s, sh + L.v, L.pst, L.kp};
    pdl_wait(); /* q, k, v are the conv kernel's output */
    pdl_trigger();
    load_q(sh + L.q, A, kh, 0, b, tid, (unsigned)(G * F_THREADS)); /* every row: each group reads its tiles' */
    load_k(sh + L.k, L.kp, A, kh, tid, (unsigned)(G * F_THREADS));
    asm volatile("cp.async.commit_group;" ::: "memory");
    load_sv(sh + L.s, sh + L.v, A, h, tid, (unsigned)(G * F_THREADS)); /* in flight during the first tiles' scores */
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    __syncthreads();
    int tile = g;
    if (tile < tiles) { /* the group's first tile up to its softmax while S and v arrive */
        const int i0 = tile * F_RT, rows = b - i0 < F_RT ? b - i0 : F_RT;
        T.q = sh + L.q + (size_t)i0 * dk;
        tile_scores(A, T, h, i0, rows, t, F_THREADS);
        group_sync<G>(g);
        tile_softmax(T, b + 1, rows, lane, warp);
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads(); /* every thread once, groups without a tile too */
    for (; tile < tiles; tile += G) {
        const int i0 = tile * F_RT, rows = b - i0 < F_RT ? b - i0 : F_RT;
        if (tile != g) {
            T.q = sh + L.q + (size_t)i0 * dk;
            /* the tile before's read-out is past its barrier: p and qsc are free */
            tile_scores(A, T, h, i0, rows, t, F_THREADS);
            group_sync<G>(g);
            tile_softmax(T, b + 1, rows, lane, warp);
            group_sync<G>(g);
        }
        if (A.k128)
            tile_readout<F_RT, 128>(T, b, 128, 128, rows, t);
        else
            tile_readout<F_RT, 0>(T, b, dk, A.dv, rows, t);
        group_sync<G>(g);
        tile_norm(A, T, h, i0, rows, lane, warp); /* (o is rewritten only past the next tile's first barrier) */
    }
}

/* (min blocks 1: without it ptxas held the one-group form to 64 registers and spilled once the dk = dv = 128 steps came) */
template <int G>
__global__ void __launch_bounds__(G *F_THREADS, 1) k_block_head_once(fused_args A) {
    head_once<G>(A, (int)blockIdx.x);
}

template <int G>
__global__ void __launch_bounds__(G *F_THREADS) k_block_head_once_multi(fused_args A, cuda_gdn_block_seqs m) {
    const cuda_gdn_block_seq q = m.seq[blockIdx.z];
    if (q.b <= 0) return; /* the whole block */
    seq_args(A, q);
    head_once<G>(A, (int)blockIdx.x);
}

extern thread_local char g_preview_err[256]; /* gdn_block.cu */

/* ---- the head-once form's switch, group count and launch ---- */
static int g_head_once = INT_MIN, g_head_once_g = INT_MIN;
static unsigned long long g_head_once_launches;
/* 0 never, 1 every pass, 2 (unset: AUTO) stacked passes of 2+ sequences only. Why AUTO (H200, tall29 h1 / h2):
 * 16 stacked diffusion sequences 297 -> 308.6 agg tok/s (+3.6%: 512 blocks instead of 2,048 tiles re-reading each
 * head's state), while a lone preview's 32 blocks on 32 SMs cost it +0.52 ms. Any other value: AUTO. */
extern "C" int cuda_gdn_head_once_on(void) {
    const int v = cuda_env_int(&g_head_once, "CLOVER_CUDA_GDN_HEAD_ONCE", 2);
    return v == 0 || v == 1 ? v : 2;
}
extern "C" void cuda_gdn_head_once_set(int on) {
    __atomic_store_n(&g_head_once, on < 0 ? INT_MIN : on >= 2 ? 2 : on != 0, __ATOMIC_RELAXED);
}
extern "C" void cuda_gdn_head_once_groups_set(int g) {
    __atomic_store_n(&g_head_once_g, g < 0 ? INT_MIN : g, __ATOMIC_RELAXED);
}
extern "C" unsigned long long cuda_gdn_head_once_launches(void) {
    return __atomic_load_n(&g_head_once_launches, __ATOMIC_RELAXED);
}

/* ---- the tile form's rows a tile: 8, or 4 where the 8-row tiles would not give every SM a block (a lone preview:
 * 32 value heads x 4 tiles = 128 blocks on the H100's 132 SMs; ncu, 2026-12-24-pdlrows24: 57% of the kernel in the
 * read-out's dependent chains at 8 warps an SM). CLOVER_CUDA_GDN_HEAD_RT=4|8 forces it; cuda_gdn_head_rt_set: 4, 8,
 * 0 by shape, negative the environment again. Each output's operations do not depend on the tile: the same bits. */
static int g_head_rt = INT_MIN;
extern "C" void cuda_gdn_head_rt_set(int rt) { __atomic_store_n(&g_head_rt, rt < 0 ? INT_MIN : rt, __ATOMIC_RELAXED); }
static int head_rt(int bmax, int nv, int n_seq) {
    const int f = cuda_env_int(&g_head_rt, "CLOVER_CUDA_GDN_HEAD_RT", 0);
    if (f == 4 || f == 8) return f;
    return (long)nv * ((bmax + 7) / 8) * n_seq <= cuda_sm_count() && bmax > 4 ? 4 : 8;
}
template <int RT>
static void head_tile_launch(const fused_args &A, const cuda_gdn_block_seqs *m, int bmax, cudaStream_t st) {
    static int attr_set = 0;
    if (!attr_set) {
        cudaFuncSetAttribute(k_block_head_fused<RT>, cudaFuncAttributeMaxDynamicSharedMemorySize, F_SMEM_MAX);
        cudaFuncSetAttribute(k_block_head_fused_multi<RT>, cudaFuncAttributeMaxDynamicSharedMemorySize, F_SMEM_MAX);
        attr_set = 1;
    }
    const size_t smem = fused_layout_of(bmax, A.dk, A.dv, RT).total * sizeof(float);
    const unsigned tiles = (unsigned)((bmax + RT - 1) / RT);
    if (m)
        pdl_launch(k_block_head_fused_multi<RT>, dim3((unsigned)A.nv, tiles, (unsigned)m->n_seq), dim3(F_THREADS),
                   smem, st, A, *m);
    else
        pdl_launch(k_block_head_fused<RT>, dim3((unsigned)A.nv, tiles), dim3(F_THREADS), smem, st, A);
}

/* The groups of a block of b rows: one a tile up to 4 (3 tiles: 4, a group idle rather than one walking two), or
 * CLOVER_CUDA_GDN_HEAD_ONCE_G=1|2|4; halved while the shared memory does not fit. 0: it never fits (*smem: bytes). */
static int head_once_groups(int b, int dk, int dv, size_t *smem) {
    const int tiles = (b + F_RT - 1) / F_RT, f = cuda_env_int(&g_head_once_g, "CLOVER_CUDA_GDN_HEAD_ONCE_G", 0);
    int G = f == 1 || f == 2 || f == 4 ? f : tiles >= 3 ? 4 : tiles >= 2 ? 2 : 1;
    for (; G >= 1; G /= 2) {
        *smem = once_layout_of(b, dk, dv, G).total * sizeof(float);
        if (*smem <= F_SMEM_MAX) return G;
    }
    return 0;
}

/* k_block_head_once<G> (m NULL: one sequence, a block a value head) or its multi form (grid z a sequence). The
 * carveout asked at its most: one 152 KB block an SM needs more than the default may give. */
template <int G>
static void head_once_launch(const fused_args &A, const cuda_gdn_block_seqs *m, size_t smem, cudaStream_t st) {
    static int attr_set = 0;
    if (!attr_set) {
        cudaFuncSetAttribute(k_block_head_once<G>, cudaFuncAttributeMaxDynamicSharedMemorySize, F_SMEM_MAX);
        cudaFuncSetAttribute(k_block_head_once_multi<G>, cudaFuncAttributeMaxDynamicSharedMemorySize, F_SMEM_MAX);
        cudaFuncSetAttribute(k_block_head_once<G>, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared);
        cudaFuncSetAttribute(k_block_head_once_multi<G>, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared);
        attr_set = 1;
    }
    if (m)
        pdl_launch(k_block_head_once_multi<G>, dim3((unsigned)A.nv, 1, (unsigned)m->n_seq), dim3(G * F_THREADS),
                   smem, st, A, *m);
    else
        pdl_launch(k_block_head_once<G>, dim3((unsigned)A.nv), dim3(G * F_THREADS), smem, st, A);
    __atomic_fetch_add(&g_head_once_launches, 1ull, __ATOMIC_RELAXED);
}

/* The heads' launch of either form: the head-once one when its switch takes this pass (AUTO: a stack of 2+
 * sequences) and its shared memory fits (bmax rows),
 * else the tile one (its 8-row tiles' shared memory checked by the caller; 4-row tiles take less). */
static void heads_launch(const fused_args &A, const cuda_gdn_block_seqs *m, int bmax, cudaStream_t st) {
    size_t smem = 0;
    const int mode = cuda_gdn_head_once_on(), once = mode == 1 || (mode == 2 && m && m->n_seq >= 2);
    const int G = once ? head_once_groups(bmax, A.dk, A.dv, &smem) : 0;
    if (G == 4) return head_once_launch<4>(A, m, smem, st);
    if (G == 2) return head_once_launch<2>(A, m, smem, st);
    if (G == 1) return head_once_launch<1>(A, m, smem, st);
    if (head_rt(bmax, A.nv, m ? m->n_seq : 1) == 4) return head_tile_launch<4>(A, m, bmax, st);
    head_tile_launch<F_RT>(A, m, bmax, st);
}

/* score_dots / tile_readout's unrolled steps at dk = dv = 128 (tile_readout's comment): every real geometry. */
static int k128_of(int dk, int dv) { return dk == 128 && dv == 128; }

/* 1: the shapes or alignments do not fit this form (the caller runs the four-launch one); 0: launched;
 * -1: a launch failed (cuda_preview_last_error says why). */
int gdn_block_fused_launch(float *y, const float *mixed, const float *z, const float *a, const float *ring,
                           const float *state, const cuda_gdn_block_weights *w, const cuda_gdn_dims *d, int b,
                           float ln_ratio, float *work, cudaStream_t st) {
    const int cd = cuda_gdn_conv_dim(d), dk = d->k_dim, dv = d->v_dim, nk = d->n_k_heads;
    const size_t smem = fused_layout_of(b, dk, dv, F_RT).total * sizeof(float);
    if (dk % 4 || dv % 4 || cd % 4 || dv > F_THREADS || F_THREADS % dv || smem > F_SMEM_MAX ||
        ((uintptr_t)work | (uintptr_t)state) % 16)
        return 1;
    const int units = 2 * nk + (cd - 2 * nk * dk + F_VCH - 1) / F_VCH;
    pdl_launch(k_block_conv_l2, dim3((unsigned)((units + 7) / 8), (unsigned)b), dim3(256), 0, st, work, mixed, ring,
               w->conv_w, w->conv_right, cd, d->conv_k, b, nk, dk);
    if (CUDA_LAUNCH_STATUS(g_preview_err, "cuda_gdn_block conv + L2 norm")) return -1;
    fused_args A = {y,  work, z,  a,  state, *w, nk, d->n_v_heads, dk, dv, cd, b, d->tiled, ln_ratio,
                    (float)pow((double)dk, -0.5), d->eps, k128_of(dk, dv)};
    heads_launch(A, NULL, b, st);
    if (CUDA_LAUNCH_STATUS(g_preview_err, "cuda_gdn_block heads + gated norm")) return -1;
    return 0;
}

/* cuda_gdn_block_multi's two launches: 1 when the shapes or alignments do not fit (nothing launched; the caller
 * runs each sequence alone), 0 launched, -1 a launch failed. */
int gdn_block_fused_multi_launch(float *y, const float *mixed, const float *z, const float *a,
                                 const cuda_gdn_block_weights *w, const cuda_gdn_dims *d, const cuda_gdn_block_seqs *m,
                                 float *work, cudaStream_t st) {
    const int cd = cuda_gdn_conv_dim(d), dk = d->k_dim, dv = d->v_dim, nk = d->n_k_heads;
    int bmax = 0;
    bool aligned = ((uintptr_t)work % 16) == 0;
    for (int i = 0; i < m->n_seq; i++) {
        if (m->seq[i].b > bmax) bmax = m->seq[i].b;
        aligned = aligned && ((uintptr_t)m->seq[i].state % 16) == 0;
    }
    if (bmax <= 0) return 0;
    const size_t smem = fused_layout_of(bmax, dk, dv, F_RT).total * sizeof(float);
    if (dk % 4 || dv % 4 || cd % 4 || dv > F_THREADS || F_THREADS % dv || smem > F_SMEM_MAX || !aligned) return 1;
    const int units = 2 * nk + (cd - 2 * nk * dk + F_VCH - 1) / F_VCH;
    pdl_launch(k_block_conv_l2_multi, dim3((unsigned)((units + 7) / 8), (unsigned)bmax, (unsigned)m->n_seq),
               dim3(256), 0, st, work, mixed, w->conv_w, w->conv_right, cd, d->conv_k, nk, dk, *m);
    if (CUDA_LAUNCH_STATUS(g_preview_err, "cuda_gdn_block_multi conv + L2 norm")) return -1;
    fused_args A = {y,  work, z,  a,  NULL, *w, nk, d->n_v_heads, dk, dv, cd, 0, d->tiled, 0.0f,
                    (float)pow((double)dk, -0.5), d->eps, k128_of(dk, dv)};
    heads_launch(A, m, bmax, st);
    if (CUDA_LAUNCH_STATUS(g_preview_err, "cuda_gdn_block_multi heads + gated norm")) return -1;
    return 0;
}
