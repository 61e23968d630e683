/*
 * test_golden_generate.c: block-diffusion generation end to end on the tiny
 * Clover fixture (tests/fixtures/tiny_clover), against tools/reference's
 * generate_block_diffusion: every `generate` case of the manifest (record
 * as shipped, threshold 0 and 1, max_tokens cutting a block, block size 4,
 * a stop fixed before rows ahead of it, ignore_eos, suppressed ids,
 * sampling with and without top-k / top-p, penalties off), the prefix-reuse
 * case (request 2 on the same session commits only its tail and equals a
 * fresh run), and the NLL of the manifest's text through clover_score.
 * The fixture's hf/ directory is converted to an F32 GGUF by the converter
 * library, loaded, and run on the public API (clover_session_create: the
 * CPU backend).
 */
#include "engine/session.h"
#include "golden_generate.h"

static fixture fx;
static test_model tm;

static clover_session *new_session(void) {
    clover_session *s = NULL;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = 2;
    clover_error err = {0};
    int rc = clover_session_create(&s, tm.model, &sp, &err);
    CHECK_MSG(rc == 0, "session: %s", err.message);
    return s;
}

static void stop_ids_match(void) {
    /* The record's 455 is past the vocabulary; the EOS ids are 400, 402. */
    clover_session *s = new_session();
    if (!s) return;
    json_t *want = json_object_get(fx.manifest, "stop_ids");
    CHECK_EQ_INT(s->n_stop_ids, json_array_size(want));
    for (size_t i = 0; i < s->n_stop_ids && i < json_array_size(want); i++)
        CHECK_EQ_INT(s->stop_ids[i], json_integer_value(json_array_get(want, i)));
    clover_session_free(s);
}

static void generate_cases(void) {
    json_t *cases = json_object_get(fx.manifest, "generate");
    CHECK(json_array_size(cases) >= 11);
    clover_session *s = new_session();
    if (!s) return;
    golden_generate_cases(s, tm.model, cases, CLOVER_MODE_DIFFUSION);
    clover_session_free(s);
}

static json_t *case_named(const char *name) {
    json_t *cases = json_object_get(fx.manifest, "generate"), *c;
    size_t i;
    json_array_foreach(cases, i, c) if (!strcmp(json_string_value(json_object_get(c, "name")), name)) return c;
    return NULL;
}

static void prefix_reuse(void) {
    json_t *pr = json_object_get(fx.manifest, "prefix_reuse");
    json_t *first = case_named(json_string_value(json_object_get(pr, "first")));
    CHECK(first != NULL);
    if (!first) return;
    clover_session *s = new_session(), *fresh = new_session();
    if (!s || !fresh) goto done;
    golden_request g1, g2;
    golden_request_init(&g1, tm.model, json_object_get(first, "prompt_ids"), json_object_get(first, "options"),
                        json_object_get(first, "record_overrides"));
    golden_request_init(&g2, tm.model, json_object_get(pr, "second_prompt_ids"), json_object_get(pr, "options"), NULL);
    clover_generate_result r1, r2, r3;
    clover_error err = {0};
    int rc = clover_generate(s, g1.prompt, g1.n_prompt, &g1.p, &r1, &err);
    CHECK_MSG(rc == 0, "request 1: %s", err.message);
    if (!rc) {
        golden_compare("request 1", &r1, json_object_get(first, "expected"));
        clover_generate_result_free(&r1);
        rc = clover_generate(s, g2.prompt, g2.n_prompt, &g2.p, &r2, &err);
        CHECK_MSG(rc == 0, "request 2: %s", err.message);
        if (!rc) {
            golden_compare("request 2 (reused)", &r2, json_object_get(pr, "expected"));
            rc = clover_generate(fresh, g2.prompt, g2.n_prompt, &g2.p, &r3, &err);
            CHECK_MSG(rc == 0, "request 2 fresh: %s", err.message);
            if (!rc) {
                CHECK_EQ_INT(r3.stats.reused_tokens, 0);
                CHECK_EQ_INT(r3.n_generated, r2.n_generated);
                for (size_t i = 0; i < r2.n_generated && i < r3.n_generated; i++) {
                    CHECK_EQ_INT(r3.ids[i], r2.ids[i]);
                    CHECK_NEAR(r3.confidences[i], r2.confidences[i], 1e-5);
                }
                CHECK_EQ_INT(r3.n_blocks, r2.n_blocks);
                CHECK_EQ_INT(r3.finish, r2.finish);
                clover_generate_result_free(&r3);
            }
            clover_generate_result_free(&r2);
        }
    }
    golden_request_free(&g1);
    golden_request_free(&g2);
done:
    clover_session_free(s);
    clover_session_free(fresh);
}

static void nll_of_text(void) { golden_score_alone(new_session(), json_object_get(fx.manifest, "nll")); }

static void every_case(void) {
    RUN(stop_ids_match);
    RUN(generate_cases);
    RUN(prefix_reuse);
    RUN(nll_of_text);
}

int main(void) { return golden_main(&fx, &tm, "tiny_clover", every_case); }
