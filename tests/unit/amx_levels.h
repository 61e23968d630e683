/*
 * amx_levels.h: the checks shared by test_quant_amx.c (the real AMX
 * kernel) and test_gemm_amx_emu.c (its source on emulated tiles): the AMX
 * level's tile kernel (gemm_amx.c, its rows staged by gemm_amx_stage) for
 * Q8_0, Q4_K and Q5_K against
 *  1. the scalar oracle of the whole-block order (al_oracle below: exact
 *     integer block or sub-block sums, then one fmaf each, in order), bit
 *     for bit: the order fixes every rounding, so any correct
 *     implementation gives these bits;
 *  2. the AMX level's one-row decode dots (act_bsum_avx2.c), bit for bit,
 *     where the CPU has AVX2;
 * and the oracle itself against the other levels' scalar oracle
 * (quant_act_dot_scalar: their float order) within 2e-6 * sum |w x|, so the
 * new order computes the same product. Activation rows 1..64 each on the
 * smallest shapes and a spread past the kernel's 16-row groups and 128-row
 * passes elsewhere; Q8_0: one block, odd block counts (3, 65, 129: a
 * partial step, and past the kernel's 128-block chunks); K-quants: 1, 3 and
 * 9 super-blocks (past the kernel's 8-super-block chunks); output counts that leave a
 * partial 16-row weight tile (1, 5, 13, 37) and output ranges split off a
 * tile boundary; quantised-normal and raw random weights (every code); an
 * all-zero row, a large row and a NaN row.
 */
#ifndef CLOVER_TEST_AMX_LEVELS_H
#define CLOVER_TEST_AMX_LEVELS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/threadpool.h"
#include "quant/gemm_amx.h"
#include "quant/gemm_amx_pack.h"
#include "quant/matmul.h"
#include "quant/simd_level.h"
#include "unit/gemm_levels.h"

/* The whole-block order, written out: the independent expected value.
 * Q8_0: per block, acc = fmaf(d_w * d_x, exact sum, acc). Q4_K / Q5_K: per
 * super-block, per sub-block s: acc = fmaf((d * scale(s)) * d_x, exact sum,
 * acc); then acc = fmaf(-(dmin * d_x), sum over s of min(s) * (sum of the
 * activation codes of s), acc), the codes read from the block as quant.h's
 * layout comments say (not from the kernels' decoders). */
static inline float al_oracle(uint32_t type, const uint8_t *row, const void *xq, size_t n_in) {
    float acc = 0.0f;
    if (type == QUANT_Q8_0) {
        const act_q8_32 *x = xq;
        for (size_t b = 0; b < n_in / QUANT_QK8_0; b++) {
            const block_q8_0 *w = (const block_q8_0 *)(const void *)(row + b * sizeof(block_q8_0));
            int32_t s = 0;
            for (int k = 0; k < QUANT_QK8_0; k++) s += (int32_t)w->qs[k] * x[b].qs[k];
            const float p = quant_f16_to_f32(quant_load_u16(w->d)) * x[b].d;
            acc = fmaf(p, (float)s, acc);
        }
        return acc;
    }
    const act_q8_k *x = xq;
    const size_t bsz = quant_block_bytes(type);
    for (size_t b = 0; b < n_in / QUANT_QK_K; b++) {
        const uint8_t *blk = row + b * bsz;
        const uint8_t *qs = type == QUANT_Q4_K ? ((const block_q4_k *)(const void *)blk)->qs
                                               : ((const block_q5_k *)(const void *)blk)->qs;
        const uint8_t *qh = type == QUANT_Q5_K ? ((const block_q5_k *)(const void *)blk)->qh : NULL;
        const float d = quant_f16_to_f32(quant_load_u16(blk)), dmin = quant_f16_to_f32(quant_load_u16(blk + 2));
        int32_t M = 0;
        for (int s = 0; s < 8; s++) {
            uint8_t sc, mn;
            quant_k4_scale_min(s, blk + 4, &sc, &mn);
            const int c = s / 2, high = s & 1;
            int32_t S = 0, X = 0;
            for (int l = 0; l < 32; l++) {
                int q = high ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15;
                if (qh && (qh[l] >> s & 1)) q += 16;
                S += q * x[b].qs[32 * s + l];
                X += x[b].qs[32 * s + l];
            }
            acc = fmaf((d * (float)sc) * x[b].d, (float)S, acc);
            M += mn * X;
        }
        acc = fmaf(-(dmin * x[b].d), (float)M, acc);
    }
    return acc;
}

/* The AMX level's one-row dot of a type. */
static inline quant_act_dot_fn al_one_row_dot(uint32_t type) {
    return type == QUANT_Q8_0   ? quant_act_dot_q8_0_bsum_avx2
           : type == QUANT_Q4_K ? quant_act_dot_q4_k_bsum_avx2
                                : quant_act_dot_q5_k_bsum_avx2;
}

static inline int al_same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b)); }

/* The forms of the kernel one case runs on the same inputs (al_case): each sets its switch (env = val, none where
 * env is NULL), the job's q4k_pipe and, where al_set_flight is set (the emulated kernel's CLOVER_AMX_FLIGHT), the
 * blocks in flight (0: as it is) around its calls; every form's outputs are checked against the references, which
 * are computed once a case. spread: the form runs on al_spread's row counts only (al_all's cases but the rows
 * 1..64 off the spread). al_all and al_forms set them for a sweep; none set: one form, no switch, q4k_pipe 0. */
typedef struct al_form {
    const char *env, *val;
    int pipe, flight, spread;
} al_form;
static const size_t al_spread[] = {1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 80, 130};
static const al_form *al_forms_on;
static size_t al_n_forms;
static void (*al_set_flight)(int flight);

static inline const char *al_form_name(const al_form *f) {
    static char buf[80];
    snprintf(buf, sizeof buf, "%s%s%s%s%s", f->env ? f->env : "", f->env ? "=" : "", f->val ? f->val : "",
             f->pipe ? "pipelined" : "", f->flight == 2 ? "flight 2" : f->flight ? "flight 4" : "");
    return buf;
}

/* One case: returns the number of failed outputs (and reports the first). */
static inline int al_case(gemm_kernel_fn kernel, rng_state *r, uint32_t type, size_t n_out, size_t n_in, size_t n_rows,
                          int raw) {
    static const al_form plain = {NULL, NULL, 0, 0, 0};
    const al_form *forms = al_forms_on ? al_forms_on : &plain;
    const size_t nf = al_forms_on ? al_n_forms : 1;
    const size_t rb = quant_row_bytes(type, n_in), xqb = quant_act_row_bytes(type, n_in);
    const size_t ny = n_rows * n_out;
    uint8_t *w = mem_alloc(rb * n_out), *xq = mem_alloc(n_rows * xqb + 64);
    uint8_t *staged = mem_alloc(gemm_amx_stage_bytes(type, n_rows, n_in) + 64);
    float *x = mem_alloc(n_rows * n_in * sizeof(float)), *y = mem_alloc(nf * ny * sizeof(float));
    float *deq = mem_alloc(n_out * n_in * sizeof(float));
    int bad = 0;
    if (!w || !xq || !staged || !x || !y || !deq) {
        CHECK(!"allocation failed");
        bad = 1;
        goto out;
    }
    gl_fill_case(r, type, w, n_out, n_in, raw, x, n_rows, deq, xq);
    memset(staged, 0xA5, gemm_amx_stage_bytes(type, n_rows, n_in)); /* the padding must be written, not found */
    gemm_amx_stage(type, x, n_rows, n_in, staged);
    /* two tasks' ranges: the first ends off a 16-row tile boundary (matmul's tasks are runs of 4) */
    const size_t split = n_out > 20 ? 20 : n_out > 4 ? 4 : n_out;
    int in_spread = 0;
    for (size_t k = 0; k < sizeof al_spread / sizeof al_spread[0]; k++) in_spread |= al_spread[k] == n_rows;
    for (size_t f = 0; f < nf; f++) {
        if (forms[f].spread && !in_spread) continue;
        matmul_job j = {.type = type, .w = w, .row_bytes = rb, .n_out = n_out, .n_in = n_in, .x = x,
                        .n_rows = n_rows, .rows_per_task = n_out, .xq = staged, .xq_bytes = xqb, .amx = 1,
                        .q4k_pipe = forms[f].pipe, .y = y + f * ny};
        for (size_t i = 0; i < ny; i++) j.y[i] = -1.0f;
        if (forms[f].env) setenv(forms[f].env, forms[f].val, 1);
        if (forms[f].flight && al_set_flight) al_set_flight(forms[f].flight);
        kernel(&j, 0, split);
        kernel(&j, split, n_out);
        if (forms[f].flight && al_set_flight) al_set_flight(4);
        if (forms[f].env) unsetenv(forms[f].env);
    }
    const int simd = quant_simd_active();
    for (size_t rr = 0; rr < n_rows; rr++) {
        const float *xr = x + rr * n_in;
        const void *xb = xq + rr * xqb;
        for (size_t o = 0; o < n_out; o++) {
            const size_t i = rr * n_out + o;
            const uint8_t *row = w + o * rb;
            const float want = al_oracle(type, row, xb, n_in);
            const float one = simd ? al_one_row_dot(type)(row, xb, n_in) : want;
            const float sc = quant_act_dot_scalar(type, row, xb, n_in);
            double mag = 0; /* sum |w x|: the scale of the float-order bound */
            for (size_t k = 0; k < n_in; k++) mag += fabs((double)deq[o * n_in + k] * xr[k]);
            const int near = isnan(sc) ? isnan(want) : fabs((double)want - sc) <= 2e-6 * mag + 1e-30;
            for (size_t f = 0; f < nf; f++) {
                if (forms[f].spread && !in_spread) continue;
                const float yf = y[f * ny + i];
                if ((!al_same(yf, want) || !al_same(one, want) || !near) && bad++ < 3)
                    fprintf(stderr,
                            "  %s%s out=%zu in=%zu rows=%zu%s%s: y[%zu][%zu] = %.9g, oracle %.9g, one-row %.9g, "
                            "other levels' scalar %.9g\n", quant_type_name(type), raw ? " raw" : "", n_out, n_in,
                            n_rows, nf > 1 ? ", form " : "", nf > 1 ? al_form_name(&forms[f]) : "", rr, o, yf, want,
                            one, sc);
            }
        }
    }
out:
    mem_free(w), mem_free(xq), mem_free(staged), mem_free(x), mem_free(y), mem_free(deq);
    return bad;
}

/* Every type and shape, each case on every form of forms (n_forms; NULL: one, plain): rows 1..64 each on the
 * smallest shapes with 13 and 37 outputs, and there the spread's counts past 64 too; the spread elsewhere. */
static inline void al_all(gemm_kernel_fn kernel, const al_form *forms, size_t n_forms) {
    static const uint32_t types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K};
    static const size_t q8_ins[] = {32, 96, 2080, 4128}, k_ins[] = {256, 768, 2304}, outs[] = {1, 5, 13, 37};
    const size_t *spread = al_spread;
    enum { N_SPREAD = sizeof al_spread / sizeof al_spread[0], N_OUTS = sizeof outs / sizeof outs[0] };
    rng_state r;
    rng_seed(&r, 3030);
    al_forms_on = forms, al_n_forms = n_forms;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const uint32_t type = types[t];
        const size_t *ins = type == QUANT_Q8_0 ? q8_ins : k_ins, n_ins = type == QUANT_Q8_0 ? 4 : 3;
        const size_t small_in = type == QUANT_Q8_0 ? 96 : 256;
        int cases = 0;
        int bad = gl_sweep(al_case, kernel, &r, type, ins, n_ins, small_in, outs, N_OUTS, spread, N_SPREAD, 0,
                           &cases);
        /* gl_sweep's rows 1..64 end at 64 on the smallest shapes: the spread's counts past 64 there too */
        for (size_t a = 0; a < n_ins && ins[a] <= small_in; a++)
            for (size_t o = 0; o < N_OUTS; o++)
                for (size_t k = 0; k < N_SPREAD; k++)
                    if (outs[o] >= 13 && spread[k] > 64)
                        bad += al_case(kernel, &r, type, outs[o], ins[a], spread[k], (int)((k + o) & 1)), cases++;
        CHECK_MSG(bad == 0, "%s: %d outputs differ from the whole-block oracle or the one-row dot in %d cases",
                  quant_type_name(type), bad, cases);
    }
    al_forms_on = NULL, al_n_forms = 0;
}

/* The K-quants (the switches below touch nothing else) on a narrow sweep: 1, 3 and 9 super-blocks, a partial and a
 * wider weight tile, rows inside one 16-row group, past one, past two and past the kernel's passes. */
static inline void al_k_narrow(gemm_kernel_fn kernel) {
    static const size_t ins[] = {256, 768, 2304}, outs[] = {5, 37}, rows[] = {1, 3, 17, 33, 65, 130};
    rng_state r;
    rng_seed(&r, 3031);
    for (size_t t = 0; t < 2; t++) {
        const uint32_t type = t ? QUANT_Q5_K : QUANT_Q4_K;
        int cases = 0;
        const int bad = gl_sweep(al_case, kernel, &r, type, ins, 3, 256, outs, 2, rows, 6, 1, &cases);
        CHECK_MSG(bad == 0, "%s: %d outputs differ from the whole-block oracle or the one-row dot in %d cases",
                  quant_type_name(type), bad, cases);
    }
}

/* al_k_narrow over the forms the switches select (gemm_amx.c; the same bits each): the panel kernel
 * pipelined, the chunk unpacked a row at a time (CLOVER_AMX_KUNPACK=0), chunks of 1, 3 (a partial last one at 9
 * super-blocks) and 8 super-blocks (CLOVER_AMX_KCHUNK). Each case's inputs and references are made once and every
 * form run on them (al_case): the same cases, inputs and checks as one sweep a form (the sweep reseeds), at a fifth
 * of the references' cost. */
static inline void al_forms(gemm_kernel_fn kernel) {
    static const al_form forms[] = {{NULL, NULL, 1, 0, 0},
                                    {"CLOVER_AMX_KUNPACK", "0", 0, 0, 0},
                                    {"CLOVER_AMX_KCHUNK", "1", 0, 0, 0},
                                    {"CLOVER_AMX_KCHUNK", "3", 0, 0, 0},
                                    {"CLOVER_AMX_KCHUNK", "8", 0, 0, 0}};
    al_forms_on = forms, al_n_forms = sizeof forms / sizeof forms[0];
    al_k_narrow(kernel);
    al_forms_on = NULL, al_n_forms = 0;
}

/* The AMX level's one-row dots alone against the oracle: Q8_0 at every
 * block count 1..40 (the 8-block steps and every tail) and a long row, the
 * K-quants at 1..10 super-blocks and a long row. */
static inline void al_one_row(void) {
    rng_state r;
    rng_seed(&r, 3232);
    int bad = 0;
    static const uint32_t types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K};
    for (size_t t = 0; t < 3; t++)
    for (size_t nb = 1; nb <= (t ? 11 : 41); nb++) {
        const uint32_t type = types[t];
        const size_t be = t ? QUANT_QK_K : QUANT_QK8_0;
        const size_t n_in = nb <= (t ? 10 : 40) ? nb * be : 16384;
        const size_t rb = quant_row_bytes(type, n_in), xqb = quant_act_row_bytes(type, n_in);
        uint8_t *w = mem_alloc(rb), *xq = mem_alloc(xqb);
        float *x = mem_alloc(n_in * sizeof(float));
        if (!w || !xq || !x) {
            CHECK(!"allocation failed");
            mem_free(w), mem_free(xq), mem_free(x);
            return;
        }
        for (int rep = 0; rep < 4; rep++) {
            fill_quant_weights(&r, type, w, 1, n_in, rep & 1);
            for (size_t k = 0; k < n_in; k++) x[k] = rng_normal(&r) * (rep == 2 ? 1e-30f : 1.0f);
            quant_act_quantize(type, x, xq, n_in);
            const float want = al_oracle(type, w, xq, n_in);
            const float got = al_one_row_dot(type)(w, xq, n_in);
            if (!al_same(got, want) && bad++ < 3)
                fprintf(stderr, "  one-row %s n=%zu rep=%d: %.9g, oracle %.9g\n", quant_type_name(type), n_in, rep, got, want);
        }
        mem_free(w), mem_free(xq), mem_free(x);
    }
    CHECK_MSG(bad == 0, "the AMX level's one-row dots differ from the whole-block oracle %d times", bad);
}

/* gl_matmul_rows' extra check at the AMX level: the one-row products are
 * the whole-block oracle's. */
static inline void al_rows_oracle(uint32_t type, const uint8_t *w, size_t n_out, size_t n_in, const float *x,
                                  size_t n_rows, const float *y1) {
    if (quant_simd_level() != QUANT_LEVEL_AMX || !gemm_amx_type(type)) return;
    const size_t rb = quant_row_bytes(type, n_in), xqb = quant_act_row_bytes(type, n_in);
    uint8_t *xq = mem_alloc(xqb);
    if (!xq) {
        CHECK(!"allocation failed");
        return;
    }
    int bad_oracle = 0;
    for (size_t rr = 0; rr < n_rows; rr++) {
        quant_act_quantize(type, x + rr * n_in, xq, n_in);
        for (size_t o = 0; o < n_out; o++) bad_oracle += !al_same(y1[rr * n_out + o], al_oracle(type, w + o * rb, xq, n_in));
    }
    CHECK_MSG(bad_oracle == 0, "%s: %d one-row outputs differ from the whole-block oracle", quant_type_name(type),
              bad_oracle);
    mem_free(xq);
}

/* matmul at the level this process runs: each row of an n-row product has
 * its one-row product's bits, no pool and 2 threads; at the AMX level the
 * whole-block oracle's. */
static inline void al_matmul_rows(void) { gl_matmul_rows(20, 25, al_rows_oracle); }

/* matmul_batch, items of every type on one x (their 8-bit copies shared
 * where the format allows: at the AMX level Q6_K's rows are not staged as
 * Q4_K's / Q5_K's are), 4 and 40 rows, against each product alone. */
static inline void al_batch(void) {
    static const uint32_t types[] = {QUANT_Q6_K, QUANT_Q5_K, QUANT_Q4_K, QUANT_Q8_0, QUANT_Q6_K, QUANT_Q4_K};
    enum { NT = 6, NIN = 512, NOUT = 21, NR = 40 };
    threadpool *pool = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool, 2, &err), CLOVER_OK);
    rng_state r;
    rng_seed(&r, 3333);
    uint8_t *w[NT];
    float *x = mem_alloc(NR * NIN * sizeof(float)), *y[NT], *y1 = mem_alloc(NR * NOUT * sizeof(float));
    for (int t = 0; t < NT; t++) {
        w[t] = mem_alloc(quant_row_bytes(types[t], NIN) * NOUT);
        y[t] = mem_alloc(NR * NOUT * sizeof(float));
        if (w[t]) fill_quant_weights(&r, types[t], w[t], NOUT, NIN, t & 1);
    }
    for (size_t i = 0; i < NR * NIN && x; i++) x[i] = rng_normal(&r);
    int bad = 0;
    for (size_t rows = 4; rows <= NR && x && y1; rows += NR - 4) {
        matmul_item items[NT];
        for (int t = 0; t < NT; t++) items[t] = (matmul_item){types[t], w[t], NOUT, NIN, x, rows, y[t]};
        matmul_batch(pool, items, NT);
        for (int t = 0; t < NT; t++) {
            matmul(NULL, types[t], w[t], NOUT, NIN, x, rows, y1);
            if (memcmp(y[t], y1, rows * NOUT * sizeof(float)) != 0 && bad++ < 3)
                fprintf(stderr, "  item %d (%s, %zu rows): batch and matmul differ\n", t, quant_type_name(types[t]), rows);
        }
    }
    CHECK_MSG(bad == 0, "%d batch items differ from their products alone", bad);
    for (int t = 0; t < NT; t++) mem_free(w[t]), mem_free(y[t]);
    mem_free(x), mem_free(y1);
    threadpool_free(pool);
}

/* A full batch of the MoE's shape (moe.c with cpu_grouped: 16 experts'
 * gate and up, each pair on its own rows, and the shared expert's three
 * products on the layer's rows; MATMUL_BATCH_MAX items' worth), 1..64 rows
 * an item (one-row dots, partial and whole 16-row groups), odd output
 * counts, the AMX types and Q6_K: every item bit for bit what matmul gives
 * it alone, on a pool of 3 threads. */
static inline void al_batch_moe(void) {
    static const uint32_t et[] = {QUANT_Q4_K, QUANT_Q8_0, QUANT_Q5_K, QUANT_Q6_K};
    static const size_t rows_of[] = {32, 1, 2, 3, 17, 64, 16, 33, 5, 48, 31, 63, 4, 15, 8, 40};
    enum { NIN = 512, NOUT = 37, EXPERTS = 16, ITEMS = 2 * EXPERTS + 3, NR = 64 };
    threadpool *pool = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool, 3, &err), CLOVER_OK);
    rng_state r;
    rng_seed(&r, 4242);
    uint8_t *w[4];
    for (int t = 0; t < 4; t++) {
        w[t] = mem_alloc(quant_row_bytes(et[t], NIN) * NOUT);
        if (w[t]) fill_quant_weights(&r, et[t], w[t], NOUT, NIN, t & 1);
    }
    float *x = mem_alloc((EXPERTS + 1) * NR * NIN * sizeof(float));
    float *y = mem_alloc(ITEMS * NR * NOUT * sizeof(float)), *y1 = mem_alloc(NR * NOUT * sizeof(float));
    for (size_t i = 0; i < (EXPERTS + 1) * NR * NIN && x; i++) x[i] = rng_normal(&r);
    int bad = 0;
    for (size_t shift = 0; shift < 2 && x && y && y1; shift++) {
        matmul_item items[ITEMS];
        size_t n = 0;
        for (size_t e = 0; e < EXPERTS; e++) {
            const size_t rows = rows_of[(e + 7 * shift) % EXPERTS], t = (e + shift) % 4;
            const float *xe = x + e * NR * NIN;
            for (int k = 0; k < 2; k++, n++)
                items[n] = (matmul_item){et[t], w[t], NOUT - (e + (size_t)k) % 4, NIN, xe, rows, y + n * NR * NOUT};
        }
        const float *xs = x + EXPERTS * NR * NIN;
        const size_t rs = shift ? 29 : 32;
        items[n] = (matmul_item){QUANT_Q8_0, w[1], NOUT, NIN, xs, rs, y + n * NR * NOUT}, n++;
        items[n] = (matmul_item){QUANT_Q5_K, w[2], NOUT, NIN, xs, rs, y + n * NR * NOUT}, n++;
        items[n] = (matmul_item){QUANT_Q8_0, w[1], 1, NIN, xs, rs, y + n * NR * NOUT}, n++;
        matmul_batch(pool, items, n);
        for (size_t i = 0; i < n; i++) {
            const matmul_item *it = &items[i];
            matmul(NULL, it->type, it->w, it->n_out, NIN, it->x, it->n_rows, y1);
            if (memcmp(it->y, y1, it->n_rows * it->n_out * sizeof(float)) != 0 && bad++ < 3)
                fprintf(stderr, "  item %zu (%s, %zu rows): batch and matmul differ\n", i, quant_type_name(it->type),
                        it->n_rows);
        }
    }
    CHECK_MSG(bad == 0, "%d items of the MoE-shaped batch differ from their products alone", bad);
    for (int t = 0; t < 4; t++) mem_free(w[t]);
    mem_free(x), mem_free(y), mem_free(y1);
    threadpool_free(pool);
}

/* matmul's split for many threads (issue 30: whole 16-row runs, so the
 * tile kernel gets 16-row tiles, and a minimum of work a task), with the
 * staging fused into the product's run of the pool, kept in its own run
 * (CLOVER_STAGE_SEPARATE=1), or split as before (CLOVER_OLD_SPLIT=1: runs
 * of 4, partial 16-row tiles), with the K-quants' prefetch off or tile-
 * ahead only (CLOVER_AMX_KPF=0 / 1), with 1 or 3 tiles the fewest a
 * task takes (CLOVER_AMX_TASK_TILES), the K-quants unpacked a row at a time
 * (CLOVER_AMX_KUNPACK=0), chunks of 1, 3 (a partial last one) or 8 super-
 * blocks (CLOVER_AMX_KCHUNK) and the panel kernel's pipeline off
 * (CLOVER_AMX_Q4K_PIPE=0; Q8_0 runs the first three modes only: its
 * products read none of the others' switches): pools of 3 and 16 threads against
 * matmul with no pool (one task), bit for bit, 264 outputs (16 tiles and a
 * partial one), rows past a 16-row group, staged on the calling thread (17
 * rows) and on the pool (40, 100). */
static inline void al_split(void) {
    static const uint32_t types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K};
    static const size_t rows[] = {17, 40, 100}, pools[] = {3, 16};
    static const char *const modes[][2] = {{NULL, NULL},
                                           {"CLOVER_STAGE_SEPARATE", "1"},
                                           {"CLOVER_OLD_SPLIT", "1"},
                                           {"CLOVER_AMX_TASK_TILES", "1"},
                                           {"CLOVER_AMX_TASK_TILES", "3"},
                                           {"CLOVER_AMX_KPF", "0"},
                                           {"CLOVER_AMX_KPF", "1"},
                                           {"CLOVER_AMX_KUNPACK", "0"},
                                           {"CLOVER_AMX_KCHUNK", "1"},
                                           {"CLOVER_AMX_KCHUNK", "3"},
                                           {"CLOVER_AMX_KCHUNK", "8"},
                                           {"CLOVER_AMX_Q4K_PIPE", "0"}};
    /* modes from here on set switches only the K-quants read (matmul.c asks amx_task_tiles and the Q4K_PIPE switch
     * for them alone, gemm_amx.c KPF, KUNPACK and KCHUNK): Q8_0's runs under them would repeat its first one's */
    enum { N_MODES = sizeof modes / sizeof modes[0], FIRST_KQ_MODE = 3 };
    enum { NIN = 1024, NOUT = 264, NR = 100 };
    rng_state r;
    rng_seed(&r, 3434);
    threadpool *pool[2] = {0};
    clover_error err;
    for (int p = 0; p < 2; p++) CHECK_EQ_INT(threadpool_create(&pool[p], pools[p], &err), CLOVER_OK);
    uint8_t *w = mem_alloc(quant_row_bytes(QUANT_Q8_0, NIN) * NOUT); /* the largest of the three rows */
    float *x = mem_alloc(NR * NIN * sizeof(float)), *y = mem_alloc(NR * NOUT * sizeof(float));
    float *y1 = mem_alloc(NR * NOUT * sizeof(float));
    int bad = 0;
    for (size_t t = 0; t < 3 && w && x && y && y1; t++) {
        fill_quant_weights(&r, types[t], w, NOUT, NIN, (int)(t & 1));
        for (size_t i = 0; i < NR * NIN; i++) x[i] = rng_normal(&r);
        for (size_t ri = 0; ri < 3; ri++) {
            const size_t n = rows[ri];
            matmul(NULL, types[t], w, NOUT, NIN, x, n, y1);
            for (int p = 0; p < 2; p++)
                for (int m = 0; m < N_MODES; m++) {
                    if (types[t] == QUANT_Q8_0 && m >= FIRST_KQ_MODE) continue; /* the plain run's bits again */
                    if (modes[m][0]) setenv(modes[m][0], modes[m][1], 1);
                    memset(y, 0xFF, n * NOUT * sizeof(float));
                    matmul(pool[p], types[t], w, NOUT, NIN, x, n, y);
                    if (modes[m][0]) unsetenv(modes[m][0]);
                    if (memcmp(y, y1, n * NOUT * sizeof(float)) != 0 && bad++ < 3)
                        fprintf(stderr, "  %s rows %zu pool %zu %s=%s: differs from the product with no pool\n",
                                quant_type_name(types[t]), n, pools[p], modes[m][0] ? modes[m][0] : "(new split)",
                                modes[m][1] ? modes[m][1] : "fused");
                }
        }
    }
    CHECK_MSG(w && x && y && y1, "allocation failed");
    CHECK_MSG(bad == 0, "%d products split for many threads differ", bad);
    mem_free(w), mem_free(x), mem_free(y), mem_free(y1);
    for (int p = 0; p < 2; p++) threadpool_free(pool[p]);
}

/* ---- the repacked Q4_K path (gemm_amx_pack.h) ----
 *
 * al_rp_case, one case of the tile kernel `kernel`: Q4_K weights
 * registered as stable memory, their pack made by gemm_amx_q4k_find and
 * its tiles filled lazily by the kernel's calls (two tasks split at
 * `split`: at a tile boundary, both take the panels; off one, the second
 * starts mid-tile and takes the unpacking path). Every output must equal,
 * bit for bit, the unpacking kernel's (the same job with no pack) and the
 * whole-block oracle's; with the software pipeline on (the default), then
 * off (q4k_pipe 0, what CLOVER_AMX_Q4K_PIPE=0 sets; the panels now filled),
 * then with tile 0 marked as being filled by another task (its rows take
 * the unpacking path, the rest the panels). Returns the failed outputs. */
static inline int al_rp_case(gemm_kernel_fn kernel, rng_state *r, size_t n_out, size_t n_in, size_t n_rows, int raw,
                             size_t split) {
    const uint32_t type = QUANT_Q4_K;
    const size_t rb = quant_row_bytes(type, n_in), xqb = quant_act_row_bytes(type, n_in), ny = n_rows * n_out;
    uint8_t *w = mem_alloc(rb * n_out), *xq = mem_alloc(n_rows * xqb + 64);
    uint8_t *staged = mem_alloc(gemm_amx_stage_bytes(type, n_rows, n_in) + 64);
    float *x = mem_alloc(n_rows * n_in * sizeof(float)), *deq = mem_alloc(n_out * n_in * sizeof(float));
    float *y0 = mem_alloc(ny * sizeof(float)), *y = mem_alloc(ny * sizeof(float));
    int bad = 0;
    if (!w || !xq || !staged || !x || !deq || !y0 || !y) {
        CHECK(!"allocation failed");
        bad = 1;
        goto out;
    }
    gl_fill_case(r, type, w, n_out, n_in, raw, x, n_rows, deq, xq);
    gemm_amx_stage(type, x, n_rows, n_in, staged);
    matmul_job j = {.type = type, .w = w, .row_bytes = rb, .n_out = n_out, .n_in = n_in, .x = x, .n_rows = n_rows,
                    .rows_per_task = n_out, .xq = staged, .xq_bytes = xqb, .amx = 1, .y = y0};
    if (split > n_out) split = n_out;
    kernel(&j, 0, split);
    kernel(&j, split, n_out);
    gemm_amx_stable_add(w, rb * n_out);
    const gemm_amx_q4k_pack *pk = gemm_amx_q4k_find(w, n_out, n_in);
    CHECK_MSG(pk != NULL, "no pack for a weight in stable memory");
    if (!pk) {
        bad = 1;
        goto out;
    }
    CHECK(gemm_amx_q4k_find(w, n_out, n_in) == pk); /* made once */
    for (int mode = 0; mode < 3; mode++) {
        j.q4k = pk, j.q4k_pipe = mode != 1, j.y = y;
        _Atomic unsigned char *st0 = (_Atomic unsigned char *)&pk->state[0];
        if (mode == 2) atomic_store(st0, GEMM_AMX_PACK_FILLING);
        for (size_t i = 0; i < ny; i++) y[i] = -1.0f;
        kernel(&j, 0, split);
        kernel(&j, split, n_out);
        if (mode == 2) atomic_store(st0, GEMM_AMX_PACK_READY);
        for (size_t rr = 0; rr < n_rows; rr++)
            for (size_t o = 0; o < n_out; o++) {
                const size_t i = rr * n_out + o;
                const float want = al_oracle(type, w + o * rb, xq + rr * xqb, n_in);
                if ((!al_same(y[i], y0[i]) || !al_same(y[i], want)) && bad++ < 3)
                    fprintf(stderr, "  repacked q4_K mode %d out=%zu in=%zu rows=%zu split=%zu: y[%zu][%zu] = %.9g, "
                            "unpacking kernel %.9g, oracle %.9g\n", mode, n_out, n_in, n_rows, split, rr, o, y[i],
                            y0[i], want);
            }
    }
    for (size_t t = 0; t < pk->tiles; t++) /* a task that starts mid-tile never fills: only tile-aligned ones do */
        if (split % 16 == 0 || t < (split + 15) / 16) CHECK(atomic_load(&pk->state[t]) == GEMM_AMX_PACK_READY);
    gemm_amx_stable_remove(w, rb * n_out);
out:
    mem_free(w), mem_free(xq), mem_free(staged), mem_free(x), mem_free(deq), mem_free(y0), mem_free(y);
    return bad;
}

static inline void al_repacked(gemm_kernel_fn kernel) {
    static const size_t outs[] = {1, 5, 13, 37, 100}, ins[] = {256, 768, 2304}, splits[] = {16, 20, 32, 1000};
    static const size_t spread[] = {3, 4, 15, 16, 17, 31, 33, 64, 65, 130};
    rng_state r;
    rng_seed(&r, 3031);
    int bad = 0, cases = 0;
    for (size_t rows = 1; rows <= 64; rows++, cases++) /* every row count on the smallest shape */
        bad += al_rp_case(kernel, &r, 37, 256, rows, (int)(rows & 1), splits[rows % 4]);
    for (size_t a = 0; a < sizeof outs / sizeof outs[0]; a++)
        for (size_t b = 0; b < sizeof ins / sizeof ins[0]; b++)
            for (size_t c = 0; c < sizeof spread / sizeof spread[0]; c += 1 + (ins[b] > 256))
                bad += al_rp_case(kernel, &r, outs[a], ins[b], spread[c], (int)((a + c) & 1), splits[(a + b + c) % 4]),
                cases++;
    CHECK_MSG(bad == 0, "repacked q4_K: %d outputs differ from the unpacking kernel or the oracle in %d cases", bad,
              cases);
    CHECK_MSG(gemm_amx_q4k_pack_bytes() == 0, "packs left after their memory was removed");
}

/* The switches and the bounds: no pack where the memory is not stable, the
 * switch is off or the budget is spent; a pack for the stable weight's
 * shape only; removing the memory frees its packs. */
static inline void al_repack_bookkeeping(void) {
    enum { NOUT = 40, NIN = 512 };
    const size_t rb = quant_row_bytes(QUANT_Q4_K, NIN);
    uint8_t *w = mem_alloc(rb * NOUT);
    if (!w) {
        CHECK(!"allocation failed");
        return;
    }
    memset(w, 0, rb * NOUT);
    CHECK(gemm_amx_q4k_find(w, NOUT, NIN) == NULL); /* not stable */
    gemm_amx_stable_add(w, rb * NOUT);
    CHECK(gemm_amx_q4k_find(w, NOUT + 1, NIN) == NULL); /* past the stable bytes */
    setenv("CLOVER_AMX_Q4K_REPACK", "0", 1);
    CHECK(gemm_amx_q4k_find(w, NOUT, NIN) == NULL);
    setenv("CLOVER_AMX_Q4K_REPACK", "1", 1); /* on again (the tests run with it on) */
    setenv("CLOVER_AMX_Q4K_REPACK_MB", "0", 1);
    CHECK(gemm_amx_q4k_find(w, NOUT, NIN) == NULL);
    unsetenv("CLOVER_AMX_Q4K_REPACK_MB");
    const gemm_amx_q4k_pack *pk = gemm_amx_q4k_find(w, NOUT, NIN);
    CHECK(pk != NULL);
    CHECK(gemm_amx_q4k_find(w, NOUT / 2, NIN) == NULL); /* another shape at the same address */
    CHECK_EQ_INT((long long)gemm_amx_q4k_pack_bytes(), (long long)(3 * 2 * sizeof(gemm_amx_q4k_panel)));
    gemm_amx_stable_remove(w, rb * NOUT);
    CHECK_EQ_INT((long long)gemm_amx_q4k_pack_bytes(), 0);
    CHECK(gemm_amx_q4k_find(w, NOUT, NIN) == NULL);
    mem_free(w);
}


/* matmul at the level this process runs, Q4_K weights in stable memory (so
 * its products take the panels where the level is AMX, filled lazily by the
 * pool's tasks, several at once): 264 outputs (16 tiles and a partial one),
 * 17, 40 and 100 rows, pools of 3 and 16 threads and none, each product
 * bit for bit what it gives with CLOVER_AMX_Q4K_REPACK=0 (the unpacking
 * path), the first product on each fresh pack, then again on the filled
 * one, and with CLOVER_AMX_Q4K_PIPE=0. Where the level is AMX the pack
 * must exist and be filled, every tile. */
static inline void al_matmul_repacked(void) {
    static const size_t rows[] = {17, 40, 100}, pools[] = {3, 16};
    enum { NIN = 1024, NOUT = 264, NR = 100 };
    rng_state r;
    rng_seed(&r, 3535);
    threadpool *pool[2] = {0};
    clover_error err;
    for (int p = 0; p < 2; p++) CHECK_EQ_INT(threadpool_create(&pool[p], pools[p], &err), CLOVER_OK);
    const size_t bytes = quant_row_bytes(QUANT_Q4_K, NIN) * NOUT;
    uint8_t *w = mem_alloc(bytes);
    float *x = mem_alloc(NR * NIN * sizeof(float)), *y = mem_alloc(NR * NOUT * sizeof(float));
    float *y0 = mem_alloc(NR * NOUT * sizeof(float));
    int bad = 0;
    const int amx = quant_simd_level() == QUANT_LEVEL_AMX;
    for (size_t ri = 0; ri < 3 && w && x && y && y0; ri++)
        for (int p = -1; p < 2; p++) {
            const size_t n = rows[ri];
            fill_quant_weights(&r, QUANT_Q4_K, w, NOUT, NIN, (int)(ri & 1)); /* before registering: stable after */
            for (size_t i = 0; i < NR * NIN; i++) x[i] = rng_normal(&r);
            threadpool *pl = p < 0 ? NULL : pool[p];
            setenv("CLOVER_AMX_Q4K_REPACK", "0", 1);
            matmul(pl, QUANT_Q4_K, w, NOUT, NIN, x, n, y0);
            setenv("CLOVER_AMX_Q4K_REPACK", "1", 1); /* on again (the tests run with it on) */
            gemm_amx_stable_add(w, bytes);
            for (int pass = 0; pass < 3; pass++) {
                if (pass == 2) setenv("CLOVER_AMX_Q4K_PIPE", "0", 1);
                memset(y, 0xFF, n * NOUT * sizeof(float));
                matmul(pl, QUANT_Q4_K, w, NOUT, NIN, x, n, y);
                if (pass == 2) unsetenv("CLOVER_AMX_Q4K_PIPE");
                if (memcmp(y, y0, n * NOUT * sizeof(float)) != 0 && bad++ < 3)
                    fprintf(stderr, "  q4_K rows %zu pool %zu pass %d: the panels' product differs\n", n,
                            p < 0 ? (size_t)0 : pools[p], pass);
            }
            const gemm_amx_q4k_pack *pk = gemm_amx_q4k_find(w, NOUT, NIN);
            CHECK(pk != NULL); /* the memory is stable: made by the products, or here */
            for (size_t t = 0; pk && amx && t < pk->tiles; t++)
                CHECK(atomic_load(&pk->state[t]) == GEMM_AMX_PACK_READY);
            gemm_amx_stable_remove(w, bytes); /* before the bytes change */
        }
    CHECK_MSG(w && x && y && y0, "allocation failed");
    CHECK_MSG(bad == 0, "%d products through the panels differ from the unpacking path", bad);
    CHECK_MSG(gemm_amx_q4k_pack_bytes() == 0, "packs left after their memory was removed");
    mem_free(w), mem_free(x), mem_free(y), mem_free(y0);
    for (int p = 0; p < 2; p++) threadpool_free(pool[p]);
}

#endif
