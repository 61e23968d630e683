/*
 * test_cuda_engine.c: the CUDA backend through the engine (contract v2,
 * backend_cuda): public sessions with device CUDA run the tiny_ar golden
 * generation cases and the NLL of its text, and the NLL of tiny_clover's,
 * against tools/reference's values (golden_generate.h: tokens, finish and
 * lengths exactly, confidences within 1e-5, per-token NLL within 1e-4).
 * Those bounds hold on this path because the models are f32 files, whose
 * products the backend runs in FP32 (test_cuda_backend.c: the GPU differs
 * from the reference only by summation order, SPEC 1.1's 1e-4 on logits;
 * a probability moves by at most about that much times itself).
 * Also on the v2 table itself: a batched commit of three sequences, the
 * middle one with a bad id, fails only that one and leaves its session
 * untouched while the other two match the same commits alone bit for bit;
 * checkpoint, commit, restore and the same commit again give the same
 * logits; truncate on a GDN model is refused. A "continue" (the prompt =
 * the committed ids) decodes from the logits the device kept, equal to the
 * eager path's (CLOVER_ENGINE_EAGER_LOGITS). (Block diffusion on CUDA:
 * test_cuda_preview.c.)
 * Without a CUDA device: "SKIP: no CUDA device (...)" and exit 77.
 */
#include "cuda/cuda_backend.h"
#include "cuda_test.h"
#include "golden_generate.h"

static fixture fx_ar, fx_cl;
static test_model tm_ar, tm_cl;

static clover_session *cuda_session(const clover_model *m) {
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.device = CLOVER_DEVICE_CUDA;
    sp.max_context = 4096;
    clover_session *s = NULL;
    clover_error err = {0};
    int rc = clover_session_create(&s, m, &sp, &err);
    CHECK_MSG(rc == 0, "cuda session: %s", err.message);
    if (s) CHECK_MSG(!strcmp(clover_session_backend(s), "cuda"), "backend %s, expected cuda", clover_session_backend(s));
    return s;
}

static void ar_generate_cases(void) {
    json_t *cases = json_object_get(fx_ar.manifest, "generate");
    CHECK_EQ_INT(json_array_size(cases), 3);
    clover_session *s = cuda_session(tm_ar.model);
    if (!s) return;
    golden_generate_cases(s, tm_ar.model, cases, CLOVER_MODE_AUTOREGRESSIVE);
    clover_session_free(s);
}

static void ar_nll(void) {
    clover_session *s = cuda_session(tm_ar.model);
    if (!s) return;
    golden_score(s, json_object_get(fx_ar.manifest, "nll"));
    clover_session_free(s);
}

static void clover_nll(void) {
    clover_session *s = cuda_session(tm_cl.model);
    if (!s) return;
    golden_score(s, json_object_get(fx_cl.manifest, "nll"));
    clover_session_free(s);
}

/* Two answers on one session, the second's prompt = every committed id (a "continue"): on the new path the
 * decode steps bring no logits back and the backend keeps the last row's on the device (backend_ops
 * .last_logits), so the second answer still reuses the whole prompt; it must equal the old path's
 * (CLOVER_ENGINE_EAGER_LOGITS: the logits came back every step and the host kept them) bit for bit. */
static void continue_once(bool eager, clover_generate_result *r2, size_t *n2) {
    json_t *c = json_array_get(json_object_get(fx_ar.manifest, "generate"), 0);
    golden_request g;
    golden_request_init(&g, tm_ar.model, json_object_get(c, "prompt_ids"), json_object_get(c, "options"), NULL);
    g.p.max_tokens = 6;
    g.p.ignore_eos = 1;
    if (eager) setenv("CLOVER_ENGINE_EAGER_LOGITS", "1", 1);
    clover_session *s = cuda_session(tm_ar.model);
    clover_generate_result r1;
    clover_error err = {0};
    memset(r2, 0, sizeof *r2);
    *n2 = 0;
    int rc = s ? clover_generate(s, g.prompt, g.n_prompt, &g.p, &r1, &err) : -1;
    CHECK_MSG(rc == 0, "continue (eager %d): first answer: %s", eager, err.message);
    if (!rc) {
        *n2 = clover_session_length(s);
        int32_t *again = malloc(*n2 * sizeof *again);
        memcpy(again, clover_session_ids(s), *n2 * sizeof *again);
        rc = clover_generate(s, again, *n2, &g.p, r2, &err);
        CHECK_MSG(rc == 0, "continue (eager %d): second answer: %s", eager, err.message);
        if (!rc) CHECK_MSG(r2->stats.reused_tokens == *n2, "continue (eager %d): reused %zu of %zu prompt ids", eager,
                           r2->stats.reused_tokens, *n2);
        if (rc) memset(r2, 0, sizeof *r2);
        free(again);
        clover_generate_result_free(&r1);
    }
    unsetenv("CLOVER_ENGINE_EAGER_LOGITS");
    clover_session_free(s);
    golden_request_free(&g);
}

static void continue_from_kept_logits(void) {
    clover_generate_result a, b;
    size_t na = 0, nb = 0;
    continue_once(false, &a, &na);
    continue_once(true, &b, &nb);
    CHECK_MSG(na == nb && a.n_generated == b.n_generated && a.n_generated > 0,
              "continue: %zu + %zu tokens kept-on-device, %zu + %zu eager", na, a.n_generated, nb, b.n_generated);
    if (na == nb && a.n_generated == b.n_generated && a.ids && b.ids) {
        CHECK_MSG(!memcmp(a.ids, b.ids, a.n_generated * sizeof *a.ids), "continue: ids differ from the eager path");
        CHECK_MSG(!memcmp(a.confidences, b.confidences, a.n_generated * sizeof *a.confidences),
                  "continue: confidences differ from the eager path");
    }
    clover_generate_result_free(&a);
    clover_generate_result_free(&b);
}

/* backend_ops.last_logits on the table itself: a stacked one-row commit that asked for no logits keeps them,
 * equal bit for bit to a twin session's that asked; another pass on the session (a two-row commit) or a reset
 * forgets them (CLOVER_E_INVALID, so the engine recommits). */
static void kept_logits_equal_returned(void) {
    const clover_model *m = tm_ar.model;
    const size_t V = m->hp.n_vocab;
    backend_config cfg = {.max_rows = 4, .max_context = 256};
    backend *be = NULL;
    clover_error err = {0};
    int rc = backend_cuda.create(m, &cfg, &be, &err);
    CHECK_MSG(rc == 0, "create: %s", err.message);
    if (rc) return;
    backend_session *s[2] = {0};
    for (int i = 0; i < 2; i++) CHECK(backend_cuda.session_create(be, &s[i], &err) == 0);
    CHECK(backend_cuda.last_logits && backend_cuda.last_logits(s[0], NULL, &err) == CLOVER_OK);
    const int32_t pr[5] = {1, 5, 9, 2, 7}, t1[1] = {3}, t2[2] = {4, 6};
    float *want = calloc(V, sizeof(float)), *got = calloc(V, sizeof(float));
    backend_pick pk = {.temperature = 0.0f};
    int32_t id[2];
    float cf[2];
    backend_commit_seq p[2] = {{.s = s[0], .ids = pr, .n = 5}, {.s = s[1], .ids = pr, .n = 5}};
    CHECK(backend_cuda.commit(be, p, 2, NULL) == 0);
    backend_commit_seq q[2] = {{.s = s[0], .ids = t1, .n = 1, .last_logits = want},
                               {.s = s[1], .ids = t1, .n = 1, .pick = &pk, .n_pick = 1,
                                .pick_out = {.id = id, .conf = cf}}};
    CHECK(backend_cuda.commit(be, q, 2, NULL) == 0);
    CHECK_EQ_INT(backend_cuda.last_logits(s[1], got, &err), CLOVER_OK);
    CHECK(memcmp(want, got, V * sizeof(float)) == 0);
    memset(got, 0, V * sizeof(float));
    CHECK_EQ_INT(backend_cuda.last_logits(s[0], got, &err), CLOVER_OK); /* it asked, and it is kept too */
    CHECK(memcmp(want, got, V * sizeof(float)) == 0);
    backend_commit_seq r = {.s = s[1], .ids = t2, .n = 2};
    CHECK(backend_cuda.commit(be, &r, 1, NULL) == 0);
    CHECK_EQ_INT(backend_cuda.last_logits(s[1], got, &err), CLOVER_E_INVALID);
    backend_cuda.reset(s[0]);
    CHECK_EQ_INT(backend_cuda.last_logits(s[0], got, &err), CLOVER_E_INVALID);
    free(want), free(got);
    for (int i = 0; i < 2; i++) backend_cuda.session_free(s[i]);
    backend_cuda.destroy(be);
}

static void batch_failure_is_per_sequence(void) {
    const clover_model *m = tm_ar.model;
    const size_t V = m->hp.n_vocab, n = 7;
    backend_config cfg = {.max_rows = 4, .max_context = 256}; /* 7 rows: two chunks */
    backend *be = NULL;
    clover_error err = {0};
    int rc = backend_cuda.create(m, &cfg, &be, &err);
    CHECK_MSG(rc == 0, "create: %s", err.message);
    if (rc) return;
    backend_session *s[3] = {0}, *solo[2] = {0};
    for (int i = 0; i < 3; i++) CHECK(backend_cuda.session_create(be, &s[i], &err) == 0);
    for (int i = 0; i < 2; i++) CHECK(backend_cuda.session_create(be, &solo[i], &err) == 0);
    int32_t a[7] = {1, 5, 9, 2, 7, 3, 4}, b[7] = {2, 3, (int32_t)V, 1, 1, 1, 1}, c[7] = {8, 6, 4, 2, 9, 1, 5};
    float *la = calloc(V, sizeof(float)), *lc = calloc(V * n, sizeof(float));
    float *ra = calloc(V, sizeof(float)), *rc2 = calloc(V * n, sizeof(float));
    backend_pick pk = {.temperature = 0.0f, .n_top = 3}, pk1 = {.temperature = 0.0f};
    float *lb = calloc(V, sizeof(float));
    int32_t ida[1], idc[2], topa[3];
    float cfa[1], cfc[2], tla[3];
    backend_commit_seq q[3] = {
        {.s = s[0], .ids = a, .n = n, .last_logits = la, .pick = &pk, .n_pick = 1,
         .pick_out = {.id = ida, .conf = cfa, .top_id = topa, .top_logprob = tla}},
        {.s = s[1], .ids = b, .n = n, .last_logits = lb},
        {.s = s[2], .ids = c, .n = n, .all_logits = lc, .pick = &pk1, .n_pick = 2, .pick_out = {.id = idc, .conf = cfc}},
    };
    rc = backend_cuda.commit(be, q, 3, NULL);
    CHECK_EQ_INT(rc, CLOVER_E_INVALID);
    CHECK_EQ_INT(q[0].rc, 0);
    CHECK_EQ_INT(q[1].rc, CLOVER_E_INVALID);
    CHECK_EQ_INT(q[2].rc, 0);
    CHECK(strstr(q[1].err.message, "outside the vocabulary") != NULL);
    CHECK_EQ_INT(backend_cuda.session_length(s[0]), n);
    CHECK_EQ_INT(backend_cuda.session_length(s[1]), 0);
    CHECK_EQ_INT(backend_cuda.session_length(s[2]), n);
    /* the same commits alone, on fresh sessions of the same backend */
    int32_t idb1[1], idb2[2];
    float cfb1[1], cfb2[2];
    backend_commit_seq r1 = {.s = solo[0], .ids = a, .n = n, .last_logits = ra, .pick = &pk1, .n_pick = 1,
                             .pick_out = {.id = idb1, .conf = cfb1}};
    backend_commit_seq r2 = {.s = solo[1], .ids = c, .n = n, .all_logits = rc2, .pick = &pk1, .n_pick = 2,
                             .pick_out = {.id = idb2, .conf = cfb2}};
    CHECK(backend_commit1(&backend_cuda, be, &r1, NULL, &err) == 0);
    CHECK(backend_commit1(&backend_cuda, be, &r2, NULL, &err) == 0);
    CHECK(memcmp(la, ra, V * sizeof(float)) == 0);
    CHECK(memcmp(lc, rc2, V * n * sizeof(float)) == 0);
    CHECK_EQ_INT(ida[0], idb1[0]);
    CHECK_EQ_INT(ida[0], topa[0]); /* greedy: the pick is the most probable id */
    CHECK(cfa[0] == cfb1[0] && cfa[0] > 0.0f && cfa[0] <= 1.0f);
    CHECK(idc[0] == idb2[0] && idc[1] == idb2[1] && cfc[0] == cfb2[0] && cfc[1] == cfb2[1]);
    /* the last picked row of c is the argmax of its last row of logits */
    size_t best = 0;
    for (size_t v = 1; v < V; v++)
        if (lc[(n - 1) * V + v] > lc[(n - 1) * V + best]) best = v;
    CHECK_EQ_INT(idc[1], (int)best);

    /* checkpoint, commit 3, restore, commit the same 3: the same logits */
    backend_checkpoint *ck = NULL;
    CHECK(backend_cuda.checkpoint_create(s[0], &ck, &err) == 0);
    CHECK(backend_cuda.checkpoint_save(s[0], ck, &err) == 0);
    const int32_t more[3] = {11, 12, 13};
    float *m1 = calloc(V, sizeof(float)), *m2 = calloc(V, sizeof(float));
    backend_commit_seq qm = {.s = s[0], .ids = more, .n = 3, .last_logits = m1};
    CHECK(backend_commit1(&backend_cuda, be, &qm, NULL, &err) == 0);
    CHECK_EQ_INT(backend_cuda.session_length(s[0]), n + 3);
    CHECK(backend_cuda.checkpoint_restore(s[0], ck, &err) == 0);
    CHECK_EQ_INT(backend_cuda.session_length(s[0]), n);
    qm.last_logits = m2;
    CHECK(backend_commit1(&backend_cuda, be, &qm, NULL, &err) == 0);
    CHECK(memcmp(m1, m2, V * sizeof(float)) == 0);
    CHECK_EQ_INT(backend_cuda.truncate(s[0], 2, &err), CLOVER_E_UNSUPPORTED); /* GDN layers */
    backend_cuda.reset(s[0]);
    CHECK_EQ_INT(backend_cuda.checkpoint_restore(s[0], ck, &err), CLOVER_E_INVALID); /* stale after reset */
    backend_cuda.checkpoint_free(ck);
    free(m1), free(m2);

    free(la), free(lb), free(lc), free(ra), free(rc2);
    for (int i = 0; i < 3; i++) backend_cuda.session_free(s[i]);
    for (int i = 0; i < 2; i++) backend_cuda.session_free(solo[i]);
    backend_cuda.destroy(be);
}

int main(void) {
    cuda_test_require_device();
    if (fixture_open(&fx_ar, "tiny_ar") || fixture_open(&fx_cl, "tiny_clover")) return TEST_EXIT();
    if (test_model_convert(&tm_ar, &fx_ar, CONVERT_F32) == 0 && test_model_convert(&tm_cl, &fx_cl, CONVERT_F32) == 0) {
        RUN(ar_generate_cases);
        RUN(ar_nll);
        RUN(clover_nll);
        RUN(batch_failure_is_per_sequence);
        RUN(continue_from_kept_logits);
        RUN(kept_logits_equal_returned);
    }
    test_model_free(&tm_ar);
    test_model_free(&tm_cl);
    fixture_close(&fx_ar);
    fixture_close(&fx_cl);
    return TEST_EXIT();
}
