/*
 * generate.c: clover_generate: validates a request against the model (every
 * override named in its own error line, SPEC.md 4), resolves the mode and
 * the effective record values, runs one of the two loops and settles the
 * session afterwards: a failed or cancelled request leaves nothing to
 * reuse (SPEC.md 3 item 4, reference DECISIONS 9).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "engine/request.h"
#include "engine/result_text.h"
#include "engine/stats.h"
#include "engine/structured.h"
#include "model/model.h"

#define GENERATE_DEFAULT_MAX_TOKENS 256

void clover_generate_params_init(clover_generate_params *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->mode = CLOVER_MODE_AUTO;
    p->max_tokens = GENERATE_DEFAULT_MAX_TOKENS;
    p->temperature = 0.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->threshold = -1.0f;
}

const char *clover_finish_name(int finish) {
    switch (finish) {
    case CLOVER_FINISH_STOP: return "stop";
    case CLOVER_FINISH_LENGTH: return "length";
    case CLOVER_FINISH_CANCELLED: return "cancelled";
    default: return "unknown";
    }
}

void clover_penalties_from_record(const clover_record *rec, clover_penalties *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    out->repetition_penalty = 1.0f;
    if (!rec) return;
    out->presence_penalty = rec->presence_penalty;
    out->frequency_penalty = rec->frequency_penalty;
    out->repetition_penalty = rec->repetition_penalty;
    out->length_penalty = rec->length_penalty;
    out->length_penalty_start = rec->length_penalty_start;
    out->length_penalty_window = rec->length_penalty_window;
    out->think_end_bias = rec->think_end_bias;
    out->think_end_start = rec->think_end_start;
    out->think_end_window = rec->think_end_window;
}

void clover_generate_result_free(clover_generate_result *r) {
    if (!r) return;
    mem_free(r->ids);
    mem_free(r->confidences);
    mem_free(r->passes_per_block);
    mem_free(r->accepted_per_block);
    mem_free(r->commits_per_block);
    mem_free(r->logprobs);
    mem_free(r->top_ids);
    mem_free(r->top_logprobs);
    free(r->text); /* the tokenizer's buffers are malloc'd */
    memset(r, 0, sizeof *r);
}

static int check_ids(const char *what, const int32_t *ids, size_t n, size_t n_vocab, clover_error *err) {
    if (n && !ids) return error_set(err, CLOVER_E_INVALID, "%s: %zu ids but a NULL array", what, n);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= n_vocab)
            return error_set(err, CLOVER_E_INVALID, "%s: entry %zu is id %d, expected 0..%zu", what, i, ids[i],
                             n_vocab - 1);
    return CLOVER_OK;
}

static int check_sampling(const clover_generate_params *p, clover_error *err) {
    if (!(p->temperature >= 0.0f) || isinf(p->temperature))
        return error_set(err, CLOVER_E_INVALID, "temperature %g: expected a finite value >= 0",
                         (double)p->temperature);
    if (p->top_k < 0) return error_set(err, CLOVER_E_INVALID, "top_k %d: expected >= 0 (0: off)", p->top_k);
    if (!(p->top_p >= 0.0f))
        return error_set(err, CLOVER_E_INVALID, "top_p %g: expected a value in (0, 1], or >= 1 for off",
                         (double)p->top_p);
    return CLOVER_OK;
}

static int check_penalties(const clover_penalties *q, clover_error *err) {
    const struct {
        const char *name;
        float v;
    } f[] = {{"presence_penalty", q->presence_penalty}, {"frequency_penalty", q->frequency_penalty},
             {"repetition_penalty", q->repetition_penalty}, {"length_penalty", q->length_penalty},
             {"think_end_bias", q->think_end_bias}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!isfinite(f[i].v))
            return error_set(err, CLOVER_E_INVALID, "penalties override: %s is %g, expected a finite value", f[i].name,
                             (double)f[i].v);
    if (!(q->repetition_penalty > 0.0f))
        return error_set(err, CLOVER_E_INVALID, "penalties override: repetition_penalty %g, expected > 0 (1: none)",
                         (double)q->repetition_penalty);
    return CLOVER_OK;
}

/* The block-diffusion values of this request: the record's or the
 * validated overrides. */
static int resolve_diffusion(engine_request *rq, clover_error *err) {
    const clover_record *rec = &rq->s->model->record;
    const clover_generate_params *p = rq->p;
    rq->threshold = rec->threshold;
    if (!(p->threshold < 0.0f)) {
        if (!(p->threshold >= 0.0f && p->threshold <= 1.0f))
            return error_set(err, CLOVER_E_INVALID, "threshold override %g: expected a value in [0, 1]",
                             (double)p->threshold);
        rq->threshold = p->threshold;
    }
    rq->block = rec->block_size;
    if (p->block_size) {
        if (rec->block_size % p->block_size != 0)
            return error_set(err, CLOVER_E_INVALID,
                             "block size override %u: expected a divisor of the record's block size %u",
                             p->block_size, rec->block_size);
        rq->block = p->block_size;
    }
    if (p->penalties) {
        int rc = check_penalties(p->penalties, err);
        if (rc) return rc;
        rq->pen.p = *p->penalties;
    } else {
        clover_penalties_from_record(rec, &rq->pen.p);
    }
    rq->pen.think_end_id = rec->think_end_token_id;
    /* the rule: the record's unless asked; lossless drafts and a grammar keep SPEC 3's (engine_request_setup) */
    rq->causal_rule = (p->rule == CLOVER_RULE_DEFAULT ? rec->decode_rule : p->rule) == CLOVER_RULE_CAUSAL;
    return CLOVER_OK;
}

/* The ids that end the answer in this request: the model's plus the extras. */
static void build_stop_map(clover_session *s, const clover_generate_params *p) {
    memset(s->is_stop, 0, s->n_vocab);
    for (size_t i = 0; i < s->n_stop_ids; i++)
        s->is_stop[s->stop_ids[i]] = 1;
    for (size_t i = 0; i < p->n_stop_ids; i++)
        s->is_stop[p->stop_ids[i]] = 1;
}

int engine_request_setup(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_result *out = rq->res;
    const clover_generate_params *p = rq->p;
    const clover_model *m = s->model;
    int rc;
    out->n_prompt = rq->n_prompt;
    out->finish = CLOVER_FINISH_LENGTH;
    out->mode = p->mode == CLOVER_MODE_AUTO
                    ? (m->has_record ? CLOVER_MODE_DIFFUSION : CLOVER_MODE_AUTOREGRESSIVE)
                    : p->mode;
    if (out->mode != CLOVER_MODE_DIFFUSION && out->mode != CLOVER_MODE_AUTOREGRESSIVE)
        return error_set(err, CLOVER_E_INVALID, "mode %d: expected auto, diffusion or autoregressive", (int)p->mode);
    if (out->mode == CLOVER_MODE_DIFFUSION && !m->has_record)
        return error_set(err, CLOVER_E_INVALID,
                         "block diffusion: the model has no block-diffusion record (clover.algorithm); "
                         "it runs autoregressive only");
    if ((rc = check_ids("prompt", rq->prompt, rq->n_prompt, s->n_vocab, err))) return rc;
    if ((rc = check_sampling(p, err))) return rc;
    if ((rc = check_ids("extra stop ids", p->stop_ids, p->n_stop_ids, s->n_vocab, err))) return rc;
    if ((rc = check_ids("suppressed ids", p->suppress_ids, p->n_suppress_ids, s->n_vocab, err))) return rc;
    if (p->rule != CLOVER_RULE_DEFAULT && p->rule != CLOVER_RULE_THRESHOLD && p->rule != CLOVER_RULE_CAUSAL)
        return error_set(err, CLOVER_E_INVALID, "rule %d: expected default (0), threshold (1) or causal (2)",
                         (int)p->rule);
    if (p->top_logprobs > CLOVER_MAX_TOP_LOGPROBS)
        return error_set(err, CLOVER_E_INVALID, "top_logprobs %zu: expected 0..%d", p->top_logprobs,
                         CLOVER_MAX_TOP_LOGPROBS);
    rq->want_lp = p->logprobs != 0 || p->top_logprobs > 0;
    rq->n_top = rq->want_lp ? p->top_logprobs : 0;
    out->n_top_logprobs = rq->n_top;
    rq->sp.temperature = p->temperature;
    rq->sp.top_k = p->top_k;
    rq->sp.top_p = p->top_p;
    rq->mask_id = m->has_record ? (int32_t)m->record.mask_token_id : -1;
    if (out->mode == CLOVER_MODE_DIFFUSION && (rc = resolve_diffusion(rq, err))) return rc;
    if (!sampler_is_greedy(&rq->sp) && (rc = engine_session_sampler_ready(s, err))) return rc;
    rq->forbid = mem_alloc((p->n_suppress_ids + 1) * sizeof *rq->forbid);
    if (!rq->forbid) return error_set(err, CLOVER_E_NOMEM, "generate: no memory for %zu suppressed ids",
                                      p->n_suppress_ids);
    rq->n_forbid = 0;
    if (rq->mask_id >= 0) rq->forbid[rq->n_forbid++] = rq->mask_id;
    for (size_t i = 0; i < p->n_suppress_ids; i++) rq->forbid[rq->n_forbid++] = p->suppress_ids[i];
    s->pick = (backend_pick){.temperature = p->temperature, .top_k = p->top_k, .top_p = p->top_p,
                             .forbid = rq->forbid, .n_forbid = rq->n_forbid, .n_top = rq->n_top};
    rng_seed(&rq->rng, p->seed);
    build_stop_map(s, p);
    penalty_state_reset(&s->pen);
    out->stats.prompt_tokens = rq->n_prompt;
    rq->ar = out->mode == CLOVER_MODE_AUTOREGRESSIVE;
    if (p->lossless) {
        if (rq->ar)
            return error_set(err, CLOVER_E_INVALID,
                             "lossless: needs block diffusion (a Clover model, mode auto or diffusion); "
                             "autoregressive decoding is already what it reproduces");
        if (!s->be->checkpoint_create || !s->be->checkpoint_save || !s->be->checkpoint_restore)
            return error_set(err, CLOVER_E_UNSUPPORTED, "lossless: the %s backend has no state checkpoints",
                             s->be->name);
        rq->lossless = true;
        out->lossless = 1;
        rng_seed(&rq->draft_rng, p->seed ^ 0x6c6f73736c657373ull); /* "lossless": the drafts' own stream */
    }
    if (rq->causal_rule && (p->lossless || p->json_schema)) {
        if (p->rule == CLOVER_RULE_CAUSAL) /* asked for: refused; the record's: gives way */
            return error_set(err, CLOVER_E_INVALID,
                             "rule causal: not with %s (its blocks are resolved by the threshold rule)",
                             p->lossless ? "lossless" : "a json_schema");
        rq->causal_rule = false;
    }
    if (rq->causal_rule && rq->n_prompt == 0)
        return error_set(err, CLOVER_E_INVALID, "rule causal: needs a prompt of at least one token "
                                                "(the first row's causal pick reads the prompt's last logits)");
    if (rq->causal_rule && (!s->be->checkpoint_create || !s->be->checkpoint_save || !s->be->checkpoint_restore))
        return error_set(err, CLOVER_E_UNSUPPORTED, "rule causal: the %s backend has no state checkpoints",
                         s->be->name);
    if ((rc = engine_grammar_setup(rq, err))) return rc;
    rq->phase = RQ_PROMPT;
    rq->prompt_at = SIZE_MAX;
    rq->snap_at = SIZE_MAX;
    return CLOVER_OK;
}

void engine_request_release(engine_request *rq) {
    engine_grammar_release(rq);
    mem_free(rq->forbid);
    rq->forbid = NULL;
    rq->n_forbid = 0;
}

int clover_generate(clover_session *s, const int32_t *prompt, size_t n_prompt, const clover_generate_params *params,
                    clover_generate_result *out, clover_error *err) {
    clover_error local; /* the codes travel through err: keep one even when the caller gives none */
    if (!err) err = &local;
    if (!s || !out) return error_set(err, CLOVER_E_INVALID, "clover_generate: session and out must not be NULL");
    memset(out, 0, sizeof *out);
    if (n_prompt && !prompt)
        return error_set(err, CLOVER_E_INVALID, "clover_generate: %zu prompt ids but a NULL array", n_prompt);
    if (s->active) return error_set(err, CLOVER_E_INVALID, "clover_generate: the session has a request running");
    clover_generate_params def;
    clover_generate_params_init(&def);
    engine_request rq = {.s = s, .prompt = prompt, .n_prompt = n_prompt, .p = params ? params : &def, .res = out};
    rq.t_start = timer_now();
    int rc = engine_request_setup(&rq, err);
    if (rc) { /* a rejected request leaves the session as it was */
        engine_request_release(&rq);
        clover_generate_result_free(out);
        return rc;
    }
    rc = engine_request_run(&rq, err);
    rc = engine_request_settle(&rq, rc, err);
    engine_request_release(&rq);
    return rc;
}
