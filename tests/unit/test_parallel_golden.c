/*
 * test_parallel_golden.c: the CPU backend with its MoE over simulated ranks
 * (CLOVER_SIM_RANKS, src/parallel/ep_cpu.h) against the same backend on one
 * rank: on the golden fixture models (tiny_clover f32 and q8_0, tiny_clover_k
 * q4_k_m: Q4_K experts 256 wide) and on synthetic ones (tiny f32; tiny q8_0
 * with 10 experts, which 3 and 4 ranks do not divide), N = 2, 3, 4 ranks give
 * the same bits: every logit of a prompt, six greedy tokens and their logits,
 * and a 32-row preview with and without the coreset (logits and the kept
 * experts of every layer). One rank's run is the reference (the plain CPU
 * MoE, itself checked against transformers by the golden tests).
 * Then the hook's failure paths: a planted failing rank and a silent one
 * fail the commit with the rank named (and a silent rank within its
 * deadline), bad settings fail the session's creation in one line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_test.h"
#include "parallel/ep_cpu.h"

/* A CPU sequence with the simulated expert parallelism of the environment
 * installed, as the engine opens its CPU backends (ep_cpu.h). */
static tseq *sim_session(const clover_model *m, size_t max_rows, size_t n_threads) {
    tseq *s = test_session(m, max_rows, n_threads);
    clover_error err = {0};
    if (s && ep_cpu_attach(s->be, &err)) {
        CHECK_MSG(0, "CLOVER_SIM_RANKS: %s", err.message);
        seq_free(s);
        return NULL;
    }
    return s;
}

typedef struct run_out {
    float *prompt_logits;   /* [n_prompt][V] */
    int32_t tokens[6];
    float *decode_logits;   /* [6][V] */
    float *preview_logits;  /* [2][32][V]: coreset on, off */
    uint8_t *kept;          /* [2][L][E] */
    int ok;
} run_out;

enum { N_PROMPT = 12, N_DECODE = 6, BLOCK = 32 };

static int32_t argmax(const float *v, size_t n) {
    size_t b = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return (int32_t)b;
}

static void run_scenario(const clover_model *m, run_out *o, const char *what) {
    const model_hparams *hp = &m->hp;
    const size_t V = hp->n_vocab, L = hp->n_layer, E = hp->n_expert;
    memset(o, 0, sizeof *o);
    o->prompt_logits = malloc(N_PROMPT * V * sizeof(float));
    o->decode_logits = malloc(N_DECODE * V * sizeof(float));
    o->preview_logits = malloc(2 * BLOCK * V * sizeof(float));
    o->kept = malloc(2 * L * E);
    tseq *s = sim_session(m, BLOCK, 2);
    if (!s) return;
    clover_error err = {0};
    int32_t ids[N_PROMPT];
    for (size_t i = 0; i < N_PROMPT; i++) ids[i] = (int32_t)((i * 37 + 11) % 256);
    backend_commit_seq co = {.all_logits = o->prompt_logits};
    int rc = seq_commit(s, ids, N_PROMPT, &co, NULL, &err);
    CHECK_MSG(rc == 0, "%s: commit: %s", what, err.message);
    int32_t next = argmax(o->prompt_logits + (N_PROMPT - 1) * V, V);
    for (size_t t = 0; t < N_DECODE && !rc; t++) {
        o->tokens[t] = next;
        backend_commit_seq d = {.last_logits = o->decode_logits + t * V};
        rc = seq_commit(s, &next, 1, &d, NULL, &err);
        CHECK_MSG(rc == 0, "%s: decode: %s", what, err.message);
        next = argmax(o->decode_logits + t * V, V);
    }
    int32_t block[BLOCK];
    for (size_t i = 0; i < BLOCK; i++) block[i] = i < 4 ? (int32_t)(i * 5 + 40) : (int32_t)m->record.mask_token_id;
    for (int c = 0; c < 2 && !rc; c++) {
        backend_preview_opts opts = {.record_block_size = BLOCK, .coreset = c == 0,
                                     .coreset_top_p = m->record.coreset_top_p};
        rc = seq_preview(s, block, BLOCK, &opts, o->preview_logits + (size_t)c * BLOCK * V, NULL, &err);
        CHECK_MSG(rc == 0, "%s: preview: %s", what, err.message);
        if (!rc) rc = seq_preview_debug(s, NULL, o->kept + (size_t)c * L * E, &err);
        CHECK_MSG(rc == 0, "%s: preview_debug: %s", what, err.message);
    }
    o->ok = rc == 0;
    seq_free(s);
}

static void run_free(run_out *o) {
    free(o->prompt_logits);
    free(o->decode_logits);
    free(o->preview_logits);
    free(o->kept);
}

static size_t differ(const float *a, const float *b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

static void check_ranks(const clover_model *m, const char *name) {
    const model_hparams *hp = &m->hp;
    const size_t V = hp->n_vocab, L = hp->n_layer, E = hp->n_expert;
    unsetenv("CLOVER_SIM_RANKS");
    run_out ref;
    run_scenario(m, &ref, name);
    CHECK_MSG(ref.ok, "%s: the one-rank run failed", name);
    /* the coreset kept fewer experts than all somewhere, or the comparison with it would be empty */
    size_t kept = 0;
    for (size_t i = 0; i < L * E; i++) kept += ref.kept[i];
    CHECK_MSG(kept < L * E, "%s: the coreset kept every expert of every layer", name);
    for (int n = 2; n <= 4 && ref.ok; n++) {
        char v[12];
        snprintf(v, sizeof v, "%d", n);
        setenv("CLOVER_SIM_RANKS", v, 1);
        run_out got;
        run_scenario(m, &got, name);
        CHECK_MSG(got.ok, "%s: the %d-rank run failed", name, n);
        if (got.ok) {
            size_t dp = differ(got.prompt_logits, ref.prompt_logits, N_PROMPT * V);
            size_t dd = differ(got.decode_logits, ref.decode_logits, N_DECODE * V);
            size_t dv = differ(got.preview_logits, ref.preview_logits, 2 * BLOCK * V);
            CHECK_MSG(dp == 0 && dd == 0 && dv == 0,
                      "%s, %d ranks: %zu prompt, %zu decode, %zu preview logits differ from one rank", name, n, dp, dd,
                      dv);
            CHECK_MSG(!memcmp(got.tokens, ref.tokens, sizeof ref.tokens), "%s, %d ranks: the tokens differ", name, n);
            CHECK_MSG(!memcmp(got.kept, ref.kept, 2 * L * E), "%s, %d ranks: the coreset differs", name, n);
        }
        run_free(&got);
    }
    unsetenv("CLOVER_SIM_RANKS");
    run_free(&ref);
    printf("  %s: %d..4 ranks equal to one rank (prompt %d, decode %d, preview 2 x %d rows)\n", name, 2, N_PROMPT,
           N_DECODE, BLOCK);
}

static void fixture_models(void) {
    fixture fx, fk;
    if (fixture_open(&fx, "tiny_clover")) return;
    test_model tm;
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) check_ranks(tm.model, "tiny_clover f32");
    test_model_free(&tm);
    if (test_model_convert(&tm, &fx, CONVERT_Q8_0) == 0) check_ranks(tm.model, "tiny_clover q8_0");
    test_model_free(&tm);
    fixture_close(&fx);
    if (fixture_open(&fk, "tiny_clover_k")) return;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", fk.dir, json_string_value(json_object_get(fk.manifest, "gguf")));
    clover_model *m = NULL;
    clover_error err = {0};
    CHECK_MSG(clover_model_load(&m, path, &err) == 0, "%s: %s", path, err.message);
    if (m) check_ranks(m, "tiny_clover_k q4_k_m");
    clover_model_free(m);
    fixture_close(&fk);
}

static clover_model *synth_model(const char *path, const char *type, uint32_t n_expert) {
    clover_synth_options o = {.preset = "tiny", .type = type, .seed = 11, .n_expert = n_expert};
    clover_error err = {0};
    CHECK_MSG(clover_synth(path, &o, &err) == 0, "synth: %s", err.message);
    clover_model *m = NULL;
    CHECK_MSG(clover_model_load(&m, path, &err) == 0, "load: %s", err.message);
    return m;
}

static char tmp_path[64];

static void synthetic_models(void) {
    clover_model *m = synth_model(tmp_path, NULL, 0);
    if (m) check_ranks(m, "synth tiny f32");
    clover_model_free(m);
    m = synth_model(tmp_path, "q8_0", 10);
    if (m) {
        CHECK_EQ_INT(m->hp.n_expert, 10);
        check_ranks(m, "synth tiny q8_0, 10 experts");
    }
    clover_model_free(m);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void failures(void) {
    clover_model *m = synth_model(tmp_path, NULL, 0);
    if (!m) return;
    int32_t ids[4] = {40, 41, 42, 43};
    clover_error err = {0};
    /* a rank that fails: rank 1 of 2 after 5 collectives (3 a layer: in layer 2) */
    setenv("CLOVER_SIM_RANKS", "2", 1);
    setenv("CLOVER_SIM_FAULT", "error:1:5", 1);
    tseq *s = sim_session(m, 8, 2);
    if (s) {
        int rc = seq_commit(s, ids, 4, NULL, NULL, &err);
        CHECK(rc != 0);
        CHECK_MSG(strstr(err.message, "expert-parallel MoE") && strstr(err.message, "rank 1 of 2 failed"), "%s",
                  err.message);
        CHECK(strchr(err.message, '\n') == NULL);
        /* the group stays broken: the next call fails the same way, it does not hang or crash */
        CHECK(seq_commit(s, ids, 1, NULL, NULL, &err) != 0);
        seq_free(s);
    }
    /* a rank that goes silent: the 300 ms deadline, not a hang */
    setenv("CLOVER_SIM_RANKS", "3", 1);
    setenv("CLOVER_SIM_FAULT", "stall:2:0", 1);
    setenv("CLOVER_SIM_TIMEOUT_MS", "300", 1);
    s = sim_session(m, 8, 2);
    if (s) {
        double t0 = now_s();
        int rc = seq_commit(s, ids, 4, NULL, NULL, &err);
        double dt = now_s() - t0;
        CHECK(rc != 0);
        CHECK_MSG(strstr(err.message, "rank 2 of 3 did not finish") && strstr(err.message, "300 ms"), "%s",
                  err.message);
        CHECK_MSG(dt < 10.0, "the failure took %.1f s", dt);
        seq_free(s);
    }
    unsetenv("CLOVER_SIM_FAULT");
    unsetenv("CLOVER_SIM_TIMEOUT_MS");
    /* bad settings: nothing is installed, one line names the variable */
    backend_config cfg = {.n_threads = 1, .max_rows = 8};
    tseq *b = NULL;
    CHECK(seq_create(&backend_cpu, m, &cfg, &b, &err) == 0);
    const char *bad_ranks[] = {"0", "65", "two", "2x"};
    for (size_t i = 0; b && i < 4; i++) {
        setenv("CLOVER_SIM_RANKS", bad_ranks[i], 1);
        CHECK(ep_cpu_attach(b->be, &err) == CLOVER_E_INVALID);
        CHECK_MSG(strstr(err.message, "CLOVER_SIM_RANKS") != NULL, "%s", err.message);
    }
    setenv("CLOVER_SIM_RANKS", "2", 1);
    setenv("CLOVER_SIM_FAULT", "explode:1", 1);
    if (b) CHECK(ep_cpu_attach(b->be, &err) == CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "CLOVER_SIM_FAULT") != NULL, "%s", err.message);
    /* ... and the public path refuses to open the session */
    clover_session *cs = NULL;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.device = CLOVER_DEVICE_CPU;
    CHECK(clover_session_create(&cs, m, &sp, &err) == CLOVER_E_INVALID && !cs);
    CHECK_MSG(strstr(err.message, "CLOVER_SIM_FAULT") != NULL, "%s", err.message);
    seq_free(b);
    unsetenv("CLOVER_SIM_FAULT");
    unsetenv("CLOVER_SIM_RANKS");
    clover_model_free(m);
}

int main(void) {
    snprintf(tmp_path, sizeof tmp_path, "/tmp/clover-par-%ld.gguf", (long)getpid());
    RUN(fixture_models);
    RUN(synthetic_models);
    RUN(failures);
    unlink(tmp_path);
    return TEST_EXIT();
}
