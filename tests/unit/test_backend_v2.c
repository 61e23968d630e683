/*
 * test_backend_v2.c: the parts of contract v2 (backend.h) beyond whole
 * passes, on the CPU backend and the tiny Clover fixture:
 *  - the causal pick of commit (greedy over every row) against the test's
 *    own float64 arithmetic over the same call's raw logits: the argmax
 *    after forbidding, its softmax probability, its log-probability and the
 *    top-5 ids (value descending, ties to the lower id);
 *  - the preview's pick with penalties and sampling against the engine's
 *    oracle code (penalty_apply, sampler_pick) over the raw logits;
 *  - checkpoint / restore (state bytes equal the export at the checkpoint;
 *    recommitting gives the same bytes; a stale checkpoint is refused) and
 *    truncate (refused on a model with GDN layers);
 *  - resolve: the whole first block resolved inside the backend equals the
 *    first block of clover_generate (ids, confidences, passes), and a set
 *    cancel flag stops it before the first pass.
 */
#include <math.h>

#include "backend/penalties.h"
#include "backend/sampler.h"
#include "engine/session.h"
#include "golden_generate.h"

static fixture fx;
static test_model tm;
static backend *be;

static backend_session *fresh(void) {
    backend_session *s = NULL;
    clover_error err = {0};
    CHECK(backend_cpu.session_create(be, &s, &err) == 0);
    return s;
}

static void causal_pick_matches_the_logits(void) {
    const size_t V = tm.model->hp.n_vocab, n = 12;
    int32_t ids[12];
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 37 + 11) % 400);
    backend_session *s = fresh();
    float *lg = malloc(n * V * 4), conf[12], lp[12], top_lp[12 * 5];
    int32_t pid[12], top[12 * 5];
    const int32_t forbid[2] = {(int32_t)tm.model->record.mask_token_id, 7};
    backend_pick pk = {.temperature = 0.0f, .forbid = forbid, .n_forbid = 2, .n_top = 5};
    backend_commit_seq q = {.s = s, .ids = ids, .n = n, .all_logits = lg, .pick = &pk, .n_pick = n,
                            .pick_out = {.id = pid, .conf = conf, .logprob = lp, .top_id = top, .top_logprob = top_lp}};
    CHECK(backend_cpu.commit(be, &q, 1, NULL) == 0);
    for (size_t r = 0; r < n; r++) {
        float *row = lg + r * V;
        row[forbid[0]] = row[forbid[1]] = -INFINITY;
        size_t best = 0;
        for (size_t i = 1; i < V; i++)
            if (row[i] > row[best]) best = i;
        double mx = row[best], sum = 0;
        for (size_t i = 0; i < V; i++) sum += exp((double)row[i] - mx);
        CHECK_EQ_INT(pid[r], (int)best);
        CHECK_NEAR(conf[r], 1.0 / sum, 1e-6);
        CHECK_NEAR(lp[r], -log(sum), 1e-5);
        size_t prev = best;
        for (int k = 0; k < 5; k++) { /* the k-th largest by selection */
            size_t arg = V;
            for (size_t i = 0; i < V; i++) {
                bool taken = false;
                for (int j = 0; j < k; j++) taken |= top[r * 5 + j] == (int32_t)i;
                if (taken || !(row[i] > -INFINITY)) continue;
                if (arg == V || row[i] > row[arg]) arg = i;
            }
            CHECK_EQ_INT(top[r * 5 + k], (int)arg);
            CHECK_NEAR(top_lp[r * 5 + k], (double)row[arg] - mx - log(sum), 1e-5);
            CHECK(row[arg] <= row[prev]);
            prev = arg;
        }
    }
    /* a pick with every id forbidden is refused before anything changes */
    int32_t *all = malloc(V * sizeof *all);
    for (size_t i = 0; i < V; i++) all[i] = (int32_t)i;
    backend_pick none = {.forbid = all, .n_forbid = V};
    backend_commit_seq q2 = {.s = s, .ids = ids, .n = 1, .pick = &none, .n_pick = 1, .pick_out = {.id = pid, .conf = conf}};
    CHECK_EQ_INT(backend_cpu.commit(be, &q2, 1, NULL), CLOVER_E_INVALID);
    CHECK_EQ_INT(backend_cpu.session_length(s), n);
    free(all), free(lg);
    backend_cpu.session_free(s);
}

static void preview_pick_matches_the_oracle(void) {
    const size_t V = tm.model->hp.n_vocab, B = 8;
    const clover_record *rec = &tm.model->record;
    backend_session *s = fresh();
    int32_t prompt[20];
    for (int i = 0; i < 20; i++) prompt[i] = (i * 29 + 3) % 400;
    CHECK(backend_cpu.commit(be, &(backend_commit_seq){.s = s, .ids = prompt, .n = 20}, 1, NULL) == 0);
    int32_t block[8];
    uint8_t pending[8];
    float u[8];
    for (size_t r = 0; r < B; r++) {
        pending[r] = r % 3 != 1;
        block[r] = pending[r] ? (int32_t)rec->mask_token_id : (int32_t)(r * 17);
        u[r] = (float)(r + 1) / 9.0f;
    }
    const int32_t forbid[1] = {(int32_t)rec->mask_token_id}, seen[3] = {17, 5, 90}, stops[2] = {400, 402};
    const uint32_t counts[3] = {2, 1, 3};
    backend_penalties pen = {.p = {.presence_penalty = 0.5f, .frequency_penalty = 0.25f, .repetition_penalty = 1.3f,
                                   .length_penalty = 2.0f, .length_penalty_start = 2, .length_penalty_window = 4},
                             .think_end_id = -1, .count_ids = seen, .counts = counts, .n_counts = 3,
                             .response_len = 6, .stop_ids = stops, .n_stop_ids = 2};
    backend_pick pk = {.temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .forbid = forbid, .n_forbid = 1, .pen = &pen};
    int32_t id[8];
    float conf[8], *lg = malloc(B * V * 4);
    backend_preview_seq q = {.s = s, .block = block, .b = B,
                             .opts = {.record_block_size = rec->block_size, .coreset = true, .coreset_top_p = 0.9f},
                             .pending = pending, .pick = &pk, .u = u, .pick_out = {.id = id, .conf = conf}, .logits = lg};
    CHECK(backend_cpu.preview(be, &q, 1, NULL) == 0);
    penalty_state st;
    clover_error err = {0};
    penalty_state_init(&st, V, &err);
    penalty_state_commit(&st, (const int32_t[]){17, 5, 17, 90, 90, 90}, 6);
    penalty_config cfg = {.p = pen.p, .think_end_id = -1};
    sampler_scratch sc;
    sampler_scratch_init(&sc, V, &err);
    sampler_params sp = {0.8f, 20, 0.9f};
    for (size_t r = 0; r < B; r++) {
        if (!pending[r]) continue;
        float *row = lg + r * V;
        row[forbid[0]] = -INFINITY;
        penalty_apply(&cfg, &st, row, 6 + r + 1, stops, 2, false);
        int32_t want;
        float wc;
        CHECK(sampler_pick(&sp, row, V, u[r], &sc, &want, &wc, &err) == 0);
        CHECK_EQ_INT(id[r], want);
        CHECK(conf[r] == wc);
    }
    sampler_scratch_free(&sc);
    penalty_state_free(&st);
    free(lg);
    backend_cpu.session_free(s);
}

static void checkpoint_restore_and_truncate(void) {
    int32_t ids[30];
    for (int i = 0; i < 30; i++) ids[i] = (i * 13 + 1) % 400;
    backend_session *s = fresh();
    clover_error err = {0};
    backend_checkpoint *c = NULL;
    CHECK(backend_cpu.checkpoint_create(s, &c, &err) == 0);
    CHECK(backend_cpu.commit(be, &(backend_commit_seq){.s = s, .ids = ids, .n = 10}, 1, NULL) == 0);
    size_t b10 = backend_cpu.state_bytes(s);
    unsigned char *at10 = malloc(b10);
    backend_cpu.state_export(s, at10, b10, &err);
    CHECK(backend_cpu.checkpoint_save(s, c, &err) == 0);
    CHECK(backend_cpu.commit(be, &(backend_commit_seq){.s = s, .ids = ids + 10, .n = 20}, 1, NULL) == 0);
    size_t b30 = backend_cpu.state_bytes(s);
    unsigned char *at30 = malloc(b30), *again = malloc(b30);
    backend_cpu.state_export(s, at30, b30, &err);
    CHECK(backend_cpu.checkpoint_restore(s, c, &err) == 0);
    CHECK_EQ_INT(backend_cpu.session_length(s), 10);
    unsigned char *back = malloc(b10);
    CHECK_EQ_INT(backend_cpu.state_bytes(s), b10);
    backend_cpu.state_export(s, back, b10, &err);
    CHECK(!memcmp(back, at10, b10));
    CHECK(backend_cpu.commit(be, &(backend_commit_seq){.s = s, .ids = ids + 10, .n = 20}, 1, NULL) == 0);
    backend_cpu.state_export(s, again, b30, &err);
    CHECK(!memcmp(again, at30, b30));
    /* truncation: GDN states cannot be rewound */
    CHECK_EQ_INT(backend_cpu.truncate(s, 30, &err), CLOVER_OK);
    CHECK_EQ_INT(backend_cpu.truncate(s, 31, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(backend_cpu.truncate(s, 12, &err), CLOVER_E_UNSUPPORTED);
    CHECK_MSG(strstr(err.message, "checkpoint") != NULL, "%s", err.message);
    /* a reset makes the checkpoint stale */
    backend_cpu.reset(s);
    CHECK_EQ_INT(backend_cpu.checkpoint_restore(s, c, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(backend_cpu.session_length(s), 0);
    backend_cpu.checkpoint_free(c);
    free(at10), free(at30), free(again), free(back);
    backend_cpu.session_free(s);
}

static void resolve_equals_the_engine(void) {
    json_t *c = json_array_get(json_object_get(fx.manifest, "generate"), 0); /* greedy_default */
    golden_request g;
    golden_request_init(&g, tm.model, json_object_get(c, "prompt_ids"), json_object_get(c, "options"), NULL);
    const clover_record *rec = &tm.model->record;
    const size_t B = rec->block_size;
    clover_session *es = NULL;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = 2;
    clover_error err = {0};
    CHECK(clover_session_create(&es, tm.model, &sp, &err) == 0);
    clover_generate_params p = g.p;
    p.max_tokens = B;
    clover_generate_result r;
    CHECK(clover_generate(es, g.prompt, g.n_prompt, &p, &r, &err) == 0);
    backend_session *s = fresh();
    CHECK(backend_cpu.commit(be, &(backend_commit_seq){.s = s, .ids = g.prompt, .n = g.n_prompt}, 1, NULL) == 0);
    int32_t block[64], guess[64 * 64], forbid[1] = {(int32_t)rec->mask_token_id};
    float conf[64], gconf[64 * 64];
    uint8_t fixed_at[64];
    for (size_t i = 0; i < B; i++) block[i] = forbid[0];
    backend_penalties pen = {.think_end_id = rec->think_end_token_id, .stop_ids = es->stop_ids,
                             .n_stop_ids = es->n_stop_ids};
    clover_penalties_from_record(rec, &pen.p);
    backend_pick pk = {.temperature = 0.0f, .forbid = forbid, .n_forbid = 1, .pen = &pen};
    uint64_t rng = 0;
    backend_resolve_seq q = {.s = s, .block = block, .conf = conf, .b = B,
                             .opts = {.record_block_size = rec->block_size, .coreset = rec->coreset_enabled != 0,
                                      .coreset_top_p = rec->coreset_top_p},
                             .pick = &pk, .threshold = rec->threshold, .rng = &rng, .rec_guess = guess,
                             .rec_conf = gconf, .fixed_at = fixed_at};
    CHECK(backend_cpu.resolve(be, &q, 1, NULL, NULL) == 0);
    CHECK_EQ_INT(r.n_blocks, 1);
    CHECK_EQ_INT(q.passes, r.passes_per_block[0]);
    for (size_t i = 0; i < B && i < r.n_generated; i++) {
        CHECK_EQ_INT(block[i], r.ids[i]);
        CHECK(conf[i] == r.confidences[i]);
        CHECK(fixed_at[i] >= 1 && fixed_at[i] <= q.passes);
        CHECK_EQ_INT(guess[(q.passes - 1) * B + i], block[i]); /* the last pass shows the whole block */
    }
    CHECK_EQ_INT(backend_cpu.session_length(s), g.n_prompt); /* nothing committed */
    volatile int flag = 1;
    for (size_t i = 0; i < B; i++) block[i] = forbid[0];
    CHECK(backend_cpu.resolve(be, &q, 1, &flag, NULL) == 0);
    CHECK(q.cancelled && q.passes == 0);
    clover_generate_result_free(&r);
    clover_session_free(es);
    golden_request_free(&g);
    backend_cpu.session_free(s);
}

/* The head runs over a pass's head rows in windows of logits scratch: a
 * backend with 16-row windows (a 150-row commit: 10 windows; three 40-row
 * preview blocks: blocks straddle windows) gives every output bit for bit
 * what one window over all rows gives (the code before windows existed). */
static void head_windows_change_no_bit(void) {
    const size_t V = tm.model->hp.n_vocab, n = 150, B = 40, NB = 3;
    const clover_record *rec = &tm.model->record;
    backend *bw[2] = {NULL, NULL};
    clover_error err = {0};
    for (int k = 0; k < 2; k++) {
        backend_config cfg = {.n_threads = 2, .max_rows = 160, .head_window = k ? 160 : 16};
        CHECK_MSG(backend_cpu.create(tm.model, &cfg, &bw[k], &err) == 0, "%s", err.message);
    }
    if (!bw[0] || !bw[1]) goto out;
    int32_t ids[150], pid[2][150], top[2][150 * 3], block[3][40], bid[2][3][40], bout[2][3][40];
    float *lg[2] = {malloc(n * V * 4), malloc(n * V * 4)}, *plg[2] = {malloc(NB * B * V * 4), malloc(NB * B * V * 4)};
    float nll[2][150], conf[2][150], lp[2][150], top_lp[2][150 * 3], bconf[2][3][40], u[3][40];
    uint8_t pending[3][40];
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 53 + 7) % 400);
    for (size_t j = 0; j < NB; j++)
        for (size_t r = 0; r < B; r++) {
            pending[j][r] = (r + j) % 4 != 0;
            block[j][r] = pending[j][r] ? (int32_t)rec->mask_token_id : (int32_t)((r * 31 + j) % 400);
            u[j][r] = (float)((r * 7 + j) % 11) / 11.0f;
        }
    const int32_t forbid[1] = {(int32_t)rec->mask_token_id};
    backend_pick greedy = {.temperature = 0.0f, .forbid = forbid, .n_forbid = 1, .n_top = 3};
    backend_pick greedy_p = {.temperature = 0.0f, .forbid = forbid, .n_forbid = 1};
    backend_pick sampled = {.temperature = 0.7f, .top_k = 30, .top_p = 0.95f, .forbid = forbid, .n_forbid = 1};
    for (int k = 0; k < 2; k++) {
        backend_session *s[3] = {NULL, NULL, NULL};
        for (size_t j = 0; j < NB; j++) CHECK(backend_cpu.session_create(bw[k], &s[j], &err) == 0);
        if (!s[0] || !s[1] || !s[2]) continue;
        backend_commit_seq q = {.s = s[0], .ids = ids, .n = n, .all_logits = lg[k], .targets = ids, .nll = nll[k],
                                .pick = &greedy, .n_pick = n - 5,
                                .pick_out = {.id = pid[k], .conf = conf[k], .logprob = lp[k], .top_id = top[k],
                                             .top_logprob = top_lp[k]}};
        CHECK(backend_cpu.commit(bw[k], &q, 1, NULL) == 0);
        for (size_t j = 1; j < NB; j++) /* the other blocks preview after prompts of other lengths */
            CHECK(backend_cpu.commit(bw[k], &(backend_commit_seq){.s = s[j], .ids = ids + j, .n = 10 * j}, 1, NULL) == 0);
        backend_preview_seq pv[3];
        for (size_t j = 0; j < NB; j++) {
            memcpy(bid[k][j], block[j], sizeof block[j]);
            memcpy(bout[k][j], block[j], sizeof block[j]);
            pv[j] = (backend_preview_seq){.s = s[j], .block = bid[k][j], .b = B,
                                          .opts = {.record_block_size = rec->block_size},
                                          .pending = pending[j], .pick = j == 1 ? &greedy_p : &sampled, .u = u[j],
                                          .pick_out = {.id = bout[k][j], .conf = bconf[k][j]}, .logits = plg[k] + j * B * V};
        }
        CHECK(backend_cpu.preview(bw[k], pv, NB, NULL) == 0);
        for (size_t j = 0; j < NB; j++) {
            CHECK_MSG(pv[j].rc == 0, "block %zu: %s", j, pv[j].err.message);
            backend_cpu.session_free(s[j]);
        }
    }
    CHECK(memcmp(lg[0], lg[1], n * V * 4) == 0);
    CHECK(memcmp(nll[0], nll[1], sizeof nll[0]) == 0);
    CHECK(memcmp(pid[0], pid[1], (n - 5) * sizeof pid[0][0]) == 0);
    CHECK(memcmp(conf[0], conf[1], (n - 5) * sizeof conf[0][0]) == 0);
    CHECK(memcmp(lp[0], lp[1], (n - 5) * sizeof lp[0][0]) == 0);
    CHECK(memcmp(top[0], top[1], (n - 5) * 3 * sizeof top[0][0]) == 0);
    CHECK(memcmp(top_lp[0], top_lp[1], (n - 5) * 3 * sizeof top_lp[0][0]) == 0);
    CHECK(memcmp(plg[0], plg[1], NB * B * V * 4) == 0);
    CHECK(memcmp(bout[0], bout[1], sizeof bout[0]) == 0);
    size_t changed = 0; /* the picks wrote every pending row, and the blocks were really picked */
    for (size_t j = 0; j < NB; j++)
        for (size_t r = 0; r < B; r++) {
            if (!pending[j][r]) continue;
            CHECK(memcmp(&bconf[0][j][r], &bconf[1][j][r], sizeof(float)) == 0);
            changed += bout[0][j][r] != (int32_t)rec->mask_token_id;
        }
    CHECK(changed > 0);
    for (size_t i = 0; i < n - 5; i++) CHECK(pid[0][i] != forbid[0]);
    free(lg[0]), free(lg[1]), free(plg[0]), free(plg[1]);
out:
    for (int k = 0; k < 2; k++)
        if (bw[k]) backend_cpu.destroy(bw[k]);
}

int main(void) {
    if (fixture_open(&fx, "tiny_clover")) return TEST_EXIT();
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) {
        backend_config cfg = {.n_threads = 2, .max_rows = 64};
        clover_error err = {0};
        CHECK_MSG(backend_cpu.probe(tm.model, &cfg, &err) == 0, "%s", err.message);
        CHECK(backend_cpu.create(tm.model, &cfg, &be, &err) == 0);
        if (be) {
            RUN(causal_pick_matches_the_logits);
            RUN(preview_pick_matches_the_oracle);
            RUN(checkpoint_restore_and_truncate);
            RUN(resolve_equals_the_engine);
            RUN(head_windows_change_no_bit);
            backend_cpu.destroy(be);
        }
    }
    test_model_free(&tm);
    fixture_close(&fx);
    return TEST_EXIT();
}
