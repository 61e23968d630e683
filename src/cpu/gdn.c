/* gdn.c: the scalar oracles of the GDN conv, q/k norm, gates and recurrence; the dispatch; the whole mixer. */
#include "cpu/gdn.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "cpu/act.h"
#include "cpu/cpu_simd.h"
#include "cpu/norm.h"

int cpu_gdn_dims_check(const cpu_gdn_dims *d, clover_error *err) {
    if (d->n_k_heads == 0 || d->n_v_heads == 0 || d->k_dim == 0 || d->v_dim == 0 || d->conv_k == 0)
        return error_set(err, CLOVER_E_FORMAT,
                         "gated deltanet: key heads %zu, value heads %zu, key dim %zu, value dim %zu, conv kernel %zu: "
                         "all must be >= 1",
                         d->n_k_heads, d->n_v_heads, d->k_dim, d->v_dim, d->conv_k);
    if (d->n_v_heads % d->n_k_heads != 0)
        return error_set(err, CLOVER_E_FORMAT, "gated deltanet: %zu value heads is not a multiple of %zu key heads",
                         d->n_v_heads, d->n_k_heads);
    if (d->order != CPU_GDN_TILED && d->order != CPU_GDN_GROUPED)
        return error_set(err, CLOVER_E_INVALID, "gated deltanet: unknown value-head order %d", (int)d->order);
    if (!(d->eps >= 0.0f))
        return error_set(err, CLOVER_E_FORMAT, "gated deltanet: norm eps %g must be >= 0", (double)d->eps);
    return CLOVER_OK;
}

void cpu_gdn_ring_advance(float *ring, const float *x, size_t conv_dim, size_t K, size_t n) {
    size_t keep = K - 1;
    if (keep == 0) return;
    if (n >= keep) {
        memcpy(ring, x + (n - keep) * conv_dim, keep * conv_dim * sizeof *ring);
    } else {
        memmove(ring, ring + n * conv_dim, (keep - n) * conv_dim * sizeof *ring);
        memcpy(ring + (keep - n) * conv_dim, x, n * conv_dim * sizeof *ring);
    }
}

void cpu_gdn_conv_scalar(float *y, const float *x, float *ring, const float *w, size_t conv_dim, size_t K,
                         size_t n) {
    size_t keep = K - 1;
    for (size_t t = 0; t < n; t++) {
        for (size_t c = 0; c < conv_dim; c++) {
            float acc = 0.0f;
            for (size_t j = 0; j < K; j++) {
                size_t e = t + j; /* row of E = [ring; x] */
                float in = e < keep ? ring[e * conv_dim + c] : x[(e - keep) * conv_dim + c];
                acc += w[c * K + j] * in;
            }
            y[t * conv_dim + c] = cpu_silu(acc);
        }
    }
    cpu_gdn_ring_advance(ring, x, conv_dim, K, n);
}

void cpu_gdn_qk_norm_scalar(float *qkv, const cpu_gdn_dims *d, size_t n) {
    size_t nk = d->n_k_heads, dk = d->k_dim, cd = cpu_gdn_conv_dim(d);
    float scale = (float)pow((double)dk, -0.5);
    for (size_t t = 0; t < n; t++) {
        for (size_t part = 0; part < 2; part++) { /* q, then k */
            for (size_t kh = 0; kh < nk; kh++) {
                float *v = qkv + t * cd + part * nk * dk + kh * dk;
                float ss = 0.0f;
                for (size_t i = 0; i < dk; i++) ss += v[i] * v[i];
                float inv = 1.0f / sqrtf(ss + CPU_GDN_L2_EPS);
                for (size_t i = 0; i < dk; i++) v[i] = part == 0 ? (v[i] * inv) * scale : v[i] * inv;
            }
        }
    }
}

void cpu_gdn_gates(float *beta, float *g, const float *b, const float *a, const float *ssm_a, const float *dt_bias,
                   size_t n_v_heads, size_t n) {
    for (size_t t = 0; t < n; t++) {
        for (size_t h = 0; h < n_v_heads; h++) {
            size_t i = t * n_v_heads + h;
            beta[i] = cpu_sigmoid(b[i]);
            g[i] = ssm_a[h] * cpu_softplus(a[i] + dt_bias[h]);
        }
    }
}

void cpu_gdn_recurrent_scalar(float *o, float *state, const float *qkv, const float *g, const float *beta,
                              const cpu_gdn_dims *d, size_t n, size_t h_begin, size_t h_end) {
    size_t nk = d->n_k_heads, nv = d->n_v_heads, dk = d->k_dim, dv = d->v_dim, cd = cpu_gdn_conv_dim(d);
    for (size_t h = h_begin; h < h_end; h++) {
        size_t kh = cpu_gdn_key_head(d, h);
        float *S = state + h * dk * dv; /* [dk][dv] */
        for (size_t t = 0; t < n; t++) {
            const float *q = qkv + t * cd + kh * dk;
            const float *k = qkv + t * cd + nk * dk + kh * dk;
            const float *v = qkv + t * cd + 2 * nk * dk + h * dv;
            float *ot = o + (t * nv + h) * dv; /* holds kv_mem, then delta, then the output */
            float decay = expf(g[t * nv + h]), bt = beta[t * nv + h];
            for (size_t i = 0; i < dk * dv; i++) S[i] *= decay;
            for (size_t j = 0; j < dv; j++) {
                float kv_mem = 0.0f;
                for (size_t i = 0; i < dk; i++) kv_mem += S[i * dv + j] * k[i];
                ot[j] = (v[j] - kv_mem) * bt;
            }
            for (size_t i = 0; i < dk; i++)
                for (size_t j = 0; j < dv; j++) S[i * dv + j] += k[i] * ot[j];
            for (size_t j = 0; j < dv; j++) {
                float acc = 0.0f;
                for (size_t i = 0; i < dk; i++) acc += S[i * dv + j] * q[i];
                ot[j] = acc;
            }
        }
    }
}

void cpu_gdn_conv(float *y, const float *x, float *ring, const float *w, size_t conv_dim, size_t K, size_t n) {
    if (cpu_simd_active() && K <= CPU_GDN_CONV_MAX_K_AVX2)
        cpu_gdn_conv_avx2(y, x, ring, w, conv_dim, K, n);
    else
        cpu_gdn_conv_scalar(y, x, ring, w, conv_dim, K, n);
}

void cpu_gdn_qk_norm(float *qkv, const cpu_gdn_dims *d, size_t n) {
    if (cpu_simd_active())
        cpu_gdn_qk_norm_avx2(qkv, d, n);
    else
        cpu_gdn_qk_norm_scalar(qkv, d, n);
}

void cpu_gdn_recurrent(float *o, float *state, const float *qkv, const float *g, const float *beta,
                       const cpu_gdn_dims *d, size_t n, size_t h_begin, size_t h_end) {
    if (cpu_simd_active())
        cpu_gdn_recurrent_avx2(o, state, qkv, g, beta, d, n, h_begin, h_end);
    else
        cpu_gdn_recurrent_scalar(o, state, qkv, g, beta, d, n, h_begin, h_end);
}

void cpu_gdn_chunked(float *o, float *state, const float *qkv, const float *g, const float *beta,
                     const cpu_gdn_dims *d, size_t n, size_t h_begin, size_t h_end, float *scratch) {
    if (cpu_simd_active())
        cpu_gdn_chunked_avx2(o, state, qkv, g, beta, d, n, h_begin, h_end, scratch);
    else
        cpu_gdn_chunked_scalar(o, state, qkv, g, beta, d, n, h_begin, h_end, scratch);
}

size_t cpu_gdn_mix_scratch_floats(const cpu_gdn_dims *d, size_t n, size_t n_threads) {
    return n * cpu_gdn_conv_dim(d) + 2 * n * d->n_v_heads + n_threads * cpu_gdn_chunked_scratch_floats(d);
}

typedef struct gdn_job {
    float *o, *state, *scratch;
    const float *qkv, *g, *beta;
    const cpu_gdn_dims *d;
    size_t n;
    cpu_gdn_form form;
} gdn_job;

static void gdn_task(void *ctx, size_t task, size_t thread) {
    const gdn_job *j = ctx;
    if (j->form == CPU_GDN_CHUNKED)
        cpu_gdn_chunked(j->o, j->state, j->qkv, j->g, j->beta, j->d, j->n, task, task + 1,
                        j->scratch + thread * cpu_gdn_chunked_scratch_floats(j->d));
    else
        cpu_gdn_recurrent(j->o, j->state, j->qkv, j->g, j->beta, j->d, j->n, task, task + 1);
}

void cpu_gdn_mix(float *out, const float *mixed, const float *z, const float *b, const float *a,
                 const cpu_gdn_weights *w, float *ring, float *state, const cpu_gdn_dims *d, size_t n,
                 cpu_gdn_form form, threadpool *pool, float *scratch) {
    size_t cd = cpu_gdn_conv_dim(d), nv = d->n_v_heads;
    float *qkv = scratch;       /* [n][conv_dim] */
    float *beta = qkv + n * cd; /* [n][nv] */
    float *g = beta + n * nv;   /* [n][nv] */
    cpu_gdn_conv(qkv, mixed, ring, w->conv_w, cd, d->conv_k, n);
    cpu_gdn_qk_norm(qkv, d, n);
    cpu_gdn_gates(beta, g, b, a, w->ssm_a, w->dt_bias, nv, n);
    gdn_job job = {.o = out, .state = state, .scratch = g + n * nv, .qkv = qkv, .g = g, .beta = beta, .d = d,
                   .n = n, .form = form};
    threadpool_run(pool, nv, gdn_task, &job);
    cpu_rms_norm_gated(out, out, z, w->norm_w, n * nv, d->v_dim, d->eps);
}
