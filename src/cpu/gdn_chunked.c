/*
 * gdn_chunked.c: the chunked form of the gated delta rule (TRUNK.md 4.7), the
 * scalar oracle. Per value head and chunk of L <= 64 rows (a last short chunk
 * is exactly HF's zero padding: padded rows have g = 0, beta = 0, k = 0 and
 * change nothing), with gam the in-chunk cumulative sum of g:
 *   A    = strictly-lower((beta k) k^T . e^(gam_i - gam_j))
 *   U    = (I + A)^-1 beta v          W = (I + A)^-1 (beta e^gam) k
 *   V'   = U - W S
 *   O    = (q e^gam) S + ((q k^T) . e^(gam_i - gam_j), j <= i) V'
 *   S   <- e^gam_L S + (k e^(gam_L - gam))^T V'
 * (I + A)^-1 is applied by forward substitution. gam is accumulated in double
 * and rounded per row, as torch's CPU cumsum does for float32.
 */
#include <math.h>

#include "cpu/gdn.h"

size_t cpu_gdn_chunked_scratch_floats(const cpu_gdn_dims *d) {
    size_t C = CPU_GDN_CHUNK;
    return 2 * C + C * C + C * d->v_dim + 3 * C * d->k_dim; /* the AVX2 form also keeps k^T */
}

void cpu_gdn_chunked_scalar(float *o, float *state, const float *qkv, const float *g, const float *beta,
                            const cpu_gdn_dims *d, size_t n, size_t h_begin, size_t h_end, float *scratch) {
    const size_t nk = d->n_k_heads, nv = d->n_v_heads, dk = d->k_dim, dv = d->v_dim, cd = cpu_gdn_conv_dim(d);
    const size_t C = CPU_GDN_CHUNK;
    float *gam = scratch;     /* [C] */
    float *dl = gam + C;      /* [C]: e^(gam_L - gam) */
    float *A = dl + C;        /* [C][C]: the UT system, then q k^T decayed */
    float *U = A + C * C;     /* [C][dv]: new values, then V' */
    float *W = U + C * dv;    /* [C][dk]: k_cumdecay */
    float *kb = W + C * dk;   /* [C][dk]: beta k */

    for (size_t h = h_begin; h < h_end; h++) {
        size_t kh = cpu_gdn_key_head(d, h);
        float *S = state + h * dk * dv; /* [dk][dv] */
        for (size_t s0 = 0; s0 < n; s0 += C) {
            size_t L = n - s0 < C ? n - s0 : C;
#define Q_(t) (qkv + (s0 + (t)) * cd + kh * dk)
#define K_(t) (qkv + (s0 + (t)) * cd + nk * dk + kh * dk)
#define V_(t) (qkv + (s0 + (t)) * cd + 2 * nk * dk + h * dv)
#define G_(t) (g[(s0 + (t)) * nv + h])
#define B_(t) (beta[(s0 + (t)) * nv + h])
            double acc = 0.0;
            for (size_t t = 0; t < L; t++) {
                acc += (double)G_(t);
                gam[t] = (float)acc;
            }
            for (size_t t = 0; t < L; t++)
                for (size_t i = 0; i < dk; i++) kb[t * dk + i] = K_(t)[i] * B_(t);
            for (size_t i = 0; i < L; i++) {
                for (size_t j = 0; j < i; j++) {
                    float dot = 0.0f;
                    for (size_t c = 0; c < dk; c++) dot += kb[i * dk + c] * K_(j)[c];
                    A[i * C + j] = dot * expf(gam[i] - gam[j]);
                }
            }
            /* forward substitution: U[i] = beta v_i - sum_j<i A[i][j] U[j]; W likewise */
            for (size_t i = 0; i < L; i++) {
                float eg = expf(gam[i]);
                for (size_t c = 0; c < dv; c++) U[i * dv + c] = V_(i)[c] * B_(i);
                for (size_t c = 0; c < dk; c++) W[i * dk + c] = kb[i * dk + c] * eg;
                for (size_t j = 0; j < i; j++) {
                    float a = A[i * C + j];
                    for (size_t c = 0; c < dv; c++) U[i * dv + c] -= a * U[j * dv + c];
                    for (size_t c = 0; c < dk; c++) W[i * dk + c] -= a * W[j * dk + c];
                }
            }
            /* V' = U - W S */
            for (size_t i = 0; i < L; i++)
                for (size_t c = 0; c < dv; c++) {
                    float ws = 0.0f;
                    for (size_t e = 0; e < dk; e++) ws += W[i * dk + e] * S[e * dv + c];
                    U[i * dv + c] -= ws;
                }
            /* q k^T decayed, j <= i (diagonal included) */
            for (size_t i = 0; i < L; i++)
                for (size_t j = 0; j <= i; j++) {
                    float dot = 0.0f;
                    for (size_t c = 0; c < dk; c++) dot += Q_(i)[c] * K_(j)[c];
                    A[i * C + j] = dot * expf(gam[i] - gam[j]);
                }
            /* O = (q e^gam) S + A V' */
            for (size_t i = 0; i < L; i++) {
                float eg = expf(gam[i]);
                float *ot = o + ((s0 + i) * nv + h) * dv;
                for (size_t c = 0; c < dv; c++) {
                    float inter = 0.0f;
                    for (size_t e = 0; e < dk; e++) inter += (Q_(i)[e] * eg) * S[e * dv + c];
                    float intra = 0.0f;
                    for (size_t j = 0; j <= i; j++) intra += A[i * C + j] * U[j * dv + c];
                    ot[c] = inter + intra;
                }
            }
            /* S = e^gam_L S + (k e^(gam_L - gam))^T V' */
            float gl = gam[L - 1], egl = expf(gl);
            for (size_t i = 0; i < L; i++) dl[i] = expf(gl - gam[i]);
            for (size_t e = 0; e < dk; e++)
                for (size_t c = 0; c < dv; c++) {
                    float upd = 0.0f;
                    for (size_t i = 0; i < L; i++) upd += (K_(i)[e] * dl[i]) * U[i * dv + c];
                    S[e * dv + c] = S[e * dv + c] * egl + upd;
                }
#undef Q_
#undef K_
#undef V_
#undef G_
#undef B_
        }
    }
}
