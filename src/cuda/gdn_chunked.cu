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
 */
#include <cuda_runtime.h>
#include <math.h>

#include "cuda_gdn.h"

enum { CH_THREADS = 256, CH_WARPS = CH_THREADS / 32, CC = CUDA_GDN_CHUNK, CDV = CUDA_GDN_DV_SLICE };

#include "gdn_internal.h"

size_t gdn_chunked_smem_bytes(const cuda_gdn_dims *d) {
    size_t dkp = (size_t)d->k_dim + 1;
    return sizeof(float) * (3 * CC * dkp + CC * CC + (size_t)d->k_dim * CDV + CC * CDV + 4 * CC);
}

__global__ void __launch_bounds__(CH_THREADS)
    gdn_chunked_kernel(float *o, const float *qkv, const float *b, const float *a, cuda_gdn_weights w,
                       const cuda_gdn_seq *seqs, cuda_gdn_dims d) {
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
                const float bi = bet[i];
                const float *ki = Ks + i * dkp, *kj = Ks + j * dkp;
                float dot = 0.0f;
                for (int c = 0; c < dk; c++) dot += (ki[c] * bi) * kj[c];
                val = dot * expf(gam[i] - gam[j]);
            }
            A[e] = val;
        }
        __syncthreads();
        /* forward substitution, row by row: thread c < ws owns U column c, thread CDV + c owns W column c */
        for (int i = 0; i < L; i++) {
            const float *Ai = A + i * CC;
            if (tid < ws) {
                float u = U[i * CDV + tid] * bet[i]; /* U holds v until row i is solved */
                for (int j = 0; j < i; j++) u -= Ai[j] * U[j * CDV + tid];
                U[i * CDV + tid] = u;
            } else if (tid >= CDV) {
                for (int c = tid - CDV; c < dk; c += CH_THREADS - CDV) {
                    float wv = (Ks[i * dkp + c] * bet[i]) * eg[i];
                    for (int j = 0; j < i; j++) wv -= Ai[j] * Ws[j * dkp + c];
                    Ws[i * dkp + c] = wv;
                }
            }
            __syncthreads();
        }
        /* V' = U - W S */
        for (int e = tid; e < L * CDV; e += CH_THREADS) {
            int i = e / CDV, c = e % CDV;
            if (c >= ws) continue;
            const float *wi = Ws + i * dkp;
            float acc = 0.0f;
            for (int x = 0; x < dk; x++) acc += wi[x] * S[x * CDV + c];
            U[e] -= acc;
        }
        /* A <- (q_i . k_j) e^(gam_i - gam_j), j <= i */
        for (int e = tid; e < CC * CC; e += CH_THREADS) {
            int i = e / CC, j = e % CC;
            float val = 0.0f;
            if (i < L && j <= i) {
                const float *qi = Qs + i * dkp, *kj = Ks + j * dkp;
                float dot = 0.0f;
                for (int c = 0; c < dk; c++) dot += qi[c] * kj[c];
                val = dot * expf(gam[i] - gam[j]);
            }
            A[e] = val;
        }
        __syncthreads();
        /* O = (q e^gam) S + A V' */
        for (int e = tid; e < L * CDV; e += CH_THREADS) {
            int i = e / CDV, c = e % CDV;
            if (c >= ws) continue;
            const float egi = eg[i];
            const float *qi = Qs + i * dkp;
            float inter = 0.0f;
            for (int x = 0; x < dk; x++) inter += (qi[x] * egi) * S[x * CDV + c];
            float intra = 0.0f;
            for (int j = 0; j <= i; j++) intra += A[i * CC + j] * U[j * CDV + c];
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
            float upd = 0.0f;
            for (int i = 0; i < L; i++) upd += (Ks[i * dkp + x] * gg[i]) * U[i * CDV + c];
            S[e] = S[e] * egl + upd;
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
    gdn_chunked_kernel<<<grid, CH_THREADS, gdn_chunked_smem_bytes(d), (cudaStream_t)stream>>>(o, qkv, b, a, *w, seqs,
                                                                                             *d);
    return (int)cudaGetLastError();
}

extern "C" int gdn_chunked_init(size_t max_smem) {
    return (int)cudaFuncSetAttribute(gdn_chunked_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)max_smem);
}
