/*
 * test_split.c: the split backend (offload/split.h, --gpu-layers' pass)
 * with the CPU backend on both sides, against the plain CPU backend, bit
 * for bit: every generation case of the golden fixtures (tiny_clover block
 * diffusion through resolve, a pass-loop and a lossless case; tiny_ar) at
 * every split point, tokens and confidences equal to the plain run's and
 * to the reference's (the manifest); the state a split session exports is
 * the plain session's byte for byte, and a plain export imported into a
 * split session continues exactly as the plain one. Bad split points and
 * heads asked of a front part are one-line errors.
 */
#include "engine/session.h"
#include "golden_generate.h"
#include "offload/split.h"

static fixture fx;
static test_model tm;

static clover_session *session_on(uint32_t n_front) {
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = 1;
    clover_session *s = NULL;
    clover_error err = {0};
    int rc;
    if (!n_front) {
        rc = engine_session_create(&s, tm.model, &backend_cpu, &sp, &err);
    } else {
        backend_config cfg;
        engine_backend_config(tm.model, &sp, &backend_split, &cfg);
        backend *bk = NULL;
        rc = split_create(tm.model, &cfg, &backend_cpu, &backend_cpu, n_front, &bk, &err);
        if (!rc) rc = engine_session_create_on(&s, tm.model, &backend_split, bk, &sp, &err);
        if (!rc) s->own_bk = true;
        else if (bk) backend_split.destroy(bk);
    }
    CHECK_MSG(rc == 0, "session (split at %u): %s", n_front, err.message);
    return s;
}

static void same(const char *what, const clover_generate_result *a, const clover_generate_result *b) {
    size_t bad = a->n_generated != b->n_generated;
    for (size_t i = 0; !bad && i < a->n_generated; i++)
        bad += a->ids[i] != b->ids[i] || memcmp(&a->confidences[i], &b->confidences[i], sizeof(float)) != 0;
    CHECK_MSG(bad == 0 && a->n_blocks == b->n_blocks && a->committed_after == b->committed_after, "%s: differs", what);
}

static void cases(int mode, bool golden, size_t max_cases) {
    json_t *c;
    size_t i, runs = 0;
    const uint32_t L = tm.model->hp.n_layer;
    json_array_foreach(json_object_get(fx.manifest, "generate"), i, c) {
        if (i >= max_cases) break;
        const char *name = json_string_value(json_object_get(c, "name"));
        golden_request g;
        golden_request_init(&g, tm.model, json_object_get(c, "prompt_ids"), json_object_get(c, "options"),
                            json_object_get(c, "record_overrides"));
        if (mode == 1) g.p.logprobs = 1;
        if (mode == 2) g.p.lossless = 1;
        clover_generate_result ref;
        clover_error err = {0};
        clover_session *s = session_on(0);
        int rc = !s || clover_generate(s, g.prompt, g.n_prompt, &g.p, &ref, &err);
        clover_session_free(s);
        CHECK_MSG(rc == 0, "%s plain: %s", name, err.message);
        for (uint32_t n = 1; !rc && n < L; n++) {
            char what[96];
            snprintf(what, sizeof what, "%s split at %u", name, n);
            clover_generate_result r;
            s = session_on(n);
            int rc2 = !s || clover_generate(s, g.prompt, g.n_prompt, &g.p, &r, &err);
            CHECK_MSG(rc2 == 0, "%s: %s", what, err.message);
            if (!rc2) {
                same(what, &ref, &r);
                if (golden) golden_compare(what, &r, json_object_get(c, "expected"));
                clover_generate_result_free(&r);
                runs++;
            }
            clover_session_free(s);
        }
        if (!rc) clover_generate_result_free(&ref);
        golden_request_free(&g);
    }
    printf("     %zu split runs, each equal to the plain CPU run\n", runs);
}

static void resolve_cases(void) { cases(0, true, SIZE_MAX); }
static void pass_loop_and_lossless(void) {
    cases(1, true, 2);
    cases(2, false, 2);
}

/* The split's export is the plain one byte for byte; a plain export
 * imported into a split session goes on as the plain session. */
static void state_layout(void) {
    json_t *c = json_array_get(json_object_get(fx.manifest, "generate"), 0);
    size_t n;
    int32_t *ids = fixture_ids(json_object_get(c, "prompt_ids"), &n);
    clover_session *plain = session_on(0), *split = session_on(2), *moved = session_on(3);
    if (!plain || !split || !moved) goto done;
    clover_error err = {0};
    backend_commit_seq q = {.s = plain->bs, .ids = ids, .n = n};
    backend_pass_stats st = {0};
    CHECK(backend_commit1(plain->be, plain->bk, &q, &st, &err) == 0);
    q.s = split->bs;
    CHECK(backend_commit1(split->be, split->bk, &q, &st, &err) == 0);
    size_t a = plain->be->state_bytes(plain->bs), b = split->be->state_bytes(split->bs);
    CHECK_MSG(a == b, "state bytes %zu (split) vs %zu", b, a);
    uint8_t *x = malloc(a), *y = malloc(b);
    CHECK(plain->be->state_export(plain->bs, x, a, &err) == 0 && split->be->state_export(split->bs, y, b, &err) == 0);
    CHECK_MSG(a == b && !memcmp(x, y, a), "the split's export is not the plain one");
    CHECK_MSG(moved->be->state_import(moved->bs, x, a, &err) == 0, "import: %s", err.message);
    /* one more block on each: the same logits */
    const size_t V = tm.model->hp.n_vocab;
    int32_t more[8] = {5, 6, 7, 8, 9, 10, 11, 12};
    float *l1 = malloc(8 * V * sizeof(float)), *l2 = malloc(8 * V * sizeof(float));
    backend_commit_seq q1 = {.s = plain->bs, .ids = more, .n = 8, .all_logits = l1};
    backend_commit_seq q2 = {.s = moved->bs, .ids = more, .n = 8, .all_logits = l2};
    CHECK(backend_commit1(plain->be, plain->bk, &q1, &st, &err) == 0);
    CHECK(backend_commit1(moved->be, moved->bk, &q2, &st, &err) == 0);
    CHECK_MSG(!memcmp(l1, l2, 8 * V * sizeof(float)), "logits after an imported state differ");
    CHECK(moved->be->state_import(moved->bs, x, a - 4, &err) == CLOVER_E_FORMAT && strstr(err.message, "bytes"));
    free(l1);
    free(l2);
    free(x);
    free(y);
done:
    free(ids);
    clover_session_free(plain);
    clover_session_free(split);
    clover_session_free(moved);
}

static void bad_splits(void) {
    backend_config cfg = {.n_threads = 1};
    backend *bk = NULL;
    clover_error err = {0};
    const uint32_t L = tm.model->hp.n_layer;
    CHECK(split_create(tm.model, &cfg, &backend_cpu, &backend_cpu, 0, &bk, &err) == CLOVER_E_INVALID && !bk);
    CHECK(split_create(tm.model, &cfg, &backend_cpu, &backend_cpu, L, &bk, &err) == CLOVER_E_INVALID && !bk);
    CHECK_MSG(strstr(err.message, "expected 1..") != NULL, "%s", err.message);
    /* a front part has no head */
    cfg.layer_end = 2;
    backend *be = NULL;
    backend_session *s = NULL;
    CHECK(backend_cpu.create(tm.model, &cfg, &be, &err) == 0 && backend_cpu.session_create(be, &s, &err) == 0);
    int32_t id = 3;
    float logits[1024];
    backend_commit_seq q = {.s = s, .ids = &id, .n = 1, .last_logits = logits};
    backend_pass_stats st = {0};
    CHECK(backend_commit1(&backend_cpu, be, &q, &st, &err) == CLOVER_E_INVALID && strstr(err.message, "out_hidden"));
    backend_cpu.session_free(s);
    backend_cpu.destroy(be);
    cfg.layer_begin = 3; /* 3..2 */
    CHECK(backend_cpu.create(tm.model, &cfg, &be, &err) == CLOVER_E_INVALID && strstr(err.message, "layers 3..2"));
}

int main(void) {
    if (fixture_open(&fx, "tiny_clover")) return TEST_EXIT();
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) {
        RUN(bad_splits);
        RUN(resolve_cases);
        RUN(pass_loop_and_lossless);
        RUN(state_layout);
    }
    test_model_free(&tm);
    fixture_close(&fx);
    if (fixture_open(&fx, "tiny_ar")) return TEST_EXIT();
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) RUN(resolve_cases); /* autoregressive here */
    test_model_free(&tm);
    fixture_close(&fx);
    return TEST_EXIT();
}
