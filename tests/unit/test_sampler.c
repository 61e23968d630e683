/*
 * test_sampler.c: SPEC.md 3.2 against hand-computed cases: the SplitMix64
 * stream (published vectors for seed 0, values computed independently in
 * Python for a 64-bit seed), the 24-bit draw, greedy's first maximum and
 * its confidence, top-k ties at the cut, the top-p "mass before" rule,
 * temperature, and the fast head-only path against a plain full sort
 * written here from the SPEC text.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "backend/sampler.h"
#include "test.h"

static sampler_scratch sc;

static void splitmix_vectors(void) {
    rng_state r;
    rng_seed(&r, 0);
    /* Published SplitMix64 outputs for seed 0. */
    CHECK(rng_next(&r) == 0xE220A8397B1DCDAFull);
    CHECK(rng_next(&r) == 0x6E789E6AA1B965F4ull);
    CHECK(rng_next(&r) == 0x06C45D188009454Full);
    rng_seed(&r, 0x0123456789ABCDEFull); /* a full 64-bit seed (Python) */
    CHECK(rng_next(&r) == 0x157A3807A48FAA9Dull);
    CHECK(rng_next(&r) == 0xD573529B34A1D093ull);
    /* The draw: the top 24 bits over 2^24. */
    rng_seed(&r, 0);
    CHECK((double)rng_uniform(&r) == 0xE220A8 / 16777216.0);
    CHECK((double)rng_uniform(&r) == 0x6E789E / 16777216.0);
    rng_seed(&r, 42);
    CHECK((double)rng_uniform(&r) == 12441394 / 16777216.0);
}

static void greedy_first_maximum(void) {
    const float row[4] = {1.0f, 3.0f, 3.0f, 0.0f};
    sampler_params p = {0.0f, 0, 1.0f};
    rng_state r, r0;
    rng_seed(&r, 5);
    r0 = r;
    int32_t id;
    float conf;
    CHECK_EQ_INT(sampler_pick(&p, row, 4, sampler_draw(&p, &r), &sc, &id, &conf, NULL), 0);
    CHECK_EQ_INT(id, 1);
    /* 1 / (e^-2 + 1 + 1 + e^-3) */
    CHECK_NEAR(conf, 0.45764027779301547, 1e-7);
    CHECK(r.s == r0.s); /* greedy takes no draw */
    /* T below 1e-6 is greedy too. */
    p.temperature = 5e-7f;
    CHECK_EQ_INT(sampler_pick(&p, row, 4, sampler_draw(&p, &r), &sc, &id, &conf, NULL), 0);
    CHECK_EQ_INT(id, 1);
    CHECK(r.s == r0.s);
    /* -inf entries are skipped; a forbidden argmax moves on. */
    const float row2[3] = {-INFINITY, 2.0f, -INFINITY};
    p.temperature = 0.0f;
    CHECK_EQ_INT(sampler_pick(&p, row2, 3, 0.0, NULL, &id, &conf, NULL), 0); /* greedy needs no scratch */
    CHECK_EQ_INT(id, 1);
    CHECK_NEAR(conf, 1.0, 0.0);
}

static void every_id_forbidden_is_an_error(void) {
    const float row[3] = {-INFINITY, -INFINITY, -INFINITY};
    sampler_params p = {0.0f, 0, 1.0f};
    rng_state r;
    rng_seed(&r, 0);
    int32_t id;
    float conf;
    clover_error err;
    CHECK_EQ_INT(sampler_pick(&p, row, 3, 0.0, &sc, &id, &conf, &err), CLOVER_E_INVALID);
    CHECK(strstr(err.message, "forbidden") != NULL);
    p.temperature = 1.0f;
    CHECK_EQ_INT(sampler_pick(&p, row, 3, sampler_draw(&p, &r), &sc, &id, &conf, &err), CLOVER_E_INVALID);
}

/* Seed 0's first draw is u = 0.88331079... */
static int32_t pick_seed0(const sampler_params *p, const float *row, size_t n, float *conf) {
    rng_state r;
    rng_seed(&r, 0);
    int32_t id = -1;
    double u = sampler_draw(p, &r);
    CHECK(r.s == 0x9E3779B97F4A7C15ull); /* exactly one draw */
    CHECK_EQ_INT(sampler_pick(p, row, n, u, &sc, &id, conf, NULL), 0);
    return id;
}

static void top_k_keeps_ties_at_the_cut(void) {
    /* Values 2, 1, 1, 0 with k = 2: the cut is 1 and both 1s stay.
     * p = (e^2, e, e) / 12.825 = .576, .212, .212; cumulative .576 .788 1:
     * u = .883 lands on the third candidate, id 2 (a strict top-2 would
     * only have ids 0 and 1). */
    const float row[4] = {2.0f, 1.0f, 1.0f, 0.0f};
    sampler_params p = {1.0f, 2, 1.0f};
    float conf;
    CHECK_EQ_INT(pick_seed0(&p, row, 4, &conf), 2);
    /* The confidence is the T = 1 probability over the whole row:
     * e / (e^2 + 2e + 1). */
    double e = exp(1.0);
    CHECK_NEAR(conf, e / (e * e + 2 * e + 1), 1e-7);
    /* k = 1 with a unique maximum: always id 0. */
    p.top_k = 1;
    CHECK_EQ_INT(pick_seed0(&p, row, 4, &conf), 0);
    /* k >= the number of candidates: off. Probabilities e^2, e, e, 1 over
     * 13.825: cumulative .534 .731 .928: u = .883 -> id 2. */
    p.top_k = 4;
    CHECK_EQ_INT(pick_seed0(&p, row, 4, &conf), 2);
}

static void top_p_keeps_the_prefix_until_the_mass_before_exceeds_p(void) {
    /* p = .5, .3, .2 (logits ln p). top_p .55: before = 0 keep, .5 keep,
     * .8 > .55 drop: {0, 1} renormalised to .625, .375; u = .883 -> id 1.
     * (The rule "cumulative including itself <= p" would keep only id 0.) */
    const float row[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    sampler_params p = {1.0f, 0, 0.55f};
    float conf;
    CHECK_EQ_INT(pick_seed0(&p, row, 3, &conf), 1);
    CHECK_NEAR(conf, 0.3, 1e-6);
    /* A tiny top_p keeps at least the first candidate. */
    p.top_p = 1e-6f;
    CHECK_EQ_INT(pick_seed0(&p, row, 3, &conf), 0);
    /* top_p .85: before .8 <= .85 keeps all three: cumulative .5 .8 1 ->
     * u = .883 -> id 2. */
    p.top_p = 0.85f;
    CHECK_EQ_INT(pick_seed0(&p, row, 3, &conf), 2);
    /* Outside (0, 1): off. */
    p.top_p = 0.0f;
    CHECK_EQ_INT(pick_seed0(&p, row, 3, &conf), 2);
}

static void temperature_scales_before_the_softmax(void) {
    /* Logits 2, 0. T = .5: p0 = 1/(1+e^-4) = .982 > u -> id 0.
     * T = 2: p0 = 1/(1+e^-1) = .731 < u = .883 -> id 1, whose confidence
     * is the T = 1 probability 1/(e^2+1). */
    const float row[2] = {2.0f, 0.0f};
    sampler_params p = {0.5f, 0, 1.0f};
    float conf;
    CHECK_EQ_INT(pick_seed0(&p, row, 2, &conf), 0);
    p.temperature = 2.0f;
    CHECK_EQ_INT(pick_seed0(&p, row, 2, &conf), 1);
    CHECK_NEAR(conf, 0.11920292202211755, 1e-7);
}

/* ---- a plain full-sort sampler written from SPEC 3.2, for comparison ---- */

typedef struct ref_cand {
    float v;
    int32_t id;
} ref_cand;

static int ref_cmp(const void *a, const void *b) {
    const ref_cand *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->id - y->id;
}

static int32_t ref_pick(const float *row, size_t n, float t, int32_t k, float top_p, double u) {
    ref_cand *c = malloc(n * sizeof *c);
    double *p = malloc(n * sizeof *p);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(row[i])) c[m++] = (ref_cand){row[i] / t, (int32_t)i};
    qsort(c, m, sizeof *c, ref_cmp);
    if (k > 0 && (size_t)k < m) {
        float cut = c[k - 1].v;
        size_t j = 0;
        while (j < m && c[j].v >= cut)
            j++;
        m = j;
    }
    double z = 0;
    for (size_t i = 0; i < m; i++)
        z += p[i] = exp((double)(c[i].v - c[0].v));
    for (size_t i = 0; i < m; i++)
        p[i] /= z;
    double tp = top_p;
    if (tp > 0 && tp < 1) {
        double before = 0;
        size_t keep = m;
        for (size_t i = 0; i < m; i++) {
            if (before > tp) {
                keep = i;
                break;
            }
            before += p[i];
        }
        m = keep ? keep : 1;
        z = 0;
        for (size_t i = 0; i < m; i++)
            z += p[i];
        for (size_t i = 0; i < m; i++)
            p[i] /= z;
    }
    int32_t id = c[m - 1].id;
    for (size_t i = 0; i < m; i++) {
        if (u < p[i]) {
            id = c[i].id;
            break;
        }
        u -= p[i];
    }
    free(c);
    free(p);
    return id;
}

static void fast_path_matches_a_full_sort(void) {
    enum { N = 3000 };
    float *row = malloc(N * sizeof *row);
    rng_state g;
    rng_seed(&g, 1234);
    const float temps[] = {0.3f, 0.7f, 1.0f, 1.5f};
    const int32_t ks[] = {0, 0, 40, 0};
    const float ps[] = {1.0f, 0.9f, 0.95f, 0.999f};
    int mismatches = 0, trials = 0;
    for (int trial = 0; trial < 200; trial++) {
        for (int i = 0; i < N; i++) /* a peaked head over a long tail, some ties and forbidden ids */
            row[i] = (float)((int)(rng_normal(&g) * 8.0f)) * 0.5f - (i % 97 == 0 ? INFINITY : 0.0f);
        for (int j = 0; j < 4; j++) {
            sampler_params p = {temps[j], ks[j], ps[j]};
            rng_state r;
            rng_seed(&r, (uint64_t)trial * 7919u + (uint64_t)j);
            double u = sampler_draw(&p, &r);
            int32_t id;
            float conf;
            CHECK_EQ_INT(sampler_pick(&p, row, N, u, &sc, &id, &conf, NULL), 0);
            trials++;
            if (id != ref_pick(row, N, temps[j], ks[j], ps[j], u)) mismatches++;
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(trials, 800);
    free(row);
}

int main(void) {
    if (sampler_scratch_init(&sc, 4096, NULL)) return 1;
    RUN(splitmix_vectors);
    RUN(greedy_first_maximum);
    RUN(every_id_forbidden_is_an_error);
    RUN(top_k_keeps_ties_at_the_cut);
    RUN(top_p_keeps_the_prefix_until_the_mass_before_exceeds_p);
    RUN(temperature_scales_before_the_softmax);
    RUN(fast_path_matches_a_full_sort);
    sampler_scratch_free(&sc);
    return TEST_EXIT();
}
