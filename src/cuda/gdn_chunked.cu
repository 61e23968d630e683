/*
 * gdn_chunked.cu: the chunked form of step 2 of cuda_gdn.h (TRUNK.md 4.7),
 * the prompt path. One block per (value head, slice of CDV value columns,
 * sequence) walks the sequence's chunks of 64 rows in order; its slice of S
 * [dk][CDV] stays in shared memory across chunks. Per chunk of L rows, with
 * gam the in-chunk cumsum of g (in double, rounded per row, as the CPU):
 *   A  = strictly-lower((beta k) k^T . e^(gam_i - gam_j))
 *   U  = (I + A)^-1 beta v,  W = (I + A)^-1 (beta e^gam) k  (forward substitution)
 *   V' = U - W S
 *   O  = (q e^gam) S + ((q k^T) . e^(gam_i - gam_j), j <= i) V'
 *   S <- e^gam_L S + (k e^(gam_L - gam))^T V'
 * Every product splits along the value columns, so slices are independent;
 * A and W (value-free) are recomputed by each slice's block. The operations
 * and their order per element follow src/cpu/gdn_chunked.c, so the two
 * differ by reassociation of the dot products only.
 * Shared-memory rows of k, q and W are padded to dk + 1 floats so the warps
 * that read one column of many rows hit distinct banks.
 * NP: the partial sums of every dot product and running sum. 1 is the order
 * above, one chain an element; 4 (CLOVER_CUDA_GDN_CHUNK_ILP=1) splits each into
 * independent partials (4 over dk or a chunk's rows, 2 over the substitution's
 * earlier rows) added at the end: at one block of 8 warps an SM the dependent
 * FMA chains, not the memory, bound this kernel (ncu, H200 2026-12-05: a 32-row
 * commit's GDN layer 82 us, issue 32% active, "wait" the top stall). Only the
 * reassociation changes (test_cuda_gdn: 1e-5 against the CPU's scalar form).
 */
#include <cuda_runtime.h>
#include <math.h>

#include "cuda_gdn.h"
#include "cuda_pdl.cuh"

enum { CH_THREADS = 256, CH_WARPS = CH_THREADS / 32, CC = CUDA_GDN_CHUNK, CDV = CUDA_GDN_DV_SLICE };

/* sum over x < n of (a[x * sa] * sc) * b[x * sb]: NP 1 one chain in x order; 4 the partials of x mod 4, then
 * (p0 + p1) + (p2 + p3) */
template <int NP>
__device__ __forceinline__ float ch_dot(const float *a, int sa, float sc, const float *b, int sb, int n) {
    float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
    int x = 0;
    if (NP == 4)
        for (; x + 4 <= n; x += 4) {
            p0 += (a[x * sa] * sc) * b[x * sb];
            p1 += (a[(x + 1) * sa] * sc) * b[(x + 1) * sb];
            p2 += (a[(x + 2) * sa] * sc) * b[(x + 2) * sb];
            p3 += (a[(x + 3) * sa] * sc) * b[(x + 3) * sb];
        }
    for (; x < n; x++) p0 += (a[x * sa] * sc) * b[x * sb];
    return NP == 4 ? (p0 + p1) + (p2 + p3) : p0;
}

/* v - sum over j < i of a[j] * b[j * sb]: NP 1 one chain (v, then each term subtracted in j order); else the
 * even and odd terms in two partials, subtracted together */
template <int NP>
__device__ __forceinline__ float ch_sub(float v, const float *a, const float *b, int sb, int i) {
    if (NP == 1) {
        for (int j = 0; j < i; j++) v -= a[j] * b[j * sb];
        return v;
    }
    float s0 = 0.0f, s1 = 0.0f;
    int j = 0;
    for (; j + 2 <= i; j += 2) s0 += a[j] * b[j * sb], s1 += a[j + 1] * b[(j + 1) * sb];
    if (j < i) s0 += a[j] * b[j * sb];
    return v - (s0 + s1);
}

#include "gdn_internal.h"
#include "cuda_switch.h"

/* CLOVER_CUDA_GDN_CHUNK_ILP=1: the kernel's NP = 4 form (off by default: unverified on a device when written,
 * 2026-12-05); cuda_gdn_chunk_ilp_set: 1/0 on/off, negative: the environment again. */
static int g_ilp = -1;

size_t gdn_chunked_smem_bytes(const cuda_gdn_dims *d) {
    size_t dkp = (size_t)d->k_dim + 1;
    return sizeof(float) * (3 * CC * dkp + CC * CC + (size_t)d->k_dim * CDV + CC * CDV + 4 * CC);
}

template <int NP>
__global__ void __launch_bounds__(CH_THREADS)
    gdn_chunked_kernel(float *o, const float *qkv, const float *b, const float *a, cuda_gdn_weights w,
                       const cuda_gdn_seq *seqs, cuda_gdn_dims d) {
    pdl_wait(); /* q, k, v, a, b and the state are earlier kernels' (cuda_pdl.cuh) */
    pdl_trigger();
    const cuda_gdn_seq sq = seqs[blockIdx.z];
    if (sq.n <= 0) return;
    const int h = blockIdx.x, c0 = blockIdx.y * CDV;
    const int nk = d.n_k_heads, nv = d.n_v_heads, dk = d.k_dim, dv = d.v_dim, dkp = dk + 1;
    const int cd = 2 * nk * dk + nv * dv, ws = min(CDV, dv - c0);
    const int kh = d.tiled ? h % nk : h / (nv / nk);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    extern __shared__ float smem[];
    float *Ks = smem;            /* [CC][dkp] normed k */
    float *Qs = Ks + CC * dkp;   /* [CC][dkp] normed, scaled q */
    float *Ws = Qs + CC * dkp;   /* [CC][dkp] k_cumdecay */
    float *A = Ws + CC * dkp;    /* [CC][CC] the system, then q k^T decayed */
    float *S = A + CC * CC;      /* [dk][CDV] */
    float *U = S + dk * CDV;     /* [CC][CDV] new values, then V' */
    float *gam = U + CC * CDV;   /* [CC] */
    float *eg = gam + CC;        /* [CC] e^gam */
    float *bet = eg + CC;        /* [CC] beta */
    float *gg = bet + CC;        /* [CC] g, then e^(gam_L - gam) */

    float *Sg = sq.state + (size_t)h * dk * dv;
    for (int e = tid; e < dk * CDV; e += CH_THREADS) {
        int i = e / CDV, c = e % CDV;
        S[e] = c < ws ? Sg[(size_t)i * dv + c0 + c] : 0.0f;
    }
    const float scale = (float)pow((double)dk, -0.5);

    for (int s0 = 0; s0 < sq.n; s0 += CC) {
        const int L = min(CC, sq.n - s0);
        const size_t row0 = (size_t)sq.row0 + s0;
        __syncthreads(); /* the previous chunk is done with everything */
        /* q, k and the v slice of the chunk into shared memory with every
         * thread (many loads in flight), then each row L2-normed by one warp */
        for (int e = tid; e < L * dk; e += CH_THREADS) {
            const int t = e / dk, i = e % dk;
            const float *xr = qkv + (row0 + t) * cd;
            Qs[t * dkp + i] = xr[kh * dk + i];
            Ks[t * dkp + i] = xr[nk * dk + kh * dk + i];
        }
        for (int e = tid; e < L * CDV; e += CH_THREADS) {
            const int t = e / CDV, c = e % CDV;
            U[e] = c < ws ? qkv[(row0 + t) * cd + 2 * nk * dk + (size_t)h * dv + c0 + c] : 0.0f;
        }
        __syncthreads();
        for (int t = warp; t < L; t += CH_WARPS) {
            float sq_ = 0.0f, sk = 0.0f;
            for (int i = lane; i < dk; i += 32) {
                float qv = Qs[t * dkp + i], kv = Ks[t * dkp + i];
                sq_ += qv * qv;
                sk += kv * kv;
            }
            for (int o_ = 16; o_ > 0; o_ >>= 1) {
                sq_ += __shfl_xor_sync(0xffffffffu, sq_, o_);
                sk += __shfl_xor_sync(0xffffffffu, sk, o_);
            }
            const float iq = 1.0f / sqrtf(sq_ + 1e-6f), ik = 1.0f / sqrtf(sk + 1e-6f);
            for (int i = lane; i < dk; i += 32) {
                Qs[t * dkp + i] = (Qs[t * dkp + i] * iq) * scale;
                Ks[t * dkp + i] = Ks[t * dkp + i] * ik;
            }
        }
        if (tid < L) {
            const size_t gi = (row0 + tid) * nv + h;
            const float aa = a[gi] + w.dt_bias[h];
            bet[tid] = 1.0f / (1.0f + expf(-b[gi]));
            gg[tid] = w.ssm_a[h] * (aa > 20.0f ? aa : log1pf(expf(aa)));
        }
        __syncthreads();
        if (tid == 0) {
            double acc = 0.0;
            for (int t = 0; t < L; t++) {
                acc += (double)gg[t];
                gam[t] = (float)acc;
            }
        }
        __syncthreads();
        if (tid < L) eg[tid] = expf(gam[tid]);
        /* A[i][j], j < i: ((beta_i k_i) . k_j) e^(gam_i - gam_j) */
        for (int e = tid; e < CC * CC; e += CH_THREADS) {
            int i = e / CC, j = e % CC;
            float val = 0.0f;
            if (i < L && j < i) {
                val = ch_dot<NP>(Ks + i * dkp, 1, bet[i], Ks + j * dkp, 1, dk) * expf(gam[i] - gam[j]);
            }
            A[e] = val;
        }
        __syncthreads();
        /* forward substitution, row by row: thread c < ws owns U column c, thread CDV + c owns W column c */
        for (int i = 0; i < L; i++) {
            const float *Ai = A + i * CC;
            if (tid < ws) {
                /* U holds v until row i is solved */
                U[i * CDV + tid] = ch_sub<NP>(U[i * CDV + tid] * bet[i], Ai, U + tid, CDV, i);
            } else if (tid >= CDV) {
                for (int c = tid - CDV; c < dk; c += CH_THREADS - CDV) {
                    Ws[i * dkp + c] = ch_sub<NP>((Ks[i * dkp + c] * bet[i]) * eg[i], Ai, Ws + c, dkp, i);
                }
            }
            __syncthreads();
        }
        /* V' = U - W S */
        for (int e = tid; e < L * CDV; e += CH_THREADS) {
            int i = e / CDV, c = e % CDV;
            if (c >= ws) continue;
            U[e] -= ch_dot<NP>(Ws + i * dkp, 1, 1.0f, S + c, CDV, dk);
        }
        /* A <- (q_i . k_j) e^(gam_i - gam_j), j <= i */
        for (int e = tid; e < CC * CC; e += CH_THREADS) {
            int i = e / CC, j = e % CC;
            float val = 0.0f;
            if (i < L && j <= i) {
                val = ch_dot<NP>(Qs + i * dkp, 1, 1.0f, Ks + j * dkp, 1, dk) * expf(gam[i] - gam[j]);
            }
            A[e] = val;
        }
        __syncthreads();
        /* O = (q e^gam) S + A V' */
        for (int e = tid; e < L * CDV; e += CH_THREADS) {
            int i = e / CDV, c = e % CDV;
            if (c >= ws) continue;
            const float inter = ch_dot<NP>(Qs + i * dkp, 1, eg[i], S + c, CDV, dk);
            const float intra = ch_dot<NP>(A + i * CC, 1, 1.0f, U + c, CDV, i + 1);
            o[((row0 + i) * nv + h) * dv + c0 + c] = inter + intra;
        }
        __syncthreads(); /* O read the old S */
        const float gl = gam[L - 1], egl = expf(gl);
        if (tid < L) gg[tid] = expf(gl - gam[tid]);
        __syncthreads();
        /* S = e^gam_L S + (k e^(gam_L - gam))^T V' */
        for (int e = tid; e < dk * CDV; e += CH_THREADS) {
            int x = e / CDV, c = e % CDV;
            if (c >= ws) continue;
            float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
            int i = 0;
            if (NP == 4)
                for (; i + 4 <= L; i += 4) {
                    p0 += (Ks[i * dkp + x] * gg[i]) * U[i * CDV + c];
                    p1 += (Ks[(i + 1) * dkp + x] * gg[i + 1]) * U[(i + 1) * CDV + c];
                    p2 += (Ks[(i + 2) * dkp + x] * gg[i + 2]) * U[(i + 2) * CDV + c];
                    p3 += (Ks[(i + 3) * dkp + x] * gg[i + 3]) * U[(i + 3) * CDV + c];
                }
            for (; i < L; i++) p0 += (Ks[i * dkp + x] * gg[i]) * U[i * CDV + c];
            S[e] = S[e] * egl + (NP == 4 ? (p0 + p1) + (p2 + p3) : p0);
        }
    }
    __syncthreads();
    for (int e = tid; e < dk * CDV; e += CH_THREADS) {
        int i = e / CDV, c = e % CDV;
        if (c < ws) Sg[(size_t)i * dv + c0 + c] = S[e];
    }
}

extern "C" int cuda_gdn_chunked(float *o, const float *qkv, const float *b, const float *a,
                                const cuda_gdn_weights *w, const cuda_gdn_seq *seqs, int n_seq,
                                const cuda_gdn_dims *d, void *stream) {
    if (cuda_gdn_dims_check(d, NULL, 0) != 0 || n_seq < 0 || n_seq > 65535) return CUDA_GDN_EINVAL;
    if (n_seq == 0) return 0;
    dim3 grid((unsigned)d->n_v_heads, (unsigned)((d->v_dim + CDV - 1) / CDV), (unsigned)n_seq);
    const size_t smem = gdn_chunked_smem_bytes(d);
    if (cuda_switch_on(&g_ilp, "CLOVER_CUDA_GDN_CHUNK_ILP", 0))
        pdl_launch_rows(gdn_chunked_kernel<4>, grid, dim3(CH_THREADS), smem, (cudaStream_t)stream, o, qkv, b, a, *w,
                        seqs, *d);
    else
        pdl_launch_rows(gdn_chunked_kernel<1>, grid, dim3(CH_THREADS), smem, (cudaStream_t)stream, o, qkv, b, a, *w,
                        seqs, *d);
    return (int)cudaGetLastError();
}

extern "C" void cuda_gdn_chunk_ilp_set(int on) { cuda_switch_set(&g_ilp, on); }

extern "C" int gdn_chunked_init(size_t max_smem) {
    const cudaError_t e1 =
        cudaFuncSetAttribute(gdn_chunked_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)max_smem);
    const cudaError_t e4 =
        cudaFuncSetAttribute(gdn_chunked_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)max_smem);
    return (int)(e1 != cudaSuccess ? e1 : e4);
}
