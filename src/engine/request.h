/*
 * request.h: one generation request (internal): the parameters resolved
 * and validated against the model (generate.c), the random stream, the
 * growing result, and where it stands: a resumable state machine (prompt
 * chunk -> block -> pass -> ... -> commit -> done) whose every step plans
 * one backend operation and absorbs its result, so many requests can share
 * one backend call (batch.c) and clover_generate is a loop over one. The
 * two modes (generate_diffusion.c, generate_ar.c) share the emission rule
 * through request_emit, so stop ids, the streaming callback and
 * cancellation behave the same in both.
 */
#ifndef CLOVER_ENGINE_REQUEST_H
#define CLOVER_ENGINE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"
#include "clover.h"
#include "engine/logprobs.h"
#include "backend/penalties.h"
#include "backend/sampler.h"
#include "engine/session.h"

/* Where a request stands between passes (the resumable state machine). */
typedef enum request_phase {
    RQ_PROMPT = 0,   /* committing the prompt's tail, a chunk per pass */
    RQ_BLOCK,        /* diffusion: a new block of mask rows (pass 0 shown) */
    RQ_PASS,         /* diffusion: the next denoising pass of the block */
    RQ_COMMIT_BLOCK, /* diffusion: the resolved block is committed */
    RQ_DECODE,       /* autoregressive: emit the picked token, commit it */
    RQ_VERIFY,       /* lossless: the drafted block's verifying commit */
    RQ_RECOMMIT,     /* lossless: back to the block start, the accepted prefix committed again */
    RQ_CAUSAL,       /* causal rule: rows[0..f) committed for row f's causal pick (generate_causal.c) */
    RQ_DONE,
} request_phase;

/* The backend operation a request planned for its next pass. */
typedef enum request_op { RQ_OP_NONE = 0, RQ_OP_COMMIT, RQ_OP_PREVIEW, RQ_OP_RESOLVE } request_op;

typedef struct engine_request {
    clover_session *s;
    const int32_t *prompt;
    size_t n_prompt;
    const clover_generate_params *p;
    sampler_params sp;
    rng_state rng;
    int32_t mask_id;        /* forbidden in every row; -1 without a record */
    int32_t *forbid;        /* [n_forbid] the mask id and the suppressed ids */
    size_t n_forbid;
    /* block diffusion */
    float threshold;        /* the record's or the override */
    size_t block;           /* B of this request: the record's or a divisor of it */
    penalty_config pen;     /* the record's penalties or the override */
    /* the result being built */
    clover_generate_result *res;
    size_t cap_out, cap_blocks;

    /* the state machine */
    request_phase phase;
    request_op op;          /* planned for the pass being run */
    bool ar;                /* autoregressive */
    bool lossless;          /* block diffusion drafts, the causal trunk decides (generate_lossless.c) */
    rng_state draft_rng;    /* lossless: the drafts' draws (rng stays autoregressive decoding's) */
    bool lossless_begun;    /* lossless: the first token is known */
    size_t keep;            /* lossless: block rows that stay committed after the verify */
    bool lossless_ended;    /* lossless: the answer ended inside the verified block */
    bool causal_rule;       /* the causal-fallback rule (generate_causal.c) instead of SPEC 3's */
    bool c0_saved;          /* causal rule: the checkpoint holds this block's start */
    bool c0_last_valid;     /* causal rule: the session's kept logits were valid at the block start */
    size_t fb_row;          /* causal rule: the row the pending fallback fixes */
    size_t prompt_at;       /* next prompt row to commit (SIZE_MAX: the phase has not begun) */
    size_t snap_at;         /* the snapshot point (SIZE_MAX: none) */
    bool prompt_committed;  /* a prompt chunk was committed by this request */
    size_t passes;          /* diffusion: passes on the current block */
    size_t n_pending;
    bool first_preview_done;
    int32_t tok;            /* autoregressive: the token picked for emission */
    float tok_conf;
    float tok_u;
    /* log-probabilities (clover_generate_params.logprobs) */
    bool want_lp;           /* the result carries them */
    size_t n_top;           /* alternatives per token */
    float tok_lp_v;         /* autoregressive / lossless: the picked token's, */
    int32_t tok_top_id[BACKEND_MAX_TOP]; /* beside tok and tok_conf */
    float tok_top_lp[BACKEND_MAX_TOP];
    int32_t tok_commit;     /* autoregressive: the token being committed */
    struct engine_grammar *gm; /* structured output (structured.h); NULL: free text */
    double t_start;         /* when the request began */
    double t_op;            /* when the planned operation began */
    double *op_timer;       /* the statistic the planned operation's time goes to */
} engine_request;

/* Sets up a validated request (generate.c): rq->s, prompt, p and res set by
 * the caller; fills the rest and the result's fixed fields. */
int engine_request_setup(engine_request *rq, clover_error *err);
/* Releases what setup allocated (not the result). */
void engine_request_release(engine_request *rq);

/* Plans the request's next pass: host work up to the point where it needs
 * the backend, then rq->op says which operation it left in s->cseq /
 * s->pseq (RQ_OP_NONE: the request is done, phase RQ_DONE). */
int engine_request_plan(engine_request *rq, clover_error *err);
/* Takes the results of the planned operation (after the backend ran it,
 * alone or in a batch, with the call's stats). */
int engine_request_absorb(engine_request *rq, const backend_pass_stats *st, clover_error *err);
/* Runs the request alone to its end: plan, the backend call, absorb. */
int engine_request_run(engine_request *rq, clover_error *err);
/* Settles a finished or failed request (a failed or cancelled one leaves
 * nothing to reuse), its text and statistics. rc: the request's status. */
int engine_request_settle(engine_request *rq, int rc, clover_error *err);

/* The phase steps of the two modes (generate_diffusion.c, generate_ar.c). */
int engine_diffusion_plan(engine_request *rq, clover_error *err);
int engine_diffusion_absorb(engine_request *rq, const backend_pass_stats *st, clover_error *err);
int engine_ar_plan(engine_request *rq, clover_error *err);
int engine_ar_absorb(engine_request *rq, const backend_pass_stats *st, clover_error *err);
int engine_lossless_plan(engine_request *rq, clover_error *err);
int engine_lossless_absorb(engine_request *rq, const backend_pass_stats *st, clover_error *err);
/* The causal-fallback rule (generate_causal.c): a pass's fixes after the
 * preview (RQ_CAUSAL when the fallback needs a commit), and that phase. */
int engine_causal_fix(engine_request *rq, size_t *n_fixed, clover_error *err);
int engine_causal_plan(engine_request *rq, clover_error *err);
int engine_causal_absorb(engine_request *rq, const backend_pass_stats *st, clover_error *err);
/* A resolved block: counted, emitted, committed unless the answer ended (generate_diffusion.c). */
int engine_diffusion_block_end(engine_request *rq, clover_error *err);

/* The prompt phase (request.c): plans the next chunk (RQ_OP_COMMIT) or ends
 * the phase (*done); cancellation ends the request. */
int request_prompt_plan(engine_request *rq, bool *done, clover_error *err);
int request_prompt_absorb(engine_request *rq, const backend_pass_stats *st, clover_error *err);

/* Ends the request as cancelled (the session is forgotten when it settles). */
void request_cancel(engine_request *rq);

/* True when the caller's cancel flag is set. */
bool request_cancelled(const engine_request *rq);

/* Sets the forbidden ids of row [n_vocab] to -inf (the host pick). */
void request_forbid(const engine_request *rq, float *row);

/* Emits one token: appends it to the result (with row lpi of lp, its
 * log-probabilities, when the request wants them; lp may be NULL
 * otherwise); a stop id (unless ignore_eos) ends the answer with finish
 * "stop"; otherwise the callbacks see it and may end it with finish
 * "cancelled". *ended tells the loop to stop. */
int request_emit(engine_request *rq, int32_t id, float conf, const lp_rows *lp, size_t lpi, bool *ended,
                 clover_error *err);

/* The autoregressive token's log-probability slot (tok_lp_v, tok_top_*) as rows. */
lp_rows request_tok_lp(engine_request *rq);
/* Points the planned commit's picks at lp's rows (from row 0) when the
 * request wants log-probabilities. */
void request_lp_commit_out(engine_request *rq, const lp_rows *lp);
/* The log-probabilities of a host pick (a wholly reused prompt's first
 * token) from the forbidden row, into the token's slot. */
void request_lp_host(engine_request *rq, const float *row);

/* Shows the block being resolved to the caller's on_pass (if any) after
 * `passes` passes, n_fixed_now rows fixed by the last one; *cancel when the
 * callback asks to stop. */
void request_report_pass(engine_request *rq, size_t passes, size_t n_fixed_now, bool *cancel);

/* Records a resolved block's pass count. */
int request_push_block(engine_request *rq, uint32_t passes, clover_error *err);

/* Writes the parity dump (dump.c): the prompt ids and each of the b rows'
 * top-10 logit ids (value descending, ties: lower id) and values, as JSON. */
int engine_dump_first_preview(const char *path, const int32_t *prompt, size_t n_prompt, const float *logits,
                              size_t b, size_t n_vocab, clover_error *err);

#endif
