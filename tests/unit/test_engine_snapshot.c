/*
 * test_engine_snapshot.c: the prompt snapshot (src/engine/snapshot.h) on
 * the tiny Clover fixture (tests/fixtures/tiny_clover, converted to an F32
 * GGUF by the converter library, run on the CPU backend).
 *
 * A chat's next prompt shares only the part before the generation prompt
 * with the last one, so the tests build request 2 as request 1's first k
 * ids plus a different tail. What must hold:
 *  - request 1 with its snapshot cut at k still gives the reference's
 *    tokens (the golden case greedy_default);
 *  - request 2 reuses exactly k ids through the snapshot, and its tokens,
 *    confidences and the state it leaves are bit-identical to request 2 on
 *    a session whose committed ids are those k ids (the same chunking: the
 *    import restores the exact bytes), and its tokens equal a fresh run's;
 *  - the same in autoregressive mode (the snapshot keeps no logits);
 *  - the committed ids win when they are the longer prefix; the snapshot
 *    survives a cancelled request; reset, no_snapshot (session or request)
 *    and a too-small snapshot_max_bytes keep none.
 * All of it again on an engine whose backend keeps state copies itself
 * (backend_ops.state_save / state_load, as CUDA's device copies): the CPU
 * backend with those three ops added here over its own export / import,
 * counting that the snapshot went through them; and once more with a save
 * that fails after making its copy (a device out of memory), where the
 * engine must fall back to the host export and free that copy.
 */
#include "engine/session.h"
#include "golden_generate.h"
#include "state_copy_shim.h"

static fixture fx;
static test_model tm;
static int32_t *p1, *p2; /* request 1 (the golden case's prompt), request 2 = p1[0..K) + another tail */
static size_t n1, n2;
static json_t *case1;
#define K 20

/* The CPU backend plus state copies of its own (the engine's other snapshot path): state_copy_shim.h. */
static backend_ops shim;
static clover_engine *shim_engine; /* non-NULL: new_session makes its sessions on it */

static clover_session *new_session(int no_snapshot, size_t max_bytes) {
    clover_session *s = NULL;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = 2;
    sp.no_snapshot = no_snapshot;
    sp.snapshot_max_bytes = max_bytes;
    clover_error err = {0};
    int rc = shim_engine ? clover_engine_session_create(&s, shim_engine, &sp, &err)
                         : clover_session_create(&s, tm.model, &sp, &err);
    CHECK_MSG(rc == 0, "session: %s", err.message);
    return s;
}

static clover_generate_params params(clover_mode mode, size_t max_tokens, size_t snapshot_at) {
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.mode = mode;
    p.max_tokens = max_tokens;
    p.snapshot_at = snapshot_at;
    return p;
}

static int gen(clover_session *s, const int32_t *ids, size_t n, const clover_generate_params *p,
               clover_generate_result *r) {
    clover_error err = {0};
    int rc = clover_generate(s, ids, n, p, r, &err);
    CHECK_MSG(rc == 0, "generate: %s", err.message);
    return rc;
}

/* The backend state of a session as bytes (malloc'd). */
static unsigned char *export_state(clover_session *s, size_t *len) {
    *len = s->be->state_bytes(s->bs);
    unsigned char *b = malloc(*len + 1);
    clover_error err = {0};
    int rc = s->be->state_export(s->bs, b, *len, &err);
    CHECK_MSG(rc == 0, "export: %s", err.message);
    return b;
}

static void same_results(const char *what, const clover_generate_result *a, const clover_generate_result *b,
                         bool exact_conf) {
    CHECK_MSG(a->n_generated == b->n_generated, "%s: %zu vs %zu tokens", what, a->n_generated, b->n_generated);
    size_t n = a->n_generated < b->n_generated ? a->n_generated : b->n_generated;
    for (size_t i = 0; i < n; i++) {
        CHECK_MSG(a->ids[i] == b->ids[i], "%s: token %zu is %d vs %d", what, i, a->ids[i], b->ids[i]);
        if (exact_conf)
            CHECK_MSG(a->confidences[i] == b->confidences[i], "%s: confidence %zu %.9g vs %.9g", what, i,
                      (double)a->confidences[i], (double)b->confidences[i]);
        else
            CHECK_NEAR(a->confidences[i], b->confidences[i], 1e-5);
    }
    CHECK_EQ_INT(a->finish, b->finish);
    CHECK_EQ_INT(a->committed_after, b->committed_after);
}

/* Request 2 through the snapshot vs on a committed prefix of K ids vs fresh. */
static void reuse_equals_prefix_and_fresh(clover_mode mode) {
    clover_session *s = new_session(0, 0), *pre = new_session(0, 0), *fresh = new_session(1, 0);
    if (!s || !pre || !fresh) goto done;
    clover_generate_result r1, r2, rp, rf;
    clover_generate_params g1 = params(mode, 32, K), g2 = params(mode, 24, 0);
    if (gen(s, p1, n1, &g1, &r1)) goto done;
    if (mode == CLOVER_MODE_DIFFUSION) golden_compare("request 1 (cut at K)", &r1, json_object_get(case1, "expected"));
    CHECK_EQ_INT(clover_session_snapshot_length(s), K);
    CHECK(clover_session_snapshot_ids(s) && !memcmp(clover_session_snapshot_ids(s), p1, K * sizeof *p1));
    CHECK(clover_session_length(s) > K);
    CHECK_EQ_INT(clover_session_match(s, p2, n2), K);
    clover_generate_result_free(&r1);

    if (gen(s, p2, n2, &g2, &r2)) goto done;
    CHECK_EQ_INT(r2.stats.reused_tokens, K);
    CHECK_EQ_INT(r2.stats.snapshot_reused, K);
    CHECK(r2.stats.snapshot_s >= 0.0);

    /* the same K ids committed by a request of their own (max_tokens 0) */
    clover_generate_params g0 = params(mode, 0, 0);
    clover_generate_result r0;
    if (mode == CLOVER_MODE_AUTOREGRESSIVE) g0.max_tokens = 1; /* AR keeps the last row's logits: end at K */
    if (!gen(pre, p1, K, &g0, &r0)) clover_generate_result_free(&r0);
    if (mode == CLOVER_MODE_AUTOREGRESSIVE) {
        /* one token emitted and not committed: the session holds the K prompt ids */
        CHECK_EQ_INT(clover_session_length(pre), K);
    }
    if (!gen(pre, p2, n2, &g2, &rp)) {
        CHECK_EQ_INT(rp.stats.reused_tokens, K);
        CHECK_EQ_INT(rp.stats.snapshot_reused, 0);
        same_results("snapshot vs committed prefix", &r2, &rp, true);
        size_t la, lb;
        unsigned char *a = export_state(s, &la), *b = export_state(pre, &lb);
        CHECK_MSG(la == lb && !memcmp(a, b, la), "the states differ after request 2 (%zu vs %zu bytes)", la, lb);
        free(a), free(b);
        clover_generate_result_free(&rp);
    }
    if (!gen(fresh, p2, n2, &g2, &rf)) {
        CHECK_EQ_INT(rf.stats.reused_tokens, 0);
        CHECK_EQ_INT(clover_session_snapshot_length(fresh), 0);
        same_results("snapshot vs fresh", &r2, &rf, false);
        printf("     %s: request 2 reused %zu of %zu ids from the snapshot (%.3f ms), %zu tokens as a fresh run\n",
               mode == CLOVER_MODE_DIFFUSION ? "diffusion" : "autoregressive", r2.stats.reused_tokens, n2,
               r2.stats.snapshot_s * 1e3, r2.n_generated);
        clover_generate_result_free(&rf);
    }
    clover_generate_result_free(&r2);
done:
    clover_session_free(s);
    clover_session_free(pre);
    clover_session_free(fresh);
}

static void diffusion_reuse(void) { reuse_equals_prefix_and_fresh(CLOVER_MODE_DIFFUSION); }
static void autoregressive_reuse(void) { reuse_equals_prefix_and_fresh(CLOVER_MODE_AUTOREGRESSIVE); }

/* The longer prefix wins: a prompt that extends the committed ids uses them. */
static void committed_ids_win_when_longer(void) {
    clover_session *s = new_session(0, 0);
    if (!s) return;
    clover_generate_result r1, r2;
    clover_generate_params g1 = params(CLOVER_MODE_DIFFUSION, 8, K), g2 = params(CLOVER_MODE_DIFFUSION, 8, 0);
    if (!gen(s, p1, n1, &g1, &r1)) {
        size_t c = clover_session_length(s); /* p1 + one block */
        int32_t *q = malloc((c + 3) * sizeof *q);
        memcpy(q, clover_session_ids(s), c * sizeof *q);
        q[c] = 5, q[c + 1] = 6, q[c + 2] = 7;
        CHECK_EQ_INT(clover_session_match(s, q, c + 3), c);
        if (!gen(s, q, c + 3, &g2, &r2)) {
            CHECK_EQ_INT(r2.stats.reused_tokens, c);
            CHECK_EQ_INT(r2.stats.snapshot_reused, 0);
            clover_generate_result_free(&r2);
        }
        /* snapshot_at 0: the new snapshot is at the end of that prompt */
        CHECK_EQ_INT(clover_session_snapshot_length(s), c + 3);
        free(q);
        clover_generate_result_free(&r1);
    }
    clover_session_free(s);
}

static int cancel_now(void *user, int32_t id, float conf) {
    (void)user, (void)id, (void)conf;
    return 1;
}

/* A cancelled request forgets the sequence, not the snapshot (a sound state). */
static void snapshot_survives_cancel(void) {
    clover_session *s = new_session(0, 0);
    if (!s) return;
    clover_generate_result r1, r2;
    clover_generate_params g1 = params(CLOVER_MODE_DIFFUSION, 32, K), g2 = params(CLOVER_MODE_DIFFUSION, 8, 0);
    g1.on_token = cancel_now;
    if (!gen(s, p1, n1, &g1, &r1)) {
        CHECK_EQ_INT(r1.finish, CLOVER_FINISH_CANCELLED);
        CHECK_EQ_INT(clover_session_length(s), 0);
        CHECK_EQ_INT(clover_session_snapshot_length(s), K);
        clover_generate_result_free(&r1);
    }
    if (!gen(s, p2, n2, &g2, &r2)) {
        CHECK_EQ_INT(r2.stats.reused_tokens, K);
        clover_generate_result_free(&r2);
    }
    clover_session_reset(s); /* reset forgets both */
    CHECK_EQ_INT(clover_session_snapshot_length(s), 0);
    CHECK(clover_session_snapshot_ids(s) == NULL);
    CHECK_EQ_INT(clover_session_match(s, p2, n2), 0);
    clover_session_free(s);
}

/* Off by the session, by the request, or by a cap below the state's size. */
static void snapshot_off(void) {
    clover_session *off = new_session(1, 0), *tiny = new_session(0, 1024), *on = new_session(0, 0);
    if (!off || !tiny || !on) goto done;
    clover_generate_result r;
    clover_generate_params g = params(CLOVER_MODE_DIFFUSION, 8, K);
    if (!gen(off, p1, n1, &g, &r)) clover_generate_result_free(&r);
    CHECK_EQ_INT(clover_session_snapshot_length(off), 0);
    if (!gen(tiny, p1, n1, &g, &r)) clover_generate_result_free(&r);
    CHECK_EQ_INT(clover_session_snapshot_length(tiny), 0);
    g.no_snapshot = 1;
    if (!gen(on, p1, n1, &g, &r)) clover_generate_result_free(&r);
    CHECK_EQ_INT(clover_session_snapshot_length(on), 0);
    /* max_tokens 0 at the prompt's end: the committed ids are the snapshot, none taken */
    g = params(CLOVER_MODE_DIFFUSION, 0, 0);
    if (!gen(on, p1, n1, &g, &r)) clover_generate_result_free(&r);
    CHECK_EQ_INT(clover_session_snapshot_length(on), 0);
    CHECK_EQ_INT(clover_session_length(on), n1);
    g = params(CLOVER_MODE_DIFFUSION, 0, K); /* reuse n1 > K: already past the point, none taken */
    if (!gen(on, p1, n1, &g, &r)) {
        CHECK_EQ_INT(r.stats.reused_tokens, n1);
        clover_generate_result_free(&r);
    }
    CHECK_EQ_INT(clover_session_snapshot_length(on), 0);
    CHECK_EQ_INT(clover_session_match(NULL, p1, n1), 0);
done:
    clover_session_free(off);
    clover_session_free(tiny);
    clover_session_free(on);
}

int main(void) {
    if (fixture_open(&fx, "tiny_clover")) return TEST_EXIT();
    json_t *cases = json_object_get(fx.manifest, "generate"), *c;
    size_t i;
    json_array_foreach(cases, i, c) if (!strcmp(json_string_value(json_object_get(c, "name")), "greedy_default")) case1 =
        c;
    CHECK(case1 != NULL);
    size_t ns;
    int32_t *second = fixture_ids(json_object_get(json_object_get(fx.manifest, "prefix_reuse"), "second_prompt_ids"),
                                  &ns);
    p1 = fixture_ids(json_object_get(case1, "prompt_ids"), &n1);
    CHECK(n1 > K && ns > n1);
    /* p2 = p1[0..K) + the follow-up part of the fixture's second prompt */
    n2 = K + (ns - n1);
    p2 = malloc(n2 * sizeof *p2);
    memcpy(p2, p1, K * sizeof *p2);
    memcpy(p2 + K, second + n1, (ns - n1) * sizeof *p2);
    CHECK(p2[K] != p1[K]);
    if (case1 && test_model_convert(&tm, &fx, CONVERT_F32) == 0) {
        RUN(diffusion_reuse);
        RUN(autoregressive_reuse);
        RUN(committed_ids_win_when_longer);
        RUN(snapshot_survives_cancel);
        RUN(snapshot_off);
        shim = shim_ops();
        clover_session_params sp;
        clover_session_params_init(&sp);
        sp.n_threads = 2;
        clover_error err = {0};
        CHECK_MSG(engine_create_on(&shim_engine, tm.model, &shim, &sp, "test", &err) == 0, "%s", err.message);
        if (shim_engine) {
            printf("     the same on a backend that keeps state copies itself:\n");
            RUN(diffusion_reuse);
            RUN(autoregressive_reuse);
            RUN(committed_ids_win_when_longer);
            RUN(snapshot_survives_cancel);
            RUN(snapshot_off);
            printf("     %d copies saved, %d loaded\n", shim_saves, shim_loads);
            /* request 2 of diffusion_reuse, autoregressive_reuse and snapshot_survives_cancel comes through the
             * snapshot: three loads, each of a copy saved before */
            CHECK_EQ_INT(shim_loads, 3);
            CHECK(shim_saves >= shim_loads);
            shim_fail = 1;
            const int loads = shim_loads;
            printf("     and with copies refused (the host export instead):\n");
            RUN(diffusion_reuse);
            RUN(snapshot_survives_cancel);
            CHECK_EQ_INT(shim_loads, loads);
            clover_engine_free(shim_engine);
        }
    }
    test_model_free(&tm);
    free(p1), free(p2), free(second);
    fixture_close(&fx);
    return TEST_EXIT();
}
