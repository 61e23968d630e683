/* attention.c: q/gate split, q/k norms, RoPE, cache append, and the two-pass oracle. */
#include "cpu/attention.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "cpu/act.h"
#include "cpu/cpu_simd.h"
#include "cpu/norm.h"
#include "cpu/rope.h"
#include "quant/simd_level.h"

int cpu_attn_dims_check(const cpu_attn_dims *d, clover_error *err) {
    if (d->n_head == 0 || d->n_head_kv == 0 || d->head_dim == 0)
        return error_set(err, CLOVER_E_FORMAT, "attention: n_head %zu, n_head_kv %zu, head_dim %zu: all must be >= 1",
                         d->n_head, d->n_head_kv, d->head_dim);
    if (d->n_head % d->n_head_kv != 0)
        return error_set(err, CLOVER_E_FORMAT, "attention: n_head %zu is not a multiple of n_head_kv %zu", d->n_head,
                         d->n_head_kv);
    if (d->rot % 2 != 0 || d->rot > d->head_dim)
        return error_set(err, CLOVER_E_FORMAT, "attention: rotary dims %zu must be even and <= head_dim %zu", d->rot,
                         d->head_dim);
    if (!(d->eps >= 0.0f))
        return error_set(err, CLOVER_E_FORMAT, "attention: norm eps %g must be >= 0", (double)d->eps);
    return CLOVER_OK;
}

size_t cpu_attn_scratch_floats(const cpu_attn_dims *d, size_t n_ctx) {
    size_t group = d->n_head / d->n_head_kv;
    /* the AVX-512 level's (attention_avx512.c): acc, m, l, corr and a tile's scores per query of a row block, the
     * tile's K transposed and a score block's 8 queries packed; the AVX2 level uses a prefix of it */
    size_t fast = (size_t)CPU_ATTN_ROW_BLOCK * group * (d->head_dim + 3 + CPU_ATTN_KEY_TILE) +
                  d->head_dim * (CPU_ATTN_KEY_TILE + 8);
    return n_ctx > fast ? n_ctx : fast;
}

void cpu_attn_prepare(float *q, float *gate, float *k_cache, float *v_cache, const float *qg, const float *k,
                      const float *v, const float *q_norm, const float *k_norm, const float *inv_freq,
                      const cpu_attn_dims *d, int64_t pos, size_t n, float *cs) {
    size_t nh = d->n_head, nkv = d->n_head_kv, hd = d->head_dim, half = d->rot / 2;
    float *cos_t = cs, *sin_t = cs + half;
    for (size_t r = 0; r < n; r++) {
        float *qr = q + r * nh * hd;
        float *kr = k_cache + ((size_t)pos + r) * nkv * hd;
        for (size_t h = 0; h < nh; h++) {
            const float *src = qg + (r * nh + h) * 2 * hd;
            memcpy(qr + h * hd, src, hd * sizeof *qr);
            memcpy(gate + (r * nh + h) * hd, src + hd, hd * sizeof *gate);
        }
        memcpy(kr, k + r * nkv * hd, nkv * hd * sizeof *kr);
        memcpy(v_cache + ((size_t)pos + r) * nkv * hd, v + r * nkv * hd, nkv * hd * sizeof *v_cache);
        cpu_rms_norm(qr, qr, q_norm, nh, hd, d->eps);
        cpu_rms_norm(kr, kr, k_norm, nkv, hd, d->eps);
        if (half) {
            rope_cos_sin(cos_t, sin_t, inv_freq, half, pos + (int64_t)r);
            cpu_rope_apply(qr, nh, hd, d->rot, cos_t, sin_t);
            cpu_rope_apply(kr, nkv, hd, d->rot, cos_t, sin_t);
        }
    }
}

/* hd^-0.5 as torch's `head_dim ** -0.5` (a double) meets a float32 tensor */
static float attn_scale(size_t hd) { return (float)pow((double)hd, -0.5); }

static void attn_forward_scalar(float *out, const float *q, const float *gate, const float *k_cache,
                                const float *v_cache, const cpu_attn_dims *d, int64_t pos, size_t n, bool causal,
                                size_t n_keys, size_t h_begin, size_t h_end, float *scratch) {
    size_t nh = d->n_head, nkv = d->n_head_kv, hd = d->head_dim, group = nh / nkv;
    float scale = attn_scale(hd);
    float *s = scratch; /* [the keys a row sees] */
    for (size_t h = h_begin; h < h_end; h++) {
        size_t kvh = h / group;
        for (size_t r = 0; r < n; r++) {
            const float *qv = q + (r * nh + h) * hd;
            size_t n_vis = causal ? (size_t)pos + r + 1 : n_keys;
            float mx = -INFINITY;
            for (size_t j = 0; j < n_vis; j++) {
                const float *kv = k_cache + (j * nkv + kvh) * hd;
                float dot = 0.0f;
                for (size_t i = 0; i < hd; i++) dot += qv[i] * kv[i];
                s[j] = dot * scale;
                if (s[j] > mx) mx = s[j];
            }
            float sum = 0.0f;
            for (size_t j = 0; j < n_vis; j++) {
                s[j] = expf(s[j] - mx);
                sum += s[j];
            }
            float inv = 1.0f / sum;
            float *o = out + (r * nh + h) * hd;
            for (size_t i = 0; i < hd; i++) o[i] = 0.0f;
            for (size_t j = 0; j < n_vis; j++) {
                float p = s[j] * inv;
                const float *vv = v_cache + (j * nkv + kvh) * hd;
                for (size_t i = 0; i < hd; i++) o[i] += p * vv[i];
            }
            const float *gv = gate + (r * nh + h) * hd;
            for (size_t i = 0; i < hd; i++) o[i] = o[i] * cpu_sigmoid(gv[i]);
        }
    }
}

void cpu_attn_forward_scalar(float *out, const float *q, const float *gate, const float *k_cache,
                             const float *v_cache, const cpu_attn_dims *d, int64_t pos, size_t n, bool causal,
                             size_t h_begin, size_t h_end, float *scratch) {
    attn_forward_scalar(out, q, gate, k_cache, v_cache, d, pos, n, causal, (size_t)pos + n, h_begin, h_end, scratch);
}

void cpu_attn_forward_keys(float *out, const float *q, const float *gate, const float *k_cache, const float *v_cache,
                           const cpu_attn_dims *d, int64_t pos, size_t n, bool causal, size_t n_keys, size_t h_begin,
                           size_t h_end, float *scratch) {
    if (quant_avx512_active()) /* the AVX-512 level (simd_level.h; CLOVER_NO_AVX512 keeps the AVX2 kernel) */
        cpu_attn_forward_keys_avx512(out, q, gate, k_cache, v_cache, d, pos, n, causal, n_keys, h_begin, h_end,
                                     scratch);
    else if (cpu_simd_active())
        cpu_attn_forward_keys_avx2(out, q, gate, k_cache, v_cache, d, pos, n, causal, n_keys, h_begin, h_end,
                                   scratch);
    else
        attn_forward_scalar(out, q, gate, k_cache, v_cache, d, pos, n, causal, n_keys, h_begin, h_end, scratch);
}

void cpu_attn_forward(float *out, const float *q, const float *gate, const float *k_cache, const float *v_cache,
                      const cpu_attn_dims *d, int64_t pos, size_t n, bool causal, size_t h_begin, size_t h_end,
                      float *scratch) {
    cpu_attn_forward_keys(out, q, gate, k_cache, v_cache, d, pos, n, causal, (size_t)pos + n, h_begin, h_end,
                          scratch);
}
