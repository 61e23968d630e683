/*
 * gdn_block.c: the scalar oracle of the GDN block operator (SPEC.md 2.1), its
 * scratch layout, and the fast driver (conv over channel vectors, one value
 * head per pool task; with cpu_grouped the conv and the key heads' L2 norms
 * are pool tasks over runs of channels, in the same run as the head tasks
 * (two phases), and each head task applies the gated norm to its own rows: at 16 threads the conv alone, on the calling
 * thread, was ~0.6 ms of a 32-row preview's GDN layer). The oracle follows the reference's order of sums so
 * that it is the readable statement of the formula; the fast form only
 * regroups the dot products and is tested against it. gdn_block picks the
 * AVX-512 level (gdn_block_avx512.c, one task per key head) where
 * quant_avx512_active(), else this AVX2 driver, whose bits it leaves as they were.
 */
#include "cpu/gdn_block.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "cpu/act.h"
#include "cpu/cpu_simd.h"
#include "cpu/norm.h"
#include "quant/simd_level.h"

/* Per-thread temporaries of one head: scores / probabilities [b + 1], q scaled [dk], u [dv], for the
 * GDN_HEAD_ROWS rows gdn_block_head_avx2 takes at a time (the oracle uses the first row's), or the AVX-512
 * level's (gdn_block_head_avx512_tmp_floats), whichever is larger. */
static size_t block_tmp_floats(const cpu_gdn_dims *d, size_t b) {
    size_t n = GDN_HEAD_ROWS * (b + 1 + d->k_dim + d->v_dim), n512 = gdn_block_head_avx512_tmp_floats(d, b);
    n = n > n512 ? n : n512;
    return (n + 15) / 16 * 16; /* keep each thread's slice on its own cache lines */
}

/* The scratch, carved in this order. */
typedef struct block_scratch {
    float *y;   /* [b][conv_dim]: the conv output, then q | k normalised in place | v */
    float *g;   /* [b][nv] decay */
    float *wt;  /* [2K-1][conv_dim]: taps transposed for the fast conv */
    float *tmp; /* [n_threads][block_tmp_floats] */
} block_scratch;

static size_t block_layout(const cpu_gdn_dims *d, size_t b, size_t n_threads, float *base, block_scratch *s) {
    size_t cd = cpu_gdn_conv_dim(d), K = d->conv_k;
    size_t sizes[4] = {b * cd, b * d->n_v_heads, (2 * K - 1) * cd, n_threads * block_tmp_floats(d, b)};
    float **slots[4] = {&s->y, &s->g, &s->wt, &s->tmp};
    size_t off = 0;
    for (int i = 0; i < 4; i++) {
        if (base) *slots[i] = base + off;
        off += (sizes[i] + 15) / 16 * 16;
    }
    return off;
}

size_t gdn_block_scratch_floats(const cpu_gdn_dims *d, size_t b, size_t n_threads) {
    block_scratch unused;
    return block_layout(d, b, n_threads ? n_threads : 1, NULL, &unused);
}

/* conv with left taps over [ring; x] and right taps over x's next rows, then silu */
static void block_conv_scalar(float *y, const float *x, const float *ring, const gdn_block_weights *w, size_t cd,
                              size_t K, size_t b) {
    const size_t keep = K - 1;
    for (size_t i = 0; i < b; i++) {
        for (size_t c = 0; c < cd; c++) {
            float acc = 0.0f;
            for (size_t t = 0; t < K; t++) {
                size_t e = i + t; /* row of E = [ring; x] */
                float in = e < keep ? ring[e * cd + c] : x[(e - keep) * cd + c];
                acc += w->conv_w[c * K + t] * in;
            }
            for (size_t t = 1; t < K && i + t < b; t++) /* X[j] = 0 past the block */
                acc += w->conv_right[c * keep + t - 1] * x[(i + t) * cd + c];
            y[i * cd + c] = cpu_silu(acc);
        }
    }
}

/* One key head's dk values L2-normalised in place. */
static void l2_head(float *v, size_t dk) {
    float ss = 0.0f;
    for (size_t t = 0; t < dk; t++) ss += v[t] * v[t];
    float inv = 1.0f / sqrtf(ss + CPU_GDN_L2_EPS);
    for (size_t t = 0; t < dk; t++) v[t] *= inv;
}

/* q and k of every row L2-normalised per key head, in place; q NOT scaled */
static void block_l2_norm(float *qkv, const cpu_gdn_dims *d, size_t b) {
    size_t nk = d->n_k_heads, dk = d->k_dim, cd = cpu_gdn_conv_dim(d);
    for (size_t i = 0; i < b; i++)
        for (size_t kh = 0; kh < 2 * nk; kh++) l2_head(qkv + i * cd + kh * dk, dk); /* q heads, then k heads */
}

static void block_gates(float *g, const float *a, const gdn_block_weights *w, size_t nv, size_t b) {
    for (size_t i = 0; i < b; i++)
        for (size_t h = 0; h < nv; h++) g[i * nv + h] = w->ssm_a[h] * cpu_softplus(a[i * nv + h] + w->dt_bias[h]);
}

/* p = softmax(s) over n scores in place: max, e^(s - max), times 1 / sum (torch's CPU order) */
static void block_softmax(float *s, size_t n) {
    float mx = s[0];
    for (size_t j = 1; j < n; j++)
        if (s[j] > mx) mx = s[j];
    float sum = 0.0f;
    for (size_t j = 0; j < n; j++) {
        s[j] = expf(s[j] - mx);
        sum += s[j];
    }
    float inv = 1.0f / sum;
    for (size_t j = 0; j < n; j++) s[j] *= inv;
}

/* value head h of every block row: scores, softmax, o = sum_j p v_j + p_hist u */
static void block_head_scalar(float *o, const float *qkv, const float *g, const float *state,
                              const gdn_block_weights *w, const cpu_gdn_dims *d, size_t b, float ln_ratio, size_t h,
                              float *tmp) {
    const size_t nk = d->n_k_heads, nv = d->n_v_heads, dk = d->k_dim, dv = d->v_dim, cd = cpu_gdn_conv_dim(d);
    const size_t kh = cpu_gdn_key_head(d, h);
    const float scale = (float)pow((double)dk, -0.5);
    const float *S = state + h * dk * dv; /* [dk][dv] */
    float *p = tmp, *qs = tmp + b + 1, *u = qs + dk;
    for (size_t i = 0; i < b; i++) {
        const float *qi = qkv + i * cd + kh * dk;
        for (size_t j = 0; j < b; j++) {
            const float *kj = qkv + j * cd + nk * dk + kh * dk;
            float dot = 0.0f;
            for (size_t t = 0; t < dk; t++) dot += qi[t] * kj[t];
            p[j] = w->logit_scale[h] * dot;
        }
        p[b] = (w->history_bias[h] + w->history_c[h] * g[i * nv + h]) + ln_ratio;
        block_softmax(p, b + 1);
        for (size_t t = 0; t < dk; t++) qs[t] = qi[t] * scale;
        for (size_t c = 0; c < dv; c++) {
            float acc = 0.0f;
            for (size_t t = 0; t < dk; t++) acc += S[t * dv + c] * qs[t];
            u[c] = acc;
        }
        float *oi = o + (i * nv + h) * dv;
        for (size_t c = 0; c < dv; c++) {
            float acc = 0.0f;
            for (size_t j = 0; j < b; j++) acc += p[j] * qkv[j * cd + 2 * nk * dk + h * dv + c];
            oi[c] = acc + p[b] * u[c];
        }
    }
}

void gdn_block_scalar(float *out, const float *mixed, const float *z, const float *a, const float *ring,
                      const float *state, const gdn_block_weights *w, const cpu_gdn_dims *d, size_t b, float ln_ratio,
                      float *scratch) {
    block_scratch s;
    block_layout(d, b, 1, scratch, &s);
    block_conv_scalar(s.y, mixed, ring, w, cpu_gdn_conv_dim(d), d->conv_k, b);
    block_l2_norm(s.y, d, b);
    block_gates(s.g, a, w, d->n_v_heads, b);
    for (size_t h = 0; h < d->n_v_heads; h++) block_head_scalar(out, s.y, s.g, state, w, d, b, ln_ratio, h, s.tmp);
    cpu_rms_norm_gated_scalar(out, out, z, w->norm_w, b * d->n_v_heads, d->v_dim, d->eps);
}

typedef struct block_job {
    float *o, *tmp;
    const float *qkv, *g, *state, *z;
    const gdn_block_weights *w;
    const cpu_gdn_dims *d;
    size_t b, tmp_stride;
    float ln_ratio;
    bool simd, norm; /* norm: each head task applies the gated norm to its rows */
} block_job;

static void block_head_task(void *ctx, size_t task, size_t thread) {
    const block_job *j = ctx;
    float *tmp = j->tmp + thread * j->tmp_stride;
    if (j->simd)
        gdn_block_head_avx2(j->o, j->qkv, j->g, j->state, j->w, j->d, j->b, j->ln_ratio, task, tmp);
    else
        block_head_scalar(j->o, j->qkv, j->g, j->state, j->w, j->d, j->b, j->ln_ratio, task, tmp);
    if (!j->norm) return;
    /* the gated norm is per (row, head) vector: this head's rows, as the whole-block call computes them */
    const size_t nv = j->d->n_v_heads, dv = j->d->v_dim;
    for (size_t i = 0; i < j->b; i++) {
        float *v = j->o + (i * nv + task) * dv;
        cpu_rms_norm_gated(v, v, j->z + (i * nv + task) * dv, j->w->norm_w, 1, dv, j->d->eps);
    }
}

/* The conv on the pool (cpu_grouped): task t takes a run of channels for
 * every row, transposes their taps, convolves them, and L2-normalises the
 * rows' key heads among them. Runs start at multiples of 8 and end at one
 * or at cd, so each channel takes the vector or scalar path the
 * whole-width conv gives it: the same bits. */
enum { CONV_RUN = 128 };

typedef struct conv_job {
    float *y, *wt;
    const float *x, *ring;
    const gdn_block_weights *w;
    const cpu_gdn_dims *d;
    size_t cd, K, b, qk_tasks;
} conv_job;

static void conv_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    const conv_job *j = ctx;
    const size_t dk = j->d->k_dim, K = j->K, cd = j->cd;
    size_t c0, c1;
    if (task < j->qk_tasks) {
        c0 = task * dk, c1 = c0 + dk;
    } else {
        c0 = j->qk_tasks * dk + (task - j->qk_tasks) * CONV_RUN;
        c1 = c0 + CONV_RUN < cd ? c0 + CONV_RUN : cd;
    }
    for (size_t c = c0; c < c1; c++) {
        for (size_t t = 0; t < K; t++) j->wt[t * cd + c] = j->w->conv_w[c * K + t];
        for (size_t t = 0; t + 1 < K; t++) j->wt[(K + t) * cd + c] = j->w->conv_right[c * (K - 1) + t];
    }
    gdn_block_conv_avx2_range(j->y, j->x, j->ring, j->wt, cd, c0, c1, K, j->b);
    if (task < j->qk_tasks)
        for (size_t i = 0; i < j->b; i++) l2_head(j->y + i * cd + c0, dk);
}

void gdn_block_avx2(float *out, const float *mixed, const float *z, const float *a, const float *ring,
                    const float *state, const gdn_block_weights *w, const cpu_gdn_dims *d, size_t b, float ln_ratio,
                    threadpool *pool, float *scratch) {
    const size_t cd = cpu_gdn_conv_dim(d), K = d->conv_k;
    const bool simd = cpu_simd_active();
    block_scratch s;
    block_layout(d, b, threadpool_size(pool), scratch, &s);
    /* grouped: the conv and the norms on the pool (needs key heads of whole 8-channel vectors), in one run with
     * the heads (threadpool_run_phases: every conv task before any head task) */
    const bool grouped = simd && d->k_dim % 8 == 0 && cpu_grouped();
    block_gates(s.g, a, w, d->n_v_heads, b);
    block_job job = {.o = out, .tmp = s.tmp, .qkv = s.y, .g = s.g, .state = state, .z = z, .w = w, .d = d, .b = b,
                     .tmp_stride = block_tmp_floats(d, b), .ln_ratio = ln_ratio, .simd = simd, .norm = grouped};
    if (grouped) {
        const size_t qk = 2 * d->n_k_heads, vrest = cd - qk * d->k_dim;
        conv_job cj = {.y = s.y, .wt = s.wt, .x = mixed, .ring = ring, .w = w, .d = d, .cd = cd, .K = K, .b = b,
                       .qk_tasks = qk};
        const threadpool_phase ph[2] = {{qk + (vrest + CONV_RUN - 1) / CONV_RUN, conv_task, &cj},
                                        {d->n_v_heads, block_head_task, &job}};
        threadpool_run_phases(pool, ph, 2);
        return;
    }
    if (simd) {
        for (size_t c = 0; c < cd; c++) {
            for (size_t t = 0; t < K; t++) s.wt[t * cd + c] = w->conv_w[c * K + t];
            for (size_t t = 0; t + 1 < K; t++) s.wt[(K + t) * cd + c] = w->conv_right[c * (K - 1) + t];
        }
        gdn_block_conv_avx2(s.y, mixed, ring, s.wt, cd, K, b);
    } else {
        block_conv_scalar(s.y, mixed, ring, w, cd, K, b);
    }
    block_l2_norm(s.y, d, b);
    threadpool_run(pool, d->n_v_heads, block_head_task, &job);
    cpu_rms_norm_gated(out, out, z, w->norm_w, b * d->n_v_heads, d->v_dim, d->eps);
}

/* The AVX-512 level: one pool task per key head, all of it (the conv of its q and k channels and of its value
 * heads' v channels, the L2 norms and transposed keys, then each of its value heads: gates, scores, softmax,
 * read-out, mix, gated norm). A head's inputs are made by its own task, so there is no barrier between a conv
 * phase and a head phase and no conv output crosses cores: the two-phase order (64 conv tasks, then 32 head
 * tasks) scaled 5.9x on 16 threads of the issue-30 host, near linearly on the nk = 16 tasks of the 35B's 16 key
 * heads. Every channel and head takes the same kernels as in any split: the bits do not depend on the pool, and
 * cpu_grouped has no old order to keep here. */
typedef struct block512_job {
    float *o, *y, *tmp;
    const float *x, *ring, *z, *a, *state;
    const gdn_block_weights *w;
    const cpu_gdn_dims *d;
    size_t b, tmp_stride;
    float ln_ratio;
} block512_job;

static void key_head512_task(void *ctx, size_t kh, size_t thread) {
    const block512_job *j = ctx;
    const cpu_gdn_dims *d = j->d;
    const size_t nk = d->n_k_heads, dk = d->k_dim, dv = d->v_dim, cd = cpu_gdn_conv_dim(d), K = d->conv_k;
    const size_t kts = gdn_block_kt_stride(j->b), bp = (j->b + GDN_HEAD_ROWS_AVX512 - 1) / GDN_HEAD_ROWS_AVX512 *
                                                      GDN_HEAD_ROWS_AVX512;
    const float *cw = j->w->conv_w, *cr = j->w->conv_right;
    /* the task's temporaries: k transposed, q transposed and scaled, the raw dots, the heads' own */
    const size_t span = bp < GDN_SPAN_AVX512 ? bp : GDN_SPAN_AVX512;
    float *kt = j->tmp + thread * j->tmp_stride, *qt = kt + dk * kts, *D = qt + dk * bp, *head_tmp = D + span * kts;
    for (size_t qk = 0; qk < 2; qk++) { /* q of head kh, then k, normalised */
        const size_t c0 = (qk * nk + kh) * dk;
        gdn_block_conv_avx512_range(j->y, j->x, j->ring, cw, cr, cd, c0, c0 + dk, K, j->b);
        gdn_block_l2_avx512(j->y + c0, cd, dk, j->b, qk ? kt : qt, qk ? kts : bp,
                            qk ? 1.0f : (float)pow((double)dk, -0.5));
    }
    for (size_t h = 0; h < d->n_v_heads; h++) /* the value heads' v */
        if (cpu_gdn_key_head(d, h) == kh) {
            const size_t c0 = 2 * nk * dk + h * dv;
            gdn_block_conv_avx512_range(j->y, j->x, j->ring, cw, cr, cd, c0, c0 + dv, K, j->b);
        }
    /* spans of 64 rows (the temporaries linear in b): q . k once for the key head's value heads (each scales them
     * by its logit_scale), then each value head's rows of the span */
    for (size_t s0 = 0; s0 < j->b; s0 += GDN_SPAN_AVX512) {
        const size_t n = j->b - s0 < GDN_SPAN_AVX512 ? j->b - s0 : GDN_SPAN_AVX512;
        gdn_block_dots_avx512(D, j->y + s0 * cd + kh * dk, cd, kt, dk, j->b, n);
        for (size_t h = 0; h < d->n_v_heads; h++)
            if (cpu_gdn_key_head(d, h) == kh)
                gdn_block_head_avx512(j->o, j->y, D, qt, j->a, j->z, j->state, j->w, d, j->b, s0, n, j->ln_ratio, h,
                                      head_tmp);
    }
}

void gdn_block_avx512(float *out, const float *mixed, const float *z, const float *a, const float *ring,
                      const float *state, const gdn_block_weights *w, const cpu_gdn_dims *d, size_t b,
                      float ln_ratio, threadpool *pool, float *scratch) {
    block_scratch s;
    block_layout(d, b, threadpool_size(pool), scratch, &s);
    block512_job j = {.o = out, .y = s.y, .tmp = s.tmp, .x = mixed, .ring = ring, .z = z, .a = a,
                      .state = state, .w = w, .d = d, .b = b, .tmp_stride = block_tmp_floats(d, b),
                      .ln_ratio = ln_ratio};
    threadpool_run(pool, d->n_k_heads, key_head512_task, &j);
}

void gdn_block(float *out, const float *mixed, const float *z, const float *a, const float *ring, const float *state,
               const gdn_block_weights *w, const cpu_gdn_dims *d, size_t b, float ln_ratio, threadpool *pool,
               float *scratch) {
    if (quant_avx512_active())
        gdn_block_avx512(out, mixed, z, a, ring, state, w, d, b, ln_ratio, pool, scratch);
    else
        gdn_block_avx2(out, mixed, z, a, ring, state, w, d, b, ln_ratio, pool, scratch);
}
