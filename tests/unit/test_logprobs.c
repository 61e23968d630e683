/*
 * test_logprobs.c: log-probabilities in the public API
 * (clover_generate_params.logprobs / top_logprobs, the result's arrays and
 * the on_token_info callback), on the CPU backend and the tiny fixtures.
 *  - Every generation case of tiny_clover (block diffusion, the same in
 *    autoregressive mode, and the first 4 lossless) and of tiny_ar, with logprobs and 5
 *    alternatives: tokens, confidences, finish reasons and passes are bit
 *    for bit those of the run without (asking costs nothing in results);
 *    each token's log-probability is log(confidence) (the confidence is the
 *    sampler's float32 arithmetic, checked against the PyTorch reference by
 *    the golden tests; the log-probability is backend_pick's float64
 *    log-softmax, separate code); the alternatives are distinct, descending,
 *    the token's own entry equal to its log-probability, a greedy token
 *    first; the streaming callback sees exactly the result's values.
 *  - Autoregressive, independently: the test replays each tiny_ar answer on
 *    a backend session with the engine's row counts (the prompt, then one
 *    row per token), and computes every row's log-softmax and top-5 with its
 *    own float64 arithmetic over the raw logits: the engine's figures match.
 *  - Requests with logprobs mixed in one batch (clover_batch_step) with
 *    requests without: the arrays are bit for bit those of running alone.
 *  - top_logprobs 21 is refused naming the field.
 */
#include <math.h>

#include "engine/session.h"
#include "golden_generate.h"

static fixture fxc, fxa;
static test_model tmc, tma;

typedef struct seen_tokens {
    size_t n, n_top;
    int32_t id[512];
    float lp[512], top_lp[512 * 5];
    int32_t top_id[512 * 5];
} seen_tokens;

static int on_info(void *user, const clover_token_info *t) {
    seen_tokens *s = user;
    CHECK_EQ_INT(t->index, s->n);
    if (s->n < 512) {
        s->id[s->n] = t->id;
        s->lp[s->n] = t->logprob;
        s->n_top = t->n_top;
        for (size_t j = 0; j < t->n_top && j < 5; j++)
            s->top_id[s->n * 5 + j] = t->top_ids[j], s->top_lp[s->n * 5 + j] = t->top_logprobs[j];
    }
    s->n++;
    return 0;
}

static clover_session *new_session(const test_model *tm) {
    clover_session *s = NULL;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = 2;
    clover_error err = {0};
    CHECK_MSG(clover_session_create(&s, tm->model, &sp, &err) == 0, "%s", err.message);
    return s;
}

/* The checks of one result with logprobs against the same request without. */
static void check_one(const char *name, const clover_generate_result *r, const clover_generate_result *plain,
                      const seen_tokens *seen, bool greedy) {
    CHECK_MSG(r->n_generated == plain->n_generated, "%s: %zu tokens with logprobs, %zu without", name,
              r->n_generated, plain->n_generated);
    const size_t n = r->n_generated < plain->n_generated ? r->n_generated : plain->n_generated, K = 5;
    CHECK_MSG(!memcmp(r->ids, plain->ids, n * 4) && !memcmp(r->confidences, plain->confidences, n * 4),
              "%s: tokens or confidences change when logprobs are asked", name);
    CHECK_EQ_INT(r->finish, plain->finish);
    CHECK_EQ_INT(r->n_blocks, plain->n_blocks);
    if (r->n_blocks == plain->n_blocks && r->n_blocks)
        CHECK(!memcmp(r->passes_per_block, plain->passes_per_block, r->n_blocks * 4));
    CHECK_EQ_INT(r->n_top_logprobs, K);
    CHECK(r->logprobs && r->top_ids && r->top_logprobs);
    CHECK(!plain->logprobs && !plain->top_ids && plain->n_top_logprobs == 0);
    if (!r->logprobs || !r->top_ids) return;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        const float lp = r->logprobs[i], c = r->confidences[i];
        const int32_t *ti = r->top_ids + i * K;
        const float *tl = r->top_logprobs + i * K;
        double d = fabs((double)lp - log((double)c));
        if (!(d <= worst)) worst = d;
        CHECK_MSG(lp <= 0.0f, "%s token %zu: log-probability %g > 0", name, i, (double)lp);
        bool own = false;
        for (size_t j = 0; j < K; j++) {
            CHECK_MSG(ti[j] >= 0 && tl[j] <= 0.0f, "%s token %zu alt %zu: id %d lp %g", name, i, j, ti[j],
                      (double)tl[j]);
            for (size_t k = 0; k < j; k++) CHECK(ti[k] != ti[j]);
            if (j) CHECK_MSG(tl[j] < tl[j - 1] || (tl[j] == tl[j - 1] && ti[j] > ti[j - 1]),
                             "%s token %zu: alternatives out of order at %zu", name, i, j);
            if (ti[j] == r->ids[i]) {
                own = true;
                CHECK_MSG(tl[j] == lp, "%s token %zu: its alternative entry %g != its log-probability %g", name, i,
                          (double)tl[j], (double)lp);
            }
        }
        if (!own) CHECK_MSG(lp <= tl[K - 1], "%s token %zu: not among the alternatives but more probable", name, i);
        if (greedy) CHECK_MSG(ti[0] == r->ids[i], "%s token %zu: greedy pick %d is not the first alternative %d", name,
                              i, r->ids[i], ti[0]);
    }
    CHECK_MSG(worst <= 2e-5, "%s: log-probability off log(confidence) by %.3g", name, worst);
    /* the callback: every token but a final stop id, the result's values */
    size_t streamed = n - (r->finish == CLOVER_FINISH_STOP ? 1 : 0);
    CHECK_EQ_INT(seen->n, streamed);
    CHECK_EQ_INT(seen->n_top, K);
    for (size_t i = 0; i < streamed && i < seen->n && i < 512; i++) {
        CHECK(seen->id[i] == r->ids[i] && seen->lp[i] == r->logprobs[i]);
        CHECK(!memcmp(seen->top_id + i * 5, r->top_ids + i * K, K * 4));
        CHECK(!memcmp(seen->top_lp + i * 5, r->top_logprobs + i * K, K * 4));
    }
}

/* Every generation case of a fixture in one mode: with and without logprobs. */
static size_t every_case(const fixture *fx, const test_model *tm, int mode, int lossless, size_t limit) {
    json_t *cases = json_object_get(fx->manifest, "generate"), *c;
    size_t i, done = 0;
    json_array_foreach(cases, i, c) {
        if (i >= limit) break;
        const char *name = json_string_value(json_object_get(c, "name"));
        golden_request g;
        golden_request_init(&g, tm->model, json_object_get(c, "prompt_ids"), json_object_get(c, "options"),
                            json_object_get(c, "record_overrides"));
        g.p.mode = mode;
        g.p.lossless = lossless;
        clover_generate_result plain = {0}, r = {0};
        clover_error err = {0};
        clover_session *s = new_session(tm);
        int rc = s ? clover_generate(s, g.prompt, g.n_prompt, &g.p, &plain, &err) : -1;
        CHECK_MSG(rc == 0, "%s: %s", name, err.message);
        clover_session_free(s);
        seen_tokens *seen = calloc(1, sizeof *seen);
        clover_generate_params p = g.p;
        p.logprobs = 1;
        p.top_logprobs = 5;
        p.on_token_info = on_info;
        p.user = seen;
        s = new_session(tm);
        int rc2 = s ? clover_generate(s, g.prompt, g.n_prompt, &p, &r, &err) : -1;
        CHECK_MSG(rc2 == 0, "%s with logprobs: %s", name, err.message);
        clover_session_free(s);
        if (!rc && !rc2) {
            check_one(name, &r, &plain, seen, g.p.temperature < 1e-6f);
            done++;
        }
        clover_generate_result_free(&plain);
        clover_generate_result_free(&r);
        free(seen);
        golden_request_free(&g);
    }
    return done;
}

static void every_case_with_logprobs(void) {
    size_t a = every_case(&fxc, &tmc, CLOVER_MODE_AUTO, 0, SIZE_MAX);
    size_t b = every_case(&fxc, &tmc, CLOVER_MODE_AUTOREGRESSIVE, 0, SIZE_MAX);
    size_t c = every_case(&fxc, &tmc, CLOVER_MODE_AUTO, 1, 4); /* lossless is slow (verify + recommit): 4 cases */
    size_t d = every_case(&fxa, &tma, CLOVER_MODE_AUTO, 0, SIZE_MAX);
    CHECK(a >= 10 && b >= 10 && c >= 4 && d >= 3);
    printf("     cases: %zu diffusion, %zu autoregressive, %zu lossless (tiny_clover), %zu tiny_ar\n", a, b, c, d);
}

/* float64 log-softmax of the raw row with the forbidden ids removed, and the
 * top-k by selection (value descending, ties to the lower id). */
static void ref_row(const float *row, size_t V, const uint8_t *forbid, int32_t id, size_t k, double *lp,
                    int32_t *top, double *top_lp) {
    double mx = -INFINITY, sum = 0.0;
    for (size_t i = 0; i < V; i++)
        if (!forbid[i] && (double)row[i] > mx) mx = row[i];
    for (size_t i = 0; i < V; i++)
        if (!forbid[i]) sum += exp((double)row[i] - mx);
    const double lse = mx + log(sum);
    *lp = (double)row[id] - lse;
    for (size_t j = 0; j < k; j++) {
        size_t arg = V;
        for (size_t i = 0; i < V; i++) {
            bool taken = forbid[i] != 0;
            for (size_t q = 0; q < j && !taken; q++) taken = top[q] == (int32_t)i;
            if (!taken && (arg == V || row[i] > row[arg])) arg = i;
        }
        top[j] = (int32_t)arg;
        top_lp[j] = (double)row[arg] - lse;
    }
}

static void autoregressive_against_own_arithmetic(void) {
    const clover_model *m = tma.model;
    const size_t V = m->hp.n_vocab, K = 5;
    json_t *cases = json_object_get(fxa.manifest, "generate"), *c;
    size_t i, tokens = 0;
    double worst = 0.0;
    float *lg = malloc(V * 4);
    uint8_t *forbid = calloc(V, 1);
    backend_config cfg = {.n_threads = 2, .max_rows = 64};
    backend *be = NULL;
    clover_error err = {0};
    CHECK(backend_cpu.create(m, &cfg, &be, &err) == 0);
    json_array_foreach(cases, i, c) {
        golden_request g;
        golden_request_init(&g, m, json_object_get(c, "prompt_ids"), json_object_get(c, "options"),
                            json_object_get(c, "record_overrides"));
        g.p.logprobs = 1;
        g.p.top_logprobs = K;
        clover_generate_result r = {0};
        clover_session *s = new_session(&tma);
        int rc = s ? clover_generate(s, g.prompt, g.n_prompt, &g.p, &r, &err) : -1;
        CHECK_MSG(rc == 0, "%s", err.message);
        clover_session_free(s);
        backend_session *bs = NULL;
        if (!rc && be && backend_cpu.session_create(be, &bs, &err) == 0) {
            memset(forbid, 0, V);
            for (size_t k = 0; k < g.n_suppress; k++) forbid[g.suppress[k]] = 1;
            for (size_t a = 0; a < g.n_prompt; a += 64) { /* the engine's prompt chunks */
                size_t nr = g.n_prompt - a < 64 ? g.n_prompt - a : 64;
                backend_commit_seq q = {.s = bs, .ids = g.prompt + a, .n = nr, .last_logits = lg};
                CHECK(backend_cpu.commit(be, &q, 1, NULL) == 0);
            }
            for (size_t t = 0; t < r.n_generated; t++) {
                double lp, tl[5];
                int32_t ti[5];
                ref_row(lg, V, forbid, r.ids[t], K, &lp, ti, tl);
                double d = fabs(lp - r.logprobs[t]);
                if (!(d <= worst)) worst = d;
                for (size_t j = 0; j < K; j++) {
                    CHECK_MSG(ti[j] == r.top_ids[t * K + j], "token %zu alt %zu: %d, expected %d", t, j,
                              r.top_ids[t * K + j], ti[j]);
                    d = fabs(tl[j] - r.top_logprobs[t * K + j]);
                    if (!(d <= worst)) worst = d;
                }
                backend_commit_seq q = {.s = bs, .ids = &r.ids[t], .n = 1, .last_logits = lg};
                CHECK(backend_cpu.commit(be, &q, 1, NULL) == 0);
                tokens++;
            }
            backend_cpu.session_free(bs);
        }
        clover_generate_result_free(&r);
        golden_request_free(&g);
    }
    CHECK(tokens >= 10);
    CHECK_MSG(worst <= 1e-6, "log-probabilities off the test's own arithmetic by %.3g", worst);
    printf("     %zu autoregressive tokens: log-probabilities and top-5 within %.2g of float64 over the raw logits\n",
           tokens, worst);
    if (be) backend_cpu.destroy(be);
    free(lg);
    free(forbid);
}

/* Requests with logprobs beside requests without, in one batch. */
static void batched_like_alone(void) {
    json_t *cases = json_object_get(fxc.manifest, "generate");
    enum { N = 8 };
    golden_request g[N];
    clover_generate_result alone[N], got[N];
    clover_error err = {0};
    for (size_t k = 0; k < N; k++) {
        golden_request_init(&g[k], tmc.model, json_object_get(json_array_get(cases, k), "prompt_ids"),
                            json_object_get(json_array_get(cases, k), "options"),
                            json_object_get(json_array_get(cases, k), "record_overrides"));
        g[k].p.logprobs = k % 2 == 0;
        g[k].p.top_logprobs = k % 4 == 0 ? 3 : 0;
        g[k].p.mode = k % 3 == 1 ? CLOVER_MODE_AUTOREGRESSIVE : CLOVER_MODE_AUTO;
        clover_session *s = new_session(&tmc);
        CHECK(s && clover_generate(s, g[k].prompt, g[k].n_prompt, &g[k].p, &alone[k], &err) == 0);
        clover_session_free(s);
    }
    clover_engine *e = NULL;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = 2;
    CHECK(clover_engine_create(&e, tmc.model, &sp, &err) == 0);
    clover_session *ss[N] = {0};
    clover_request *rq[N] = {0};
    for (size_t k = 0; k < N; k++) {
        CHECK(clover_engine_session_create(&ss[k], e, NULL, &err) == 0);
        CHECK(clover_request_create(&rq[k], ss[k], g[k].prompt, g[k].n_prompt, &g[k].p, &err) == 0);
    }
    for (int step = 0; step < 10000 && clover_batch_step(rq, N) > 0; step++) {}
    for (size_t k = 0; k < N; k++) {
        CHECK(clover_request_result(rq[k], &got[k], &err) == 0);
        const clover_generate_result *a = &alone[k], *b = &got[k];
        CHECK(a->n_generated == b->n_generated && !memcmp(a->ids, b->ids, a->n_generated * 4));
        CHECK_EQ_INT(b->n_top_logprobs, a->n_top_logprobs);
        CHECK((a->logprobs != NULL) == (g[k].p.logprobs != 0) && (b->logprobs != NULL) == (a->logprobs != NULL));
        if (a->logprobs && b->logprobs) CHECK(!memcmp(a->logprobs, b->logprobs, a->n_generated * 4));
        if (a->n_top_logprobs && a->top_ids && b->top_ids) {
            CHECK(!memcmp(a->top_ids, b->top_ids, a->n_generated * a->n_top_logprobs * 4));
            CHECK(!memcmp(a->top_logprobs, b->top_logprobs, a->n_generated * a->n_top_logprobs * 4));
        }
        clover_generate_result_free(&got[k]);
        clover_generate_result_free(&alone[k]);
        clover_request_free(rq[k]);
        clover_session_free(ss[k]);
        golden_request_free(&g[k]);
    }
    clover_engine_free(e);
}

static void too_many_alternatives_refused(void) {
    clover_session *s = new_session(&tma);
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.top_logprobs = 21;
    int32_t prompt[3] = {1, 2, 3};
    clover_generate_result r;
    clover_error err = {0};
    CHECK_EQ_INT(clover_generate(s, prompt, 3, &p, &r, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "top_logprobs 21") != NULL, "%s", err.message);
    clover_session_free(s);
}

int main(void) {
    if (fixture_open(&fxc, "tiny_clover") || fixture_open(&fxa, "tiny_ar")) return TEST_EXIT();
    if (test_model_convert(&tmc, &fxc, CONVERT_F32) == 0 && test_model_convert(&tma, &fxa, CONVERT_F32) == 0) {
        RUN(every_case_with_logprobs);
        RUN(autoregressive_against_own_arithmetic);
        RUN(batched_like_alone);
        RUN(too_many_alternatives_refused);
    }
    test_model_free(&tmc);
    test_model_free(&tma);
    fixture_close(&fxc);
    fixture_close(&fxa);
    return TEST_EXIT();
}
