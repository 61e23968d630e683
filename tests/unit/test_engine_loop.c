/*
 * test_engine_loop.c: the generation loops (SPEC.md 3, 4) over a fake
 * backend whose logits each test scripts by hand, so every expected token,
 * pass count and confidence below is worked out from the SPEC text:
 * threshold and fallback (ties: lowest row), a stop fixed before the rows
 * ahead of it, ignore_eos, max_tokens cutting the last block, cancellation
 * (flag and callback), prefix reuse, a failing backend, override
 * validation, one SplitMix64 draw per pending row in row order, the
 * autoregressive loop (and on a backend that keeps the last row's logits:
 * no logits per decode step, a continue still reuses everything) and the
 * parity dump. Every case runs twice: on the
 * engine's own pass loop (a backend without resolve) and with the blocks
 * resolved inside the backend (resolve over the fake's previews, the
 * record replayed to the live view): the same expected values on both.
 * The fake's checkpoint, restore and truncate are checked directly.
 *
 * Vocabulary: V ids, the mask is V-1, the record's stop id V-2.
 * A row whose scripted token t has logit a and every other id 0 has, with
 * the mask forbidden, confidence e^a / (e^a + V-2).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "base/error.h"
#include "engine/session.h"
#include "model/model.h"
#include "test.h"

#include "fake_backend.h"

static clover_model model;
static uint32_t stop_ids[1];
static backend_ops loop_ops;                     /* fake_ops without resolve */
static const backend_ops *ops_under_test = &fake_ops;

static void setup(size_t V, uint32_t B, float threshold, bool record) {
    memset(&fk, 0, sizeof fk);
    fk.V = V;
    memset(&model, 0, sizeof model);
    model.hp.n_vocab = (uint32_t)V;
    model.has_record = record;
    model.tok.eos_id = model.tok.eot_id = -1;
    if (record) {
        stop_ids[0] = (uint32_t)V - 2;
        model.record.algorithm = "low_confidence";
        model.record.block_size = B;
        model.record.threshold = threshold;
        model.record.mask_token_id = (uint32_t)V - 1;
        model.record.repetition_penalty = 1.0f;
        model.record.think_end_token_id = -1;
        model.record.stop_token_ids = stop_ids;
        model.record.n_stop_token_ids = 1;
    } else {
        model.tok.eos_id = (int32_t)V - 2;
    }
}

static clover_session *open_session(void) {
    clover_session *s = NULL;
    clover_error err;
    int rc = engine_session_create(&s, &model, ops_under_test, NULL, &err);
    CHECK_MSG(rc == 0, "%s", err.message);
    return s;
}

static void row_put(float *row, size_t V, int32_t tok, float a) {
    for (size_t i = 0; i < V; i++)
        row[i] = 0.0f;
    row[tok] = a;
}

static double conf_of(double a, size_t V) { return exp(a) / (exp(a) + (double)(V - 2)); }

/* The start of most block-diffusion cases: the record with V 8 and blocks of
 * 4 at the threshold, the fake's logits from preview, the session open and p
 * at its defaults but max_tokens. */
static clover_session *open_diffusion(float threshold, preview_fn preview, clover_generate_params *p,
                                      size_t max_tokens) {
    setup(8, 4, threshold, true);
    fk.preview = preview;
    clover_generate_params_init(p);
    p->max_tokens = max_tokens;
    return open_session();
}

/* open_diffusion and the case's first request (prompt, n, on p as it comes
 * from there), which must succeed: r holds its result. */
static clover_session *first_request(float threshold, preview_fn preview, size_t max_tokens, const int32_t *prompt,
                                     size_t n, clover_generate_params *p, clover_generate_result *r) {
    clover_session *s = open_diffusion(threshold, preview, p, max_tokens);
    clover_error err;
    int rc = clover_generate(s, prompt, n, p, r, &err);
    CHECK_MSG(rc == 0, "first request: %s", err.message);
    return s;
}

/* ---- threshold and fallback ---- */

/* Row r proposes token r; the logit per pass (1-based) per row: */
static const float fallback_a[4][4] = {
    {1.0f, 1.5f, 1.5f, 0.5f}, /* pass 1: none > .5 (needs a > ln 6 = 1.79): rows 1, 2 tie: row 1 */
    {2.5f, 0.0f, 1.0f, 2.5f}, /* pass 2: rows 0 and 3 pass */
    {0.0f, 0.0f, 1.0f, 0.0f}, /* pass 3: row 2 alone, below: the fallback fixes it */
    {0},
};

static void preview_fallback(const int32_t *block, size_t b, size_t pos, int pass, float *logits) {
    for (size_t r = 0; r < b; r++)
        row_put(logits + r * fk.V, fk.V, (int32_t)r, fallback_a[pass - 1][r]);
}

static void threshold_and_fallback(void) {
    const int32_t prompt[3] = {5, 4, 3};
    clover_generate_params p;
    clover_generate_result r;
    clover_session *s = first_request(0.5f, preview_fallback, 4, prompt, 3, &p, &r);
    CHECK_EQ_INT(r.mode, CLOVER_MODE_DIFFUSION);
    CHECK_EQ_INT(r.n_generated, 4);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(r.ids[i], i);
    CHECK_EQ_INT(r.n_blocks, 1);
    CHECK_EQ_INT(r.passes_per_block[0], 3);
    /* The block each pass saw: pass 2 after row 1, pass 3 after rows 0, 3. */
    const int32_t b2[4] = {7, 1, 7, 7}, b3[4] = {0, 1, 7, 3};
    CHECK(!memcmp(fk.blocks_seen[1], b2, sizeof b2));
    CHECK(!memcmp(fk.blocks_seen[2], b3, sizeof b3));
    CHECK_NEAR(r.confidences[0], conf_of(2.5, 8), 1e-6);
    CHECK_NEAR(r.confidences[1], conf_of(1.5, 8), 1e-6);
    CHECK_NEAR(r.confidences[2], conf_of(1.0, 8), 1e-6);
    CHECK_NEAR(r.confidences[3], conf_of(2.5, 8), 1e-6);
    CHECK_EQ_INT(r.finish, CLOVER_FINISH_LENGTH);
    /* A length-ended answer's last block is not committed. */
    CHECK_EQ_INT(r.committed_after, 3);
    CHECK_EQ_INT(clover_session_length(s), 3);
    CHECK_EQ_INT(r.stats.passes, 3);
    CHECK_EQ_INT(r.stats.blocks, 1);
    CHECK_NEAR(r.stats.preview_ops.moe_s, 1.5, 0);
    CHECK_NEAR(r.stats.coreset_mean, 3.0, 0);
    CHECK_NEAR(r.stats.commit_ops.gdn_s, 1.0, 0); /* the prompt's commit */
    clover_generate_result_free(&r);
    /* Threshold override 1 (strict): never passes, one row per pass by
     * fallback: pass 1 row 1, pass 2 row 0 (2.5 vs 2.5 tie with row 3:
     * the lower row), pass 3 rows 2 and 3 remain... */
    fk.previews = 0;
    p.threshold = 1.0f;
    clover_error err;
    CHECK_EQ_INT(clover_generate(s, prompt, 3, &p, &r, &err), 0);
    CHECK_EQ_INT(r.passes_per_block[0], 4);
    const int32_t c3[4] = {0, 1, 7, 7};
    CHECK(!memcmp(fk.blocks_seen[2], c3, sizeof c3));
    clover_generate_result_free(&r);
    clover_session_free(s);
}

/* ---- stop inside a block, ignore_eos ---- */

static void preview_stop(const int32_t *block, size_t b, size_t pos, int pass, float *logits) {
    for (size_t r = 0; r < b; r++) /* pass 1: only row 1 (the stop id 6) passes */
        row_put(logits + r * fk.V, fk.V, r == 1 ? 6 : (int32_t)r, pass == 1 && r != 1 ? 0.5f : 3.0f);
}

static int seen_tokens[64], n_seen_tokens;
static int record_token(void *user, int32_t id, float conf) {
    (void)user;
    (void)conf;
    seen_tokens[n_seen_tokens++] = id;
    return 0;
}

static void stop_inside_a_block(void) {
    clover_generate_params p;
    clover_session *s = open_diffusion(0.5f, preview_stop, &p, 16);
    const int32_t prompt[2] = {1, 2};
    p.on_token = record_token;
    n_seen_tokens = 0;
    clover_generate_result r;
    clover_error err;
    CHECK_EQ_INT(clover_generate(s, prompt, 2, &p, &r, &err), 0);
    /* Row 1's stop was fixed in pass 1, row 0 in pass 2: the answer is
     * row 0 then the stop, which is kept but not streamed. */
    CHECK_EQ_INT(r.n_generated, 2);
    CHECK_EQ_INT(r.ids[0], 0);
    CHECK_EQ_INT(r.ids[1], 6);
    CHECK_EQ_INT(r.finish, CLOVER_FINISH_STOP);
    CHECK_EQ_INT(r.passes_per_block[0], 2);
    CHECK_EQ_INT(n_seen_tokens, 1);
    CHECK_EQ_INT(seen_tokens[0], 0);
    CHECK_EQ_INT(r.committed_after, 2); /* the stopped block is not committed */
    clover_generate_result_free(&r);
    /* ignore_eos: the stop is an ordinary token; every block is committed
     * except the last. */
    p.ignore_eos = 1;
    p.max_tokens = 8;
    n_seen_tokens = 0;
    CHECK_EQ_INT(clover_generate(s, prompt, 2, &p, &r, &err), 0);
    CHECK_EQ_INT(r.n_generated, 8);
    CHECK_EQ_INT(r.ids[1], 6);
    CHECK_EQ_INT(r.ids[5], 6);
    CHECK_EQ_INT(r.finish, CLOVER_FINISH_LENGTH);
    CHECK_EQ_INT(n_seen_tokens, 8);
    CHECK_EQ_INT(r.committed_after, 6);
    CHECK_EQ_INT(r.stats.reused_tokens, 2);
    clover_generate_result_free(&r);
    /* An extra stop id from the request ends the answer too. */
    const int32_t extra[1] = {3};
    p.ignore_eos = 0;
    p.stop_ids = extra;
    p.n_stop_ids = 1;
    CHECK_EQ_INT(clover_generate(s, prompt, 2, &p, &r, &err), 0);
    CHECK_EQ_INT(r.n_generated, 2); /* 0, 6: the record's stop still comes first */
    clover_generate_result_free(&r);
    clover_session_free(s);
}

/* ---- max_tokens cuts the last block ---- */

static void preview_count(const int32_t *block, size_t b, size_t pos, int pass, float *logits) {
    for (size_t r = 0; r < b; r++) /* token = absolute position mod 5, confident */
        row_put(logits + r * fk.V, fk.V, (int32_t)((pos + r) % 5), 4.0f);
}

static void max_tokens_cuts_the_last_block(void) {
    const int32_t prompt[3] = {0, 1, 2};
    clover_generate_params p;
    clover_generate_result r;
    clover_session *s = first_request(0.5f, preview_count, 6, prompt, 3, &p, &r);
    const int32_t want[6] = {3, 4, 0, 1, 2, 3}; /* positions 3..8 mod 5 */
    CHECK_EQ_INT(r.n_generated, 6);
    for (int i = 0; i < 6 && i < (int)r.n_generated; i++)
        CHECK_EQ_INT(r.ids[i], want[i]);
    CHECK_EQ_INT(r.n_blocks, 2);
    CHECK_EQ_INT(r.finish, CLOVER_FINISH_LENGTH);
    CHECK_EQ_INT(r.committed_after, 7); /* prompt + the first block */
    CHECK_EQ_INT(fk.commit_rows, 7);
    clover_generate_result_free(&r);
    /* max_tokens 0: the prompt is committed, nothing generated. */
    p.max_tokens = 0;
    clover_error err;
    CHECK_EQ_INT(clover_generate(s, prompt, 3, &p, &r, &err), 0);
    CHECK_EQ_INT(r.n_generated, 0);
    /* The session (7 ids) is not a prefix of this prompt: it starts afresh. */
    CHECK_EQ_INT(r.committed_after, 3);
    CHECK_EQ_INT(r.stats.reused_tokens, 0);
    clover_generate_result_free(&r);
    /* Block size override 2 (divides 4): blocks of two rows. */
    p.max_tokens = 5;
    p.block_size = 2;
    CHECK_EQ_INT(clover_generate(s, prompt, 3, &p, &r, &err), 0);
    CHECK_EQ_INT(r.n_blocks, 3);
    CHECK_EQ_INT(r.stats.reused_tokens, 3);
    CHECK_EQ_INT(r.committed_after, 7); /* 3 + two blocks of 2 */
    clover_generate_result_free(&r);
    clover_session_free(s);
}

/* ---- prefix reuse ---- */

static void prefix_reuse(void) {
    clover_generate_params p;
    clover_generate_result r;
    clover_session *s = first_request(0.5f, preview_count, 8, (const int32_t[3]){0, 1, 2}, 3, &p, &r);
    CHECK_EQ_INT(r.committed_after, 7);
    clover_generate_result_free(&r);
    /* The follow-up extends the committed sequence: only its tail is committed. */
    int32_t next[8];
    memcpy(next, clover_session_ids(s), 7 * sizeof *next);
    next[7] = 4;
    size_t rows0 = fk.commit_rows;
    int resets0 = fk.resets;
    p.max_tokens = 4;
    clover_error err;
    CHECK_EQ_INT(clover_generate(s, next, 8, &p, &r, &err), 0);
    CHECK_EQ_INT(r.stats.reused_tokens, 7);
    CHECK_EQ_INT(fk.commit_rows - rows0, 1);
    CHECK_EQ_INT(fk.resets, resets0);
    clover_generate_result_free(&r);
    /* A prompt that differs starts afresh. */
    const int32_t other[3] = {1, 1, 2};
    rows0 = fk.commit_rows;
    CHECK_EQ_INT(clover_generate(s, other, 3, &p, &r, &err), 0);
    CHECK_EQ_INT(r.stats.reused_tokens, 0);
    CHECK_EQ_INT(fk.commit_rows - rows0, 3);
    CHECK(fk.resets > resets0);
    clover_generate_result_free(&r);
    clover_session_free(s);
}

/* ---- cancellation ---- */

static int cancel_second(void *user, int32_t id, float conf) {
    (void)id;
    (void)conf;
    int *n = user;
    return ++*n == 2;
}

static void cancellation(void) {
    clover_generate_params p;
    clover_session *s = open_diffusion(0.5f, preview_fallback, &p, 8); /* three passes per block */
    const int32_t prompt[2] = {1, 2};
    volatile int flag = 0;
    fk.cancel_flag = &flag;
    fk.cancel_at = 2; /* set during the second pass: seen before the third */
    p.cancel = &flag;
    clover_generate_result r;
    clover_error err;
    CHECK_EQ_INT(clover_generate(s, prompt, 2, &p, &r, &err), 0);
    CHECK_EQ_INT(r.finish, CLOVER_FINISH_CANCELLED);
    CHECK_EQ_INT(fk.previews, 2);
    CHECK_EQ_INT(r.n_generated, 0);
    CHECK_EQ_INT(clover_session_length(s), 0); /* nothing to reuse */
    clover_generate_result_free(&r);
    /* A flag already set: no pass at all. */
    fk.previews = 0;
    CHECK_EQ_INT(clover_generate(s, prompt, 2, &p, &r, &err), 0);
    CHECK_EQ_INT(r.finish, CLOVER_FINISH_CANCELLED);
    CHECK_EQ_INT(fk.previews, 0);
    clover_generate_result_free(&r);
    /* The callback cancels at the second token: it stays in the result. */
    flag = 0;
    fk.cancel_at = 0;
    fk.previews = 0;
    int calls = 0;
    p.on_token = cancel_second;
    p.user = &calls;
    CHECK_EQ_INT(clover_generate(s, prompt, 2, &p, &r, &err), 0);
    CHECK_EQ_INT(r.finish, CLOVER_FINISH_CANCELLED);
    CHECK_EQ_INT(r.n_generated, 2);
    CHECK_EQ_INT(calls, 2);
    CHECK_EQ_INT(clover_session_length(s), 0);
    clover_generate_result_free(&r);
    clover_session_free(s);
    /* A long prompt goes in chunks of max_rows (64 by default) and the flag
     * is checked before each: set during chunk 2 of 3, no third chunk. */
    setup(8, 4, 0.5f, true);
    fk.preview = preview_count;
    flag = 0;
    fk.cancel_flag = &flag;
    fk.cancel_at_commit = 2;
    s = open_session();
    int32_t longp[150];
    for (int i = 0; i < 150; i++)
        longp[i] = i % 6;
    p.on_token = NULL;
    CHECK_EQ_INT(clover_generate(s, longp, 150, &p, &r, &err), 0);
    CHECK_EQ_INT(r.finish, CLOVER_FINISH_CANCELLED);
    CHECK_EQ_INT(fk.commits, 2);
    CHECK_EQ_INT(fk.commit_rows, 128);
    CHECK_EQ_INT(fk.previews, 0);
    CHECK_EQ_INT(clover_session_length(s), 0);
    clover_generate_result_free(&r);
    clover_session_free(s);
}

/* ---- failures and validation ---- */

static void failures_leave_nothing_to_reuse(void) {
    setup(8, 4, 0.5f, true);
    fk.preview = preview_fallback;
    fk.fail_preview_at = 2;
    clover_session *s = open_session();
    const int32_t prompt[2] = {1, 2};
    clover_generate_result r;
    clover_error err;
    CHECK_EQ_INT(clover_generate(s, prompt, 2, NULL, &r, &err), CLOVER_E_IO);
    CHECK(strstr(err.message, "device lost") != NULL);
    CHECK(r.ids == NULL && r.n_generated == 0);
    CHECK_EQ_INT(clover_session_length(s), 0);
    /* Without an error struct the status is still the backend's. */
    fk.previews = 0;
    CHECK_EQ_INT(clover_generate(s, prompt, 2, NULL, &r, NULL), CLOVER_E_IO);
    clover_session_free(s);
}

static void preview_nan(const int32_t *block, size_t b, size_t pos, int pass, float *logits) {
    for (size_t i = 0; i < b * fk.V; i++)
        logits[i] = NAN;
}

static void broken_logits_are_an_error_not_a_hang(void) {
    setup(8, 4, 0.5f, true);
    fk.preview = preview_nan;
    clover_session *s = open_session();
    const int32_t prompt[1] = {1};
    clover_generate_result r;
    clover_error err;
    int rc = clover_generate(s, prompt, 1, NULL, &r, &err);
    CHECK(rc < 0);
    CHECK(fk.previews == 1);
    CHECK_EQ_INT(clover_session_length(s), 0);
    clover_session_free(s);
}

static int expect_invalid(clover_session *s, const clover_generate_params *p, const char *word) {
    const int32_t prompt[2] = {1, 2};
    clover_generate_result r;
    clover_error err;
    int rc = clover_generate(s, prompt, 2, p, &r, &err);
    CHECK_EQ_INT(rc, CLOVER_E_INVALID);
    CHECK_MSG(rc != CLOVER_E_INVALID || strstr(err.message, word), "'%s' lacks '%s'", err.message, word);
    return rc;
}

static void overrides_are_validated(void) {
    clover_generate_params p;
    clover_generate_result r;
    clover_session *s = first_request(0.5f, preview_count, 4, (const int32_t[2]){1, 2}, 2, &p, &r);
    clover_generate_result_free(&r);
    size_t len = clover_session_length(s);
    p.threshold = 1.5f;
    expect_invalid(s, &p, "threshold");
    p.threshold = NAN;
    expect_invalid(s, &p, "threshold");
    p.threshold = -1.0f;
    p.block_size = 3;
    expect_invalid(s, &p, "divisor");
    p.block_size = 8;
    expect_invalid(s, &p, "divisor");
    p.block_size = 0;
    const int32_t bad[1] = {8};
    p.suppress_ids = bad;
    p.n_suppress_ids = 1;
    expect_invalid(s, &p, "suppressed");
    p.n_suppress_ids = 0;
    p.stop_ids = bad;
    p.n_stop_ids = 1;
    expect_invalid(s, &p, "stop");
    p.n_stop_ids = 0;
    p.temperature = -1.0f;
    expect_invalid(s, &p, "temperature");
    p.temperature = 0.0f;
    clover_penalties pen;
    clover_penalties_from_record(NULL, &pen);
    pen.repetition_penalty = 0.0f;
    p.penalties = &pen;
    expect_invalid(s, &p, "repetition_penalty");
    p.penalties = NULL;
    const int32_t out_of_range[2] = {1, 9};
    clover_error err;
    CHECK_EQ_INT(clover_generate(s, out_of_range, 2, &p, &r, &err), CLOVER_E_INVALID);
    CHECK(strstr(err.message, "prompt") != NULL);
    /* A rejected request leaves the session as it was. */
    CHECK_EQ_INT(clover_session_length(s), len);
    clover_session_free(s);
    /* Block diffusion on a model without the record. */
    setup(8, 0, 0.0f, false);
    fk.next = NULL;
    s = open_session();
    p.mode = CLOVER_MODE_DIFFUSION;
    expect_invalid(s, &p, "record");
    clover_session_free(s);
}

/* ---- sampling: one draw per pending row, in row order ---- */

static void preview_uniform(const int32_t *block, size_t b, size_t pos, int pass, float *logits) {
    for (size_t r = 0; r < b; r++)
        for (size_t i = 0; i < fk.V; i++) /* ids 0..3 equally likely, the rest impossible */
            logits[r * fk.V + i] = i < 4 ? 0.0f : -INFINITY;
}

static void one_draw_per_pending_row(void) {
    /* Every confidence is .25 < threshold .3: each pass fixes the lowest
     * pending row by fallback. Seed 42's draws (Python): floor(4u) =
     * 2 0 1 1 | 0 3 0 | 3 1 | 2. Pass 1 draws for rows 0-3 (row 0 gets 2),
     * pass 2 for rows 1-3 (row 1 gets 0), pass 3 rows 2-3 (row 2: 3),
     * pass 4 row 3 (2). */
    clover_generate_params p;
    clover_session *s = open_diffusion(0.3f, preview_uniform, &p, 4);
    const int32_t prompt[1] = {1};
    p.temperature = 1.0f;
    p.seed = 42;
    clover_generate_result r;
    clover_error err;
    CHECK_EQ_INT(clover_generate(s, prompt, 1, &p, &r, &err), 0);
    const int32_t want[4] = {2, 0, 3, 2};
    CHECK_EQ_INT(r.n_generated, 4);
    for (int i = 0; i < 4 && i < (int)r.n_generated; i++) {
        CHECK_EQ_INT(r.ids[i], want[i]);
        CHECK_NEAR(r.confidences[i], 0.25, 1e-7);
    }
    CHECK_EQ_INT(r.passes_per_block[0], 4);
    clover_generate_result_free(&r);
    clover_session_free(s);
}

/* ---- autoregressive ---- */

static void next_plus_one(int32_t last, float *logits) {
    /* After id t comes t+1 (mod 7, so the stop id 6 follows 5). */
    row_put(logits, fk.V, (last + 1) % 7, 3.0f);
}

/* The autoregressive script's two turns, shared by autoregressive_loop and
 * kept_run (setup(8, 0, 0.0f, false), fk.next = next_plus_one: no record,
 * eos id 6). First turn: prompt 1 2, max_tokens 3: 3 4 5, each at the
 * confidence of logit 3 against 7 zeros (no mask forbidden here), every
 * token but the last committed. r is left for the caller's own checks and
 * to free. */
static void ar_first_turn(clover_session *s, clover_generate_params *p, clover_generate_result *r) {
    const int32_t prompt[2] = {1, 2};
    clover_generate_params_init(p);
    p->max_tokens = 3;
    clover_error err;
    CHECK_EQ_INT(clover_generate(s, prompt, 2, p, r, &err), 0);
    const int32_t want[3] = {3, 4, 5};
    CHECK_EQ_INT(r->n_generated, 3);
    for (int i = 0; i < 3 && i < (int)r->n_generated; i++) {
        CHECK_EQ_INT(r->ids[i], want[i]);
        CHECK_NEAR(r->confidences[i], exp(3.0) / (exp(3.0) + 7.0), 1e-6);
    }
    CHECK_EQ_INT(r->committed_after, 4);
}

/* Second turn: the whole committed sequence as the prompt, max_tokens 8:
 * nothing is recommitted, decoding continues from the kept logits: all 4
 * reused, 5 then the EOS 6, only the 5 committed. r as above. */
static void ar_second_turn(clover_session *s, clover_generate_params *p, clover_generate_result *r) {
    int32_t again[4];
    memcpy(again, clover_session_ids(s), sizeof again);
    const size_t rows0 = fk.commit_rows;
    p->max_tokens = 8;
    clover_error err;
    CHECK_EQ_INT(clover_generate(s, again, 4, p, r, &err), 0);
    CHECK_EQ_INT(r->stats.reused_tokens, 4);
    CHECK_EQ_INT(r->n_generated, 2);
    if (r->n_generated == 2) CHECK(r->ids[0] == 5 && r->ids[1] == 6);
    CHECK_EQ_INT(fk.commit_rows - rows0, 1);
}

static void autoregressive_loop(void) {
    setup(8, 0, 0.0f, false); /* no record: eos id 6 */
    fk.next = next_plus_one;
    clover_session *s = open_session();
    clover_generate_params p;
    clover_generate_result r;
    clover_error err;
    ar_first_turn(s, &p, &r);
    CHECK_EQ_INT(r.mode, CLOVER_MODE_AUTOREGRESSIVE);
    CHECK_EQ_INT(r.finish, CLOVER_FINISH_LENGTH);
    CHECK_EQ_INT(r.stats.passes, 2);
    clover_generate_result_free(&r);
    ar_second_turn(s, &p, &r);
    CHECK_EQ_INT(r.finish, CLOVER_FINISH_STOP);
    CHECK_EQ_INT(r.committed_after, 5);
    clover_generate_result_free(&r);
    /* An empty prompt cannot be decoded from. */
    CHECK_EQ_INT(clover_generate(s, NULL, 0, &p, &r, &err), CLOVER_E_INVALID);
    clover_session_free(s);
}

/* ---- the parity dump ---- */

static void preview_ties(const int32_t *block, size_t b, size_t pos, int pass, float *logits) {
    for (size_t r = 0; r < b; r++)
        for (size_t i = 0; i < fk.V; i++) /* values 0, 1, 2, 0, 1, 2, ...: ties everywhere */
            logits[r * fk.V + i] = (float)(i % 3) + (float)r;
}

static void first_preview_dump(void) {
    setup(16, 2, 0.0f, true);
    fk.preview = preview_ties;
    clover_session *s = open_session();
    char path[] = "/tmp/clover_dumpXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    const int32_t prompt[3] = {9, 8, 7};
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.max_tokens = 4;
    p.dump_first_preview = path;
    clover_generate_result r;
    clover_error err;
    CHECK_EQ_INT(clover_generate(s, prompt, 3, &p, &r, &err), 0);
    clover_generate_result_free(&r);
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    CHECK(j != NULL);
    if (j) {
        json_t *pids = json_object_get(j, "prompt_ids"), *rows = json_object_get(j, "rows");
        CHECK_EQ_INT(json_array_size(pids), 3);
        CHECK_EQ_INT(json_integer_value(json_array_get(pids, 0)), 9);
        CHECK_EQ_INT(json_array_size(rows), 2);
        /* Row 1: ids with value 3 (2, 5, 8, 11, 14), then value 2 (1, 4, ...). */
        json_t *row1 = json_array_get(rows, 1);
        json_t *ids = json_object_get(row1, "ids"), *vals = json_object_get(row1, "logits");
        const int want[10] = {2, 5, 8, 11, 14, 1, 4, 7, 10, 13};
        CHECK_EQ_INT(json_array_size(ids), 10);
        for (int i = 0; i < 10; i++)
            CHECK_EQ_INT(json_integer_value(json_array_get(ids, (size_t)i)), want[i]);
        CHECK_NEAR(json_real_value(json_array_get(vals, 0)), 3.0, 0);
        CHECK_NEAR(json_real_value(json_array_get(vals, 9)), 2.0, 0);
        json_decref(j);
    }
    remove(path);
    /* An unwritable path is an I/O error naming it. */
    p.dump_first_preview = "/nonexistent-dir/dump.json";
    CHECK_EQ_INT(clover_generate(s, prompt, 3, &p, &r, &err), CLOVER_E_IO);
    CHECK(strstr(err.message, "/nonexistent-dir/dump.json") != NULL);
    clover_session_free(s);
}

/* The engine takes resolve when offered (and only then); the fake's
 * checkpoints and truncation. */
static void resolve_taken_and_checkpoints(void) {
    const int32_t prompt[3] = {5, 4, 3};
    clover_generate_params p;
    clover_generate_result r;
    clover_session *s = first_request(0.5f, preview_fallback, 4, prompt, 3, &p, &r);
    CHECK_EQ_INT(fk.resolves, ops_under_test->resolve ? 1 : 0);
    CHECK_EQ_INT(fk.previews, 3);
    clover_generate_result_free(&r);
    /* with logprobs the loop runs (resolve returns none) */
    fk.resolves = 0;
    fk.previews = 0; /* the script is per pass */
    p.logprobs = 1;
    clover_error err;
    CHECK_EQ_INT(clover_generate(s, prompt, 3, &p, &r, &err), 0);
    CHECK_EQ_INT(fk.resolves, 0);
    CHECK(r.logprobs && fabs(r.logprobs[0] - log(r.confidences[0])) < 1e-5);
    clover_generate_result_free(&r);
    backend_session *bs = s->bs;
    backend_checkpoint *c = NULL;
    CHECK_EQ_INT(ops_under_test->checkpoint_create(bs, &c, &err), 0);
    CHECK_EQ_INT(ops_under_test->checkpoint_save(bs, c, &err), 0);
    const size_t n0 = ops_under_test->session_length(bs);
    backend_commit_seq q = {.s = bs, .ids = prompt, .n = 3};
    CHECK_EQ_INT(ops_under_test->commit(s->bk, &q, 1, &(backend_pass_stats){0}), 0);
    CHECK_EQ_INT(ops_under_test->session_length(bs), n0 + 3);
    CHECK_EQ_INT(ops_under_test->checkpoint_restore(bs, c, &err), 0);
    CHECK_EQ_INT(ops_under_test->session_length(bs), n0);
    CHECK_EQ_INT(ops_under_test->truncate(bs, n0 + 1, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(ops_under_test->truncate(bs, 1, &err), 0);
    CHECK_EQ_INT(ops_under_test->session_length(bs), 1);
    ops_under_test->reset(bs); /* a reset makes the checkpoint stale */
    CHECK_EQ_INT(ops_under_test->checkpoint_restore(bs, c, &err), CLOVER_E_INVALID);
    ops_under_test->checkpoint_free(c);
    clover_session_free(s);
}

/* A backend that keeps the last row's logits itself (backend_ops.last_logits, as CUDA's stacked decode does):
 * the decode commits ask for no logits (only the last prompt chunk does), and a prompt equal to the committed
 * ids still reuses all of them, the first token from the kept logits (fetched once). CLOVER_ENGINE_EAGER_LOGITS
 * brings them back every step (the old path): the same answers, nothing fetched. */
static backend_ops kept_ops;
static size_t kept_len = SIZE_MAX;
static int commits_with_logits, kept_fetches;

static int kept_commit(backend *be, backend_commit_seq *seqs, size_t n, backend_pass_stats *st) {
    for (size_t i = 0; i < n; i++) commits_with_logits += seqs[i].last_logits != NULL;
    int rc = fake_ops.commit(be, seqs, n, st);
    for (size_t i = 0; i < n; i++) kept_len = !seqs[i].rc && seqs[i].n == 1 ? seqs[i].s->n : SIZE_MAX;
    return rc;
}

static int kept_last_logits(backend_session *s, float *out, clover_error *err) {
    if (!out) return CLOVER_OK;
    if (kept_len != s->n || !s->n) return error_set(err, CLOVER_E_INVALID, "fake: no logits kept");
    fk.next(s->ids[s->n - 1], out);
    kept_fetches++;
    return CLOVER_OK;
}

static void kept_run(bool eager, int want_commits_with_logits, int want_fetches) {
    setup(8, 0, 0.0f, false);
    fk.next = next_plus_one;
    kept_ops = *ops_under_test;
    kept_ops.commit = kept_commit;
    kept_ops.last_logits = kept_last_logits;
    const backend_ops *was = ops_under_test;
    ops_under_test = &kept_ops;
    commits_with_logits = kept_fetches = 0;
    kept_len = SIZE_MAX;
    if (eager) setenv("CLOVER_ENGINE_EAGER_LOGITS", "1", 1);
    clover_session *s = open_session();
    ops_under_test = was;
    if (!s) return;
    clover_generate_params p;
    clover_generate_result r;
    ar_first_turn(s, &p, &r);
    clover_generate_result_free(&r);
    CHECK_EQ_INT(commits_with_logits, want_commits_with_logits); /* eager: the prompt and both decode steps */
    ar_second_turn(s, &p, &r);
    CHECK_NEAR(r.confidences[0], exp(3.0) / (exp(3.0) + 7.0), 1e-6);
    CHECK_EQ_INT(kept_fetches, want_fetches);
    clover_generate_result_free(&r);
    unsetenv("CLOVER_ENGINE_EAGER_LOGITS");
    clover_session_free(s);
}

static void autoregressive_kept_logits(void) {
    kept_run(false, 1, 1);
    kept_run(true, 3, 0);
}

static void every_case(void) {
    RUN(threshold_and_fallback);
    RUN(stop_inside_a_block);
    RUN(max_tokens_cuts_the_last_block);
    RUN(prefix_reuse);
    RUN(cancellation);
    RUN(failures_leave_nothing_to_reuse);
    RUN(broken_logits_are_an_error_not_a_hang);
    RUN(overrides_are_validated);
    RUN(one_draw_per_pending_row);
    RUN(autoregressive_loop);
    RUN(autoregressive_kept_logits);
    RUN(first_preview_dump);
    RUN(resolve_taken_and_checkpoints);
}

int main(void) {
    loop_ops = fake_ops;
    loop_ops.resolve = NULL;
    printf("     the engine's pass loop:\n");
    ops_under_test = &loop_ops;
    every_case();
    printf("     blocks resolved inside the backend:\n");
    ops_under_test = &fake_ops;
    every_case();
    return TEST_EXIT();
}
