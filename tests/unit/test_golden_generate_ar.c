/*
 * test_golden_generate_ar.c: autoregressive decoding end to end on the tiny
 * plain Qwen3.5-MoE fixture (tests/fixtures/tiny_ar, no record), against
 * tools/reference's generate_autoregressive (whose greedy path the
 * reference checks against transformers' generate): greedy to max_tokens,
 * greedy to an EOS id, sampling with temperature / top-k / top-p; the
 * session afterwards holds the prompt and every token but the last. Also
 * the NLL of the manifest's text through clover_score, and the mode rules
 * of a model without the record.
 */
#include "golden_generate.h"

static fixture fx;
static test_model tm;

static clover_session *new_session(void) {
    clover_session *s = NULL;
    clover_error err = {0};
    int rc = clover_session_create(&s, tm.model, NULL, &err);
    CHECK_MSG(rc == 0, "session: %s", err.message);
    return s;
}

static void generate_cases(void) {
    json_t *cases = json_object_get(fx.manifest, "generate");
    CHECK_EQ_INT(json_array_size(cases), 3);
    clover_session *s = new_session();
    if (!s) return;
    golden_generate_cases(s, tm.model, cases, CLOVER_MODE_AUTOREGRESSIVE); /* no record_overrides in this manifest */
    clover_session_free(s);
}

static void continuing_equals_a_fresh_run(void) {
    /* Request 2 = request 1's prompt + its answer but the last token: the
     * session holds exactly that, so nothing is recommitted, and the answer
     * equals a fresh session's. */
    json_t *c = json_array_get(json_object_get(fx.manifest, "generate"), 0);
    golden_request g;
    golden_request_init(&g, tm.model, json_object_get(c, "prompt_ids"), json_object_get(c, "options"), NULL);
    g.p.max_tokens = 6;
    clover_session *s = new_session(), *fresh = new_session();
    clover_generate_result r1, r2, r3;
    clover_error err = {0};
    if (!s || !fresh || clover_generate(s, g.prompt, g.n_prompt, &g.p, &r1, &err)) {
        CHECK_MSG(0, "request 1: %s", err.message);
        goto done;
    }
    size_t n2 = clover_session_length(s);
    CHECK_EQ_INT(n2, g.n_prompt + 5);
    int32_t *p2 = malloc(n2 * sizeof *p2);
    memcpy(p2, clover_session_ids(s), n2 * sizeof *p2);
    if (!clover_generate(s, p2, n2, &g.p, &r2, &err) && !clover_generate(fresh, p2, n2, &g.p, &r3, &err)) {
        CHECK_EQ_INT(r2.stats.reused_tokens, n2);
        CHECK_EQ_INT(r2.ids[0], r1.ids[5]); /* decoding resumes where request 1 stopped */
        CHECK_EQ_INT(r2.n_generated, r3.n_generated);
        for (size_t i = 0; i < r2.n_generated && i < r3.n_generated; i++) {
            CHECK_EQ_INT(r2.ids[i], r3.ids[i]);
            CHECK_NEAR(r2.confidences[i], r3.confidences[i], 1e-5);
        }
        clover_generate_result_free(&r2);
        clover_generate_result_free(&r3);
    } else {
        CHECK_MSG(0, "request 2: %s", err.message);
    }
    free(p2);
    clover_generate_result_free(&r1);
done:
    golden_request_free(&g);
    clover_session_free(s);
    clover_session_free(fresh);
}

static void diffusion_needs_the_record(void) {
    clover_session *s = new_session();
    if (!s) return;
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.mode = CLOVER_MODE_DIFFUSION;
    const int32_t prompt[2] = {1, 2};
    clover_generate_result r;
    clover_error err = {0};
    CHECK_EQ_INT(clover_generate(s, prompt, 2, &p, &r, &err), CLOVER_E_INVALID);
    CHECK(strstr(err.message, "record") != NULL);
    clover_session_free(s);
}

static void nll_of_text(void) { golden_score_alone(new_session(), json_object_get(fx.manifest, "nll")); }

static void every_case(void) {
    RUN(generate_cases);
    RUN(continuing_equals_a_fresh_run);
    RUN(diffusion_needs_the_record);
    RUN(nll_of_text);
}

int main(void) { return golden_main(&fx, &tm, "tiny_ar", every_case); }
