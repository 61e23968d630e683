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
 * Then issue 25's serving switches (old_switches_equal): the new path in
 * one mixed batch (sampled --ar and --ar with log-probabilities included)
 * equals the old path (CLOVER_ENGINE_EAGER_LOGITS, CLOVER_CUDA_PICK_EACH,
 * CLOVER_CUDA_OWN_PINNED set) and each request alone.
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

/* Requests list[0..n) (job prompts, their own parameters) at once on a fresh engine, to the end. */
static void run_list(const clover_model *m, const size_t *job_of, const clover_generate_params *ps, size_t n,
                     clover_generate_result *out, int *rcs, const char *what) {
    clover_session_params sp = cuda_params();
    clover_engine *e = NULL;
    clover_session *ss[MAX_BATCH] = {0};
    clover_request *rq[MAX_BATCH] = {0};
    clover_error err = {0};
    for (size_t k = 0; k < n; k++) rcs[k] = -1;
    int rc = clover_engine_create(&e, m, &sp, &err);
    CHECK_MSG(rc == 0, "%s: cuda engine: %s", what, err.message);
    if (rc) return;
    for (size_t k = 0; k < n && !rc; k++) {
        const job *j = &jobs[job_of[k]];
        rc = clover_engine_session_create(&ss[k], e, NULL, &err) ||
             clover_request_create(&rq[k], ss[k], j->g.prompt, j->g.n_prompt, &ps[k], &err);
        CHECK_MSG(rc == 0, "%s: request %zu: %s", what, k, err.message);
    }
    for (size_t steps = 0; !rc && clover_batch_step(rq, n) > 0 && steps < 20000; steps++) {}
    for (size_t k = 0; k < n && !rc; k++) rcs[k] = clover_request_result(rq[k], &out[k], &err);
    for (size_t k = 0; k < n; k++) {
        if (rq[k]) clover_request_free(rq[k]);
        if (ss[k]) clover_session_free(ss[k]);
    }
    clover_engine_free(e);
}

static void same_lp(const char *name, const clover_generate_result *a, const clover_generate_result *b) {
    CHECK_MSG((a->logprobs != NULL) == (b->logprobs != NULL) && a->n_top_logprobs == b->n_top_logprobs,
              "%s: log-probabilities present in one path only", name);
    if (!a->logprobs || !b->logprobs || a->n_generated != b->n_generated) return;
    const size_t n = a->n_generated, k = a->n_top_logprobs;
    CHECK_MSG(!memcmp(a->logprobs, b->logprobs, n * sizeof(float)), "%s: log-probabilities differ", name);
    if (k)
        CHECK_MSG(!memcmp(a->top_ids, b->top_ids, n * k * sizeof(int32_t)) &&
                      !memcmp(a->top_logprobs, b->top_logprobs, n * k * sizeof(float)),
                  "%s: top log-probabilities differ", name);
}

/* Issue 25's serving switches: the new path (decode steps bring no logits back, grouped device picks, one
 * pinned transfer set per backend) gives every request exactly what the old one gives (the three switches
 * CLOVER_ENGINE_EAGER_LOGITS, CLOVER_CUDA_PICK_EACH and CLOVER_CUDA_OWN_PINNED set) in one mixed batch:
 * every job, and for each --ar job a sampled copy (top-k, top-p, its seed) and one that asks for
 * log-probabilities (picked on the host from its own row, the only logits that still come back); and each
 * request of that batch run alone on the new path equals its batched self. */
static void old_switches_equal(const clover_model *m, const char *what) {
    static const char *const sw[] = {"CLOVER_ENGINE_EAGER_LOGITS", "CLOVER_CUDA_PICK_EACH", "CLOVER_CUDA_OWN_PINNED"};
    make_jobs(m);
    size_t job_of[MAX_BATCH] = {0}, n = 0;
    static clover_generate_params ps[MAX_BATCH];
    for (size_t k = 0; k < n_jobs && n + 3 <= MAX_BATCH; k++) {
        job_of[n] = k, ps[n++] = jobs[k].p;
        if (jobs[k].p.mode != CLOVER_MODE_AUTOREGRESSIVE) continue;
        clover_generate_params q = jobs[k].p;
        q.temperature = 0.8f, q.top_k = 40, q.top_p = 0.95f, q.seed = 500 + k;
        job_of[n] = k, ps[n++] = q;
        q = jobs[k].p;
        q.logprobs = 1, q.top_logprobs = 3;
        job_of[n] = k, ps[n++] = q;
    }
    static clover_generate_result old[MAX_BATCH], neu[MAX_BATCH], lone[MAX_BATCH];
    int rc_old[MAX_BATCH], rc_new[MAX_BATCH], rc_lone[MAX_BATCH];
    for (size_t i = 0; i < 3; i++) setenv(sw[i], "1", 1);
    run_list(m, job_of, ps, n, old, rc_old, what);
    for (size_t i = 0; i < 3; i++) unsetenv(sw[i]);
    run_list(m, job_of, ps, n, neu, rc_new, what);
    for (size_t k = 0; k < n; k++) run_list(m, job_of + k, ps + k, 1, lone + k, rc_lone + k, what);
    for (size_t k = 0; k < n; k++) {
        char name[160];
        snprintf(name, sizeof name, "%s: %s (T %.1f, logprobs %d)", what, jobs[job_of[k]].name, ps[k].temperature,
                 ps[k].logprobs);
        CHECK_MSG(rc_old[k] == 0 && rc_new[k] == 0 && rc_lone[k] == 0, "%s: rc old %d, new %d, new alone %d", name,
                  rc_old[k], rc_new[k], rc_lone[k]);
        if (!rc_old[k] && !rc_new[k]) {
            same(name, n, &neu[k], &old[k]);
            same_lp(name, &neu[k], &old[k]);
        }
        if (!rc_lone[k] && !rc_new[k]) {
            same(name, n, &neu[k], &lone[k]);
            same_lp(name, &neu[k], &lone[k]);
        }
        if (!rc_old[k]) clover_generate_result_free(&old[k]);
        if (!rc_new[k]) clover_generate_result_free(&neu[k]);
        if (!rc_lone[k]) clover_generate_result_free(&lone[k]);
    }
    printf("     %s: %zu requests (--ar sampled and with log-probabilities among them): new path = old switches = "
           "alone\n", what, n);
    free_jobs();
}

static void f32_old_switches(void) { old_switches_equal(tm32.model, "f32"); }
static void q8_old_switches(void) { old_switches_equal(tmq8.model, "q8_0"); }

static void f32_batches(void) { batches_equal_alone(tm32.model, "f32"); }
static void q8_batches(void) { batches_equal_alone(tmq8.model, "q8_0"); }

int main(void) {
    cuda_test_require_device();
    if (fixture_open(&fx, "tiny_clover")) return TEST_EXIT();
    if (test_model_convert(&tm32, &fx, CONVERT_F32) == 0) {
        RUN(f32_batches);
        RUN(f32_old_switches);
    }
    if (test_model_convert(&tmq8, &fx, CONVERT_Q8_0) == 0) {
        RUN(q8_batches);
        RUN(q8_old_switches);
    }
    test_model_free(&tm32);
    test_model_free(&tmq8);
    fixture_close(&fx);
    return TEST_EXIT();
}
