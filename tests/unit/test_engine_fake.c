/*
 * test_engine_fake.c: the engine (clover_engine, clover_request,
 * clover_batch_step: the server's path) over a backend that is not the CPU,
 * the scripted fake of fake_backend.h, opened as a device backend is (inside
 * the failover). What it pins down:
 *  - the engine runs on the backend it is given (issue 25: it once opened
 *    the CPU whatever the device) and names it (clover_engine_backend);
 *  - the requests of a step reach the backend as ONE call per kind carrying
 *    several sequences (the fake records the most sequences a call carried);
 *  - mixed block-diffusion and autoregressive requests, some joining after
 *    others started, give the tokens the fake's script implies, worked out
 *    here by hand, and the same as each alone through clover_generate;
 *  - the registry (backend/registry.h): cpu resolves to the CPU with
 *    "asked for", an unknown device is refused, and in a build without the
 *    CUDA backend cuda is refused naming CUDA while auto falls back to the
 *    CPU saying why. (A build with CUDA: the process test
 *    tests/python/test_server_device.py checks cuda and auto with a real model.)
 *
 * Script (vocabulary 8, mask 7, stop 6, blocks of 4, threshold 0.5): a
 * preview puts token (position mod 5) on every row with logit 4 (fixed in
 * one pass: confidence e^4 / (e^4 + 6) > 0.5); a causal step after id t
 * puts t + 1 mod 7 with logit 3.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/registry.h"
#include "base/error.h"
#include "engine/session.h"
#include "model/model.h"
#include "test.h"

#include "fake_backend.h"

static clover_model model;
static uint32_t stop_ids[1];

static void setup(void) {
    memset(&fk, 0, sizeof fk);
    fk.V = 8;
    memset(&model, 0, sizeof model);
    model.hp.n_vocab = 8;
    model.has_record = true;
    model.tok.eos_id = model.tok.eot_id = -1;
    stop_ids[0] = 6;
    model.record.algorithm = "low_confidence";
    model.record.block_size = 4;
    model.record.threshold = 0.5f;
    model.record.mask_token_id = 7;
    model.record.repetition_penalty = 1.0f;
    model.record.think_end_token_id = -1;
    model.record.stop_token_ids = stop_ids;
    model.record.n_stop_token_ids = 1;
}

static void row_put(float *row, int32_t tok, float a) {
    for (size_t i = 0; i < fk.V; i++) row[i] = 0.0f;
    row[tok] = a;
}
static void preview_position(const int32_t *block, size_t b, size_t pos, int pass, float *logits) {
    (void)block, (void)pass;
    for (size_t r = 0; r < b; r++) row_put(logits + r * fk.V, (int32_t)((pos + r) % 5), 4.0f);
}
static void next_plus_one(int32_t last, float *logits) { row_put(logits, (last + 1) % 7, 3.0f); }

enum { N_REQ = 8, MAX_TOK = 6 };

typedef struct job {
    int32_t prompt[4];
    size_t n_prompt;
    int ar;
    int32_t want[MAX_TOK]; /* from the script */
    size_t n_want;
    clover_session *s;
    clover_request *rq;
    clover_generate_params p;
} job;

static void job_init(job *j, int i) {
    memset(j, 0, sizeof *j);
    j->ar = i % 2;
    j->n_prompt = 2 + (size_t)(i % 3);
    for (size_t k = 0; k < j->n_prompt; k++) j->prompt[k] = (int32_t)((i + k) % 3); /* ids 0..2: never the stop */
    clover_generate_params_init(&j->p);
    j->p.max_tokens = j->ar ? 3 : MAX_TOK;
    j->p.mode = j->ar ? CLOVER_MODE_AUTOREGRESSIVE : CLOVER_MODE_DIFFUSION;
    if (j->ar) { /* after t: t+1, t+2, t+3 (t <= 2: no stop id 6 reached) */
        for (size_t k = 0; k < 3; k++) j->want[k] = (j->prompt[j->n_prompt - 1] + 1 + (int32_t)k) % 7;
        j->n_want = 3;
    } else { /* the token at absolute position q is q mod 5 */
        for (size_t k = 0; k < MAX_TOK; k++) j->want[k] = (int32_t)((j->n_prompt + k) % 5);
        j->n_want = MAX_TOK;
    }
}

static void check_tokens(const char *what, int i, const clover_generate_result *r, const job *j) {
    CHECK_MSG(r->n_generated == j->n_want, "%s %d: %zu tokens, expected %zu", what, i, r->n_generated, j->n_want);
    for (size_t k = 0; k < j->n_want && k < r->n_generated; k++)
        CHECK_MSG(r->ids[k] == j->want[k], "%s %d: token %zu is %d, expected %d", what, i, k, r->ids[k], j->want[k]);
    CHECK_MSG(r->finish == CLOVER_FINISH_LENGTH, "%s %d: finish %d", what, i, (int)r->finish);
}

static void engine_batches_on_its_backend(void) {
    setup();
    fk.preview = preview_position;
    fk.next = next_plus_one;
    clover_engine *e = NULL;
    clover_error err = {0};
    int rc = engine_create_on(&e, &model, &fake_ops, NULL, "test", &err);
    CHECK_MSG(rc == 0, "engine on the fake: %s", err.message);
    if (rc) return;
    CHECK_MSG(!strcmp(clover_engine_backend(e), "fake"), "the engine runs on '%s'", clover_engine_backend(e));
    CHECK(!strcmp(clover_engine_device_reason(e), "test"));

    job jobs[N_REQ];
    clover_request *rqs[N_REQ] = {0};
    for (int i = 0; i < N_REQ; i++) {
        job_init(&jobs[i], i);
        rc = clover_engine_session_create(&jobs[i].s, e, NULL, &err);
        CHECK_MSG(rc == 0, "session %d: %s", i, err.message);
        if (rc) return;
    }
    /* the first six start together; the last two join after two steps */
    size_t n = 0;
    for (int steps = 0; steps < 1000; steps++) {
        while (n < N_REQ && (n < 6 || steps >= 2)) {
            rc = clover_request_create(&rqs[n], jobs[n].s, jobs[n].prompt, jobs[n].n_prompt, &jobs[n].p, &err);
            CHECK_MSG(rc == 0, "request %zu: %s", n, err.message);
            if (rc) return;
            n++;
        }
        if (clover_batch_step(rqs, n) == 0 && n == N_REQ) break;
    }
    CHECK_MSG(fk.most_commit_seqs >= 2, "one commit call carried at most %zu sequences", fk.most_commit_seqs);
    CHECK_MSG(fk.most_preview_seqs >= 2, "one preview call carried at most %zu sequences", fk.most_preview_seqs);
    for (int i = 0; i < N_REQ; i++) {
        CHECK_MSG(clover_request_done(rqs[i]), "request %d is not done", i);
        clover_generate_result r;
        rc = clover_request_result(rqs[i], &r, &err);
        CHECK_MSG(rc == 0, "request %d: %s", i, err.message);
        if (!rc) check_tokens("batched", i, &r, &jobs[i]);
        clover_generate_result_free(&r);
        clover_request_free(rqs[i]);
        /* alone, on a fresh sequence of the same engine: the same tokens */
        clover_session_reset(jobs[i].s);
        rc = clover_generate(jobs[i].s, jobs[i].prompt, jobs[i].n_prompt, &jobs[i].p, &r, &err);
        CHECK_MSG(rc == 0, "alone %d: %s", i, err.message);
        if (!rc) check_tokens("alone", i, &r, &jobs[i]);
        clover_generate_result_free(&r);
        clover_session_free(jobs[i].s);
    }
    clover_engine_free(e);
}

static void registry_resolves_the_device(void) {
    setup();
    backend_choice ch;
    clover_error err = {0};
    CHECK_EQ_INT(backend_registry_resolve(CLOVER_DEVICE_CPU, &model, NULL, &ch, &err), CLOVER_OK);
    CHECK(ch.ops == &backend_cpu && ch.device == CLOVER_DEVICE_CPU && !strcmp(ch.why, "asked for"));
    CHECK_EQ_INT(backend_registry_resolve(7, &model, NULL, &ch, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "auto, cpu, cuda") != NULL, "%s", err.message);
    CHECK_EQ_INT(backend_registry_resolve(CLOVER_DEVICE_CPU, NULL, NULL, &ch, &err), CLOVER_E_INVALID);
    if (backend_registry_cuda()) {
        printf("     (this build has the CUDA backend: cuda and auto are checked by test_server_device.py)\n");
        return;
    }
    err = (clover_error){0};
    CHECK_EQ_INT(backend_registry_resolve(CLOVER_DEVICE_CUDA, &model, NULL, &ch, &err), CLOVER_E_UNSUPPORTED);
    CHECK_MSG(strstr(err.message, "CUDA") && strstr(err.message, "--device cuda") && !strstr(err.message, "clover_"),
              "the refusal names CUDA in a user's words: '%s'", err.message);
    CHECK_EQ_INT(backend_registry_resolve(CLOVER_DEVICE_AUTO, &model, NULL, &ch, &err), CLOVER_OK);
    CHECK(ch.ops == &backend_cpu && ch.device == CLOVER_DEVICE_CPU);
    CHECK_MSG(!strncmp(ch.why, "auto: ", 6) && strstr(ch.why, "CUDA"), "auto's reason: '%s'", ch.why);
    /* the public paths refuse the same way */
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.device = CLOVER_DEVICE_CUDA;
    clover_engine *e = (clover_engine *)&model; /* must be cleared */
    CHECK_EQ_INT(clover_engine_create(&e, &model, &sp, &err), CLOVER_E_UNSUPPORTED);
    CHECK(e == NULL);
    CHECK_MSG(strstr(err.message, "CUDA") != NULL, "%s", err.message);
    clover_session *s = NULL;
    CHECK_EQ_INT(clover_session_create(&s, &model, &sp, &err), CLOVER_E_UNSUPPORTED);
    CHECK(s == NULL);
}

int main(void) {
    RUN(engine_batches_on_its_backend);
    RUN(registry_resolves_the_device);
    return TEST_EXIT();
}
