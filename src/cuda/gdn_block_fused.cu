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
 */
#include <math.h>
#include <stdint.h>

#include "cuda_check.h"
#include "cuda_pdl.cuh"
#include "cuda_preview.h"
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
};

/* shared memory layout (floats): p [RT][pst], q [RT][dk], q * scale [RT][dk], k [b][dk + 1], (pad to 4),
 * S [dk][dv], v [b][dv], o [RT][dv] */
struct fused_layout {
    int pst, kp;
    size_t q, qs, k, s, v, o, total;
};

__host__ __device__ static inline fused_layout fused_layout_of(int b, int dk, int dv) {
    fused_layout L;
    L.pst = (b + 1 + 3) / 4 * 4;
    L.kp = dk + 1;
    L.q = (size_t)F_RT * L.pst;
    L.qs = L.q + (size_t)F_RT * dk;
    L.k = L.qs + (size_t)F_RT * dk;
    L.s = (L.k + (size_t)b * L.kp + 3) / 4 * 4;
    L.v = L.s + (size_t)dk * dv;
    L.o = L.v + (size_t)b * dv;
    L.total = L.o + (size_t)F_RT * dv;
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

/* Value head h, rows i0 .. i0 + F_RT - 1 of A's block (the kernel's body). */
__device__ __forceinline__ static void head_fused_tile(const fused_args &A, int h, int i0) {
    extern __shared__ __align__(16) float sh[];
    const int b = A.b, bp = b + 1;
    const int rows = b - i0 < F_RT ? b - i0 : F_RT;
    const int kh = A.tiled ? h % A.nk : h / (A.nv / A.nk);
    const int dk = A.dk, dv = A.dv, cd = A.cd, tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
    const fused_layout L = fused_layout_of(b, dk, dv);
    float *p = sh, *qs = sh + L.q, *qsc = sh + L.qs, *ks = sh + L.k, *Ss = sh + L.s, *Vs = sh + L.v, *os = sh + L.o;
    const int pst = L.pst, kp = L.kp;
    pdl_wait(); /* q, k, v are the conv kernel's output */
    pdl_trigger();
    /* group 0: the tile's q rows, the block's k rows (for the scores) */
    for (int idx = tid; idx < rows * dk / 4; idx += blockDim.x) {
        const int ii = idx / (dk / 4), t = idx % (dk / 4) * 4;
        cp_async16(qs + ii * dk + t, A.qkv + (size_t)(i0 + ii) * cd + (size_t)kh * dk + t);
    }
    for (int idx = tid; idx < b * dk; idx += blockDim.x) {
        const int j = idx / dk, t = idx % dk;
        cp_async4(ks + j * kp + t, A.qkv + (size_t)j * cd + (size_t)A.nk * dk + (size_t)kh * dk + t);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    /* group 1: the head's state and the block's v rows (for the read-out), in flight during the scores */
    const float *S = A.state + (size_t)h * dk * dv;
    for (int idx = tid; idx < dk * dv / 4; idx += blockDim.x) cp_async16(Ss + idx * 4, S + (size_t)idx * 4);
    for (int idx = tid; idx < b * dv / 4; idx += blockDim.x) {
        const int j = idx / (dv / 4), c = idx % (dv / 4) * 4;
        cp_async16(Vs + j * dv + c, A.qkv + (size_t)j * cd + 2 * (size_t)A.nk * dk + (size_t)h * dv + c);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    __syncthreads();
    const float ls = A.w.logit_scale[h];
    for (int idx = tid; idx < rows * dk; idx += blockDim.x) qsc[idx] = qs[idx] * A.scale;
    for (int idx = tid; idx < rows * b; idx += blockDim.x) { /* scores: sequential over t, as the oracle */
        const int ii = idx / b, j = idx % b;
        const float *qi = qs + ii * dk, *kj = ks + j * kp;
        float dot = 0.0f;
        for (int t = 0; t < dk; t += 4) {
            const float4 q4 = *(const float4 *)(qi + t);
            dot += q4.x * kj[t];
            dot += q4.y * kj[t + 1];
            dot += q4.z * kj[t + 2];
            dot += q4.w * kj[t + 3];
        }
        p[ii * pst + j] = ls * dot;
    }
    for (int ii = tid; ii < rows; ii += blockDim.x) {
        const int i = i0 + ii;
        const float g = A.w.ssm_a[h] * softplus_f(A.a[(size_t)i * A.nv + h] + A.w.dt_bias[h]);
        p[ii * pst + b] = (A.w.history_bias[h] + A.w.history_c[h] * g) + A.ln_ratio;
    }
    __syncthreads();
    for (int ii = warp; ii < rows; ii += F_WARPS) { /* the softmax over b + 1 slots, a warp a row */
        float *s = p + ii * pst;
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
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    /* read-out: a thread owns column c for the rows rg, rg + NR, ... (k_block_head_s's split and sums) */
    const int NR = F_THREADS / dv, c = tid % dv, rg = tid / dv;
    if (rg < NR) {
        float u[F_RT], acc[F_RT];
#pragma unroll
        for (int r = 0; r < F_RT; r++) u[r] = 0.0f, acc[r] = 0.0f;
        for (int t = 0; t < dk; t += 4) {
            const float s0 = Ss[t * dv + c], s1 = Ss[(t + 1) * dv + c], s2 = Ss[(t + 2) * dv + c],
                        s3 = Ss[(t + 3) * dv + c];
#pragma unroll
            for (int r = 0; r < F_RT; r++) {
                const int ii = rg + r * NR;
                if (r * NR < F_RT && ii < rows) {
                    const float4 q4 = *(const float4 *)(qsc + ii * dk + t);
                    u[r] += s0 * q4.x;
                    u[r] += s1 * q4.y;
                    u[r] += s2 * q4.z;
                    u[r] += s3 * q4.w;
                }
            }
        }
        int j = 0;
        for (; j + 4 <= b; j += 4) {
            const float v0 = Vs[j * dv + c], v1 = Vs[(j + 1) * dv + c], v2 = Vs[(j + 2) * dv + c],
                        v3 = Vs[(j + 3) * dv + c];
#pragma unroll
            for (int r = 0; r < F_RT; r++) {
                const int ii = rg + r * NR;
                if (r * NR < F_RT && ii < rows) {
                    const float4 p4 = *(const float4 *)(p + ii * pst + j);
                    acc[r] += p4.x * v0;
                    acc[r] += p4.y * v1;
                    acc[r] += p4.z * v2;
                    acc[r] += p4.w * v3;
                }
            }
        }
        for (; j < b; j++) {
            const float vv = Vs[j * dv + c];
#pragma unroll
            for (int r = 0; r < F_RT; r++) {
                const int ii = rg + r * NR;
                if (r * NR < F_RT && ii < rows) acc[r] += p[ii * pst + j] * vv;
            }
        }
#pragma unroll
        for (int r = 0; r < F_RT; r++) {
            const int ii = rg + r * NR;
            if (r * NR < F_RT && ii < rows) os[ii * dv + c] = acc[r] + p[ii * pst + b] * u[r];
        }
    }
    __syncthreads();
    /* gated RMSNorm, a warp a row: gdn_gated_norm_kernel's sums (GN_THREADS threads: per thread its columns in
     * order, a xor tree per warp, the warps' sums in order) and its output expression */
    for (int ii = warp; ii < rows; ii += F_WARPS) {
        const float *o = os + ii * dv;
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

__global__ void __launch_bounds__(F_THREADS) k_block_head_fused(fused_args A) {
    head_fused_tile(A, (int)blockIdx.x, (int)blockIdx.y * F_RT);
}

/* Every sequence of a stacked preview (grid z): A's pointers at the pass's row 0, moved to the sequence's rows;
 * its own state, row count and ln_ratio. Shared memory is sized for the largest block; a smaller one's layout
 * (fused_layout_of of its own b) fits inside it, and the arithmetic does not depend on where. */
__global__ void __launch_bounds__(F_THREADS) k_block_head_fused_multi(fused_args A, cuda_gdn_block_seqs m) {
    const cuda_gdn_block_seq q = m.seq[blockIdx.z];
    const int i0 = (int)blockIdx.y * F_RT;
    if (i0 >= q.b) return; /* the whole block */
    const size_t zw = (size_t)A.nv * A.dv;
    A.y += (size_t)q.row0 * zw;
    A.qkv += (size_t)q.row0 * A.cd;
    A.z += (size_t)q.row0 * zw;
    A.a += (size_t)q.row0 * A.nv;
    A.state = q.state;
    A.b = q.b;
    A.ln_ratio = q.ln_ratio;
    head_fused_tile(A, (int)blockIdx.x, i0);
}

extern thread_local char g_preview_err[256]; /* gdn_block.cu */

/* 1: the shapes or alignments do not fit this form (the caller runs the four-launch one); 0: launched;
 * -1: a launch failed (cuda_preview_last_error says why). */
int gdn_block_fused_launch(float *y, const float *mixed, const float *z, const float *a, const float *ring,
                           const float *state, const cuda_gdn_block_weights *w, const cuda_gdn_dims *d, int b,
                           float ln_ratio, float *work, cudaStream_t st) {
    const int cd = cuda_gdn_conv_dim(d), dk = d->k_dim, dv = d->v_dim, nk = d->n_k_heads;
    const fused_layout L = fused_layout_of(b, dk, dv);
    const size_t smem = L.total * sizeof(float);
    if (dk % 4 || dv % 4 || cd % 4 || dv > F_THREADS || F_THREADS % dv || smem > F_SMEM_MAX ||
        ((uintptr_t)work | (uintptr_t)state) % 16)
        return 1;
    static int attr_set = 0;
    if (!attr_set) {
        cudaFuncSetAttribute(k_block_head_fused, cudaFuncAttributeMaxDynamicSharedMemorySize, F_SMEM_MAX);
        attr_set = 1;
    }
    const int units = 2 * nk + (cd - 2 * nk * dk + F_VCH - 1) / F_VCH;
    pdl_launch(k_block_conv_l2, dim3((unsigned)((units + 7) / 8), (unsigned)b), dim3(256), 0, st, work, mixed, ring,
               w->conv_w, w->conv_right, cd, d->conv_k, b, nk, dk);
    if (CUDA_LAUNCH_STATUS(g_preview_err, "cuda_gdn_block conv + L2 norm")) return -1;
    fused_args A = {y,  work, z,  a,  state, *w, nk, d->n_v_heads, dk, dv, cd, b, d->tiled, ln_ratio,
                    (float)pow((double)dk, -0.5), d->eps};
    pdl_launch(k_block_head_fused, dim3((unsigned)d->n_v_heads, (unsigned)((b + F_RT - 1) / F_RT)), dim3(F_THREADS),
               smem, st, A);
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
    const fused_layout L = fused_layout_of(bmax, dk, dv);
    const size_t smem = L.total * sizeof(float);
    if (dk % 4 || dv % 4 || cd % 4 || dv > F_THREADS || F_THREADS % dv || smem > F_SMEM_MAX || !aligned) return 1;
    static int attr_set = 0;
    if (!attr_set) {
        cudaFuncSetAttribute(k_block_head_fused_multi, cudaFuncAttributeMaxDynamicSharedMemorySize, F_SMEM_MAX);
        attr_set = 1;
    }
    const int units = 2 * nk + (cd - 2 * nk * dk + F_VCH - 1) / F_VCH;
    pdl_launch(k_block_conv_l2_multi, dim3((unsigned)((units + 7) / 8), (unsigned)bmax, (unsigned)m->n_seq),
               dim3(256), 0, st, work, mixed, w->conv_w, w->conv_right, cd, d->conv_k, nk, dk, *m);
    if (CUDA_LAUNCH_STATUS(g_preview_err, "cuda_gdn_block_multi conv + L2 norm")) return -1;
    fused_args A = {y,  work, z,  a,  NULL, *w, nk, d->n_v_heads, dk, dv, cd, 0, d->tiled, 0.0f,
                    (float)pow((double)dk, -0.5), d->eps};
    pdl_launch(k_block_head_fused_multi,
               dim3((unsigned)d->n_v_heads, (unsigned)((bmax + F_RT - 1) / F_RT), (unsigned)m->n_seq),
               dim3(F_THREADS), smem, st, A, *m);
    if (CUDA_LAUNCH_STATUS(g_preview_err, "cuda_gdn_block_multi heads + gated norm")) return -1;
    return 0;
}
