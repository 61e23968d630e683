/*
 * test_causal_rule.c: block diffusion's causal-fallback rule
 * (src/engine/generate_causal.c) against an oracle written here, which
 * recomputes everything from scratch through the backend contract with a
 * freshly reset session for every step: per pass, the prefix committed and
 * the block previewed (the backend's pick: forbidden ids, the pass's draws);
 * per fallback, the prefix and rows[0..f) committed with the causal pick of
 * the last row (the fallback's draw, no penalties). The rule's decisions
 * are coded independently: the run of rows above the threshold starting at
 * the first pending row f, else row f's causal pick; then the block is
 * emitted in row order (a stop id or max_tokens ends it). Every emitted id,
 * the finish, the pass and causal-step counts and the confidences (1e-4)
 * must match, greedy and sampled, over random prompts, thresholds and
 * block sizes on the tiny synthetic model (f32); the cases must cover a
 * fallback at f = 0 and at f > 0, threshold runs, a stop and max_tokens
 * inside a block. The rule is also selected through the record
 * (clover.decode_rule in a rewritten copy of the model), and the choices
 * around it (lossless, a schema, bad values, the record's rule giving way)
 * are checked.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/sampler.h"
#include "base/rng.h"
#include "clover.h"
#include "engine/session.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "test.h"

#define MAXB 32
#define MAXN 256

static char dir[64], base_path[128], causal_path[128];
static clover_model *M, *M_causal;
static clover_session *O; /* the oracle's session, reset before every step */

typedef struct oracle_out {
    int32_t ids[MAXN];
    float conf[MAXN];
    size_t n, passes, steps;
    int finish;
    /* coverage */
    size_t fb0, fbpos, runs, stop_in_block, len_in_block;
} oracle_out;

static oracle_out COV; /* coverage summed over the cases */

static const clover_penalties NO_PEN = {.repetition_penalty = 1.0f, .length_penalty_window = 1,
                                        .think_end_window = 1};

/* Reset O and commit ids[0..n); with pick, the last row's causal pick with draw u. */
static int commit_fresh(const int32_t *ids, size_t n, const backend_pick *pick, const float *u, int32_t *id,
                        float *conf) {
    clover_session_reset(O);
    backend_commit_seq q;
    memset(&q, 0, sizeof q);
    q.s = O->bs;
    q.ids = ids;
    q.n = n;
    if (pick) {
        q.pick = pick;
        q.n_pick = 1;
        q.u = u;
        q.pick_out.id = id;
        q.pick_out.conf = conf;
    }
    backend_pass_stats st = {0};
    O->be->commit(O->bk, &q, 1, &st);
    CHECK_MSG(q.rc == 0, "oracle commit: %s", q.err.message);
    CHECK(O->be->session_length(O->bs) == n);
    return q.rc;
}

static bool is_stop(const clover_generate_params *p, int32_t id) {
    if (p->ignore_eos) return false;
    for (size_t i = 0; i < O->n_stop_ids; i++)
        if (O->stop_ids[i] == id) return true;
    for (size_t i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] == id) return true;
    return false;
}

/* The rule from scratch. B: the block size, thr: the threshold. */
static int oracle(const clover_model *m, const int32_t *prompt, size_t n_prompt, const clover_generate_params *p,
                  size_t B, float thr, oracle_out *o) {
    memset(o, 0, sizeof *o);
    const int32_t mask = (int32_t)m->record.mask_token_id;
    int32_t forbid[16] = {mask};
    size_t n_forbid = 1;
    for (size_t i = 0; i < p->n_suppress_ids; i++) forbid[n_forbid++] = p->suppress_ids[i];
    const sampler_params sp = {p->temperature, p->top_k, p->top_p};
    const bool greedy = sampler_is_greedy(&sp) != 0;
    const backend_pick pick = {.temperature = p->temperature, .top_k = p->top_k, .top_p = p->top_p,
                               .forbid = forbid, .n_forbid = n_forbid};
    rng_state g;
    rng_seed(&g, p->seed);
    int32_t prefix[MAXN + 64];
    size_t np = n_prompt;
    memcpy(prefix, prompt, n_prompt * sizeof *prefix);
    o->finish = CLOVER_FINISH_LENGTH;
    for (;;) {
        if (o->n >= p->max_tokens) return 0;
        int32_t rows[MAXB];
        float rconf[MAXB];
        uint8_t fixed[MAXB] = {0};
        for (size_t r = 0; r < B; r++) rows[r] = mask;
        size_t f = 0; /* the first pending row: everything before it is fixed */
        while (f < B) {
            float u[MAXB];
            uint8_t pend[MAXB];
            for (size_t r = 0; r < B; r++) {
                pend[r] = !fixed[r];
                u[r] = pend[r] ? (float)sampler_draw(&sp, &g) : 0.0f;
            }
            if (commit_fresh(prefix, np, NULL, NULL, NULL, NULL)) return -1;
            int32_t pid[MAXB];
            float pconf[MAXB];
            backend_preview_seq q;
            memset(&q, 0, sizeof q);
            q.s = O->bs;
            q.block = rows;
            q.b = B;
            q.opts = (backend_preview_opts){.record_block_size = m->record.block_size,
                                            .coreset = m->record.coreset_enabled != 0,
                                            .coreset_top_p = m->record.coreset_top_p};
            q.pending = pend;
            q.pick = &pick;
            q.u = greedy ? NULL : u;
            q.pick_out = (backend_pick_out){.id = pid, .conf = pconf};
            backend_pass_stats st = {0};
            O->be->preview(O->bk, &q, 1, &st);
            CHECK_MSG(q.rc == 0, "oracle preview: %s", q.err.message);
            if (q.rc) return -1;
            o->passes++;
            size_t k = f;
            while (k < B && pconf[k] > thr) { /* the confident run from f */
                rows[k] = pid[k];
                rconf[k] = pconf[k];
                fixed[k] = 1;
                k++;
            }
            if (k > f) {
                o->runs++;
                f = k;
                continue;
            }
            /* the fallback: row f's causal pick given prefix + rows[0..f) */
            const float ud = (float)sampler_draw(&sp, &g);
            int32_t buf[MAXN + 64 + MAXB];
            memcpy(buf, prefix, np * sizeof *buf);
            memcpy(buf + np, rows, f * sizeof *buf);
            int32_t id = -1;
            float c = -1.0f;
            if (commit_fresh(buf, np + f, &pick, greedy ? NULL : &ud, &id, &c)) return -1;
            rows[f] = id;
            rconf[f] = c;
            fixed[f] = 1;
            o->steps++;
            if (f == 0)
                o->fb0++;
            else
                o->fbpos++;
            f++;
        }
        for (size_t r = 0; r < B; r++) {
            if (o->n >= p->max_tokens) {
                if (r > 0) o->len_in_block++;
                return 0;
            }
            o->conf[o->n] = rconf[r];
            o->ids[o->n++] = rows[r];
            if (is_stop(p, rows[r])) {
                o->finish = CLOVER_FINISH_STOP;
                if (r + 1 < B) o->stop_in_block++;
                return 0;
            }
        }
        memcpy(prefix + np, rows, B * sizeof *rows);
        np += B;
    }
}

static clover_session *new_session(const clover_model *m) {
    clover_session *s = NULL;
    clover_error err = {0};
    int rc = clover_session_create(&s, m, NULL, &err);
    CHECK_MSG(rc == 0, "session: %s", err.message);
    return s;
}

/* The engine on a fresh session against the oracle; returns the oracle's answer in *o. */
static void compare(const char *name, const clover_model *m, const int32_t *prompt, size_t n,
                    const clover_generate_params *p, size_t B, float thr, oracle_out *o) {
    clover_session *s = new_session(m);
    if (!s) return;
    clover_generate_result r;
    clover_error err = {0};
    int rc = clover_generate(s, prompt, n, p, &r, &err);
    CHECK_MSG(rc == 0, "%s: %s", name, err.message);
    int orc = oracle(m, prompt, n, p, B, thr, o);
    CHECK_MSG(orc == 0, "%s: the oracle failed", name);
    if (rc == 0 && orc == 0) {
        size_t first = SIZE_MAX;
        for (size_t i = 0; i < r.n_generated && i < o->n; i++)
            if (r.ids[i] != o->ids[i]) {
                first = i;
                break;
            }
        CHECK_MSG(first == SIZE_MAX && r.n_generated == o->n, "%s: %zu tokens, the oracle %zu; first difference at %zu",
                  name, r.n_generated, o->n, first);
        CHECK_MSG((int)r.finish == o->finish, "%s: finish %s, the oracle %s", name, clover_finish_name(r.finish),
                  clover_finish_name(o->finish));
        CHECK_MSG(r.stats.passes == o->passes && r.stats.causal_steps == o->steps,
                  "%s: %zu passes and %zu causal steps, the oracle %zu and %zu", name, r.stats.passes,
                  r.stats.causal_steps, o->passes, o->steps);
        double wc = 0.0;
        for (size_t i = 0; i < r.n_generated && i < o->n && first == SIZE_MAX; i++) {
            double d = fabs((double)r.confidences[i] - (double)o->conf[i]);
            if (!(d <= wc)) wc = d;
        }
        CHECK_MSG(wc <= 1e-4, "%s: confidences off the oracle's by %.3g", name, wc);
        clover_generate_result_free(&r);
    }
    clover_session_free(s);
    COV.fb0 += o->fb0;
    COV.fbpos += o->fbpos;
    COV.runs += o->runs;
    COV.stop_in_block += o->stop_in_block;
    COV.len_in_block += o->len_in_block;
}

/* Random prompts, seeds, thresholds, block sizes; greedy and sampled. */
static void against_oracle(void) {
    memset(&COV, 0, sizeof COV);
    rng_state r;
    rng_seed(&r, 26);
    const uint32_t blocks[] = {4, 8, 16, 32};
    const float thrs[] = {0.0f, 0.01f, 0.03f, 0.06f, 0.2f, 1.0f};
    for (int seed = 0; seed < 24; seed++) {
        int32_t prompt[24];
        size_t n = 1 + rng_next(&r) % 20;
        for (size_t i = 0; i < n; i++) prompt[i] = (int32_t)(rng_next(&r) % 256);
        clover_generate_params p;
        clover_generate_params_init(&p);
        p.rule = CLOVER_RULE_CAUSAL;
        p.penalties = &NO_PEN;
        p.max_tokens = 3 + rng_next(&r) % 40;
        p.seed = (uint64_t)seed * 7919u + 3;
        p.temperature = seed % 2 ? 0.0f : (seed % 4 ? 1.0f : 0.7f);
        if (seed % 6 == 4) p.top_k = 8;
        if (seed % 6 == 2) p.top_p = 0.9f;
        p.block_size = blocks[rng_next(&r) % 4];
        const float thr = thrs[rng_next(&r) % 6];
        p.threshold = thr;
        int32_t suppress = 7;
        if (seed % 5 == 3) {
            p.suppress_ids = &suppress;
            p.n_suppress_ids = 1;
        }
        oracle_out o;
        char nm[96];
        snprintf(nm, sizeof nm, "seed %d (B %u, threshold %g, %s)", seed, p.block_size, (double)thr,
                 p.temperature > 0 ? "sampled" : "greedy");
        /* a stop inside a block: every third case, an extra stop id taken from the answer without it */
        if (seed % 3 == 1 && oracle(M, prompt, n, &p, p.block_size, thr, &o) == 0 && o.n > 2) {
            int32_t stop = -1;
            for (size_t i = 1; i < o.n && stop < 0; i++)
                if ((i + 1) % p.block_size != 0) stop = o.ids[i];
            static int32_t stop_id;
            stop_id = stop;
            if (stop >= 0) {
                p.stop_ids = &stop_id;
                p.n_stop_ids = 1;
            }
        }
        compare(nm, M, prompt, n, &p, p.block_size, thr, &o);
    }
    printf("     coverage: %zu fallbacks at row 0, %zu at a later row, %zu threshold runs, %zu stops and %zu "
           "max_tokens inside a block\n",
           COV.fb0, COV.fbpos, COV.runs, COV.stop_in_block, COV.len_in_block);
    CHECK_MSG(COV.fb0 > 0 && COV.fbpos > 0 && COV.runs > 0 && COV.stop_in_block > 0 && COV.len_in_block > 0,
              "the cases do not cover every branch");
}

/* The rule chosen by the record's clover.decode_rule, the param overriding it either way. */
static void by_record(void) {
    CHECK(M->record.decode_rule == CLOVER_RULE_THRESHOLD);
    CHECK(M_causal->record.decode_rule == CLOVER_RULE_CAUSAL);
    const int32_t prompt[] = {72, 101, 108, 108, 111};
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.penalties = &NO_PEN;
    p.max_tokens = 40;
    p.block_size = 8;
    p.threshold = 0.1f; /* a mix of threshold runs and fallbacks on this prompt */
    oracle_out o;
    compare("record: causal_fallback", M_causal, prompt, 5, &p, 8, 0.1f, &o); /* rule DEFAULT: the record's */
    CHECK_MSG(o.steps > 0 && o.runs > 0, "the case takes causal steps and threshold runs");
    p.rule = CLOVER_RULE_CAUSAL;
    compare("param: causal on a threshold record", M, prompt, 5, &p, 8, 0.1f, &o);
    /* the threshold rule: the record's on M, asked for on M_causal: the same answer, no causal steps */
    clover_generate_result a, b;
    clover_error err = {0};
    p.rule = CLOVER_RULE_DEFAULT;
    clover_session *s = new_session(M), *t = new_session(M_causal);
    CHECK(clover_generate(s, prompt, 5, &p, &a, &err) == 0);
    p.rule = CLOVER_RULE_THRESHOLD;
    CHECK(clover_generate(t, prompt, 5, &p, &b, &err) == 0);
    CHECK(a.stats.causal_steps == 0 && b.stats.causal_steps == 0);
    CHECK(a.n_generated == b.n_generated && !memcmp(a.ids, b.ids, a.n_generated * sizeof *a.ids));
    CHECK_MSG(a.n_generated != o.n || memcmp(a.ids, o.ids, o.n * sizeof *o.ids) != 0,
              "the case tells the two rules apart");
    clover_generate_result_free(&a);
    clover_generate_result_free(&b);
    clover_session_free(s);
    clover_session_free(t);
}

/* Bad values and the combinations the rule refuses or gives way in. */
static void choices(void) {
    const int32_t prompt[] = {72, 101, 108};
    clover_session *s = new_session(M_causal);
    clover_generate_params p;
    clover_generate_result r;
    clover_error err = {0};
    clover_generate_params_init(&p);
    p.max_tokens = 8;
    p.rule = (clover_rule)3;
    CHECK(clover_generate(s, prompt, 3, &p, &r, &err) == CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "rule 3") != NULL, "%s", err.message);
    p.rule = (clover_rule)-1;
    CHECK(clover_generate(s, prompt, 3, &p, &r, &err) == CLOVER_E_INVALID);
    p.rule = CLOVER_RULE_CAUSAL;
    p.lossless = 1;
    CHECK(clover_generate(s, prompt, 3, &p, &r, &err) == CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "lossless") != NULL, "%s", err.message);
    p.lossless = 0;
    p.json_schema = "{\"type\": \"object\"}";
    CHECK(clover_generate(s, prompt, 3, &p, &r, &err) == CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "json_schema") != NULL, "%s", err.message);
    p.json_schema = NULL;
    CHECK(clover_generate(s, prompt, 0, &p, &r, &err) == CLOVER_E_INVALID); /* no prompt: no logits for row 0 */
    /* the record's rule gives way under lossless and a schema: they run, with no causal steps */
    p.rule = CLOVER_RULE_DEFAULT;
    p.lossless = 1;
    int rc = clover_generate(s, prompt, 3, &p, &r, &err);
    CHECK_MSG(rc == 0, "lossless on a causal record: %s", err.message);
    if (!rc) {
        CHECK(r.stats.causal_steps == 0 && r.lossless);
        clover_generate_result_free(&r);
    }
    p.lossless = 0;
    p.json_schema = "{\"type\": \"object\"}";
    p.max_tokens = 4;
    rc = clover_generate(s, prompt, 3, &p, &r, &err);
    CHECK_MSG(rc == 0, "a schema on a causal record: %s", err.message);
    if (!rc) {
        CHECK(r.stats.causal_steps == 0);
        clover_generate_result_free(&r);
    }
    /* autoregressive decoding ignores the rule, as it ignores the threshold */
    p.json_schema = NULL;
    p.rule = CLOVER_RULE_CAUSAL;
    p.mode = CLOVER_MODE_AUTOREGRESSIVE;
    rc = clover_generate(s, prompt, 3, &p, &r, &err);
    CHECK_MSG(rc == 0, "--ar with the rule: %s", err.message);
    if (!rc) clover_generate_result_free(&r);
    clover_session_free(s);
}

/* The prompt wholly reused from the session (a follow-up request): row 0's fallback needs the kept logits. */
static void reuse(void) {
    const int32_t prompt[] = {10, 20, 30, 40, 50, 60};
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.rule = CLOVER_RULE_CAUSAL;
    p.penalties = &NO_PEN;
    p.block_size = 4;
    p.threshold = 1.0f; /* every row by the fallback: the answer is the causal path's */
    p.max_tokens = 0;
    clover_session *s = new_session(M);
    clover_generate_result r;
    clover_error err = {0};
    CHECK(clover_generate(s, prompt, 6, &p, &r, &err) == 0);
    clover_generate_result_free(&r);
    p.max_tokens = 12; /* three whole blocks */
    int rc = clover_generate(s, prompt, 6, &p, &r, &err);
    CHECK_MSG(rc == 0, "reused prompt: %s", err.message);
    oracle_out o;
    CHECK(oracle(M, prompt, 6, &p, 4, 1.0f, &o) == 0);
    if (!rc) {
        CHECK(r.stats.reused_tokens == 6);
        CHECK(r.n_generated == o.n && !memcmp(r.ids, o.ids, o.n * sizeof *o.ids));
        /* threshold 1: every row is a causal step, so the answer is --ar's too */
        clover_generate_params a = p;
        a.mode = CLOVER_MODE_AUTOREGRESSIVE;
        clover_generate_result ra;
        clover_session *t = new_session(M);
        CHECK(clover_generate(t, prompt, 6, &a, &ra, &err) == 0);
        CHECK(ra.n_generated == r.n_generated && !memcmp(ra.ids, r.ids, r.n_generated * sizeof *r.ids));
        CHECK(r.stats.causal_steps == r.n_generated);
        clover_generate_result_free(&ra);
        clover_session_free(t);
        clover_generate_result_free(&r);
    }
    clover_session_free(s);
}

/* Log-probabilities ride along: the same tokens, and each token's log-probability is the log of its
 * confidence (the T = 1 probability), the causal steps' included. */
static void logprobs(void) {
    const int32_t prompt[] = {72, 101, 108, 108, 111};
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.rule = CLOVER_RULE_CAUSAL;
    p.penalties = &NO_PEN;
    p.block_size = 8;
    p.threshold = 0.1f;
    p.max_tokens = 24;
    clover_session *s = new_session(M);
    clover_generate_result a, b;
    clover_error err = {0};
    CHECK(clover_generate(s, prompt, 5, &p, &a, &err) == 0);
    p.top_logprobs = 3;
    CHECK_MSG(clover_generate(s, prompt, 5, &p, &b, &err) == 0, "%s", err.message);
    CHECK(a.n_generated == b.n_generated && !memcmp(a.ids, b.ids, a.n_generated * sizeof *a.ids));
    CHECK(b.stats.causal_steps > 0 && b.logprobs);
    for (size_t i = 0; b.logprobs && i < b.n_generated; i++)
        CHECK_MSG(fabs((double)b.logprobs[i] - log((double)b.confidences[i])) < 1e-4 && b.top_ids[3 * i] == b.ids[i],
                  "token %zu: logprob %g, confidence %g, top id %d", i, (double)b.logprobs[i],
                  (double)b.confidences[i], b.top_ids[3 * i]);
    clover_generate_result_free(&a);
    clover_generate_result_free(&b);
    clover_session_free(s);
}

/* Requests stepped together on one engine (the server's scheduler): causal-rule requests beside a threshold one
 * and an autoregressive one; each causal one equals its oracle, the others their answers alone. */
static void batched(void) {
    clover_engine *e = NULL;
    clover_error err = {0};
    CHECK(clover_engine_create(&e, M, NULL, &err) == 0);
    if (!e) return;
    enum { N = 5 };
    clover_session *ss[N] = {0};
    clover_request *rq[N] = {0};
    clover_generate_params p[N];
    int32_t prompts[N][8];
    for (size_t i = 0; i < N; i++) {
        clover_generate_params_init(&p[i]);
        p[i].rule = i < 3 ? CLOVER_RULE_CAUSAL : CLOVER_RULE_THRESHOLD;
        p[i].mode = i == 4 ? CLOVER_MODE_AUTOREGRESSIVE : CLOVER_MODE_AUTO;
        p[i].penalties = &NO_PEN;
        p[i].block_size = i == 1 ? 4 : 8;
        p[i].threshold = i == 2 ? 0.03f : 0.1f;
        p[i].max_tokens = 20 + 3 * i;
        p[i].temperature = i == 2 ? 0.8f : 0.0f;
        p[i].seed = 100 + i;
        for (size_t k = 0; k < 8; k++) prompts[i][k] = (int32_t)(11 + 29 * i + 7 * k) % 256;
        CHECK(clover_engine_session_create(&ss[i], e, NULL, &err) == 0);
        CHECK_MSG(ss[i] && clover_request_create(&rq[i], ss[i], prompts[i], 8 - i, &p[i], &err) == 0, "%s",
                  err.message);
    }
    for (int guard = 0; guard < 10000 && clover_batch_step(rq, N) > 0; guard++) {
    }
    size_t steps = 0;
    for (size_t i = 0; i < N; i++) {
        clover_generate_result r;
        if (!rq[i] || clover_request_result(rq[i], &r, &err) != 0) {
            CHECK_MSG(0, "request %zu: %s", i, err.message);
            continue;
        }
        oracle_out o;
        if (i < 3) {
            CHECK(oracle(M, prompts[i], 8 - i, &p[i], p[i].block_size, p[i].threshold, &o) == 0);
        } else { /* alone, on a fresh session */
            clover_session *a = new_session(M);
            clover_generate_result ra;
            CHECK(a && clover_generate(a, prompts[i], 8 - i, &p[i], &ra, &err) == 0);
            o.n = ra.n_generated < MAXN ? ra.n_generated : MAXN;
            memcpy(o.ids, ra.ids, o.n * sizeof *o.ids);
            o.steps = 0;
            clover_generate_result_free(&ra);
            if (a) clover_session_free(a);
        }
        CHECK_MSG(r.n_generated == o.n && !memcmp(r.ids, o.ids, o.n * sizeof *o.ids) && r.stats.causal_steps == o.steps,
                  "batched request %zu: %zu tokens, %zu causal steps; expected %zu and %zu", i, r.n_generated,
                  r.stats.causal_steps, o.n, o.steps);
        steps += r.stats.causal_steps;
        clover_generate_result_free(&r);
    }
    CHECK_MSG(steps > 0, "the batched causal requests take causal steps");
    for (size_t i = 0; i < N; i++) {
        if (rq[i]) clover_request_free(rq[i]);
        if (ss[i]) clover_session_free(ss[i]);
    }
    clover_engine_free(e);
}

/* A copy of src with clover.decode_rule set to value (keys and tensors copied as they are). */
static int with_rule(const char *src, const char *dst, const char *value) {
    clover_error err = {0};
    gguf_file *f = NULL;
    if (gguf_open(&f, src, &err)) return -1;
    gguf_writer *w = gguf_writer_create();
    int rc = 0;
    for (size_t i = 0; i < gguf_kv_count(f) && !rc; i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        rc = gguf_writer_set_value(w, kv->key.str, &kv->value, &err);
    }
    gguf_value v = {.type = GGUF_VT_STRING};
    v.v.str = (gguf_string){(char *)value, strlen(value)};
    if (!rc) rc = gguf_writer_set_value(w, "clover.decode_rule", &v, &err);
    for (size_t i = 0; i < gguf_tensor_count(f) && !rc; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        rc = gguf_writer_add_tensor(w, t->name.str, t->n_dims, t->ne, t->type, &err);
    }
    if (!rc) rc = gguf_writer_begin(w, dst, &err);
    for (size_t i = 0; i < gguf_tensor_count(f) && !rc; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        rc = gguf_writer_write(w, t->data, (size_t)t->nbytes, &err);
    }
    if (!rc) rc = gguf_writer_finish(w, &err);
    if (rc) fprintf(stderr, "rewrite %s: %s\n", dst, err.message);
    gguf_writer_free(w);
    gguf_close(f);
    return rc;
}

/* The record key's load error names the key and the value. */
static void record_key_error(void) {
    char bad[160];
    snprintf(bad, sizeof bad, "%s/bad.gguf", dir);
    CHECK(with_rule(base_path, bad, "causal") == 0);
    clover_model *m = NULL;
    clover_error err = {0};
    CHECK(clover_model_load(&m, bad, &err) == CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "clover.decode_rule") && strstr(err.message, "'causal'"), "%s", err.message);
    if (m) clover_model_free(m);
    CHECK(with_rule(base_path, bad, "threshold") == 0);
    CHECK(clover_model_load(&m, bad, &err) == 0 && m->record.decode_rule == CLOVER_RULE_THRESHOLD);
    if (m) clover_model_free(m);
    unlink(bad);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/clover_causal_XXXXXX");
    if (!mkdtemp(dir)) return EXIT_FAILURE;
    snprintf(base_path, sizeof base_path, "%s/tiny.gguf", dir);
    snprintf(causal_path, sizeof causal_path, "%s/tiny_causal.gguf", dir);
    clover_synth_options so = {.preset = "tiny", .type = "f32", .seed = 5};
    clover_error err = {0};
    int rc = clover_synth(base_path, &so, &err);
    CHECK_MSG(rc == 0, "synth: %s", err.message);
    if (!rc) rc = with_rule(base_path, causal_path, "causal_fallback");
    if (!rc) rc = clover_model_load(&M, base_path, &err);
    if (!rc) rc = clover_model_load(&M_causal, causal_path, &err);
    CHECK_MSG(rc == 0, "load: %s", err.message);
    if (!rc && (O = new_session(M))) {
        RUN(against_oracle);
        RUN(by_record);
        RUN(choices);
        RUN(reuse);
        RUN(batched);
        RUN(logprobs);
        RUN(record_key_error);
        clover_session_free(O);
    }
    if (M) clover_model_free(M);
    if (M_causal) clover_model_free(M_causal);
    unlink(base_path);
    unlink(causal_path);
    rmdir(dir);
    return TEST_EXIT();
}
