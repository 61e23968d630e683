/*
 * gdn_chunked_avx2.c: the chunked gated delta rule (see gdn_chunked.c for the
 * algebra) with AVX2+FMA. Every matrix product of a chunk (beta k k^T, q k^T,
 * W S, q S, A V' and k^T V') goes through one register-blocked kernel (4 rows
 * x 16 columns of accumulators, B rows streamed); the forward substitution
 * stays a sequence of row updates. Subnormals are flushed for the call: the
 * in-chunk decays e^gamma of strongly decaying heads otherwise drive whole
 * products through microcode assists (5x slower, measured). Even so, on the
 * CPUs measured this form is 20-40% slower than the recurrence (gdn.h).
 */
#include <math.h>

#include "cpu/gdn.h"
#include "cpu/simd_avx2.h"

/* C[M][N] (row stride ldc) += sign * A B, A(i, k) = A[i*ars + k*acs], B [K][N] (row stride ldb). */
static void gdn_gemm_acc(float *C, size_t ldc, const float *A, size_t ars, size_t acs, const float *B, size_t ldb,
                         size_t M, size_t N, size_t K, float sign) {
    size_t i = 0;
    for (; i + 4 <= M; i += 4) {
        size_t j = 0;
        for (; j + 16 <= N; j += 16) {
            __m256 c[4][2];
            for (int r = 0; r < 4; r++) {
                c[r][0] = _mm256_loadu_ps(C + (i + r) * ldc + j);
                c[r][1] = _mm256_loadu_ps(C + (i + r) * ldc + j + 8);
            }
            for (size_t k = 0; k < K; k++) {
                __m256 b0 = _mm256_loadu_ps(B + k * ldb + j), b1 = _mm256_loadu_ps(B + k * ldb + j + 8);
                for (int r = 0; r < 4; r++) {
                    __m256 a = _mm256_set1_ps(sign * A[(i + r) * ars + k * acs]);
                    c[r][0] = _mm256_fmadd_ps(a, b0, c[r][0]);
                    c[r][1] = _mm256_fmadd_ps(a, b1, c[r][1]);
                }
            }
            for (int r = 0; r < 4; r++) {
                _mm256_storeu_ps(C + (i + r) * ldc + j, c[r][0]);
                _mm256_storeu_ps(C + (i + r) * ldc + j + 8, c[r][1]);
            }
        }
        for (; j + 8 <= N; j += 8) {
            __m256 c[4];
            for (int r = 0; r < 4; r++) c[r] = _mm256_loadu_ps(C + (i + r) * ldc + j);
            for (size_t k = 0; k < K; k++) {
                __m256 b0 = _mm256_loadu_ps(B + k * ldb + j);
                for (int r = 0; r < 4; r++)
                    c[r] = _mm256_fmadd_ps(_mm256_set1_ps(sign * A[(i + r) * ars + k * acs]), b0, c[r]);
            }
            for (int r = 0; r < 4; r++) _mm256_storeu_ps(C + (i + r) * ldc + j, c[r]);
        }
        for (; j < N; j++)
            for (int r = 0; r < 4; r++) {
                float acc = C[(i + r) * ldc + j];
                for (size_t k = 0; k < K; k++) acc += sign * A[(i + r) * ars + k * acs] * B[k * ldb + j];
                C[(i + r) * ldc + j] = acc;
            }
    }
    for (; i < M; i++) {
        float *crow = C + i * ldc;
        for (size_t k = 0; k < K; k++) v8_axpy(crow, sign * A[i * ars + k * acs], B + k * ldb, N);
    }
}

/* row[j] *= e^(gi - gam[j]) for j < jn, zero for jn <= j < L */
static void gdn_decay_row(float *row, float gi, const float *gam, size_t jn, size_t L) {
    __m256 vg = _mm256_set1_ps(gi);
    size_t j = 0;
    for (; j + 8 <= jn; j += 8)
        _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j),
                                                v8_exp(_mm256_sub_ps(vg, _mm256_loadu_ps(gam + j)))));
    for (; j < jn; j++) row[j] *= expf(gi - gam[j]);
    for (; j < L; j++) row[j] = 0.0f;
}

void cpu_gdn_chunked_avx2(float *o, float *state, const float *qkv, const float *g, const float *beta,
                          const cpu_gdn_dims *d, size_t n, size_t h_begin, size_t h_end, float *scratch) {
    const size_t nk = d->n_k_heads, nv = d->n_v_heads, dk = d->k_dim, dv = d->v_dim, cd = cpu_gdn_conv_dim(d);
    const size_t C = CPU_GDN_CHUNK, ldo = nv * dv;
    float *gam = scratch;   /* [C] */
    float *dl = gam + C;    /* [C]: e^(gam_L - gam) */
    float *A = dl + C;      /* [C][C]: (beta k) k^T decayed, then q k^T decayed */
    float *U = A + C * C;   /* [C][dv]: new values, then V' */
    float *W = U + C * dv;  /* [C][dk]: k_cumdecay, then q e^gam */
    float *kb = W + C * dk; /* [C][dk]: beta k, then k e^(gam_L - gam) */
    float *kt = kb + C * dk; /* [dk][C]: k^T of the chunk */
    unsigned csr = v8_ftz_begin();

    for (size_t h = h_begin; h < h_end; h++) {
        size_t kh = cpu_gdn_key_head(d, h);
        float *S = state + h * dk * dv;
        for (size_t s0 = 0; s0 < n; s0 += C) {
            size_t L = n - s0 < C ? n - s0 : C;
#define Q_(t) (qkv + (s0 + (t)) * cd + kh * dk)
#define K_(t) (qkv + (s0 + (t)) * cd + nk * dk + kh * dk)
#define V_(t) (qkv + (s0 + (t)) * cd + 2 * nk * dk + h * dv)
            double acc = 0.0;
            for (size_t t = 0; t < L; t++) {
                acc += (double)g[(s0 + t) * nv + h];
                gam[t] = (float)acc;
            }
            for (size_t t = 0; t < L; t++) {
                float bt = beta[(s0 + t) * nv + h], eg = expf(gam[t]);
                const float *kr = K_(t), *vr = V_(t);
                for (size_t c = 0; c < dk; c++) {
                    kb[t * dk + c] = kr[c] * bt;
                    W[t * dk + c] = kb[t * dk + c] * eg;
                    kt[c * C + t] = kr[c];
                }
                for (size_t c = 0; c < dv; c++) U[t * dv + c] = vr[c] * bt;
            }
            /* A = strictly-lower((beta k) k^T . decay), then forward substitution */
            for (size_t i = 0; i < L * C; i++) A[i] = 0.0f;
            gdn_gemm_acc(A, C, kb, dk, 1, kt, C, L, L, dk, 1.0f);
            for (size_t i = 0; i < L; i++) gdn_decay_row(A + i * C, gam[i], gam, i, L);
            for (size_t i = 1; i < L; i++) {
                for (size_t j = 0; j < i; j++) {
                    float a = A[i * C + j];
                    v8_axpy(U + i * dv, -a, U + j * dv, dv);
                    v8_axpy(W + i * dk, -a, W + j * dk, dk);
                }
            }
            /* V' = U - W S */
            gdn_gemm_acc(U, dv, W, dk, 1, S, dv, L, dv, dk, -1.0f);
            /* q k^T decayed (diagonal included), q e^gam into W, k e^(gam_L - gam) into kb */
            float gl = gam[L - 1];
            for (size_t i = 0; i < L * C; i++) A[i] = 0.0f;
            for (size_t i = 0; i < L; i++) {
                const float *qi = Q_(i), *ki = K_(i);
                float eg = expf(gam[i]);
                dl[i] = expf(gl - gam[i]);
                for (size_t c = 0; c < dk; c++) {
                    W[i * dk + c] = qi[c] * eg;
                    kb[i * dk + c] = ki[c] * dl[i];
                }
            }
            gdn_gemm_acc(A, C, Q_(0), cd, 1, kt, C, L, L, dk, 1.0f); /* q rows straight from qkv */
            for (size_t i = 0; i < L; i++) gdn_decay_row(A + i * C, gam[i], gam, i + 1, L);
            /* O = (q e^gam) S + A V' */
            float *o0 = o + (s0 * nv + h) * dv;
            for (size_t i = 0; i < L; i++)
                for (size_t c = 0; c < dv; c++) o0[i * ldo + c] = 0.0f;
            gdn_gemm_acc(o0, ldo, W, dk, 1, S, dv, L, dv, dk, 1.0f);
            gdn_gemm_acc(o0, ldo, A, C, 1, U, dv, L, dv, L, 1.0f);
            /* S = e^gam_L S + (k e^(gam_L - gam))^T V' */
            v8_scale(S, expf(gl), dk * dv);
            gdn_gemm_acc(S, dv, kb, 1, dk, U, dv, dk, dv, L, 1.0f);
#undef Q_
#undef K_
#undef V_
        }
    }
    v8_ftz_end(csr);
}
