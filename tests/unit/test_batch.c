/*
 * test_batch.c: batch invariance on the CPU backend. Every generation case
 * of both fixtures (tiny_clover: block diffusion; tiny_ar: autoregressive;
 * and the Clover cases again in autoregressive mode) runs through the batch
 * path (clover_engine, clover_request, clover_batch_step), all at once,
 * mixed with each other and with requests that join between passes, and
 * must equal (1) the reference's expected values (golden_compare) and (2)
 * the same request run alone through clover_generate, bit for bit: tokens,
 * confidences, finish reasons, passes per block, committed length.
 * A request with bad input (an unwritable dump path; a prompt longer than
 * the context) fails alone in the batch while the others stay exact. At the
 * backend: a batched commit and preview with a bad sequence in the middle
 * fail that sequence alone (its state unchanged) and leave the others'
 * logits and states exactly those of running alone.
 * The batched passes share one read of each weight across their sequences
 * (backend_cpu_pass.c), each row with its own sequence's kernel: the f32
 * model exercises the per-row f32 dot next to the tiled kernel, and the
 * same cases on a Q8_0 copy of tiny_clover the 8-bit integer rows (no
 * reference values there: batched must equal alone, bit for bit).
 * The passes' row-wise work on the pool (cpu_grouped: GDN block conv and
 * norms, the coreset's rows, the MoE's routing / gather / SwiGLU / sum, the
 * residual adds and norms)
 * gives the bits of the old order (CLOVER_CPU_GROUPED=0): commits, a
 * 32-row preview with the coreset (logits and hidden states) and a
 * two-block preview, f32 and Q8_0 models, a 3-thread pool.
 * clover_batch_step_ex's account of each step (sequences, rows, backend
 * calls and passes) matches the shapes of 16 requests started together.
 */
#include <stdlib.h>
#include "engine/session.h"
#include "golden_generate.h"

static fixture fxc, fxa;
static test_model tmc, tma, tmq;

typedef struct job {
    const char *name;
    golden_request g;
    json_t *expected; /* NULL: no reference (compared with the lone run only) */
    clover_generate_result alone;
    int rc_alone;
} job;

static void same_result(const char *name, const clover_generate_result *a, const clover_generate_result *b) {
    CHECK_MSG(a->n_generated == b->n_generated, "%s: %zu tokens batched, %zu alone", name, a->n_generated,
              b->n_generated);
    size_t n = a->n_generated < b->n_generated ? a->n_generated : b->n_generated;
    CHECK_MSG(!memcmp(a->ids, b->ids, n * sizeof *a->ids), "%s: tokens differ from the lone run", name);
    CHECK_MSG(!memcmp(a->confidences, b->confidences, n * sizeof *a->confidences),
              "%s: confidences differ (bits) from the lone run", name);
    CHECK_EQ_INT(a->finish, b->finish);
    CHECK_EQ_INT(a->n_blocks, b->n_blocks);
    if (a->n_blocks == b->n_blocks && a->n_blocks)
        CHECK_MSG(!memcmp(a->passes_per_block, b->passes_per_block, a->n_blocks * sizeof(uint32_t)),
                  "%s: passes per block differ", name);
    CHECK_EQ_INT(a->committed_after, b->committed_after);
    CHECK_EQ_INT(a->stats.passes, b->stats.passes);
}

static size_t load_jobs(job *jobs, size_t cap, const fixture *fx, const test_model *tm, int mode) {
    json_t *cases = json_object_get(fx->manifest, "generate"), *c;
    size_t i, n = 0;
    json_array_foreach(cases, i, c) {
        if (n == cap) break;
        job *j = &jobs[n++];
        memset(j, 0, sizeof *j);
        j->name = json_string_value(json_object_get(c, "name"));
        golden_request_init(&j->g, tm->model, json_object_get(c, "prompt_ids"), json_object_get(c, "options"),
                            json_object_get(c, "record_overrides"));
        j->g.p.mode = mode;
        j->expected = mode == CLOVER_MODE_AUTO ? json_object_get(c, "expected") : NULL;
    }
    return n;
}

/* Every job alone, each on a fresh session of its own backend. */
static void run_alone(job *jobs, size_t n, const test_model *tm) {
    for (size_t i = 0; i < n; i++) {
        clover_session *s = NULL;
        clover_session_params sp;
        clover_session_params_init(&sp);
        sp.n_threads = 2;
        clover_error err = {0};
        CHECK(clover_session_create(&s, tm->model, &sp, &err) == 0);
        jobs[i].rc_alone = s ? clover_generate(s, jobs[i].g.prompt, jobs[i].g.n_prompt, &jobs[i].g.p,
                                               &jobs[i].alone, &err)
                             : -1;
        CHECK_MSG(jobs[i].rc_alone == 0, "%s alone: %s", jobs[i].name, err.message);
        clover_session_free(s);
    }
}

/* All jobs on one engine: the first half start together, the rest join
 * after `join_after` steps; each result is checked. Returns the steps. */
static size_t run_batched(job *jobs, size_t n, const test_model *tm, size_t join_after) {
    clover_engine *e = NULL;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = 2;
    clover_error err = {0};
    CHECK_MSG(clover_engine_create(&e, tm->model, &sp, &err) == 0, "%s", err.message);
    if (!e) return 0;
    clover_session *ss[64] = {0};
    clover_request *rq[64] = {0};
    for (size_t i = 0; i < n; i++) CHECK(clover_engine_session_create(&ss[i], e, NULL, &err) == 0);
    size_t half = n / 2, steps = 0, live = 0;
    for (size_t i = 0; i < half; i++)
        CHECK(clover_request_create(&rq[i], ss[i], jobs[i].g.prompt, jobs[i].g.n_prompt, &jobs[i].g.p, &err) == 0);
    for (;;) {
        if (steps == join_after)
            for (size_t i = half; i < n; i++)
                CHECK(clover_request_create(&rq[i], ss[i], jobs[i].g.prompt, jobs[i].g.n_prompt, &jobs[i].g.p,
                                            &err) == 0);
        int running = clover_batch_step(rq, n);
        CHECK(running >= 0);
        steps++;
        live = (size_t)running;
        if ((live == 0 && steps > join_after) || steps > 10000) break;
    }
    for (size_t i = 0; i < n; i++) {
        clover_generate_result r;
        CHECK(clover_request_done(rq[i]));
        int rc = clover_request_result(rq[i], &r, &err);
        CHECK_MSG(rc == 0, "%s batched: %s", jobs[i].name, err.message);
        if (!rc) {
            if (jobs[i].expected) golden_compare(jobs[i].name, &r, jobs[i].expected);
            if (!jobs[i].rc_alone) same_result(jobs[i].name, &r, &jobs[i].alone);
            clover_generate_result_free(&r);
        }
        clover_request_free(rq[i]);
        clover_session_free(ss[i]);
    }
    clover_engine_free(e);
    return steps;
}

static void free_jobs(job *jobs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        golden_request_free(&jobs[i].g);
        clover_generate_result_free(&jobs[i].alone);
    }
}

static void every_fixture_case_batched(void) {
    job jobs[48];
    size_t n = load_jobs(jobs, 48, &fxc, &tmc, CLOVER_MODE_AUTO);                     /* diffusion */
    n += load_jobs(jobs + n, 48 - n, &fxc, &tmc, CLOVER_MODE_AUTOREGRESSIVE);          /* the same, AR */
    CHECK(n >= 22);
    run_alone(jobs, n, &tmc);
    size_t steps = run_batched(jobs, n, &tmc, 3);
    printf("     %zu Clover-fixture requests (diffusion and autoregressive) in %zu batch steps\n", n, steps);
    free_jobs(jobs, n);
    size_t m = load_jobs(jobs, 48, &fxa, &tma, CLOVER_MODE_AUTO);
    CHECK(m >= 3);
    run_alone(jobs, m, &tma);
    steps = run_batched(jobs, m, &tma, 1);
    printf("     %zu AR-fixture requests in %zu batch steps\n", m, steps);
    free_jobs(jobs, m);
}

/* The Clover cases on the Q8_0 copy: the integer rows of one-row
 * sequences share products with the tiled rows of blocks and chunks. */
static void quantised_cases_batched(void) {
    job jobs[48];
    size_t n = load_jobs(jobs, 48, &fxc, &tmq, CLOVER_MODE_AUTO);
    n += load_jobs(jobs + n, 48 - n, &fxc, &tmq, CLOVER_MODE_AUTOREGRESSIVE);
    for (size_t i = 0; i < n; i++) jobs[i].expected = NULL; /* the references are the f32 model's */
    run_alone(jobs, n, &tmq);
    size_t steps = run_batched(jobs, n, &tmq, 2);
    printf("     %zu Q8_0 requests in %zu batch steps: each equals its lone run\n", n, steps);
    free_jobs(jobs, n);
}

/* clover_batch_step_ex's account of a step (the server's /metrics), against the shapes of the requests: 16
 * copies of one AR fixture prompt (L ids), T tokens each, started together, share every step: step 1 commits
 * the 16 prompts (16 L rows, one shared pass: 16 L <= max_rows), steps 2..T the 16 decode rows (one pass
 * each), step T + 1 only emits the last tokens (no operation); one backend call a step. */
static void step_stats_show_shared_passes(void) {
    enum { N = 16, T = 5 };
    job jobs[1];
    CHECK(load_jobs(jobs, 1, &fxa, &tma, CLOVER_MODE_AUTO) == 1);
    const size_t L = jobs[0].g.n_prompt;
    clover_engine *e = NULL;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = 2;
    sp.device = CLOVER_DEVICE_CPU; /* the CPU backend's account: auto takes CUDA where a GPU is (one pass a chunk) */
    clover_error err = {0};
    CHECK_MSG(clover_engine_create(&e, tma.model, &sp, &err) == 0, "%s", err.message);
    clover_session *ss[N] = {0};
    clover_request *rq[N] = {0};
    clover_generate_params p = jobs[0].g.p;
    p.max_tokens = T;
    p.ignore_eos = 1;
    for (size_t i = 0; e && i < N; i++) {
        CHECK(clover_engine_session_create(&ss[i], e, NULL, &err) == 0);
        CHECK(clover_request_create(&rq[i], ss[i], jobs[0].g.prompt, L, &p, &err) == 0);
    }
    CHECK(L >= 1 && N * L <= 512);
    for (size_t step = 1; e && step <= T + 1; step++) {
        clover_step_stats st;
        memset(&st, 0xff, sizeof st); /* every field must be written */
        int running = clover_batch_step_ex(rq, N, &st);
        const bool op = step <= T;
        CHECK_MSG(st.sequences == (op ? N : 0), "step %zu: %zu sequences", step, st.sequences);
        CHECK_MSG(st.rows == (step == 1 ? N * L : op ? N : 0), "step %zu: %zu rows", step, st.rows);
        CHECK_EQ_INT(st.backend_calls, (op ? 1 : 0));
        CHECK_MSG(st.backend_passes == (op ? 1u : 0u), "step %zu: %llu passes", step,
                  (unsigned long long)st.backend_passes);
        CHECK(st.backend_s >= 0.0 && st.backend_s <= st.step_s);
        CHECK_EQ_INT(running, (op ? N : 0)); /* the T-th token is emitted (and the requests end) in step T + 1 */
    }
    for (size_t i = 0; i < N; i++) {
        CHECK(clover_request_done(rq[i]));
        clover_request_free(rq[i]);
        clover_session_free(ss[i]);
    }
    clover_engine_free(e);
    golden_request_free(&jobs[0].g);
}

/* Bad input in one request of a batch fails that request alone. */
static void a_bad_request_fails_alone(void) {
    job jobs[8];
    size_t n = load_jobs(jobs, 4, &fxc, &tmc, CLOVER_MODE_AUTO);
    run_alone(jobs, n, &tmc);
    clover_engine *e = NULL;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = 2;
    sp.max_context = 200;
    clover_error err = {0};
    CHECK(clover_engine_create(&e, tmc.model, &sp, &err) == 0);
    if (!e) return;
    clover_session *ss[6] = {0};
    clover_request *rq[6] = {0};
    for (size_t i = 0; i < 6; i++) CHECK(clover_engine_session_create(&ss[i], e, NULL, &err) == 0);
    clover_generate_params dump = jobs[0].g.p;
    dump.dump_first_preview = "/nonexistent-dir/first.json"; /* fails when the first preview comes back */
    int32_t longp[300];
    for (int i = 0; i < 300; i++) longp[i] = (i * 13) % 300;
    clover_generate_params lp = jobs[0].g.p;
    CHECK(clover_request_create(&rq[0], ss[0], jobs[0].g.prompt, jobs[0].g.n_prompt, &jobs[0].g.p, &err) == 0);
    CHECK(clover_request_create(&rq[1], ss[1], jobs[0].g.prompt, jobs[0].g.n_prompt, &dump, &err) == 0);
    CHECK(clover_request_create(&rq[2], ss[2], jobs[1].g.prompt, jobs[1].g.n_prompt, &jobs[1].g.p, &err) == 0);
    CHECK(clover_request_create(&rq[3], ss[3], longp, 300, &lp, &err) == 0); /* 300 > the context of 200 */
    CHECK(clover_request_create(&rq[4], ss[4], jobs[2].g.prompt, jobs[2].g.n_prompt, &jobs[2].g.p, &err) == 0);
    CHECK(clover_request_create(&rq[5], ss[5], jobs[3].g.prompt, jobs[3].g.n_prompt, &jobs[3].g.p, &err) == 0);
    /* a second request on a busy session is refused */
    clover_request *dup = NULL;
    CHECK_EQ_INT(clover_request_create(&dup, ss[0], jobs[0].g.prompt, jobs[0].g.n_prompt, NULL, &err),
                 CLOVER_E_INVALID);
    for (int k = 0; k < 10000 && clover_batch_step(rq, 6) > 0; k++) {}
    const size_t good[4] = {0, 2, 4, 5}, from[4] = {0, 1, 2, 3};
    for (size_t k = 0; k < 4; k++) {
        clover_generate_result r;
        int rc = clover_request_result(rq[good[k]], &r, &err);
        CHECK_MSG(rc == 0, "request %zu: %s", good[k], err.message);
        if (!rc) {
            same_result(jobs[from[k]].name, &r, &jobs[from[k]].alone);
            clover_generate_result_free(&r);
        }
    }
    clover_generate_result r;
    CHECK_EQ_INT(clover_request_result(rq[1], &r, &err), CLOVER_E_IO);
    CHECK_MSG(strstr(err.message, "/nonexistent-dir/first.json") != NULL, "%s", err.message);
    CHECK_EQ_INT(clover_session_length(ss[1]), 0);
    CHECK_EQ_INT(clover_request_result(rq[3], &r, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "context") != NULL, "%s", err.message);
    CHECK_EQ_INT(clover_session_length(ss[3]), 0);
    for (size_t i = 0; i < 6; i++) {
        clover_request_free(rq[i]);
        clover_session_free(ss[i]);
    }
    clover_engine_free(e);
    free_jobs(jobs, n);
}

/* Backend level: seqs {A, bad, B} in one commit and one preview. */
static void backend_failure_is_per_sequence(void) {
    const clover_model *m = tmc.model;
    const size_t V = m->hp.n_vocab;
    backend_config cfg = {.n_threads = 2, .max_rows = 16};
    backend *be = NULL;
    clover_error err = {0};
    CHECK(backend_cpu.create(m, &cfg, &be, &err) == 0);
    if (!be) return;
    backend_session *s[3], *solo[2];
    for (int i = 0; i < 3; i++) CHECK(backend_cpu.session_create(be, &s[i], &err) == 0);
    for (int i = 0; i < 2; i++) CHECK(backend_cpu.session_create(be, &solo[i], &err) == 0);
    int32_t a[20], bad[5] = {1, 2, (int32_t)V, 3, 4}, b[7];
    for (int i = 0; i < 20; i++) a[i] = (i * 7 + 3) % 400;
    for (int i = 0; i < 7; i++) b[i] = (i * 11 + 5) % 400;
    float *la = malloc(V * 4), *lb = malloc(V * 4), *sa = malloc(V * 4), *sb = malloc(V * 4);
    CHECK(backend_cpu.commit(be, &(backend_commit_seq){.s = s[1], .ids = b, .n = 3}, 1, NULL) == 0);
    size_t before = backend_cpu.state_bytes(s[1]);
    unsigned char *st0 = malloc(before), *st1 = malloc(before);
    backend_cpu.state_export(s[1], st0, before, &err);
    backend_commit_seq q[3] = {{.s = s[0], .ids = a, .n = 20, .last_logits = la},
                               {.s = s[1], .ids = bad, .n = 5},
                               {.s = s[2], .ids = b, .n = 7, .last_logits = lb}};
    int rc = backend_cpu.commit(be, q, 3, NULL);
    CHECK_EQ_INT(rc, CLOVER_E_INVALID);
    CHECK_EQ_INT(q[0].rc, 0);
    CHECK_EQ_INT(q[1].rc, CLOVER_E_INVALID);
    CHECK_MSG(strstr(q[1].err.message, "row 2") != NULL, "%s", q[1].err.message);
    CHECK_EQ_INT(q[2].rc, 0);
    CHECK_EQ_INT(backend_cpu.session_length(s[1]), 3);
    backend_cpu.state_export(s[1], st1, before, &err);
    CHECK(!memcmp(st0, st1, before));
    backend_commit_seq qa = {.s = solo[0], .ids = a, .n = 20, .last_logits = sa};
    backend_commit_seq qb = {.s = solo[1], .ids = b, .n = 7, .last_logits = sb};
    CHECK(backend_cpu.commit(be, &qa, 1, NULL) == 0 && backend_cpu.commit(be, &qb, 1, NULL) == 0);
    CHECK(!memcmp(la, sa, V * 4) && !memcmp(lb, sb, V * 4));
    /* preview: {A, bad block, B} */
    const int32_t mask = (int32_t)m->record.mask_token_id;
    int32_t blk[8], badblk[8];
    for (int i = 0; i < 8; i++) blk[i] = i % 2 ? mask : (int32_t)(i * 5), badblk[i] = i == 4 ? -3 : mask;
    backend_preview_opts o = {.record_block_size = m->record.block_size, .coreset = true, .coreset_top_p = 0.9f};
    float *pa = malloc(8 * V * 4), *pb = malloc(8 * V * 4), *qa2 = malloc(8 * V * 4), *qb2 = malloc(8 * V * 4);
    backend_preview_seq pq[3] = {{.s = s[0], .block = blk, .b = 8, .opts = o, .logits = pa},
                                 {.s = s[1], .block = badblk, .b = 8, .opts = o},
                                 {.s = s[2], .block = blk, .b = 8, .opts = o, .logits = pb}};
    CHECK_EQ_INT(backend_cpu.preview(be, pq, 3, NULL), CLOVER_E_INVALID);
    CHECK(pq[0].rc == 0 && pq[2].rc == 0 && pq[1].rc == CLOVER_E_INVALID);
    backend_preview_seq p1 = {.s = solo[0], .block = blk, .b = 8, .opts = o, .logits = qa2};
    backend_preview_seq p2 = {.s = solo[1], .block = blk, .b = 8, .opts = o, .logits = qb2};
    CHECK(backend_cpu.preview(be, &p1, 1, NULL) == 0 && backend_cpu.preview(be, &p2, 1, NULL) == 0);
    CHECK(!memcmp(pa, qa2, 8 * V * 4) && !memcmp(pb, qb2, 8 * V * 4));
    for (int i = 0; i < 3; i++) backend_cpu.session_free(s[i]);
    for (int i = 0; i < 2; i++) backend_cpu.session_free(solo[i]);
    backend_cpu.destroy(be);
    free(la), free(lb), free(sa), free(sb), free(st0), free(st1), free(pa), free(pb), free(qa2), free(qb2);
}

/* cpu_grouped against CLOVER_CPU_GROUPED=0 on two sessions fed the same calls. */
static void grouped_passes_match_old_order_on(const test_model *tm) {
    const clover_model *m = tm->model;
    const size_t V = m->hp.n_vocab, L = m->hp.n_layer, H = m->hp.n_embd;
    backend_config cfg = {.n_threads = 3, .max_rows = 64};
    backend *be = NULL;
    clover_error err = {0};
    CHECK(backend_cpu.create(m, &cfg, &be, &err) == 0);
    if (!be) return;
    backend_session *s[2][2];
    for (int g = 0; g < 2; g++)
        for (int i = 0; i < 2; i++) CHECK(backend_cpu.session_create(be, &s[g][i], &err) == 0);
    int32_t prompt[20], blk[32], blk2[9];
    const int32_t mask = (int32_t)m->record.mask_token_id;
    for (int i = 0; i < 20; i++) prompt[i] = (i * 7 + 3) % 400;
    for (int i = 0; i < 32; i++) blk[i] = i % 3 ? mask : (int32_t)(i * 5 % 400);
    for (int i = 0; i < 9; i++) blk2[i] = i % 2 ? mask : (int32_t)(i * 13 % 400);
    backend_preview_opts o = {.record_block_size = m->record.block_size, .coreset = true, .coreset_top_p = 0.9f};
    float *lg[2], *hid[2], *lg2[2], *cl[2];
    for (int g = 0; g < 2; g++) {
        lg[g] = malloc(32 * V * 4), hid[g] = malloc((L + 1) * 32 * H * 4), lg2[g] = malloc(41 * V * 4);
        cl[g] = malloc(V * 4);
    }
    for (int g = 0; g < 2; g++) { /* g = 1: the old order */
        if (g) setenv("CLOVER_CPU_GROUPED", "0", 1);
        backend_commit_seq c[2] = {{.s = s[g][0], .ids = prompt, .n = 20}, {.s = s[g][1], .ids = prompt, .n = 11}};
        CHECK(backend_cpu.commit(be, c, 2, NULL) == 0);
        backend_preview_seq p = {.s = s[g][0], .block = blk, .b = 32, .opts = o, .logits = lg[g]};
        CHECK(backend_cpu.preview(be, &p, 1, NULL) == 0);
        CHECK(backend_cpu.preview_debug(s[g][0], hid[g], NULL, &err) == 0);
        backend_preview_seq pq[2] = {{.s = s[g][0], .block = blk, .b = 32, .opts = o, .logits = lg2[g]},
                                     {.s = s[g][1], .block = blk2, .b = 9, .opts = o, .logits = lg2[g] + 32 * V}};
        CHECK(backend_cpu.preview(be, pq, 2, NULL) == 0);
        backend_commit_seq cb = {.s = s[g][0], .ids = blk2, .n = 9, .last_logits = cl[g]};
        CHECK(backend_cpu.commit(be, &cb, 1, NULL) == 0);
        if (g) unsetenv("CLOVER_CPU_GROUPED");
    }
    CHECK_MSG(!memcmp(lg[0], lg[1], 32 * V * 4), "32-row preview logits differ");
    CHECK_MSG(!memcmp(hid[0], hid[1], (L + 1) * 32 * H * 4), "32-row preview hidden states differ");
    CHECK_MSG(!memcmp(lg2[0], lg2[1], 41 * V * 4), "two-block preview logits differ");
    CHECK_MSG(!memcmp(cl[0], cl[1], V * 4), "commit logits differ");
    const size_t n0 = backend_cpu.state_bytes(s[0][0]), n1 = backend_cpu.state_bytes(s[1][0]);
    CHECK_EQ_INT((int)n0, (int)n1);
    unsigned char *st0 = malloc(n0), *st1 = malloc(n1);
    backend_cpu.state_export(s[0][0], st0, n0, &err);
    backend_cpu.state_export(s[1][0], st1, n1, &err);
    CHECK_MSG(!memcmp(st0, st1, n0), "committed states differ");
    for (int g = 0; g < 2; g++) {
        for (int i = 0; i < 2; i++) backend_cpu.session_free(s[g][i]);
        free(lg[g]), free(hid[g]), free(lg2[g]), free(cl[g]);
    }
    free(st0), free(st1);
    backend_cpu.destroy(be);
}

static void grouped_passes_match_old_order(void) {
    grouped_passes_match_old_order_on(&tmc);
    if (tmq.model) grouped_passes_match_old_order_on(&tmq);
}

int main(void) {
    if (fixture_open(&fxc, "tiny_clover") || fixture_open(&fxa, "tiny_ar")) return TEST_EXIT();
    if (test_model_convert(&tmc, &fxc, CONVERT_F32) == 0 && test_model_convert(&tma, &fxa, CONVERT_F32) == 0) {
        RUN(every_fixture_case_batched);
        RUN(step_stats_show_shared_passes);
        RUN(a_bad_request_fails_alone);
        if (test_model_convert(&tmq, &fxc, CONVERT_Q8_0) == 0) RUN(quantised_cases_batched);
        RUN(backend_failure_is_per_sequence);
        RUN(grouped_passes_match_old_order);
    }
    test_model_free(&tmc);
    test_model_free(&tma);
    test_model_free(&tmq);
    fixture_close(&fxc);
    fixture_close(&fxa);
    return TEST_EXIT();
}
