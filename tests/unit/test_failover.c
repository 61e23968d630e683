/*
 * test_failover.c: a device failing mid-request (offload/failover.h) on
 * CI, with no GPU: CLOVER_FAULT_INJECT makes the CPU backend the "device"
 * that fails at the N-th call, and a second CPU backend takes over. For
 * the generation cases of the golden fixtures (tiny_clover: block
 * diffusion, resolve in the backend, every other case; the first two with
 * logprobs on: the engine's pass loop over previews; the first two
 * lossless: checkpoints restored after the move; tiny_ar: every case,
 * autoregressive) and each failure point (at load, mid
 * prompt, the first block commit, the first and a later preview / resolve),
 * once (the state exported from the device) and dead (the state lost: the
 * committed ids recommitted), the request completes with the tokens of the
 * reference (the manifest, where it has them) and bit for bit the tokens,
 * confidences and passes of the uninjected run; the session did move, and
 * exactly one warning is logged: "dropped" where the device is gone,
 * "moved" where it failed once. Bad plans are one-line errors.
 */
#include "engine/session.h"
#include "golden_generate.h"
#include "offload/failover.h"
#include "offload/fault_inject.h"
#include "state_copy_shim.h"

static fixture fx;
static test_model tm;
static size_t n_warn_dropped, n_warn_moved, n_warn_other;

static void count_log(int level, const char *line, void *user) {
    (void)user;
    if (level != 1) return; /* warnings */
    if (strstr(line, "dropped for the rest of the process")) n_warn_dropped++;
    else if (strstr(line, "the session moved to the cpu backend")) n_warn_moved++;
    else n_warn_other++;
}

enum { ROWS = 16 }; /* prompts of 18-36 ids: two or three prompt commits */

static clover_session *new_session(const char *inject) {
    if (inject) setenv("CLOVER_FAULT_INJECT", inject, 1);
    else unsetenv("CLOVER_FAULT_INJECT");
    failover_forget_drops();
    clover_session *s = NULL;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = 1;
    sp.max_rows = ROWS;
    clover_error err = {0};
    int rc = clover_session_create(&s, tm.model, &sp, &err);
    CHECK_MSG(rc == 0, "session (%s): %s", inject ? inject : "no fault", err.message);
    return s;
}

typedef enum { RUN_DIFFUSION, RUN_LOGPROBS, RUN_LOSSLESS, RUN_AR } run_kind;

static int run_one(const char *inject, json_t *c, run_kind kind, clover_generate_result *r, bool *moved) {
    golden_request g;
    golden_request_init(&g, tm.model, json_object_get(c, "prompt_ids"), json_object_get(c, "options"),
                        json_object_get(c, "record_overrides"));
    if (kind == RUN_LOGPROBS) g.p.logprobs = 1;
    if (kind == RUN_LOSSLESS) g.p.lossless = 1;
    clover_session *s = new_session(inject);
    int rc = -1;
    if (s) {
        clover_error err = {0};
        rc = clover_generate(s, g.prompt, g.n_prompt, &g.p, r, &err);
        CHECK_MSG(rc == 0, "%s under %s: %s", json_string_value(json_object_get(c, "name")),
                  inject ? inject : "no fault", err.message);
        *moved = s->be == &backend_failover && failover_session_moved(s->bs);
        if (!inject) CHECK_MSG(s->be == &backend_cpu, "no fault asked for, but the session runs on %s", s->be->name);
        clover_session_free(s);
    }
    golden_request_free(&g);
    unsetenv("CLOVER_FAULT_INJECT");
    return rc;
}

static void same_run(const char *what, const clover_generate_result *a, const clover_generate_result *b) {
    CHECK_MSG(a->n_generated == b->n_generated, "%s: %zu tokens, uninjected %zu", what, b->n_generated, a->n_generated);
    size_t bad = 0;
    for (size_t i = 0; i < a->n_generated && i < b->n_generated; i++)
        bad += a->ids[i] != b->ids[i] || memcmp(&a->confidences[i], &b->confidences[i], sizeof(float)) != 0;
    CHECK_MSG(bad == 0, "%s: %zu tokens or confidences differ from the uninjected run", what, bad);
    CHECK_MSG(a->n_blocks == b->n_blocks && a->finish == b->finish && a->committed_after == b->committed_after,
              "%s: blocks %zu finish %d committed %zu, uninjected %zu %d %zu", what, b->n_blocks, (int)b->finish,
              b->committed_after, a->n_blocks, (int)a->finish, a->committed_after);
    for (size_t i = 0; i < a->n_blocks && i < b->n_blocks; i++)
        CHECK_MSG(a->passes_per_block[i] == b->passes_per_block[i], "%s: block %zu passes %u, uninjected %u", what, i,
                  b->passes_per_block[i], a->passes_per_block[i]);
}

/* Every case of the manifest under every failure point, once and dead. */
static void cases_under_faults(run_kind kind, bool golden, size_t stride, size_t max_cases) {
    json_t *cases = json_object_get(fx.manifest, "generate"), *c;
    size_t i, runs = 0;
    CHECK(json_array_size(cases) >= 3);
    json_array_foreach(cases, i, c) {
        if (i % stride) continue;
        if (i / stride >= max_cases) break;
        const char *name = json_string_value(json_object_get(c, "name"));
        size_t n_prompt = json_array_size(json_object_get(c, "prompt_ids")), chunks = (n_prompt + ROWS - 1) / ROWS;
        clover_generate_result ref;
        bool moved = false;
        if (run_one(NULL, c, kind, &ref, &moved)) continue;
        if (golden) golden_compare(name, &ref, json_object_get(c, "expected"));
        char points[6][32];
        snprintf(points[0], sizeof points[0], "load:1");
        snprintf(points[1], sizeof points[1], "commit:1");          /* the prompt's first chunk */
        snprintf(points[2], sizeof points[2], "commit:%zu", chunks); /* its last: mid prompt */
        snprintf(points[3], sizeof points[3], "commit:%zu", chunks + (kind == RUN_AR ? 3 : 1)); /* after it */
        snprintf(points[4], sizeof points[4], "preview:1");
        /* a later pass: the second block's resolve, a mid-block preview of the pass loop */
        snprintf(points[5], sizeof points[5], "%s", kind == RUN_AR ? "commit:3" : kind == RUN_DIFFUSION ? "preview:2" : "preview:3");
        for (int p = 0; p < 6; p++)
            for (int dead = 0; dead < 2; dead++) {
                if (p == 0 && dead) continue; /* a load failure has no mode */
                if (kind == RUN_AR && p == 4) continue; /* no previews */
                char spec[48], what[160];
                snprintf(spec, sizeof spec, "%s%s", points[p], dead ? ":dead" : "");
                snprintf(what, sizeof what, "%s (%s) under %s", name,
                         kind == RUN_LOGPROBS ? "pass loop"
                         : kind == RUN_LOSSLESS ? "lossless"
                         : kind == RUN_AR      ? "autoregressive"
                                               : "resolve",
                         spec);
                size_t w0 = n_warn_dropped, m0 = n_warn_moved, o0 = n_warn_other;
                clover_generate_result r;
                if (run_one(spec, c, kind, &r, &moved)) continue;
                runs++;
                CHECK_MSG(moved, "%s: the fault did not fire (the session never moved)", what);
                same_run(what, &ref, &r);
                if (golden) golden_compare(what, &r, json_object_get(c, "expected"));
                size_t want = dead || p == 0 ? 1 : 0;
                CHECK_MSG(n_warn_dropped - w0 == want, "%s: %zu 'dropped' warnings, expected %zu", what,
                          n_warn_dropped - w0, want);
                CHECK_MSG(n_warn_moved - m0 == 1 - want, "%s: %zu 'moved' warnings, expected %zu", what,
                          n_warn_moved - m0, 1 - want);
                CHECK_MSG(n_warn_other == o0, "%s: another warning was logged", what);
                clover_generate_result_free(&r);
            }
        clover_generate_result_free(&ref);
    }
    printf("     %zu injected runs, each equal to its uninjected run\n", runs);
}

/* Every other case on the default path (greedy, threshold 1, block size 4,
 * ignore_eos, sampled, penalties off), two on the others (CI time). */
static void diffusion_resolve(void) { cases_under_faults(RUN_DIFFUSION, true, 2, SIZE_MAX); }
static void diffusion_pass_loop(void) { cases_under_faults(RUN_LOGPROBS, true, 1, 2); }
static void lossless(void) { cases_under_faults(RUN_LOSSLESS, false, 1, 2); }
static void autoregressive(void) { cases_under_faults(RUN_AR, true, 1, SIZE_MAX); }

/* Request 2 shares request 1's first 28 prompt ids, then differs: the
 * prompt snapshot (taken at 24) is imported, so a device that dies in request 2 is rebuilt from
 * that imported state plus the commits since. */
static void after_a_snapshot(void) {
    json_t *c = json_array_get(json_object_get(fx.manifest, "generate"), 0);
    golden_request g;
    golden_request_init(&g, tm.model, json_object_get(c, "prompt_ids"), json_object_get(c, "options"), NULL);
    g.p.max_tokens = 8;
    g.p.snapshot_at = 24;
    const size_t n2 = 28 + 5;
    int32_t *p2 = malloc(n2 * sizeof *p2);
    memcpy(p2, g.prompt, 28 * sizeof *p2);
    for (size_t i = 0; i < 5; i++) p2[28 + i] = (int32_t)(97 + i); /* "abcde" */
    clover_generate_result ref1, ref2, r1, r2;
    clover_error err = {0};
    clover_session *s = new_session(NULL);
    int rc = !s || clover_generate(s, g.prompt, g.n_prompt, &g.p, &ref1, &err) ||
             clover_generate(s, p2, n2, &g.p, &ref2, &err);
    CHECK_MSG(rc == 0, "uninjected: %s", err.message);
    clover_session_free(s);
    if (!rc) {
        CHECK_MSG(ref2.stats.snapshot_reused == 24, "the snapshot gave %zu ids, expected 24",
                  ref2.stats.snapshot_reused);
        char spec[32];
        snprintf(spec, sizeof spec, "preview:%zu:dead", ref1.n_blocks + 1); /* request 2's first resolve */
        size_t w0 = n_warn_dropped;
        s = new_session(spec);
        rc = !s || clover_generate(s, g.prompt, g.n_prompt, &g.p, &r1, &err);
        bool moved_early = s && failover_session_moved(s->bs);
        rc = rc || clover_generate(s, p2, n2, &g.p, &r2, &err);
        CHECK_MSG(rc == 0, "under %s: %s", spec, err.message);
        if (!rc) {
            CHECK_MSG(!moved_early && failover_session_moved(s->bs), "the fault did not fire in request 2");
            CHECK(r2.stats.snapshot_reused == 24 && n_warn_dropped - w0 == 1);
            same_run("request 1 (snapshot)", &ref1, &r1);
            same_run("request 2 (snapshot)", &ref2, &r2);
            clover_generate_result_free(&r1);
            clover_generate_result_free(&r2);
        }
        clover_session_free(s);
        unsetenv("CLOVER_FAULT_INJECT");
        clover_generate_result_free(&ref1);
        clover_generate_result_free(&ref2);
    }
    free(p2);
    golden_request_free(&g);
}

/* A state loaded from a device copy (backend_ops.state_save / state_load: CUDA's prompt snapshots in device memory)
 * stays rebuildable: the copy keeps the saved session's replay log, so a device that dies after the load hands the
 * session to the fallback with the copy's committed ids replayed. The "device" is the CPU backend plus host-memory
 * copies of its own (state_copy_shim.h); the reference is the plain CPU backend committing the same ids: the last
 * logits bit for bit. Before the copy kept its log, the commit after the load failed ("its state cannot be
 * rebuilt"). */
static void after_a_device_copy(void) {
    const backend_ops dev = shim_ops();
    const backend_config cfg = {.n_threads = 2, .max_rows = 32, .max_context = 128};
    const size_t V = tm.model->hp.n_vocab;
    int32_t ids[40];
    for (size_t i = 0; i < 40; i++) ids[i] = (int32_t)(5 + 7 * i % (V - 10));
    float *ref = malloc(V * sizeof *ref), *got = malloc(V * sizeof *got);
    clover_error err = {0};
    /* the reference: 24 ids, then 5 more, on the CPU */
    backend *rb = NULL;
    backend_session *rs = NULL;
    backend_commit_seq q = {.ids = ids, .n = 24};
    int rc = backend_cpu.create(tm.model, &cfg, &rb, &err) || backend_cpu.session_create(rb, &rs, &err);
    q.s = rs;
    rc = rc || backend_commit1(&backend_cpu, rb, &q, NULL, &err);
    q = (backend_commit_seq){.s = rs, .ids = ids + 30, .n = 5, .last_logits = ref};
    rc = rc || backend_commit1(&backend_cpu, rb, &q, NULL, &err);
    CHECK_MSG(rc == 0, "reference: %s", err.message);
    /* the failover over the device: commit 24 (call 1), save a copy, commit 6 more (call 2), load the copy (back
     * at 24), then the device dies at call 3, the 5 ids' commit: moved, the log of the copy replayed */
    setenv("CLOVER_FAULT_INJECT", "commit:3:dead", 1);
    backend *fb = NULL;
    backend_session *s = NULL;
    backend_state_copy *c = NULL;
    size_t w0 = n_warn_dropped;
    rc = failover_create(tm.model, &cfg, &dev, &backend_cpu, &fb, &err) ||
         backend_failover.session_create(fb, &s, &err);
    q = (backend_commit_seq){.s = s, .ids = ids, .n = 24};
    rc = rc || backend_commit1(&backend_failover, fb, &q, NULL, &err);
    rc = rc || backend_failover.state_save(s, &c, &err);
    q = (backend_commit_seq){.s = s, .ids = ids + 24, .n = 6};
    rc = rc || backend_commit1(&backend_failover, fb, &q, NULL, &err);
    rc = rc || backend_failover.state_load(s, c, &err);
    CHECK_MSG(rc == 0, "before the fault: %s", err.message);
    q = (backend_commit_seq){.s = s, .ids = ids + 30, .n = 5, .last_logits = got};
    rc = rc || backend_commit1(&backend_failover, fb, &q, NULL, &err);
    CHECK_MSG(rc == 0, "the commit after the load, the device dead: %s", err.message);
    if (!rc) {
        CHECK_MSG(failover_session_moved(s), "the fault did not move the session");
        CHECK(n_warn_dropped - w0 == 1);
        CHECK_MSG(memcmp(ref, got, V * sizeof *ref) == 0, "the rebuilt session's logits differ from the reference");
        CHECK(backend_failover.session_length(s) == 29);
    }
    unsetenv("CLOVER_FAULT_INJECT");
    if (c) backend_failover.state_copy_free(c);
    if (s) backend_failover.session_free(s);
    if (fb) backend_failover.destroy(fb);
    if (rs) backend_cpu.session_free(rs);
    if (rb) backend_cpu.destroy(rb);
    free(ref), free(got);
}

static void bad_plans(void) {
    const char *bad[] = {"commit", "commit:0", "preview:x", "load:2", "nothing:1", "commit:3:sometimes", "call:-1",
                         "full:2:dead", "full:0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fault_plan p;
        clover_error err = {0};
        CHECK_MSG(fault_plan_parse(&p, bad[i], &err) == CLOVER_E_INVALID, "'%s' was taken", bad[i]);
        CHECK_MSG(strstr(err.message, "CLOVER_FAULT_INJECT") && !strchr(err.message, '\n'), "'%s': %s", bad[i],
                  err.message);
    }
    fault_plan p;
    clover_error err = {0};
    CHECK(fault_plan_parse(&p, "call:2:dead", &err) == 0 && p.armed && p.kind == FAULT_CALL && p.n == 2 && p.dead);
    /* call counts commits and previews together; dead fails every later call */
    CHECK(!fault_hit(&p, FAULT_LOAD, &err) && !fault_hit(&p, FAULT_COMMIT, &err) && fault_hit(&p, FAULT_PREVIEW, &err));
    CHECK(err.code == CLOVER_E_DEVICE && fault_hit(&p, FAULT_COMMIT, &err) && fault_state_lost(&p));
    CHECK(fault_plan_parse(&p, "", &err) == 0 && !p.armed && !fault_hit(&p, FAULT_COMMIT, &err));
    /* full:3: two sessions fit, the third and later are refused as out of memory; calls never fail */
    CHECK(fault_plan_parse(&p, "full:3", &err) == 0 && p.armed && p.kind == FAULT_FULL && p.n == 3);
    CHECK(!fault_hit(&p, FAULT_COMMIT, &err) && !fault_hit(&p, FAULT_PREVIEW, &err) && !fault_hit(&p, FAULT_LOAD, &err));
    CHECK(!fault_full(&p, &err) && !fault_full(&p, &err) && fault_full(&p, &err) && fault_full(&p, &err));
    CHECK(err.code == CLOVER_E_NOMEM && strstr(err.message, "memory") && !fault_state_lost(&p));
    /* through the public API: the session is refused with the message */
    setenv("CLOVER_FAULT_INJECT", "preview:two", 1);
    clover_session *s = NULL;
    int rc = clover_session_create(&s, tm.model, NULL, &err);
    CHECK_MSG(rc == CLOVER_E_INVALID && !s && strstr(err.message, "CLOVER_FAULT_INJECT='preview:two'"), "rc %d: %s", rc,
              err.message);
    unsetenv("CLOVER_FAULT_INJECT");
}

int main(void) {
    clover_set_log(count_log, NULL, 1);
    if (fixture_open(&fx, "tiny_clover")) return TEST_EXIT();
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) {
        RUN(bad_plans);
        RUN(diffusion_resolve);
        RUN(diffusion_pass_loop);
        RUN(lossless);
        RUN(after_a_snapshot);
        RUN(after_a_device_copy);
    }
    test_model_free(&tm);
    fixture_close(&fx);
    if (fixture_open(&fx, "tiny_ar")) return TEST_EXIT();
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) RUN(autoregressive);
    test_model_free(&tm);
    fixture_close(&fx);
    return TEST_EXIT();
}
