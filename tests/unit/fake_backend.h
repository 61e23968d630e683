/*
 * fake_backend.h: a backend (backend.h v2) whose logits each engine test
 * scripts by hand (preview_fn, next_fn), so expected tokens, pass counts
 * and confidences follow from the SPEC text alone. It holds no tensors: a
 * session is its committed ids. The pick is the host pick every host
 * backend uses (backend/pick.h), over the scripted logits. Batched calls
 * run the sequences one after another, each as alone; a failure (scripted
 * or a full context) is that sequence's own. The whole contract: also
 * checkpoints (the committed length and the session's epoch: a reset makes
 * every older checkpoint stale), truncation (the ids simply drop: no GDN
 * state to rewind), and resolve over its own previews
 * (backend_resolve_by_preview, what the CPU backend offers too); tests that
 * want the engine's own pass loop take fake_ops_loop (no resolve).
 */
#ifndef CLOVER_TEST_FAKE_BACKEND_H
#define CLOVER_TEST_FAKE_BACKEND_H

#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/pick.h"
#include "base/error.h"
#include "model/model.h"

#define MAXV 32
#define FAKE_CTX 1024

struct backend {
    size_t V, max_rows;
    uint32_t counts[MAXV];
    host_pick_ctx pick;
    float logits[64 * MAXV];
};

struct backend_session {
    backend *be;
    size_t n;
    uint64_t epoch; /* bumped by reset */
    int32_t ids[FAKE_CTX];
};

struct backend_checkpoint {
    backend_session *s;
    size_t n;
    uint64_t epoch;
    bool valid;
};

typedef void (*preview_fn)(const int32_t *block, size_t b, size_t pos, int pass, float *logits);
typedef void (*next_fn)(int32_t last, float *logits);

static struct {
    size_t V;
    preview_fn preview;
    next_fn next;
    int previews;        /* preview calls so far (sequences) */
    int fail_preview_at; /* that preview fails (1-based; 0: never) */
    int cancel_at;       /* that preview sets *cancel_flag */
    int cancel_at_commit; /* that commit sets *cancel_flag */
    volatile int *cancel_flag;
    size_t commit_rows;  /* rows committed so far */
    int commits;
    int resets;
    int saves, restores;
    int resolves;        /* resolve calls */
    size_t most_commit_seqs, most_preview_seqs; /* the most sequences one call carried */
    int32_t blocks_seen[16][MAXV]; /* the block of each preview */
} fk;

static int fk_probe(const clover_model *m, const backend_config *cfg, clover_error *err) {
    (void)cfg;
    return m->hp.n_vocab <= MAXV ? 0 : error_set(err, CLOVER_E_UNSUPPORTED, "fake: vocabulary over %d", MAXV);
}
static int fk_be_create(const clover_model *m, const backend_config *cfg, backend **out, clover_error *err) {
    if (fk_probe(m, cfg, err)) return err->code;
    backend *be = calloc(1, sizeof *be);
    if (!be) return error_set(err, CLOVER_E_NOMEM, "fake");
    be->V = m->hp.n_vocab;
    be->max_rows = cfg && cfg->max_rows ? cfg->max_rows : 64;
    if (be->max_rows > 64) be->max_rows = 64;
    be->pick = (host_pick_ctx){.pool = NULL, .n_vocab = be->V, .counts = be->counts, .n_samp = 1};
    *out = be;
    return 0;
}
static void fk_be_destroy(backend *be) {
    if (!be) return;
    host_pick_ctx_free(&be->pick);
    free(be);
}
static size_t fk_max_rows(const backend *be) { return be->max_rows; }
static int fk_create(backend *be, backend_session **out, clover_error *err) {
    *out = calloc(1, sizeof **out);
    if (!*out) return error_set(err, CLOVER_E_NOMEM, "fake");
    (*out)->be = be;
    return 0;
}
static void fk_free(backend_session *s) { free(s); }
static size_t fk_length(const backend_session *s) { return s->n; }
static void fk_reset(backend_session *s) {
    s->n = 0;
    s->epoch++;
    fk.resets++;
}

static int fk_ck_create(backend_session *s, backend_checkpoint **out, clover_error *err) {
    *out = calloc(1, sizeof **out);
    if (!*out) return error_set(err, CLOVER_E_NOMEM, "fake checkpoint");
    (*out)->s = s;
    return 0;
}
static void fk_ck_free(backend_checkpoint *c) { free(c); }
static int fk_ck_save(backend_session *s, backend_checkpoint *c, clover_error *err) {
    if (c->s != s) return error_set(err, CLOVER_E_INVALID, "fake: the checkpoint belongs to another session");
    c->n = s->n, c->epoch = s->epoch, c->valid = true;
    fk.saves++;
    return 0;
}
static int fk_ck_restore(backend_session *s, const backend_checkpoint *c, clover_error *err) {
    if (c->s != s || !c->valid || c->epoch != s->epoch || c->n > s->n)
        return error_set(err, CLOVER_E_INVALID, "fake: stale checkpoint");
    s->n = c->n;
    fk.restores++;
    return 0;
}
static int fk_truncate(backend_session *s, size_t n, clover_error *err) {
    if (n > s->n) return error_set(err, CLOVER_E_INVALID, "fake: truncate to %zu of %zu rows", n, s->n);
    s->n = n;
    return 0;
}

static int fk_commit_one(backend *be, backend_commit_seq *q, backend_pass_stats *st) {
    backend_session *s = q->s;
    clover_error *err = &q->err;
    if (s->n + q->n > FAKE_CTX) return error_set(err, CLOVER_E_INVALID, "fake: context full");
    if (q->n_pick && host_pick_check(&be->pick, q->pick, err)) return err->code;
    memcpy(s->ids + s->n, q->ids, q->n * sizeof *q->ids);
    s->n += q->n;
    fk.commit_rows += q->n;
    fk.commits++;
    if (fk.commits == fk.cancel_at_commit) *fk.cancel_flag = 1;
    st->gdn_s += 1.0;
    if (q->n == 0 || (!q->last_logits && !q->n_pick)) return 0;
    fk.next(q->ids[q->n - 1], be->logits);
    if (q->last_logits) memcpy(q->last_logits, be->logits, be->V * sizeof(float));
    if (!q->n_pick) return 0;
    backend_pick pk = *q->pick;
    pk.pen = NULL;
    size_t row = 0;
    return host_pick_rows(&be->pick, &pk, be->logits, &row, 1, q->u, NULL, 0, &q->pick_out, st, err);
}

static int fk_commit(backend *be, backend_commit_seq *seqs, size_t n, backend_pass_stats *st) {
    int first = 0;
    if (n > fk.most_commit_seqs) fk.most_commit_seqs = n;
    for (size_t i = 0; i < n; i++) {
        seqs[i].rc = fk_commit_one(be, &seqs[i], st);
        if (seqs[i].rc && !first) first = seqs[i].rc;
    }
    return first;
}

static int fk_preview_one(backend *be, backend_preview_seq *q, backend_pass_stats *st) {
    clover_error *err = &q->err;
    if (q->pending && host_pick_check(&be->pick, q->pick, err)) return err->code;
    fk.previews++;
    if (fk.previews == fk.fail_preview_at) return error_set(err, CLOVER_E_IO, "fake: device lost");
    if (fk.previews == fk.cancel_at) *fk.cancel_flag = 1;
    if (fk.previews <= 16) memcpy(fk.blocks_seen[fk.previews - 1], q->block, q->b * sizeof *q->block);
    fk.preview(q->block, q->b, q->s->n, fk.previews, be->logits);
    st->moe_s += 0.5;
    st->coreset_kept += 6;
    st->coreset_layers += 2;
    if (q->logits) memcpy(q->logits, be->logits, q->b * be->V * sizeof(float));
    if (!q->pending) return 0;
    size_t rows[MAXV], n = 0;
    float u[MAXV];
    for (size_t r = 0; r < q->b; r++)
        if (q->pending[r]) {
            u[n] = q->u ? q->u[r] : 0.0f;
            rows[n++] = r;
        }
    return host_pick_rows(&be->pick, q->pick, be->logits, rows, n, q->u ? u : NULL, q->block, q->b, &q->pick_out, st,
                          err);
}

static int fk_preview(backend *be, backend_preview_seq *seqs, size_t n, backend_pass_stats *st) {
    int first = 0;
    if (n > fk.most_preview_seqs) fk.most_preview_seqs = n;
    for (size_t i = 0; i < n; i++) {
        seqs[i].rc = fk_preview_one(be, &seqs[i], st);
        if (seqs[i].rc && !first) first = seqs[i].rc;
    }
    return first;
}

static const backend_ops fake_ops;
static int fk_resolve(backend *be, backend_resolve_seq *seqs, size_t n, const volatile int *cancel,
                      backend_pass_stats *st) {
    fk.resolves++;
    return backend_resolve_by_preview(&fake_ops, be, seqs, n, cancel, st);
}

static const backend_ops fake_ops = {
    .name = "fake",
    .probe = fk_probe,
    .create = fk_be_create,
    .destroy = fk_be_destroy,
    .max_rows = fk_max_rows,
    .session_create = fk_create,
    .session_free = fk_free,
    .session_length = fk_length,
    .commit = fk_commit,
    .preview = fk_preview,
    .resolve = fk_resolve,
    .reset = fk_reset,
    .checkpoint_create = fk_ck_create,
    .checkpoint_free = fk_ck_free,
    .checkpoint_save = fk_ck_save,
    .checkpoint_restore = fk_ck_restore,
    .truncate = fk_truncate,
};

#endif
