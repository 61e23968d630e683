/*
 * split.c: the split backend (split.h). A call runs the front over every
 * sequence (its rows' residual streams into one buffer), then the back over
 * the sequences the front did not fail, with every output the caller asked
 * for; rc and err are each sequence's own.
 */
#include "offload/split.h"

#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/model.h"

struct backend {
    const clover_model *model;
    const backend_ops *ops[2]; /* front, back */
    backend *be[2];
    uint32_t n_front;
    size_t max_rows;
    float *h;                  /* the residual streams handed on, grown on demand */
    size_t h_floats;
    void *seqs;                /* the per-part copies of a call's sequences */
    size_t seqs_bytes;
};

struct backend_session {
    backend *sp;
    backend_session *in[2];
    bool broken;
};

struct backend_checkpoint {
    backend_session *s;
    backend_checkpoint *in[2];
};

static int grow(void **p, size_t *have, size_t need, clover_error *err) {
    if (need <= *have) return CLOVER_OK;
    void *q = mem_alloc(need);
    if (!q) return error_set(err, CLOVER_E_NOMEM, "split: no memory for %zu bytes of a call", need);
    mem_free(*p);
    *p = q;
    *have = need;
    return CLOVER_OK;
}

int split_create(const clover_model *model, const backend_config *cfg, const backend_ops *front,
                 const backend_ops *back, uint32_t n_front, backend **out, clover_error *err) {
    if (!out || !model || !cfg || !front || !back)
        return error_set(err, CLOVER_E_INVALID, "split: model, config, both backends and out are required");
    *out = NULL;
    if (n_front == 0 || n_front >= model->hp.n_layer)
        return error_set(err, CLOVER_E_INVALID, "split: %u layers on the first backend, expected 1..%u", n_front,
                         model->hp.n_layer - 1);
    backend *sp = mem_calloc(1, sizeof *sp);
    if (!sp) return error_set(err, CLOVER_E_NOMEM, "split: no memory");
    *sp = (backend){.model = model, .ops = {front, back}, .n_front = n_front};
    backend_config c[2] = {*cfg, *cfg};
    c[0].layer_begin = 0, c[0].layer_end = n_front;
    c[1].layer_begin = n_front, c[1].layer_end = 0;
    int rc = CLOVER_OK;
    for (int i = 0; i < 2 && !rc; i++) {
        if (sp->ops[i]->probe) rc = sp->ops[i]->probe(model, &c[i], err);
        if (!rc) rc = sp->ops[i]->create(model, &c[i], &sp->be[i], err);
        if (rc) error_prefix(err, "split: layers %u..%u on the %s backend", c[i].layer_begin,
                             c[i].layer_end ? c[i].layer_end : model->hp.n_layer, sp->ops[i]->name);
    }
    if (!rc) {
        size_t a = front->max_rows(sp->be[0]), b = back->max_rows(sp->be[1]);
        sp->max_rows = a < b ? a : b;
        *out = sp;
        return CLOVER_OK;
    }
    for (int i = 0; i < 2; i++)
        if (sp->be[i]) sp->ops[i]->destroy(sp->be[i]);
    mem_free(sp);
    return rc;
}

static int sp_create(const clover_model *model, const backend_config *cfg, backend **out, clover_error *err) {
    (void)model, (void)cfg, (void)out;
    return error_set(err, CLOVER_E_INVALID, "split: made by split_create (it needs its two backends)");
}

static void sp_destroy(backend *sp) {
    if (!sp) return;
    for (int i = 0; i < 2; i++)
        if (sp->be[i]) sp->ops[i]->destroy(sp->be[i]);
    mem_free(sp->h);
    mem_free(sp->seqs);
    mem_free(sp);
}

static size_t sp_max_rows(const backend *sp) { return sp ? sp->max_rows : 0; }

/* ---- passes ---- */

/* Room for two copies of n sequences of `size` bytes and `rows` rows of residual. */
static int call_room(backend *sp, size_t n, size_t size, size_t rows, clover_error *err) {
    size_t need, floats;
    if (!mem_mul_ok(2 * n + 1, size, &need) || !mem_mul_ok(rows ? rows : 1, sp->model->hp.n_embd, &floats))
        return error_set(err, CLOVER_E_INVALID, "split: a call of %zu sequences", n);
    int rc = grow(&sp->seqs, &sp->seqs_bytes, need, err);
    if (!rc && floats > sp->h_floats) {
        size_t bytes = sp->h_floats * sizeof(float);
        rc = grow((void **)&sp->h, &bytes, floats * sizeof(float), err);
        if (!rc) sp->h_floats = floats;
    }
    return rc;
}

/* Whether sequence i goes on to the back (else its rc says why not). */
static bool to_back(backend_session *s, int *rc, clover_error *e, size_t nb) {
    if (s && s->broken) *rc = error_set(e, CLOVER_E_INVALID, "split: this session's parts are out of step; reset it");
    else if (!*rc && nb >= 256) *rc = error_set(e, CLOVER_E_INVALID, "split: more than 256 sequences in a call");
    return *rc == CLOVER_OK;
}

/* Hands the sequences on from the front to the back, the same in both passes
 * but for the sequence type (a commit's or a preview's, hence a macro): each
 * of the n sequences takes the front's outcome, and those that go on are
 * copied into b[0..nb) with the back's session and, as their input, the rows
 * the front left in sp->h (f[i].out_hidden); map[j] is b[j]'s index in seqs. */
#define HAND_ON(seqs, f, b, n, nb, map)                                         \
    do {                                                                        \
        for (size_t i_ = 0; i_ < (n); i_++) {                                   \
            (seqs)[i_].rc = (f)[i_].rc, (seqs)[i_].err = (f)[i_].err;           \
            if (to_back((seqs)[i_].s, &(seqs)[i_].rc, &(seqs)[i_].err, (nb))) { \
                (b)[(nb)] = (seqs)[i_];                                         \
                (b)[(nb)].s = (seqs)[i_].s->in[1];                              \
                (b)[(nb)].in_hidden = (f)[i_].out_hidden;                       \
                (map)[(nb)++] = i_;                                             \
            }                                                                   \
        }                                                                       \
    } while (0)

static int sp_commit(backend *sp, backend_commit_seq *seqs, size_t n, backend_pass_stats *st) {
    size_t rows = 0;
    for (size_t i = 0; i < n; i++) rows += seqs[i].n;
    clover_error e = {0};
    int first = CLOVER_OK;
    if (call_room(sp, n, sizeof *seqs, rows, &e)) {
        for (size_t i = 0; i < n; i++) seqs[i].rc = e.code, seqs[i].err = e;
        return n ? e.code : CLOVER_OK;
    }
    backend_commit_seq *f = sp->seqs, *b = f + n;
    const size_t H = sp->model->hp.n_embd;
    size_t off = 0, nb = 0, map[256];
    for (size_t i = 0; i < n; i++) { /* the front: the layers before the split, nothing asked but the residual */
        f[i] = (backend_commit_seq){.s = seqs[i].s ? seqs[i].s->in[0] : NULL, .ids = seqs[i].ids, .n = seqs[i].n,
                                    .out_hidden = sp->h + off * H, .hidden = seqs[i].hidden};
        off += seqs[i].n;
    }
    for (size_t i = 0; i < n; i++)
        if (seqs[i].s && seqs[i].s->broken) f[i].s = NULL; /* fails it: the parts are out of step */
    sp->ops[0]->commit(sp->be[0], f, n, st);
    HAND_ON(seqs, f, b, n, nb, map);
    sp->ops[1]->commit(sp->be[1], b, nb, st);
    for (size_t j = 0; j < nb; j++) {
        backend_commit_seq *q = &seqs[map[j]];
        q->rc = b[j].rc, q->err = b[j].err;
        if (q->rc && q->n) q->s->broken = true; /* the front committed it, the back did not */
    }
    for (size_t i = 0; i < n; i++)
        if (!first) first = seqs[i].rc;
    return first;
}

static int sp_preview(backend *sp, backend_preview_seq *seqs, size_t n, backend_pass_stats *st) {
    size_t rows = 0;
    for (size_t i = 0; i < n; i++) rows += seqs[i].b;
    clover_error e = {0};
    int first = CLOVER_OK;
    if (call_room(sp, n, sizeof *seqs, rows, &e)) {
        for (size_t i = 0; i < n; i++) seqs[i].rc = e.code, seqs[i].err = e;
        return n ? e.code : CLOVER_OK;
    }
    backend_preview_seq *f = sp->seqs, *b = f + n;
    const size_t H = sp->model->hp.n_embd;
    size_t off = 0, nb = 0, map[256];
    for (size_t i = 0; i < n; i++) {
        bool ok = seqs[i].s && !seqs[i].s->broken;
        f[i] = (backend_preview_seq){.s = ok ? seqs[i].s->in[0] : NULL, .block = seqs[i].block, .b = seqs[i].b,
                                     .opts = seqs[i].opts, .out_hidden = sp->h + off * H};
        off += seqs[i].b;
    }
    sp->ops[0]->preview(sp->be[0], f, n, st);
    HAND_ON(seqs, f, b, n, nb, map);
    sp->ops[1]->preview(sp->be[1], b, nb, st);
    for (size_t j = 0; j < nb; j++) seqs[map[j]].rc = b[j].rc, seqs[map[j]].err = b[j].err;
    for (size_t i = 0; i < n; i++)
        if (!first) first = seqs[i].rc;
    return first;
}

static int sp_resolve(backend *sp, backend_resolve_seq *seqs, size_t n, const volatile int *cancel,
                      backend_pass_stats *st) {
    return backend_resolve_by_preview(&backend_split, sp, seqs, n, cancel, st);
}

/* ---- sessions, state, checkpoints ---- */

static int sp_session_create(backend *sp, backend_session **out, clover_error *err) {
    if (!sp || !out) return error_set(err, CLOVER_E_INVALID, "split: session_create without a backend or out");
    *out = NULL;
    backend_session *s = mem_calloc(1, sizeof *s);
    if (!s) return error_set(err, CLOVER_E_NOMEM, "split: no memory for a session");
    s->sp = sp;
    int rc = CLOVER_OK;
    for (int i = 0; i < 2 && !rc; i++) rc = sp->ops[i]->session_create(sp->be[i], &s->in[i], err);
    if (rc) {
        for (int i = 0; i < 2; i++)
            if (s->in[i]) sp->ops[i]->session_free(s->in[i]);
        mem_free(s);
        return rc;
    }
    *out = s;
    return CLOVER_OK;
}

static void sp_session_free(backend_session *s) {
    if (!s) return;
    for (int i = 0; i < 2; i++) s->sp->ops[i]->session_free(s->in[i]);
    mem_free(s);
}

static size_t sp_session_length(const backend_session *s) {
    return s->broken ? 0 : s->sp->ops[0]->session_length(s->in[0]);
}

static void sp_reset(backend_session *s) {
    for (int i = 0; i < 2; i++) s->sp->ops[i]->reset(s->in[i]);
    s->broken = false;
}

static size_t sp_state_bytes(const backend_session *s) {
    const backend *sp = s->sp;
    return sp->ops[0]->state_bytes(s->in[0]) + sp->ops[1]->state_bytes(s->in[1]) - 8;
}

static int sp_state_export(const backend_session *s, void *buf, size_t len, clover_error *err) {
    const backend *sp = s->sp;
    if (s->broken) return error_set(err, CLOVER_E_INVALID, "split: this session's parts are out of step");
    size_t a = sp->ops[0]->state_bytes(s->in[0]), b = sp->ops[1]->state_bytes(s->in[1]);
    if (len < a + b - 8)
        return error_set(err, CLOVER_E_INVALID, "state_export: a buffer of %zu bytes, the state needs %zu", len,
                         a + b - 8);
    uint8_t *tmp = mem_alloc(b);
    if (!tmp) return error_set(err, CLOVER_E_NOMEM, "split: no memory for %zu state bytes", b);
    int rc = sp->ops[0]->state_export(s->in[0], buf, a, err);
    if (!rc) rc = sp->ops[1]->state_export(s->in[1], tmp, b, err);
    if (!rc) memcpy((uint8_t *)buf + a, tmp + 8, b - 8); /* the back's layers after the front's, one length */
    mem_free(tmp);
    return rc;
}

/* The bytes of layers [l0, l1) of a state of n committed rows (backend.h's layout). */
static size_t layer_bytes(const clover_model *m, uint32_t l0, uint32_t l1, uint64_t n) {
    const model_hparams *hp = &m->hp;
    size_t total = 0;
    for (uint32_t l = l0; l < l1; l++)
        total += m->layers[l].kind == MODEL_LAYER_ATTENTION
                     ? 2 * (size_t)n * hp->n_head_kv * hp->head_dim
                     : (size_t)(hp->ssm_conv_kernel - 1) * hp->gdn_conv_dim + (size_t)hp->gdn_nv * hp->gdn_dk * hp->gdn_dv;
    return total * sizeof(float);
}

static int sp_state_import(backend_session *s, const void *buf, size_t len, clover_error *err) {
    const backend *sp = s->sp;
    if (len < 8) return error_set(err, CLOVER_E_FORMAT, "state_import: %zu bytes, shorter than the length", len);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)((const uint8_t *)buf)[i] << (8 * i);
    if (n > ((uint64_t)1 << 40)) return error_set(err, CLOVER_E_FORMAT, "state_import: committed length %llu", (unsigned long long)n);
    size_t a = layer_bytes(sp->model, 0, sp->n_front, n), b = layer_bytes(sp->model, sp->n_front, sp->model->hp.n_layer, n);
    if (len != 8 + a + b)
        return error_set(err, CLOVER_E_FORMAT, "state_import: %zu bytes, but a state of length %llu has %zu", len,
                         (unsigned long long)n, 8 + a + b);
    uint8_t *tmp = mem_alloc(8 + b);
    if (!tmp) return error_set(err, CLOVER_E_NOMEM, "split: no memory for %zu state bytes", 8 + b);
    memcpy(tmp, buf, 8);
    memcpy(tmp + 8, (const uint8_t *)buf + 8 + a, b);
    int rc = sp->ops[0]->state_import(s->in[0], buf, 8 + a, err);
    if (!rc) rc = sp->ops[1]->state_import(s->in[1], tmp, 8 + b, err);
    mem_free(tmp);
    s->broken = rc != CLOVER_OK;
    return rc;
}

static int sp_checkpoint_create(backend_session *s, backend_checkpoint **out, clover_error *err) {
    backend_checkpoint *c = mem_calloc(1, sizeof *c);
    if (!c) return error_set(err, CLOVER_E_NOMEM, "checkpoint: no memory");
    c->s = s;
    int rc = CLOVER_OK;
    for (int i = 0; i < 2 && !rc; i++) rc = s->sp->ops[i]->checkpoint_create(s->in[i], &c->in[i], err);
    if (rc) {
        for (int i = 0; i < 2; i++)
            if (c->in[i]) s->sp->ops[i]->checkpoint_free(c->in[i]);
        mem_free(c);
        return rc;
    }
    *out = c;
    return CLOVER_OK;
}

static void sp_checkpoint_free(backend_checkpoint *c) {
    if (!c) return;
    for (int i = 0; i < 2; i++) c->s->sp->ops[i]->checkpoint_free(c->in[i]);
    mem_free(c);
}

static int sp_checkpoint_save(backend_session *s, backend_checkpoint *c, clover_error *err) {
    if (!c || c->s != s) return error_set(err, CLOVER_E_INVALID, "checkpoint_save: not this session's checkpoint");
    int rc = CLOVER_OK;
    for (int i = 0; i < 2 && !rc; i++) rc = s->sp->ops[i]->checkpoint_save(s->in[i], c->in[i], err);
    return rc;
}

static int sp_checkpoint_restore(backend_session *s, const backend_checkpoint *c, clover_error *err) {
    if (!c || c->s != s) return error_set(err, CLOVER_E_INVALID, "checkpoint_restore: not this session's checkpoint");
    int rc = s->sp->ops[0]->checkpoint_restore(s->in[0], c->in[0], err);
    if (rc) return rc; /* the front refused (stale): nothing changed */
    rc = s->sp->ops[1]->checkpoint_restore(s->in[1], c->in[1], err);
    s->broken = rc != CLOVER_OK; /* the front moved back, the back did not */
    return rc;
}

static int sp_truncate(backend_session *s, size_t n, clover_error *err) {
    int rc = s->sp->ops[0]->truncate(s->in[0], n, err);
    if (rc) return rc;
    rc = s->sp->ops[1]->truncate(s->in[1], n, err);
    if (rc) s->broken = true;
    return rc;
}

const backend_ops backend_split = {
    .name = "split",
    .probe = NULL,
    .create = sp_create,
    .destroy = sp_destroy,
    .max_rows = sp_max_rows,
    .session_create = sp_session_create,
    .session_free = sp_session_free,
    .session_length = sp_session_length,
    .reset = sp_reset,
    .commit = sp_commit,
    .preview = sp_preview,
    .resolve = sp_resolve,
    .preview_debug = NULL,
    .state_bytes = sp_state_bytes,
    .state_export = sp_state_export,
    .state_import = sp_state_import,
    .checkpoint_create = sp_checkpoint_create,
    .checkpoint_free = sp_checkpoint_free,
    .checkpoint_save = sp_checkpoint_save,
    .checkpoint_restore = sp_checkpoint_restore,
    .truncate = sp_truncate,
};
