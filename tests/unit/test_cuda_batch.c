/*
 * test_cuda_batch.c: batch invariance on the CUDA backend through the
 * engine (clover_engine on --device cuda, clover_request, clover_batch_step:
 * the server's path). Every generation case of tiny_clover runs in four
 * variants (lossless greedy, lossless sampled, lossy block diffusion, --ar),
 * first each alone through clover_generate on a CUDA session; then batches
 * of 1, 2, 3, 4, 8, 12 and 16 of them, mixed (each batch starts at another
 * offset in the list, so every variant lands in different company) and half
 * of each batch joining after two steps (a prompt chunk, previews, verifying
 * commits and decode rows of different sequences share calls), must give
 * each request's answer alone bit for bit (then batches of 24 and 32, and
 * 32 --ar requests at once: every decode step of a call is ONE stacked pass
 * since issue 25, backend_cuda_stack.c): ids, confidences, finish,
 * committed length, blocks and the lossless per-block statistics. On the
 * f32 file and on a Q8_0 copy (whose products take the 8-bit integer path:
 * each row must keep its own sequence's kernel choice, issue 25).
 * The reference of "alone" is the same backend's lone run, not the code
 * under test in the batched shape: a stacked pass that let rows of one
 * sequence change another's bits fails here.
 * Without a CUDA device: "SKIP: no CUDA device (...)" and exit 77.
 */
#include "cuda_test.h"
#include "golden_generate.h"

static fixture fx;
static test_model tm32, tmq8;

enum { MAX_JOBS = 64, MAX_BATCH = 32 };

typedef struct job {
    char name[96];
    golden_request g;
    clover_generate_params p;
    clover_generate_result alone;
    int rc_alone;
} job;

static job jobs[MAX_JOBS];
static size_t n_jobs;

static clover_session_params cuda_params(void) {
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.device = CLOVER_DEVICE_CUDA;
    sp.max_context = 1024;
    return sp;
}

static void same(const char *name, size_t batch, const clover_generate_result *a, const clover_generate_result *b) {
    CHECK_MSG(a->n_generated == b->n_generated, "%s in %zu: %zu tokens batched, %zu alone", name, batch,
              a->n_generated, b->n_generated);
    if (a->n_generated != b->n_generated) return;
    CHECK_MSG(!memcmp(a->ids, b->ids, a->n_generated * sizeof *a->ids), "%s in %zu: ids differ", name, batch);
    CHECK_MSG(!memcmp(a->confidences, b->confidences, a->n_generated * sizeof *a->confidences),
              "%s in %zu: confidences differ", name, batch);
    CHECK_MSG(a->finish == b->finish, "%s in %zu: finish differs", name, batch);
    CHECK_MSG(a->committed_after == b->committed_after, "%s in %zu: committed %zu batched, %zu alone", name, batch,
              a->committed_after, b->committed_after);
    CHECK_MSG(a->n_blocks == b->n_blocks && a->lossless == b->lossless, "%s in %zu: blocks differ", name, batch);
    if (a->n_blocks != b->n_blocks || !a->lossless || !b->lossless) return;
    CHECK_MSG(!memcmp(a->accepted_per_block, b->accepted_per_block, a->n_blocks * sizeof(uint32_t)) &&
                  !memcmp(a->commits_per_block, b->commits_per_block, a->n_blocks * sizeof(uint32_t)),
              "%s in %zu: per-block statistics differ", name, batch);
}

static void make_jobs(const clover_model *m) {
    json_t *cases = json_object_get(fx.manifest, "generate"), *c;
    size_t i;
    n_jobs = 0;
    json_array_foreach(cases, i, c) {
        for (int v = 0; v < 4 && n_jobs < MAX_JOBS; v++) { /* lossless greedy, lossless sampled, lossy, --ar */
            job *j = &jobs[n_jobs++];
            memset(j, 0, sizeof *j);
            golden_request_init(&j->g, m, json_object_get(c, "prompt_ids"), json_object_get(c, "options"),
                                json_object_get(c, "record_overrides"));
            j->p = j->g.p;
            if (j->p.max_tokens > 24) j->p.max_tokens = 24;
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
}

static void free_jobs(void) {
    for (size_t k = 0; k < n_jobs; k++) {
        if (!jobs[k].rc_alone) clover_generate_result_free(&jobs[k].alone);
        golden_request_free(&jobs[k].g);
    }
    n_jobs = 0;
}

/* One engine, a batch of n requests (the jobs `only` lists, else from job `first` on), half joining after two
 * steps. */
static void one_batch(clover_engine *e, size_t n, size_t first, const size_t *only) {
    clover_session *ss[MAX_BATCH] = {0};
    clover_request *rq[MAX_BATCH] = {0};
    size_t idx[MAX_BATCH];
    clover_error err = {0};
    for (size_t k = 0; k < n; k++) {
        idx[k] = only ? only[k] : (first + k) % n_jobs;
        int rc = clover_engine_session_create(&ss[k], e, NULL, &err);
        CHECK_MSG(rc == 0, "batch %zu: session %zu: %s", n, k, err.message);
        if (rc) goto out;
    }
    size_t steps = 0;
    for (;;) {
        for (size_t k = 0; k < n; k++) {
            const job *j = &jobs[idx[k]];
            if (rq[k] || (k % 2 && steps < 2)) continue;
            int rc = clover_request_create(&rq[k], ss[k], j->g.prompt, j->g.n_prompt, &j->p, &err);
            CHECK_MSG(rc == 0, "batch %zu: %s: %s", n, j->name, err.message);
            if (rc) goto out;
        }
        int running = clover_batch_step(rq, n);
        CHECK(running >= 0);
        if ((running <= 0 && steps >= 2) || ++steps > 20000) break;
    }
    for (size_t k = 0; k < n; k++) {
        const job *j = &jobs[idx[k]];
        clover_generate_result r;
        CHECK(clover_request_done(rq[k]));
        int rc = clover_request_result(rq[k], &r, &err);
        CHECK_MSG(rc == j->rc_alone, "%s in %zu: rc %d batched, %d alone (%s)", j->name, n, rc, j->rc_alone,
                  err.message);
        if (!rc) {
            if (!j->rc_alone) same(j->name, n, &r, &j->alone);
            clover_generate_result_free(&r);
        }
    }
out:
    for (size_t k = 0; k < n; k++) {
        if (rq[k]) clover_request_free(rq[k]);
        if (ss[k]) clover_session_free(ss[k]);
    }
}

static void batches_equal_alone(const clover_model *m, const char *what) {
    make_jobs(m);
    CHECK(n_jobs >= 8);
    clover_session_params sp = cuda_params();
    clover_error err = {0};
    clover_session *s = NULL;
    int rc = clover_session_create(&s, m, &sp, &err);
    CHECK_MSG(rc == 0, "%s: cuda session: %s", what, err.message);
    for (size_t k = 0; s && k < n_jobs; k++) {
        clover_session_reset(s);
        jobs[k].rc_alone = clover_generate(s, jobs[k].g.prompt, jobs[k].g.n_prompt, &jobs[k].p, &jobs[k].alone, &err);
        CHECK_MSG(jobs[k].rc_alone == 0, "%s: %s alone: %s", what, jobs[k].name, err.message);
    }
    if (s) clover_session_free(s);
    clover_engine *e = NULL;
    rc = clover_engine_create(&e, m, &sp, &err);
    CHECK_MSG(rc == 0, "%s: cuda engine: %s", what, err.message);
    if (e) {
        CHECK_MSG(!strcmp(clover_engine_backend(e), "cuda"), "the engine runs on %s", clover_engine_backend(e));
        static const size_t sizes[] = {1, 2, 3, 4, 8, 12, 16, 24, 32};
        for (size_t b = 0; b < sizeof sizes / sizeof *sizes; b++) one_batch(e, sizes[b], b * 5, NULL);
        /* the server's main case: MAX_BATCH decode rows (the --ar jobs, each several times) in every call */
        size_t ar[MAX_BATCH], n_ar = 0;
        for (size_t k = 0, tries = 0; n_jobs && n_ar < MAX_BATCH && tries < 64 * MAX_BATCH; k = (k + 1) % n_jobs, tries++)
            if (jobs[k].p.mode == CLOVER_MODE_AUTOREGRESSIVE) ar[n_ar++] = k;
        CHECK(n_ar == MAX_BATCH);
        if (n_ar == MAX_BATCH) one_batch(e, MAX_BATCH, 0, ar);
        clover_engine_free(e);
    }
    printf("     %s: %zu requests alone, then in batches of 1..32 and 32 --ar\n", what, n_jobs);
    free_jobs();
}

static void f32_batches(void) { batches_equal_alone(tm32.model, "f32"); }
static void q8_batches(void) { batches_equal_alone(tmq8.model, "q8_0"); }

int main(void) {
    cuda_test_require_device();
    if (fixture_open(&fx, "tiny_clover")) return TEST_EXIT();
    if (test_model_convert(&tm32, &fx, CONVERT_F32) == 0) RUN(f32_batches);
    if (test_model_convert(&tmq8, &fx, CONVERT_Q8_0) == 0) RUN(q8_batches);
    test_model_free(&tm32);
    test_model_free(&tmq8);
    fixture_close(&fx);
    return TEST_EXIT();
}
