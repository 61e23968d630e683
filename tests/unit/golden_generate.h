/*
 * golden_generate.h: helpers of the engine's golden tests
 * (test_golden_generate*.c): a manifest's generation case turned into
 * clover_generate_params, and the result compared with the reference's
 * expected values (tests/fixtures/README.md): tokens, finish reason, prompt
 * and reused tokens, the committed length afterwards and passes per block
 * exactly; confidences within 1e-5. Also what the golden generation tests
 * (test_golden_generate.c, test_golden_generate_ar.c) share: the loop over
 * a manifest's `generate` cases, the NLL on a session of its own, and main.
 */
#ifndef CLOVER_TEST_GOLDEN_GENERATE_H
#define CLOVER_TEST_GOLDEN_GENERATE_H

#include "backend_test.h"
#include "clover.h"

typedef struct golden_request {
    clover_generate_params p;
    clover_penalties pen;
    int32_t *prompt, *suppress;
    size_t n_prompt, n_suppress;
} golden_request;

/* Inline floats are float32 values written as the shortest decimal of the
 * exact double: parse as double, cast to float. */
static inline float golden_f32(const json_t *v) { return (float)json_number_value(v); }

static inline void golden_request_init(golden_request *g, const clover_model *m, json_t *prompt_ids, json_t *opt,
                                       json_t *record_overrides) {
    memset(g, 0, sizeof *g);
    clover_generate_params_init(&g->p);
    g->prompt = fixture_ids(prompt_ids, &g->n_prompt);
    g->p.max_tokens = (size_t)json_integer_value(json_object_get(opt, "max_tokens"));
    json_t *t = json_object_get(opt, "threshold"), *b = json_object_get(opt, "block_size");
    if (t && !json_is_null(t)) g->p.threshold = golden_f32(t);
    if (b && !json_is_null(b)) g->p.block_size = (uint32_t)json_integer_value(b);
    g->p.temperature = golden_f32(json_object_get(opt, "temperature"));
    g->p.top_k = (int32_t)json_integer_value(json_object_get(opt, "top_k"));
    g->p.top_p = golden_f32(json_object_get(opt, "top_p"));
    g->p.seed = (uint64_t)json_integer_value(json_object_get(opt, "seed"));
    g->p.ignore_eos = json_is_true(json_object_get(opt, "ignore_eos"));
    g->suppress = fixture_ids(json_object_get(opt, "suppress"), &g->n_suppress);
    g->p.suppress_ids = g->suppress;
    g->p.n_suppress_ids = g->n_suppress;
    if (json_object_size(record_overrides)) {
        clover_penalties_from_record(&m->record, &g->pen);
        const char *key;
        json_t *v;
        json_object_foreach(record_overrides, key, v) {
            float f = golden_f32(v);
            if (!strcmp(key, "presence_penalty")) g->pen.presence_penalty = f;
            else if (!strcmp(key, "frequency_penalty")) g->pen.frequency_penalty = f;
            else if (!strcmp(key, "repetition_penalty")) g->pen.repetition_penalty = f;
            else if (!strcmp(key, "length_penalty")) g->pen.length_penalty = f;
            else if (!strcmp(key, "think_end_bias")) g->pen.think_end_bias = f;
            else CHECK_MSG(0, "record override '%s' not handled by this test", key);
        }
        g->p.penalties = &g->pen;
    }
}

static inline void golden_request_free(golden_request *g) {
    free(g->prompt);
    free(g->suppress);
}

/* Compares r with an `expected` object; name labels the messages. */
static inline void golden_compare(const char *name, const clover_generate_result *r, json_t *exp) {
    size_t n;
    int32_t *tokens = fixture_ids(json_object_get(exp, "tokens"), &n);
    CHECK_MSG(r->n_generated == n, "%s: %zu tokens, expected %zu", name, r->n_generated, n);
    size_t bad = 0;
    double worst = 0.0;
    json_t *confs = json_object_get(exp, "confidences");
    for (size_t i = 0; i < n && i < r->n_generated; i++) {
        if (r->ids[i] != tokens[i]) {
            if (!bad) fprintf(stderr, "  %s: token %zu is %d, expected %d\n", name, i, r->ids[i], tokens[i]);
            bad++;
        }
        double d = fabs((double)r->confidences[i] - (double)golden_f32(json_array_get(confs, i)));
        if (!(d <= worst)) worst = d;
    }
    CHECK_MSG(bad == 0, "%s: %zu tokens differ", name, bad);
    CHECK_MSG(worst <= 1e-5, "%s: confidence off by %.3g", name, worst);
    const char *finish = json_string_value(json_object_get(exp, "finish_reason"));
    CHECK_MSG(finish && !strcmp(clover_finish_name(r->finish), finish), "%s: finish %s, expected %s", name,
              clover_finish_name(r->finish), finish ? finish : "?");
    CHECK_EQ_INT(r->n_prompt, json_integer_value(json_object_get(exp, "prompt_tokens")));
    CHECK_EQ_INT(r->stats.reused_tokens, json_integer_value(json_object_get(exp, "reused_tokens")));
    CHECK_MSG((json_int_t)r->committed_after == json_integer_value(json_object_get(exp, "committed_after")),
              "%s: committed %zu after, expected %lld", name, r->committed_after,
              (long long)json_integer_value(json_object_get(exp, "committed_after")));
    json_t *ppb = json_object_get(exp, "passes_per_block");
    if (ppb) {
        CHECK_MSG(r->n_blocks == json_array_size(ppb), "%s: %zu blocks, expected %zu", name, r->n_blocks,
                  json_array_size(ppb));
        for (size_t i = 0; i < r->n_blocks && i < json_array_size(ppb); i++)
            CHECK_MSG((json_int_t)r->passes_per_block[i] == json_integer_value(json_array_get(ppb, i)),
                      "%s: block %zu took %u passes, expected %lld", name, i, r->passes_per_block[i],
                      (long long)json_integer_value(json_array_get(ppb, i)));
    }
    printf("     %-18s %2zu tokens, finish %-6s, passes", name, r->n_generated, clover_finish_name(r->finish));
    for (size_t i = 0; i < r->n_blocks; i++)
        printf(" %u", r->passes_per_block[i]);
    printf(", worst confidence diff %.2g\n", worst);
    free(tokens);
}

/* Every case of a manifest's `generate` array on s, each on a fresh
 * sequence (as the reference ran them): the result must be in mode `mode`
 * and match the case's `expected` (golden_compare). */
static inline void golden_generate_cases(clover_session *s, const clover_model *m, json_t *cases, clover_mode mode) {
    json_t *c;
    size_t i;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        golden_request g;
        golden_request_init(&g, m, json_object_get(c, "prompt_ids"), json_object_get(c, "options"),
                            json_object_get(c, "record_overrides"));
        clover_session_reset(s);
        clover_generate_result r;
        clover_error err = {0};
        int rc = clover_generate(s, g.prompt, g.n_prompt, &g.p, &r, &err);
        CHECK_MSG(rc == 0, "%s: %s", name, err.message);
        if (!rc) {
            CHECK_EQ_INT(r.mode, mode);
            golden_compare(name, &r, json_object_get(c, "expected"));
            clover_generate_result_free(&r);
        }
        golden_request_free(&g);
    }
}

/* The main of a golden generation test: tests/fixtures/<name> converted to
 * an F32 GGUF into tm, then `cases` (the file's RUN() list) on it. */
static inline int golden_main(fixture *fx, test_model *tm, const char *name, void (*cases)(void)) {
    if (fixture_open(fx, name)) return TEST_EXIT();
    if (test_model_convert(tm, fx, CONVERT_F32) == 0) cases();
    test_model_free(tm);
    fixture_close(fx);
    return TEST_EXIT();
}

/* SPEC 5 through clover_score_tokens: per-token NLL and the mean within 1e-4. */
static inline void golden_score(clover_session *s, json_t *nll) {
    size_t n;
    int32_t *ids = fixture_ids(json_object_get(nll, "ids"), &n);
    double *got = calloc(n, sizeof *got);
    clover_score_result sr;
    clover_error err = {0};
    int rc = clover_score_tokens(s, ids, n, got, &sr, &err);
    CHECK_MSG(rc == 0, "score: %s", err.message);
    if (!rc) {
        json_t *per = json_object_get(nll, "per_token_nll");
        CHECK_EQ_INT(sr.n_scored, json_array_size(per));
        double worst = 0.0;
        for (size_t i = 0; i + 1 < n; i++) {
            double d = fabs(got[i] - json_number_value(json_array_get(per, i)));
            if (!(d <= worst)) worst = d;
        }
        CHECK_MSG(worst <= 1e-4, "per-token NLL off by %.3g", worst);
        double mean = json_number_value(json_object_get(nll, "mean_nll"));
        double ppl = json_number_value(json_object_get(nll, "perplexity"));
        CHECK_NEAR(sr.mean_nll, mean, 1e-4);
        CHECK_NEAR(sr.perplexity / ppl, 1.0, 1e-4);
        CHECK_EQ_INT(clover_session_length(s), n);
        printf("     NLL over %zu tokens: mean %.6f (reference %.6f), perplexity %.4f (reference %.4f), worst token "
               "diff %.2g\n",
               sr.n_scored, sr.mean_nll, mean, sr.perplexity, ppl, worst);
    }
    free(got);
    free(ids);
}

/* golden_score on a session made for it alone (NULL: its creation has
 * already failed a check), freed afterwards. */
static inline void golden_score_alone(clover_session *s, json_t *nll) {
    if (!s) return;
    golden_score(s, nll);
    clover_session_free(s);
}

#endif
