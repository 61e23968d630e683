/*
 * session.c: sessions: the committed ids beside the backend's state, prefix
 * reuse (SPEC.md 3 step 1, reference DECISIONS 9) from the committed ids or
 * the prompt snapshot (snapshot.h), and the scratch of every request,
 * allocated once here so the per-pass loops allocate nothing.
 *
 * Invariant: the backend session holds exactly n_ids committed rows. Any
 * failed commit forgets the sequence, so a failure can never leave ids and
 * backend state out of step.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "engine/session.h"
#include "engine/structured.h"
#include "engine/stop_ids.h"
#include "model/model.h"
#include "offload/expert_host_cpu.h"

/* Rows per pass when neither the caller nor the backend (backend_ops.default_rows) says. */
#define SESSION_DEFAULT_ROWS 64
#define SESSION_DEFAULT_SNAPSHOT_BYTES ((size_t)1 << 30)

void clover_session_params_init(clover_session_params *p) {
    if (p) memset(p, 0, sizeof *p);
}

static void session_free_buffers(clover_session *s) {
    mem_free(s->ids);
    mem_free(s->last_logits);
    mem_free(s->stop_ids);
    mem_free(s->logits);
    mem_free(s->row);
    mem_free(s->is_stop);
    mem_free(s->block);
    mem_free(s->block_conf);
    mem_free(s->pending);
    mem_free(s->pick_id);
    mem_free(s->pick_conf);
    mem_free(s->pick_u);
    mem_free(s->pen_counts);
    mem_free(s->view_fixed);
    mem_free(s->rblock);
    mem_free(s->rec_guess);
    mem_free(s->rec_conf);
    mem_free(s->fixed_at);
    lp_rows_free(&s->pick_lp);
    lp_rows_free(&s->block_lp);
    engine_snapshot_free(&s->snap);
    penalty_state_free(&s->pen);
    if (s->samp_ready) sampler_scratch_free(&s->samp);
}

void clover_session_free(clover_session *s) {
    if (!s) return;
    if (s->ckpt) s->be->checkpoint_free(s->ckpt);
    engine_grammar_vocab_free(s->gvocab);
    if (s->bs) s->be->session_free(s->bs);
    if (s->own_bk && s->bk) s->be->destroy(s->bk);
    session_free_buffers(s);
    mem_free(s);
}

static int session_alloc(clover_session *s, clover_error *err) {
    size_t v = s->n_vocab, b = s->max_block ? s->max_block : 1, nb;
    if (!mem_mul_ok(v, b, &nb)) return error_set(err, CLOVER_E_NOMEM, "session: %zu x %zu logits overflow", b, v);
    s->last_logits = mem_calloc(v, sizeof(float));
    s->row = mem_calloc(v, sizeof(float));
    s->is_stop = mem_calloc(v, 1);
    s->logits = s->max_block ? mem_calloc(nb, sizeof(float)) : NULL;
    s->block = mem_calloc(b, sizeof *s->block);
    s->block_conf = mem_calloc(b, sizeof *s->block_conf);
    s->pending = mem_calloc(b, 1);
    s->pick_id = mem_calloc(b, sizeof *s->pick_id);
    s->pick_conf = mem_calloc(b, sizeof *s->pick_conf);
    s->pick_u = mem_calloc(b, sizeof *s->pick_u);
    s->pen_counts = mem_calloc(v, sizeof *s->pen_counts);
    s->view_fixed = mem_calloc(b, 1);
    if (!s->last_logits || !s->row || !s->is_stop || (s->max_block && !s->logits) || !s->block || !s->block_conf ||
        !s->pending || !s->pick_id || !s->pick_conf || !s->pick_u || !s->pen_counts || !s->view_fixed)
        return error_set(err, CLOVER_E_NOMEM, "session: no memory for the scratch of a %zu-row block over %zu ids",
                         b, v);
    s->rblock = mem_calloc(b, sizeof *s->rblock);
    s->rec_guess = mem_calloc(b * b, sizeof *s->rec_guess);
    s->rec_conf = mem_calloc(b * b, sizeof *s->rec_conf);
    s->fixed_at = mem_calloc(b, 1);
    if (!s->rblock || !s->rec_guess || !s->rec_conf || !s->fixed_at)
        return error_set(err, CLOVER_E_NOMEM, "session: no memory for the record of a %zu-row block", b);
    int rc;
    if ((rc = lp_rows_alloc(&s->pick_lp, b, err)) || (rc = lp_rows_alloc(&s->block_lp, b, err))) return rc;
    if ((rc = penalty_state_init(&s->pen, v, err))) return rc;
    return engine_stop_ids_build(s->model, &s->stop_ids, &s->n_stop_ids, err);
}

bool engine_eager_logits(void) { return getenv("CLOVER_ENGINE_EAGER_LOGITS") != NULL; }

int engine_session_sampler_ready(clover_session *s, clover_error *err) {
    if (s->samp_ready) return CLOVER_OK;
    int rc = sampler_scratch_init(&s->samp, s->n_vocab, err);
    if (!rc) s->samp_ready = true;
    return rc;
}

void engine_backend_config(const clover_model *model, const clover_session_params *params, const backend_ops *ops,
                           backend_config *cfg) {
    size_t rows = params->max_rows ? params->max_rows : ops && ops->default_rows ? ops->default_rows : SESSION_DEFAULT_ROWS;
    /* --gpu-mem: each prompt chunk sweeps the routed experts over the host link (a 64-row chunk touches most of
     * a layer's experts, as a 512-row one does), so the default chunk is 512 rows: 8x fewer sweeps a prompt */
    if (params->gpu_mem && !params->max_rows) rows = 512;
    size_t block = model->has_record ? model->record.block_size : 0;
    /* --gpu-mem: the CPU's MoE as the host the device may hand misses to (opened only under CLOVER_GPU_MEM_CPU) */
    *cfg = (backend_config){.n_threads = params->n_threads, .max_rows = rows < block ? block : rows,
                            .max_context = params->max_context, .gpu_mem = params->gpu_mem,
                            .expert_host_open = params->gpu_mem ? expert_host_cpu_open : NULL};
}

int engine_session_create(clover_session **out, const clover_model *model, const backend_ops *be,
                          const clover_session_params *params, clover_error *err) {
    return engine_session_create_on(out, model, be, NULL, params, err);
}

int engine_session_create_on(clover_session **out, const clover_model *model, const backend_ops *be, backend *bk,
                             const clover_session_params *params, clover_error *err) {
    clover_error local; /* the codes travel through err: keep one even when the caller gives none */
    if (!err) err = &local;
    if (!out) return error_set(err, CLOVER_E_INVALID, "clover_session_create: out must not be NULL");
    *out = NULL;
    if (!model) return error_set(err, CLOVER_E_INVALID, "clover_session_create: model must not be NULL");
    if (!be) return error_set(err, CLOVER_E_INVALID, "clover_session_create: no backend");
    if (model->hp.n_vocab == 0) return error_set(err, CLOVER_E_INVALID, "clover_session_create: model has no vocabulary");
    clover_session_params def;
    clover_session_params_init(&def);
    if (!params) params = &def;

    clover_session *s = mem_calloc(1, sizeof *s);
    if (!s) return error_set(err, CLOVER_E_NOMEM, "clover_session_create: no memory");
    s->model = model;
    s->be = be;
    s->n_vocab = model->hp.n_vocab;
    s->max_block = model->has_record ? model->record.block_size : 0;
    backend_config cfg;
    engine_backend_config(model, params, be, &cfg);
    s->max_rows = cfg.max_rows;
    s->max_context = cfg.max_context ? cfg.max_context : model->hp.n_ctx_train;
    s->snapshot_on = !params->no_snapshot;
    s->snapshot_max_bytes = params->snapshot_max_bytes ? params->snapshot_max_bytes : SESSION_DEFAULT_SNAPSHOT_BYTES;

    int rc = session_alloc(s, err);
    if (!rc && !bk) {
        rc = be->create(model, &cfg, &bk, err);
        if (rc) error_prefix(err, "session on the %s backend", be->name);
        else s->own_bk = true;
    }
    s->bk = bk;
    if (!rc && be->max_rows(bk) < s->max_rows)
        rc = error_set(err, CLOVER_E_INVALID, "session: %zu rows per pass, but the %s backend takes %zu", s->max_rows,
                       be->name, be->max_rows(bk));
    if (!rc) {
        rc = be->session_create(bk, &s->bs, err);
        if (rc) error_prefix(err, "session on the %s backend", be->name);
    }
    if (!rc && be->last_logits) {
        clover_error e2 = {0};
        s->keeps_last = be->last_logits(s->bs, NULL, &e2) == CLOVER_OK;
    }
    if (rc) {
        clover_session_free(s);
        return rc;
    }
    *out = s;
    return CLOVER_OK;
}

void engine_session_forget(clover_session *s) {
    s->be->reset(s->bs);
    s->n_ids = 0;
    s->last_valid = false;
}

void clover_session_reset(clover_session *s) {
    if (!s) return;
    engine_session_forget(s);
    engine_snapshot_drop(&s->snap);
}

size_t clover_session_length(const clover_session *s) { return s ? s->n_ids : 0; }

const int32_t *clover_session_ids(const clover_session *s) { return s ? s->ids : NULL; }

size_t clover_session_snapshot_length(const clover_session *s) { return s && s->snap.valid ? s->snap.n_ids : 0; }

const int32_t *clover_session_snapshot_ids(const clover_session *s) {
    return s && s->snap.valid ? s->snap.ids : NULL;
}

/* The committed ids' reuse of prompt[0..n): their length when a prefix. */
static size_t session_committed_match(const clover_session *s, const int32_t *prompt, size_t n) {
    if (s->n_ids > 0 && s->n_ids <= n && !memcmp(s->ids, prompt, s->n_ids * sizeof *prompt)) return s->n_ids;
    return 0;
}

size_t clover_session_match(const clover_session *s, const int32_t *prompt, size_t n) {
    if (!s || (n && !prompt)) return 0;
    size_t a = session_committed_match(s, prompt, n), b = engine_snapshot_match(&s->snap, prompt, n);
    return a > b ? a : b;
}

int engine_session_reserve(clover_session *s, size_t extra, clover_error *err) {
    size_t need;
    if (!mem_add_ok(s->n_ids, extra, &need)) return error_set(err, CLOVER_E_INVALID, "session: sequence too long");
    if (need <= s->cap_ids) return CLOVER_OK;
    size_t cap = s->cap_ids ? s->cap_ids : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    int32_t *v = mem_calloc(cap, sizeof *v);
    if (!v) return error_set(err, CLOVER_E_NOMEM, "session: no memory for %zu committed ids", cap);
    if (s->n_ids) memcpy(v, s->ids, s->n_ids * sizeof *v);
    mem_free(s->ids);
    s->ids = v;
    s->cap_ids = cap;
    return CLOVER_OK;
}

int engine_session_plan_commit(clover_session *s, const int32_t *ids, size_t n, bool want_logits,
                               const backend_pick *pick, const float *u, int32_t *id, float *conf,
                               clover_op_seconds *ops, clover_error *err) {
    int rc = engine_session_reserve(s, n, err);
    if (rc) {
        engine_session_forget(s);
        return rc;
    }
    backend_commit_seq *q = &s->cseq;
    memset(q, 0, sizeof *q);
    q->s = s->bs;
    q->ids = ids;
    q->n = n;
    q->last_logits = want_logits ? s->last_logits : NULL;
    if (pick) {
        q->pick = pick;
        q->n_pick = 1;
        q->u = u;
        q->pick_out.id = id;
        q->pick_out.conf = conf;
    }
    s->last_valid = false; /* until the commit is done */
    s->commit_ops = ops;
    return CLOVER_OK;
}

int engine_session_commit_done(clover_session *s, const backend_pass_stats *st, clover_error *err) {
    backend_commit_seq *q = &s->cseq;
    if (q->rc) {
        *err = q->err;
        engine_session_forget(s);
        return q->rc;
    }
    memcpy(s->ids + s->n_ids, q->ids, q->n * sizeof *q->ids);
    s->n_ids += q->n;
    s->last_valid = q->last_logits != NULL;
    engine_ops_add(s->commit_ops, st);
    size_t have = s->be->session_length(s->bs);
    if (have != s->n_ids) {
        engine_session_forget(s);
        return error_set(err, CLOVER_E_INTERNAL, "session: the %s backend holds %zu rows after a commit, expected %zu",
                         s->be->name, have, s->n_ids);
    }
    return CLOVER_OK;
}

/* Puts the snapshot (which holds prompt[0..m)) back as the committed
 * sequence. A failure only costs the reuse: the snapshot is dropped and the
 * sequence forgotten, and the prompt is committed afresh. */
static size_t session_restore_snapshot(clover_session *s, const int32_t *prompt, size_t m) {
    clover_error local = {0};
    engine_session_forget(s);
    int rc = engine_session_reserve(s, m, &local);
    if (!rc) rc = engine_snapshot_restore(&s->snap, s->be, s->bs, &local);
    if (!rc && s->be->session_length(s->bs) != m) rc = CLOVER_E_INTERNAL;
    if (rc) {
        engine_snapshot_drop(&s->snap);
        engine_session_forget(s);
        return 0;
    }
    memcpy(s->ids, prompt, m * sizeof *prompt);
    s->n_ids = m;
    return m;
}

/* Where this request takes its prompt snapshot: a prompt length in
 * [reuse, n], or SIZE_MAX for none (off, already held, or redundant with
 * the ids the request leaves committed). */
static size_t session_snapshot_point(const clover_session *s, const int32_t *prompt, size_t n, size_t reuse,
                                     const clover_generate_params *p) {
    if (!s->snapshot_on || p->no_snapshot || n == 0) return SIZE_MAX;
    size_t at = p->snapshot_at && p->snapshot_at < n ? p->snapshot_at : n;
    if (at < reuse || at == 0) return SIZE_MAX;              /* the sequence is already past it */
    if (at == n && p->max_tokens == 0) return SIZE_MAX;      /* the committed ids will be exactly these */
    if (engine_snapshot_holds(&s->snap, prompt, at)) return SIZE_MAX;
    return at;
}

int engine_session_prompt_begin(clover_session *s, const int32_t *prompt, size_t n, bool want_logits,
                                const clover_generate_params *p, size_t *reused, size_t *at,
                                clover_generate_stats *st, clover_error *err) {
    *reused = 0;
    *at = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        if (prompt[i] < 0 || (size_t)prompt[i] >= s->n_vocab)
            return error_set(err, CLOVER_E_INVALID, "token %zu is id %d, expected 0..%zu", i, prompt[i],
                             s->n_vocab - 1);
    size_t reuse = session_committed_match(s, prompt, n);
    if (want_logits && reuse == n && !s->last_valid) { /* the backend may have kept them, else recommit */
        clover_error e2 = {0};
        if (s->keeps_last && s->be->last_logits(s->bs, s->last_logits, &e2) == CLOVER_OK)
            s->last_valid = true;
        else
            reuse = 0;
    }
    size_t snap = engine_snapshot_match(&s->snap, prompt, n);
    if (want_logits && snap == n) snap = 0; /* the snapshot keeps no logits */
    if (snap > reuse) {
        double t = timer_now();
        reuse = session_restore_snapshot(s, prompt, snap);
        st->snapshot_reused = reuse;
        st->snapshot_s += timer_now() - t;
    }
    if (reuse == 0) engine_session_forget(s);
    if (want_logits && n == 0)
        return error_set(err, CLOVER_E_INVALID, "empty; autoregressive decoding needs at least one token");
    *at = session_snapshot_point(s, prompt, n, reuse, p);
    *reused = reuse;
    return CLOVER_OK;
}

size_t engine_prompt_chunk_end(const clover_session *s, size_t a, size_t n, size_t at) {
    size_t end = n - a < s->max_rows ? n : a + s->max_rows;
    if (at > a && at < end) end = at; /* stop at the snapshot point */
    return end;
}

void engine_session_take_snapshot(clover_session *s, const int32_t *prompt, size_t at, clover_generate_stats *st) {
    double t = timer_now();
    clover_error local = {0};
    if (engine_snapshot_take(&s->snap, s->be, s->bs, prompt, at, s->snapshot_max_bytes, &local))
        engine_snapshot_drop(&s->snap);
    st->snapshot_s += timer_now() - t;
}
