/*
 * test_lossless.c: lossless block diffusion (src/engine/generate_lossless.c)
 * against autoregressive decoding (--ar, itself golden-tested against the
 * reference on tiny_ar) with the same options and seed: every generation
 * fixture prompt of tiny_clover (their options, greedy and sampled), and
 * the tiny synthetic model, f32 and Q8_0, over many seeds of random
 * prompts, thresholds and block sizes, greedy and sampled. Per run: the
 * same tokens, finish, committed ids, confidences within 1e-4, and the
 * committed state (KV rows, GDN rings and states, exported) within a
 * relative 1e-4 of the state --ar left after committing the same tokens
 * row by row. The verify commits a block in one chunk where --ar commits
 * one row at a time, so the state differs in the last bits. On f32 weights
 * and the golden fixtures every token must be identical; with 8-bit
 * activations (Q8_0) the drift can be amplified by a rounding step, so the
 * flip rule (rule below) allows a first difference only at a near-tie of
 * --ar's pick (top-2 gap, or a sampled draw near a bucket edge, within the
 * stated bound); its oracle is tested on its own (flip_rule_oracle).
 */
#include "backend_test.h"
#include "base/rng.h"
#include "backend/sampler.h"
#include "engine/session.h"
#include "golden_generate.h"

static fixture fx;
static test_model tm;

typedef struct tally {
    size_t runs, tokens, blocks, accepted, recommits, flips;
    double worst_state, worst_conf;
} tally;
static tally T;

static clover_session *S_ar, *S_ll; /* the model's two sessions: --ar and lossless */

static clover_session *new_session(const clover_model *m) {
    clover_session *s = NULL;
    clover_error err = {0};
    int rc = clover_session_create(&s, m, NULL, &err);
    CHECK_MSG(rc == 0, "session: %s", err.message);
    return s;
}

/* max |a - b| / max |b| over the two sessions' exported states. */
static double state_diff(const clover_session *a, const clover_session *b, const char *name) {
    size_t na = a->be->state_bytes(a->bs), nb = b->be->state_bytes(b->bs);
    CHECK_MSG(na == nb, "%s: state of %zu bytes, --ar's %zu", name, na, nb);
    if (na != nb || na < 8) return na == nb ? 0.0 : INFINITY;
    unsigned char *x = malloc(na), *y = malloc(nb);
    clover_error err = {0};
    CHECK(a->be->state_export(a->bs, x, na, &err) == 0);
    CHECK(b->be->state_export(b->bs, y, nb, &err) == 0);
    CHECK(!memcmp(x, y, 8)); /* the committed length */
    double d = 0.0, m = 0.0;
    for (size_t i = 8; i + 4 <= na; i += 4) {
        float u, v;
        memcpy(&u, x + i, 4);
        memcpy(&v, y + i, 4);
        double e = fabs((double)u - (double)v);
        if (!(e <= d)) d = e;
        if (fabs((double)v) > m) m = fabs((double)v);
    }
    free(x);
    free(y);
    return m > 0.0 ? d / m : d;
}

/* How close lossless must stay to --ar on a model. bound 0: every token
 * identical (f32 weights: the reassociation drift is ~1e-6, far below any
 * margin these prompts have). bound > 0 (8-bit activations: a drift of
 * ~1e-7 can move an activation across a rounding step, so log-probabilities
 * drift by up to ~1e-2): the first token that differs must sit where --ar's
 * pick is a near-tie: greedy, --ar's top-2 log-probability gap <= bound;
 * sampled, the draw within bound of a bucket edge (the pick changes between
 * u - bound and u + bound over the row's replayed logits). The agreeing
 * tokens' log-confidences must stay within bound / 2 (so a gap above the
 * bound cannot close) and the state within state_tol. */
typedef struct rule {
    double bound, state_tol;
} rule;

static size_t first_difference(const clover_generate_result *a, const clover_generate_result *b) {
    const size_t n = a->n_generated < b->n_generated ? a->n_generated : b->n_generated;
    for (size_t i = 0; i < n; i++)
        if (a->ids[i] != b->ids[i]) return i;
    return a->n_generated == b->n_generated ? SIZE_MAX : n;
}

/* --ar's top-2 gap at token i (recorded with top_logprobs = 2). */
static double ar_margin(const clover_generate_result *ra, size_t i) {
    if (!ra->top_logprobs || ra->n_top_logprobs < 2 || i >= ra->n_generated) return INFINITY;
    return (double)ra->top_logprobs[2 * i] - (double)ra->top_logprobs[2 * i + 1];
}

/* Sampled: --ar's pick of token i with its draw moved by du. The row's
 * logits are replayed: prompt + answer[:i] committed on a fresh session
 * (one chunk: its own drift is within the bound too); the draw is the i-th
 * of the request's stream (token i takes draw i, as --ar). -1 on failure. */
static int32_t sampled_pick_at(const clover_model *m, const int32_t *prompt, size_t n, const clover_generate_params *p,
                               const clover_generate_result *ra, size_t at, double du) {
    int32_t *ids = malloc((n + at) * sizeof *ids), id = -1;
    clover_session *s = new_session(m);
    float *row = NULL;
    if (!ids || !s) goto out;
    memcpy(ids, prompt, n * sizeof *ids);
    memcpy(ids + n, ra->ids, at * sizeof *ids);
    clover_generate_params q = *p;
    q.mode = CLOVER_MODE_AUTOREGRESSIVE;
    q.max_tokens = 0; /* the prompt only: its last row's logits are kept */
    q.top_logprobs = 0;
    clover_generate_result r;
    clover_error err = {0};
    int rc = clover_generate(s, ids, n + at, &q, &r, &err);
    CHECK_MSG(rc == 0 && s->last_valid, "replay: %s", err.message);
    if (rc) goto out;
    clover_generate_result_free(&r);
    const size_t V = s->n_vocab;
    sampler_scratch sc;
    if (!(row = malloc(V * sizeof *row)) || sampler_scratch_init(&sc, V, &err)) goto out;
    memcpy(row, s->last_logits, V * sizeof *row);
    row[m->record.mask_token_id] = -INFINITY; /* forbidden as --ar forbids it */
    for (size_t k = 0; k < p->n_suppress_ids; k++) row[p->suppress_ids[k]] = -INFINITY;
    const sampler_params sp = {p->temperature, p->top_k, p->top_p};
    rng_state g;
    rng_seed(&g, p->seed);
    double u = 0.0;
    for (size_t k = 0; k <= at; k++) u = sampler_draw(&sp, &g);
    u = (double)(float)u + du; /* the commit takes the draw as a float */
    float c;
    CHECK(sampler_pick(&sp, row, V, u < 0.0 ? 0.0 : u < 1.0 ? u : 0.999999, &sc, &id, &c, &err) == 0);
    sampler_scratch_free(&sc);
out:
    free(row);
    free(ids);
    if (s) clover_session_free(s);
    return id;
}

static bool sampled_near_tie(const clover_model *m, const int32_t *prompt, size_t n, const clover_generate_params *p,
                             const clover_generate_result *ra, size_t at, double bound) {
    return sampled_pick_at(m, prompt, n, p, ra, at, -bound) != sampled_pick_at(m, prompt, n, p, ra, at, bound);
}

/* Runs the request twice, --ar and lossless, on fresh sessions and compares. */
static void compare(const char *name, const clover_model *m, const int32_t *prompt, size_t n,
                    const clover_generate_params *p, const rule *ru) {
    clover_generate_params ar = *p, ll = *p;
    ar.mode = CLOVER_MODE_AUTOREGRESSIVE;
    ar.penalties = NULL; /* --ar applies none; the drafts keep the request's */
    ar.top_logprobs = 2; /* the margins (the tokens are the same either way) */
    ll.mode = CLOVER_MODE_AUTO;
    ll.lossless = 1;
    clover_session *sa = S_ar, *sl = S_ll; /* reused (reset): a session prepares its backend once */
    clover_session_reset(sa);
    clover_session_reset(sl);
    clover_generate_result ra, rl;
    clover_error err = {0};
    int rc = clover_generate(sa, prompt, n, &ar, &ra, &err);
    CHECK_MSG(rc == 0, "%s (--ar): %s", name, err.message);
    int rc2 = rc == 0 ? clover_generate(sl, prompt, n, &ll, &rl, &err) : -1;
    CHECK_MSG(rc != 0 || rc2 == 0, "%s (lossless): %s", name, err.message);
    if (rc || rc2) {
        if (!rc) clover_generate_result_free(&ra);
        return;
    }
    CHECK_MSG(rl.lossless == 1 && rl.mode == CLOVER_MODE_DIFFUSION, "%s: ran lossless diffusion", name);
    const size_t at = first_difference(&rl, &ra);
    size_t bad = 0;
    double wc = 0.0;
    for (size_t i = 0; i < ra.n_generated && i < rl.n_generated && i < at; i++) {
        double d = ru->bound > 0 ? fabs(log((double)rl.confidences[i]) - log((double)ra.confidences[i]))
                                 : fabs((double)rl.confidences[i] - (double)ra.confidences[i]);
        if (!(d <= wc)) wc = d;
    }
    if (at != SIZE_MAX && ru->bound > 0) { /* the flip rule */
        const bool greedy = !(p->temperature >= 1e-6f);
        const double mg = ar_margin(&ra, at);
        const bool tie = greedy ? mg <= ru->bound : sampled_near_tie(m, prompt, n, p, &ra, at, ru->bound);
        CHECK_MSG(tie, "%s: token %zu is %d, --ar's %d, where --ar's pick is no near-tie (top-2 gap %.3g, bound %g)",
                  name, at, at < rl.n_generated ? rl.ids[at] : -1, at < ra.n_generated ? ra.ids[at] : -1, mg,
                  ru->bound);
        CHECK_MSG(wc <= ru->bound / 2, "%s: log-confidence off --ar's by %.3g before the flip", name, wc);
        printf("     %s: a near-tie flip at token %zu (%s, --ar's top-2 gap %.3g)\n", name, at,
               greedy ? "greedy" : "sampled", mg);
        T.flips++;
        if (wc > T.worst_conf) T.worst_conf = wc;
        clover_generate_result_free(&ra);
        clover_generate_result_free(&rl);
        return;
    }
    if (at != SIZE_MAX) {
        bad = 1;
        fprintf(stderr, "  %s: token %zu is %d, --ar %d\n", name, at, at < rl.n_generated ? rl.ids[at] : -1,
                at < ra.n_generated ? ra.ids[at] : -1);
    }
    CHECK_MSG(bad == 0, "%s: tokens differ from --ar", name);
    CHECK_MSG(rl.n_generated == ra.n_generated, "%s: %zu tokens, --ar %zu", name, rl.n_generated, ra.n_generated);
    CHECK_MSG(wc <= (ru->bound > 0 ? ru->bound / 2 : 1e-4), "%s: confidence off --ar's by %.3g", name, wc);
    CHECK_MSG(rl.finish == ra.finish, "%s: finish %s, --ar %s", name, clover_finish_name(rl.finish),
              clover_finish_name(ra.finish));
    CHECK_MSG(rl.committed_after == ra.committed_after, "%s: committed %zu after, --ar %zu", name,
              rl.committed_after, ra.committed_after);
    size_t la = clover_session_length(sa);
    CHECK(clover_session_length(sl) == la);
    if (clover_session_length(sl) == la)
        CHECK_MSG(!memcmp(clover_session_ids(sl), clover_session_ids(sa), la * sizeof(int32_t)),
                  "%s: committed ids differ from --ar's", name);
    double ds = state_diff(sl, sa, name);
    CHECK_MSG(ds <= ru->state_tol, "%s: committed state off --ar's by %.3g (relative)", name, ds);
    /* per-block statistics add up */
    size_t emitted = 0;
    for (size_t b = 0; b < rl.n_blocks; b++) {
        emitted += rl.accepted_per_block[b];
        CHECK(rl.commits_per_block[b] == 1 || rl.commits_per_block[b] == 2);
        T.recommits += rl.commits_per_block[b] == 2;
    }
    CHECK_MSG(emitted == rl.n_generated || emitted + 1 == rl.n_generated || rl.n_generated == 0,
              "%s: blocks emitted %zu of %zu tokens", name, emitted, rl.n_generated);
    CHECK(rl.stats.accepted_drafts + rl.n_blocks == emitted);
    T.runs++;
    T.tokens += rl.n_generated;
    T.blocks += rl.n_blocks;
    T.accepted += rl.stats.accepted_drafts;
    if (ds > T.worst_state) T.worst_state = ds;
    if (wc > T.worst_conf) T.worst_conf = wc;
    clover_generate_result_free(&ra);
    clover_generate_result_free(&rl);
}

static const rule STRICT = {0.0, 1e-4};

static void fixture_prompts(void) {
    json_t *cases = json_object_get(fx.manifest, "generate"), *c;
    size_t i;
    CHECK(json_array_size(cases) > 0);
    memset(&T, 0, sizeof T);
    S_ar = new_session(tm.model);
    S_ll = new_session(tm.model);
    if (!S_ar || !S_ll) return;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        golden_request g;
        golden_request_init(&g, tm.model, json_object_get(c, "prompt_ids"), json_object_get(c, "options"),
                            json_object_get(c, "record_overrides"));
        compare(name, tm.model, g.prompt, g.n_prompt, &g.p, &STRICT);
        /* the same prompt sampled, and greedy with the lowest threshold */
        char nm[96];
        clover_generate_params q = g.p;
        q.temperature = 0.9f;
        q.seed = 1000 + i;
        if (q.max_tokens > 12) q.max_tokens = 12; /* the variants: CI time */
        snprintf(nm, sizeof nm, "%s sampled", name);
        compare(nm, tm.model, g.prompt, g.n_prompt, &q, &STRICT);
        q = g.p;
        q.threshold = 0.0f;
        if (q.max_tokens > 12) q.max_tokens = 12;
        snprintf(nm, sizeof nm, "%s threshold 0", name);
        compare(nm, tm.model, g.prompt, g.n_prompt, &q, &STRICT);
        golden_request_free(&g);
    }
    printf("     fixture: %zu runs, %zu tokens, %zu blocks, %zu drafts accepted, %zu recommits; "
           "worst state diff %.2g, confidence %.2g\n",
           T.runs, T.tokens, T.blocks, T.accepted, T.recommits, T.worst_state, T.worst_conf);
    clover_session_free(S_ar);
    clover_session_free(S_ll);
}

/* Many seeds of random prompts on the tiny synthetic model, of one type. */
static void synthetic_seeds_of(const char *type, const rule *ru, int n_seeds) {
    char dir[] = "/tmp/clover_lossless_XXXXXX", path[96];
    if (!mkdtemp(dir)) {
        CHECK_MSG(0, "mkdtemp failed");
        return;
    }
    snprintf(path, sizeof path, "%s/tiny.gguf", dir);
    clover_synth_options so = {.preset = "tiny", .type = type, .seed = 5};
    clover_error err = {0};
    clover_model *m = NULL;
    int rc = clover_synth(path, &so, &err);
    CHECK_MSG(rc == 0, "synth: %s", err.message);
    if (!rc) rc = clover_model_load(&m, path, &err);
    CHECK_MSG(rc == 0, "load: %s", err.message);
    if (!rc) {
        const uint32_t B = m->record.block_size;
        memset(&T, 0, sizeof T);
        S_ar = new_session(m);
        S_ll = new_session(m);
        rng_state r;
        rng_seed(&r, 42);
        for (int seed = 0; seed < n_seeds; seed++) {
            int32_t prompt[24];
            size_t n = 1 + rng_next(&r) % 24;
            for (size_t i = 0; i < n; i++) prompt[i] = (int32_t)(rng_next(&r) % 256); /* byte tokens */
            clover_generate_params p;
            clover_generate_params_init(&p);
            p.max_tokens = 4 + rng_next(&r) % 20;
            p.seed = (uint64_t)seed * 7919u;
            p.temperature = seed % 2 ? 0.0f : (seed % 4 ? 1.0f : 0.7f);
            if (seed % 6 == 4) p.top_k = 8;
            if (seed % 6 == 2) p.top_p = 0.9f;
            const float th[] = {0.0f, 0.3f, -1.0f}; /* the record's needs the most passes */
            p.threshold = th[seed % 3];
            if (seed % 5 == 3 && B % 4 == 0) p.block_size = 4;
            if (seed % 7 == 5 && B % 2 == 0) p.block_size = 2;
            p.ignore_eos = seed % 4 == 1;
            char nm[48];
            snprintf(nm, sizeof nm, "synthetic %s seed %d", type, seed);
            compare(nm, m, prompt, n, &p, ru);
        }
        printf("     synthetic %s: %zu runs, %zu tokens, %zu blocks, %zu drafts accepted, %zu recommits, %zu near-tie "
               "flips; worst state diff %.2g, confidence %.2g\n",
               type, T.runs, T.tokens, T.blocks, T.accepted, T.recommits, T.flips, T.worst_state, T.worst_conf);
        clover_session_free(S_ar);
        clover_session_free(S_ll);
    }
    clover_model_free(m);
    unlink(path);
    rmdir(dir);
}

static void synthetic_seeds(void) { synthetic_seeds_of("f32", &STRICT, 16); }

/* 8-bit activations: the flip rule (see rule). */
static void synthetic_seeds_q8_0(void) {
    const rule q8 = {0.1, 1e-2};
    synthetic_seeds_of("q8_0", &q8, 8); /* CI time: the first 8 seeds cover every option */
}

/* The flip rule's own oracle, which the runs above never need on these
 * models (no pick of theirs is a near-tie): the replayed sampled pick at
 * --ar's draw is --ar's token at every row (the replay has the right logits
 * and draw), a draw moved by 1e-9 is no tie, and moved across the whole
 * interval it is; the greedy gap is the recorded top-2 difference. */
static void flip_rule_oracle(void) {
    json_t *c = json_array_get(json_object_get(fx.manifest, "generate"), 0);
    golden_request g;
    golden_request_init(&g, tm.model, json_object_get(c, "prompt_ids"), json_object_get(c, "options"),
                        json_object_get(c, "record_overrides"));
    clover_generate_params p = g.p;
    p.mode = CLOVER_MODE_AUTOREGRESSIVE;
    p.penalties = NULL;
    p.temperature = 1.0f;
    p.seed = 77;
    p.max_tokens = 4;
    p.top_logprobs = 2;
    clover_session *s = new_session(tm.model);
    clover_generate_result ra;
    clover_error err = {0};
    int rc = s ? clover_generate(s, g.prompt, g.n_prompt, &p, &ra, &err) : -1;
    CHECK_MSG(rc == 0, "--ar: %s", err.message);
    if (!rc) {
        size_t ties = 0;
        for (size_t i = 0; i < ra.n_generated; i++) {
            CHECK_MSG(sampled_pick_at(tm.model, g.prompt, g.n_prompt, &p, &ra, i, 0.0) == ra.ids[i],
                      "token %zu: the replayed pick is not --ar's %d", i, ra.ids[i]);
            CHECK_MSG(!sampled_near_tie(tm.model, g.prompt, g.n_prompt, &p, &ra, i, 1e-9), "token %zu: a tie at 1e-9", i);
            ties += sampled_near_tie(tm.model, g.prompt, g.n_prompt, &p, &ra, i, 1.0);
            const double mg = ar_margin(&ra, i);
            CHECK_MSG(mg >= 0.0 && mg < INFINITY, "token %zu: top-2 gap %g", i, mg);
        }
        CHECK_MSG(ties == ra.n_generated, "%zu of %zu rows change their pick over the whole draw interval", ties,
                  ra.n_generated);
        clover_generate_result_free(&ra);
    }
    if (s) clover_session_free(s);
    golden_request_free(&g);
}

/* A Clover request only: --ar with lossless is refused, one line. */
static void refuses_autoregressive(void) {
    clover_session *s = new_session(tm.model);
    if (!s) return;
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.mode = CLOVER_MODE_AUTOREGRESSIVE;
    p.lossless = 1;
    int32_t prompt[] = {1, 2, 3};
    clover_generate_result r;
    clover_error err = {0};
    int rc = clover_generate(s, prompt, 3, &p, &r, &err);
    CHECK_EQ_INT(rc, CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "lossless") != NULL, "message: %s", err.message);
    clover_session_free(s);
}

int main(void) {
    if (fixture_open(&fx, "tiny_clover")) return TEST_EXIT();
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) {
        RUN(fixture_prompts);
        RUN(synthetic_seeds);
        RUN(synthetic_seeds_q8_0);
        RUN(flip_rule_oracle);
        RUN(refuses_autoregressive);
    }
    test_model_free(&tm);
    fixture_close(&fx);
    return TEST_EXIT();
}
