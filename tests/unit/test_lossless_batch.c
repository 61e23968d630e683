/*
 * test_lossless_batch.c: lossless requests in a continuous batch (the
 * server's path: clover_engine, clover_request, clover_batch_step) give
 * what each gives alone through clover_generate, bit for bit: tokens,
 * confidences, finish, tokens emitted and commits per block, committed
 * length. Every generation fixture prompt of tiny_clover runs lossless
 * greedy and lossless sampled, mixed in one batch with the same prompts in
 * lossy block diffusion and in --ar, half of them joining after a few
 * steps (so a verify, a recommit and other sequences' previews and
 * commits share passes). Alone, each lossless answer must also equal the
 * --ar one of the same batch (f32 weights: no near-tie flips here).
 */
#include "engine/session.h"
#include "golden_generate.h"

static fixture fx;
static test_model tm;

enum { MAX_JOBS = 96 };

typedef struct job {
    char name[96];
    golden_request g;
    clover_generate_params p;
    clover_generate_result alone;
    int rc_alone;
} job;

static void same(const char *name, const clover_generate_result *a, const clover_generate_result *b) {
    CHECK_MSG(a->n_generated == b->n_generated, "%s: %zu tokens batched, %zu alone", name, a->n_generated,
              b->n_generated);
    if (a->n_generated != b->n_generated) return;
    CHECK_MSG(!memcmp(a->ids, b->ids, a->n_generated * sizeof *a->ids), "%s: ids differ batched", name);
    CHECK_MSG(!memcmp(a->confidences, b->confidences, a->n_generated * sizeof *a->confidences),
              "%s: confidences differ batched", name);
    CHECK_MSG(a->finish == b->finish, "%s: finish differs batched", name);
    CHECK_MSG(a->committed_after == b->committed_after, "%s: committed %zu batched, %zu alone", name,
              a->committed_after, b->committed_after);
    CHECK_MSG(a->n_blocks == b->n_blocks && a->lossless == b->lossless, "%s: blocks differ batched", name);
    if (a->n_blocks != b->n_blocks || !a->lossless || !b->lossless) return;
    CHECK_MSG(!memcmp(a->accepted_per_block, b->accepted_per_block, a->n_blocks * sizeof(uint32_t)) &&
                  !memcmp(a->commits_per_block, b->commits_per_block, a->n_blocks * sizeof(uint32_t)),
              "%s: per-block statistics differ batched", name);
}

static void batched(void) {
    json_t *cases = json_object_get(fx.manifest, "generate"), *c;
    static job jobs[MAX_JOBS];
    size_t n = 0, i;
    json_array_foreach(cases, i, c) {
        for (int v = 0; v < 4 && n < MAX_JOBS; v++) { /* lossless greedy, lossless sampled, lossy, --ar */
            job *j = &jobs[n++];
            golden_request_init(&j->g, tm.model, json_object_get(c, "prompt_ids"), json_object_get(c, "options"),
                                json_object_get(c, "record_overrides"));
            j->p = j->g.p;
            if (j->p.max_tokens > 10) j->p.max_tokens = 10; /* CI time */
            if (v == 1) {
                j->p.temperature = 0.9f;
                j->p.seed = 300 + i;
            }
            j->p.lossless = v < 2;
            if (v == 3) {
                j->p.mode = CLOVER_MODE_AUTOREGRESSIVE;
                j->p.penalties = NULL;
            }
            snprintf(j->name, sizeof j->name, "%s %s", json_string_value(json_object_get(c, "name")),
                     v == 0 ? "lossless" : v == 1 ? "lossless sampled" : v == 2 ? "lossy" : "--ar");
        }
    }
    CHECK(n >= 8);
    clover_error err = {0};
    clover_session *s = NULL;
    CHECK(clover_session_create(&s, tm.model, NULL, &err) == 0);
    for (size_t k = 0; s && k < n; k++) {
        clover_session_reset(s);
        jobs[k].rc_alone = clover_generate(s, jobs[k].g.prompt, jobs[k].g.n_prompt, &jobs[k].p, &jobs[k].alone, &err);
        CHECK_MSG(jobs[k].rc_alone == 0, "%s alone: %s", jobs[k].name, err.message);
    }
    if (s) clover_session_free(s);
    /* lossless alone = --ar alone (the greedy variant has --ar's options but the penalties) */
    for (size_t k = 0; k + 3 < n; k += 4) {
        const clover_generate_result *ll = &jobs[k].alone, *ar = &jobs[k + 3].alone;
        if (jobs[k].rc_alone || jobs[k + 3].rc_alone) continue;
        CHECK_MSG(ll->n_generated == ar->n_generated && !memcmp(ll->ids, ar->ids, ar->n_generated * sizeof *ar->ids),
                  "%s: not --ar's answer", jobs[k].name);
    }
    clover_engine *e = NULL;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = 2;
    CHECK_MSG(clover_engine_create(&e, tm.model, &sp, &err) == 0, "%s", err.message);
    if (e) {
        static clover_session *ss[MAX_JOBS];
        static clover_request *rq[MAX_JOBS];
        for (size_t k = 0; k < n; k++) CHECK(clover_engine_session_create(&ss[k], e, NULL, &err) == 0);
        size_t steps = 0;
        for (size_t k = 0; k < n; k += 2) CHECK(clover_request_create(&rq[k], ss[k], jobs[k].g.prompt, jobs[k].g.n_prompt, &jobs[k].p, &err) == 0);
        for (;;) {
            if (steps == 3)
                for (size_t k = 1; k < n; k += 2)
                    CHECK(clover_request_create(&rq[k], ss[k], jobs[k].g.prompt, jobs[k].g.n_prompt, &jobs[k].p,
                                                &err) == 0);
            int running = clover_batch_step(rq, n);
            CHECK(running >= 0);
            if ((running <= 0 && steps >= 3) || ++steps > 20000) break;
        }
        size_t lossless = 0;
        for (size_t k = 0; k < n; k++) {
            clover_generate_result r;
            CHECK(rq[k] && clover_request_done(rq[k]));
            int rc = rq[k] ? clover_request_result(rq[k], &r, &err) : -1;
            CHECK_MSG(rc == 0, "%s batched: %s", jobs[k].name, err.message);
            if (!rc) {
                if (!jobs[k].rc_alone) same(jobs[k].name, &r, &jobs[k].alone);
                lossless += r.lossless != 0;
                clover_generate_result_free(&r);
            }
            if (rq[k]) clover_request_free(rq[k]);
            clover_session_free(ss[k]);
        }
        printf("     %zu requests (%zu lossless) in %zu steps\n", n, lossless, steps);
        clover_engine_free(e);
    }
    for (size_t k = 0; k < n; k++) {
        if (!jobs[k].rc_alone) clover_generate_result_free(&jobs[k].alone);
        golden_request_free(&jobs[k].g);
    }
}

int main(void) {
    if (fixture_open(&fx, "tiny_clover")) return TEST_EXIT();
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) RUN(batched);
    test_model_free(&tm);
    fixture_close(&fx);
    return TEST_EXIT();
}
