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
 * TILE (CLOVER_CUDA_GDN_CHUNK_TILE, on by default; the ILP switch wins): NP 1's chains, but a thread computes a small
 * tile of outputs at once in the A / q k^T, V' / O and state phases (ch_tile_*; the forward substitution is NP 1's),
 * so each shared load feeds several FMAs (NP 1: two loads an FMA) and a thread's chains are independent (ncu, H100
 * 2026-12-24: issue and latency of scalar code bound it). The kernel alone on an H100, 32 heads x 128: 32 rows
 * 57 -> 32 us, 150 rows 256 -> 150 us. Bit-identical to NP 1 (test_cuda_gdn): per element the same float operations
 * in the same order and expression shape (the same FMA contraction), no partial sums.
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
/* CLOVER_CUDA_GDN_CHUNK_TILE: the TILE form (on unless "0"; the ILP switch wins); cuda_gdn_chunk_tile_set: as
 * cuda_gdn_chunk_ilp_set. */
static int g_tile = -1;

size_t gdn_chunked_smem_bytes(const cuda_gdn_dims *d) {
    size_t dkp = (size_t)d->k_dim + 1;
    return sizeof(float) * (3 * CC * dkp + CC * CC + (size_t)d->k_dim * CDV + CC * CDV + 4 * CC);
}

/* TILE = 1, the register-tiled phases (NP = 1 only). Each output keeps the float operations of NP 1 in their order:
 * one chain from 0.0f in x order, (a * sc) * b added, so nvcc contracts it to the same FMA; a tile only shares the
 * loads (and a row's a * sc, the same value) among its chains. Rows or columns past the chunk are read at a clamped
 * index (initialised data) and never stored. */
enum {
    AQ_T = (CC / 2) * (CC / 2) / CH_THREADS, /* A / q k^T tiles a thread, at most */
    VO_T = (CC / 2) * (CDV / 2) / CH_THREADS /* V' / O tiles a thread, at most */
};
static_assert(CH_THREADS == 256 && CC == 64 && CDV == 32 && CUDA_GDN_MAX_DK <= 128, "the tiles' thread maps");

/* A (the system) and q k^T over the L x L square, H = ceil(L / 2): tile (ti, tj) < (H, H) holds rows {ti, ti + H} x
 * columns {tj, tj + H} but its upper-right element (j >= H > i) is always masked: 3 elements of A and 3 of q k^T, six
 * chains sharing the loads of k and q of rows ti, ti + H and of k of rows tj, tj + H (a warp: <= 2 consecutive ti,
 * distinct tj, so distinct banks). A is stored (0.0f outside its mask and the tiles, as NP 1); q k^T waits in qk for
 * the forward substitution to be done with A (ch_tile_qk_store). */
__device__ __forceinline__ void ch_tile_aqk(float *A, float (&qk)[AQ_T][3], const float *Ks, const float *Qs,
                                           const float *bet, const float *gam, int L, int dk, int dkp, int tid) {
    const int H = (L + 1) >> 1;
#pragma unroll
    for (int k = 0; k < AQ_T; k++) {
        const int t = tid + k * CH_THREADS;
        if (t >= H * H) break;
        const int ti = t / H, tj = t - ti * H, i1 = ti + H, j1 = tj + H;
        const int r1 = min(i1, L - 1), s1 = min(j1, L - 1); /* rows read; i1 or j1 = L only when masked */
        float a00 = 0.0f, a10 = 0.0f, a11 = 0.0f, q00 = 0.0f, q10 = 0.0f, q11 = 0.0f;
        if (tj <= ti || i1 < L) { /* else every element is masked (q k^T's mask holds A's) */
            const float b0 = bet[ti], b1 = bet[r1];
            const float *k0 = Ks + ti * dkp, *k1 = Ks + r1 * dkp, *q0 = Qs + ti * dkp, *q1 = Qs + r1 * dkp;
            const float *kj0 = Ks + tj * dkp, *kj1 = Ks + s1 * dkp;
#pragma unroll 4
            for (int x = 0; x < dk; x++) {
                const float u0 = kj0[x], u1 = kj1[x];
                const float c0 = k0[x] * b0, c1 = k1[x] * b1, p0 = q0[x], p1 = q1[x]; /* q_i * 1.0f of NP 1 */
                a00 += c0 * u0;
                a10 += c1 * u0;
                a11 += c1 * u1;
                q00 += p0 * u0;
                q10 += p1 * u0;
                q11 += p1 * u1;
            }
        }
        const bool in1 = i1 < L;
        const float d00 = expf(gam[ti] - gam[tj]);
        const float d10 = in1 ? expf(gam[i1] - gam[tj]) : 0.0f, d11 = in1 ? expf(gam[i1] - gam[j1]) : 0.0f;
        A[ti * CC + tj] = tj < ti ? a00 * d00 : 0.0f;
        A[ti * CC + j1] = 0.0f;
        A[i1 * CC + tj] = in1 ? a10 * d10 : 0.0f;
        A[i1 * CC + j1] = in1 && tj < ti ? a11 * d11 : 0.0f;
        qk[k][0] = tj <= ti ? q00 * d00 : 0.0f;
        qk[k][1] = in1 ? q10 * d10 : 0.0f;
        qk[k][2] = in1 && tj <= ti ? q11 * d11 : 0.0f;
    }
    for (int e = tid; e < CC * CC; e += CH_THREADS)
        if (e / CC >= 2 * H || e % CC >= 2 * H) A[e] = 0.0f;
}

/* q k^T into A where ch_tile_aqk's tiles put A (their fourth element and the rest stay 0.0f, as q k^T's) */
__device__ __forceinline__ void ch_tile_qk_store(float *A, const float (&qk)[AQ_T][3], int L, int tid) {
    const int H = (L + 1) >> 1;
#pragma unroll
    for (int k = 0; k < AQ_T; k++) {
        const int t = tid + k * CH_THREADS;
        if (t >= H * H) break;
        const int ti = t / H, tj = t - ti * H;
        A[ti * CC + tj] = qk[k][0];
        A[(ti + H) * CC + tj] = qk[k][1];
        A[(ti + H) * CC + tj + H] = qk[k][2];
    }
}

/* V' = U - W S and O's inter part (q e^gam) S in 2x2 tiles, rows {2 rg, 2 rg + 1} x columns {2 cg, 2 cg + 1}
 * (cg = t mod 16: a warp reads 2 rows, banks distinct, and a float2 of S): eight chains sharing the loads of S. U is
 * updated; inter waits in regs for the new A and V' (ch_tile_o). */
__device__ __forceinline__ void ch_tile_vi(float *U, float (&inter)[VO_T][4], const float *Ws, const float *Qs,
                                          const float *S, const float *eg, int L, int ws, int dk, int dkp, int tid) {
    const int RP = (L + 1) >> 1;
#pragma unroll
    for (int k = 0; k < VO_T; k++) {
        const int t = tid + k * CH_THREADS;
        if (t >= RP * (CDV / 2)) break;
        const int i0 = 2 * (t / (CDV / 2)), c = 2 * (t % (CDV / 2)), i1 = min(i0 + 1, L - 1);
        if (c >= ws) continue;
        const float e0 = eg[i0], e1 = eg[i1];
        const float *w0 = Ws + i0 * dkp, *w1 = Ws + i1 * dkp, *q0 = Qs + i0 * dkp, *q1 = Qs + i1 * dkp;
        float v00 = 0.0f, v01 = 0.0f, v10 = 0.0f, v11 = 0.0f, p00 = 0.0f, p01 = 0.0f, p10 = 0.0f, p11 = 0.0f;
#pragma unroll 4
        for (int x = 0; x < dk; x++) {
            const float2 s = *(const float2 *)(S + x * CDV + c);
            const float a0 = w0[x], a1 = w1[x], b0 = q0[x] * e0, b1 = q1[x] * e1; /* w_i * 1.0f of NP 1 */
            v00 += a0 * s.x;
            v01 += a0 * s.y;
            v10 += a1 * s.x;
            v11 += a1 * s.y;
            p00 += b0 * s.x;
            p01 += b0 * s.y;
            p10 += b1 * s.x;
            p11 += b1 * s.y;
        }
        const bool c1 = c + 1 < ws, r1 = i0 + 1 < L;
        U[i0 * CDV + c] -= v00;
        if (c1) U[i0 * CDV + c + 1] -= v01;
        if (r1) U[i1 * CDV + c] -= v10;
        if (r1 && c1) U[i1 * CDV + c + 1] -= v11;
        inter[k][0] = p00, inter[k][1] = p01, inter[k][2] = p10, inter[k][3] = p11;
    }
}

/* O = inter + A V' on ch_tile_vi's tiles: intra over j <= i, so the row pair shares j <= 2 rg and row 2 rg + 1 adds
 * its last term alone */
__device__ __forceinline__ void ch_tile_o(float *o, const float (&inter)[VO_T][4], const float *A, const float *U,
                                         int L, int ws, size_t orow0, size_t ostride, int tid) {
    const int RP = (L + 1) >> 1;
#pragma unroll
    for (int k = 0; k < VO_T; k++) {
        const int t = tid + k * CH_THREADS;
        if (t >= RP * (CDV / 2)) break;
        const int i0 = 2 * (t / (CDV / 2)), c = 2 * (t % (CDV / 2));
        if (c >= ws) continue;
        const bool c1 = c + 1 < ws, r1 = i0 + 1 < L;
        const float *a0 = A + i0 * CC, *a1 = A + (r1 ? i0 + 1 : i0) * CC;
        float r00 = 0.0f, r01 = 0.0f, r10 = 0.0f, r11 = 0.0f;
#pragma unroll 4
        for (int j = 0; j <= i0; j++) {
            const float2 u = *(const float2 *)(U + j * CDV + c);
            const float b0 = a0[j], b1 = a1[j];
            r00 += b0 * u.x;
            r01 += b0 * u.y;
            r10 += b1 * u.x;
            r11 += b1 * u.y;
        }
        if (r1) {
            const float2 u = *(const float2 *)(U + (i0 + 1) * CDV + c);
            const float b1 = a1[i0 + 1];
            r10 += b1 * u.x;
            r11 += b1 * u.y;
        }
        float *o0 = o + (orow0 + i0) * ostride + c, *o1 = o0 + ostride;
        o0[0] = inter[k][0] + r00;
        if (c1) o0[1] = inter[k][1] + r01;
        if (r1) o1[0] = inter[k][2] + r10;
        if (r1 && c1) o1[1] = inter[k][3] + r11;
    }
}

/* S = e^gam_L S + (k e^(gam_L - gam))^T V' in 4x4 tiles, rows x = tid / 8 + 32 a x columns 4 (tid mod 8) + b: a
 * warp reads 4 rows of k (distinct banks) and float4s of V' and S (a quarter warp a whole row of S) */
__device__ __forceinline__ void ch_tile_s(float *S, const float *Ks, const float *U, const float *gg, float egl,
                                         int L, int ws, int dk, int dkp, int tid) {
    const int c = 4 * (tid & 7), x0 = tid >> 3;
    if (c >= ws) return;
    int xr[4]; /* rows read: x past dk at dk - 1, never stored */
#pragma unroll
    for (int a = 0; a < 4; a++) xr[a] = min(x0 + 32 * a, dk - 1);
    float p[4][4] = {};
    for (int i = 0; i < L; i++) {
        const float4 u = *(const float4 *)(U + i * CDV + c);
        const float g = gg[i];
        const float *kr = Ks + i * dkp;
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const float kx = kr[xr[a]] * g;
            p[a][0] += kx * u.x;
            p[a][1] += kx * u.y;
            p[a][2] += kx * u.z;
            p[a][3] += kx * u.w;
        }
    }
#pragma unroll
    for (int a = 0; a < 4; a++) {
        const int x = x0 + 32 * a;
        if (x >= dk) break;
        float *sr = S + x * CDV + c;
        if (c + 4 <= ws) {
            float4 s = *(float4 *)sr;
            s.x = s.x * egl + p[a][0];
            s.y = s.y * egl + p[a][1];
            s.z = s.z * egl + p[a][2];
            s.w = s.w * egl + p[a][3];
            *(float4 *)sr = s;
        } else {
#pragma unroll
            for (int b = 0; b < 4; b++)
                if (c + b < ws) sr[b] = sr[b] * egl + p[a][b];
        }
    }
}

template <int NP, int TILE = 0>
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
        float qk[AQ_T][3]; /* TILE: q k^T until A is free */
        if constexpr (TILE) {
            ch_tile_aqk(A, qk, Ks, Qs, bet, gam, L, dk, dkp, tid);
        } else {
            /* A[i][j], j < i: ((beta_i k_i) . k_j) e^(gam_i - gam_j) */
            for (int e = tid; e < CC * CC; e += CH_THREADS) {
                int i = e / CC, j = e % CC;
                float val = 0.0f;
                if (i < L && j < i) {
                    val = ch_dot<NP>(Ks + i * dkp, 1, bet[i], Ks + j * dkp, 1, dk) * expf(gam[i] - gam[j]);
                }
                A[e] = val;
            }
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
        if constexpr (TILE) {
            float inter[VO_T][4];
            ch_tile_qk_store(A, qk, L, tid);
            ch_tile_vi(U, inter, Ws, Qs, S, eg, L, ws, dk, dkp, tid);
            __syncthreads();
            ch_tile_o(o + (size_t)h * dv + c0, inter, A, U, L, ws, row0, (size_t)nv * dv, tid);
        } else {
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
        }
        __syncthreads(); /* O read the old S */
        const float gl = gam[L - 1], egl = expf(gl);
        if (tid < L) gg[tid] = expf(gl - gam[tid]);
        __syncthreads();
        /* S = e^gam_L S + (k e^(gam_L - gam))^T V' */
        if constexpr (TILE) {
            ch_tile_s(S, Ks, U, gg, egl, L, ws, dk, dkp, tid);
        } else {
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
    else if (cuda_switch_on(&g_tile, "CLOVER_CUDA_GDN_CHUNK_TILE", 1))
        pdl_launch_rows(gdn_chunked_kernel<1, 1>, grid, dim3(CH_THREADS), smem, (cudaStream_t)stream, o, qkv, b, a,
                        *w, seqs, *d);
    else
        pdl_launch_rows(gdn_chunked_kernel<1>, grid, dim3(CH_THREADS), smem, (cudaStream_t)stream, o, qkv, b, a, *w,
                        seqs, *d);
    return (int)cudaGetLastError();
}

extern "C" void cuda_gdn_chunk_ilp_set(int on) { cuda_switch_set(&g_ilp, on); }

extern "C" void cuda_gdn_chunk_tile_set(int on) { cuda_switch_set(&g_tile, on); }

extern "C" int gdn_chunked_init(size_t max_smem) {
    const cudaError_t e1 =
        cudaFuncSetAttribute(gdn_chunked_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)max_smem);
    const cudaError_t e4 =
        cudaFuncSetAttribute(gdn_chunked_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)max_smem);
    const cudaError_t et =
        cudaFuncSetAttribute(gdn_chunked_kernel<1, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)max_smem);
    return (int)(e1 != cudaSuccess ? e1 : e4 != cudaSuccess ? e4 : et);
}
