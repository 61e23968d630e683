/*
 * failover_session.c: a failover session (failover.h): the session on the
 * backend it runs on now, the log that can rebuild its state elsewhere,
 * the move to the fallback, and checkpoints that survive the move.
 *
 * The log is the last imported state (the base: a prompt snapshot, or
 * none) and the ids committed since, with the end of each commit call, so
 * a replay makes the same calls as the original commits (backend.h: the
 * split of a commit into passes depends only on its own rows). A
 * checkpoint is the inner backend's where it was saved; restored after a
 * move, it is rebuilt by replaying the log up to its length.
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "offload/failover_internal.h"

static const backend_ops *ops_of(const backend_session *s) { return s->fb->ops[s->on]; }

static size_t log_length(const backend_session *s) { return s->base_len + s->n_ids; }

static void log_clear(backend_session *s) {
    mem_free(s->base);
    s->base = NULL;
    s->base_bytes = s->base_len = 0;
    s->n_ids = s->n_cuts = 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t each, clover_error *err) {
    if (need <= *cap) return CLOVER_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = mem_alloc(c * each);
    if (!q) return error_set(err, CLOVER_E_NOMEM, "failover: no memory for the log of %zu committed ids", need);
    if (*p) memcpy(q, *p, *cap * each);
    mem_free(*p);
    *p = q;
    *cap = c;
    return CLOVER_OK;
}

int fo_log_commit(backend_session *s, const int32_t *ids, size_t n, clover_error *err) {
    if (!n) return CLOVER_OK;
    int rc = grow((void **)&s->ids, &s->cap_ids, s->n_ids + n, sizeof *s->ids, err);
    if (!rc) rc = grow((void **)&s->cuts, &s->cap_cuts, s->n_cuts + 1, sizeof *s->cuts, err);
    if (rc) { /* the log cannot follow: the state can no longer be rebuilt, so say so at once */
        s->broken = true;
        return rc;
    }
    memcpy(s->ids + s->n_ids, ids, n * sizeof *ids);
    s->n_ids += n;
    s->cuts[s->n_cuts++] = s->n_ids;
    return CLOVER_OK;
}

/* The log cut back to a committed length n (>= base_len). */
static void log_truncate(backend_session *s, size_t n) {
    size_t k = n - s->base_len;
    while (s->n_cuts && s->cuts[s->n_cuts - 1] > k) s->n_cuts--;
    s->n_ids = k;
    if (k && (!s->n_cuts || s->cuts[s->n_cuts - 1] != k)) s->cuts[s->n_cuts++] = k; /* room: it only shrank */
}

/* Rebuilds the state of the log's first `upto` rows into `in` on backend
 * `on`: the base imported, then the commit calls again. */
static int replay(backend_session *s, int on, backend_session *in, size_t upto, clover_error *err) {
    const backend_ops *ops = s->fb->ops[on];
    backend *be = s->fb->be[on];
    ops->reset(in);
    if (s->no_replay)
        return error_set(err, CLOVER_E_UNSUPPORTED, "failover: the session was truncated below an imported state: "
                                                    "its state cannot be rebuilt");
    int rc = CLOVER_OK;
    if (s->base && (rc = ops->state_import(in, s->base, s->base_bytes, err))) return error_prefix(err, "failover replay");
    size_t a = 0, end = upto - s->base_len;
    for (size_t c = 0; c < s->n_cuts && a < end && !rc; c++) {
        size_t b = s->cuts[c] < end ? s->cuts[c] : end;
        backend_commit_seq q = {.s = in, .ids = s->ids + a, .n = b - a};
        backend_pass_stats st = {0};
        rc = backend_commit1(ops, be, &q, &st, err);
        a = b;
    }
    return rc ? error_prefix(err, "failover replay of %zu committed ids", upto) : CLOVER_OK;
}

int fo_session_move(backend_session *s, bool *lost, clover_error *err) {
    backend *fb = s->fb;
    *lost = false;
    if (s->on == FO_FALLBACK) return CLOVER_OK;
    int rc = fo_fallback_ready(fb, err);
    backend_session *in = NULL;
    if (!rc) rc = fb->ops[FO_FALLBACK]->session_create(fb->be[FO_FALLBACK], &in, err);
    if (rc) return error_prefix(err, "failover");
    /* the device's own export first: it holds the state of the last good call */
    const backend_ops *dev = fb->ops[FO_PRIMARY];
    bool moved = false;
    if (!fault_state_lost(&fb->fault) && dev->state_bytes && dev->state_export) {
        size_t bytes = dev->state_bytes(s->in);
        void *buf = bytes ? mem_alloc(bytes) : NULL;
        clover_error e2 = {0};
        if (buf && !dev->state_export(s->in, buf, bytes, &e2) &&
            !fb->ops[FO_FALLBACK]->state_import(in, buf, bytes, &e2))
            moved = true;
        mem_free(buf);
    }
    if (!moved) {
        *lost = true;
        if ((rc = replay(s, FO_FALLBACK, in, log_length(s), err))) {
            fb->ops[FO_FALLBACK]->reset(in);
            s->broken = true;
        }
    }
    /* the device's copies go: checkpoints there are rebuilt from the log when restored */
    for (backend_checkpoint *c = s->ckpts; c; c = c->next)
        if (c->in && c->on == FO_PRIMARY) {
            dev->checkpoint_free(c->in);
            c->in = NULL;
        }
    dev->session_free(s->in);
    s->in = in;
    s->on = FO_FALLBACK;
    return rc;
}

int fo_session_create(backend *fb, backend_session **out, clover_error *err) {
    if (!fb || !out) return error_set(err, CLOVER_E_INVALID, "failover: session_create without a backend or out");
    *out = NULL;
    backend_session *s = mem_calloc(1, sizeof *s);
    if (!s) return error_set(err, CLOVER_E_NOMEM, "failover: no memory for a session");
    s->fb = fb;
    s->on = fb->dropped || !fb->be[FO_PRIMARY] ? FO_FALLBACK : FO_PRIMARY;
    clover_error why = {0};
    int rc = CLOVER_OK;
    if (s->on == FO_PRIMARY) {
        if (fault_state_lost(&fb->fault))
            rc = error_set(&why, CLOVER_E_DEVICE, "session_create: injected fault: the device is gone");
        else if (fault_full(&fb->fault, &why))
            rc = why.code; /* not a device failure: the caller's to answer (the server: 503) */
        else
            rc = fb->ops[FO_PRIMARY]->session_create(fb->be[FO_PRIMARY], &s->in, &why);
        if (rc && failover_is_device_error(rc)) {
            fo_note_failure(fb, &why, true);
            s->on = FO_FALLBACK;
            rc = CLOVER_OK;
        } else if (rc) {
            *err = why;
        }
    }
    if (!rc && s->on == FO_FALLBACK) {
        rc = fo_fallback_ready(fb, err);
        if (!rc) rc = fb->ops[FO_FALLBACK]->session_create(fb->be[FO_FALLBACK], &s->in, err);
    }
    if (rc) {
        mem_free(s);
        return rc;
    }
    *out = s;
    return CLOVER_OK;
}

void fo_session_free(backend_session *s) {
    if (!s) return;
    while (s->ckpts) fo_checkpoint_free(s->ckpts);
    if (s->in) ops_of(s)->session_free(s->in);
    log_clear(s);
    mem_free(s->ids);
    mem_free(s->cuts);
    mem_free(s);
}

size_t fo_session_length(const backend_session *s) { return s && !s->broken ? ops_of(s)->session_length(s->in) : 0; }

void fo_reset(backend_session *s) {
    ops_of(s)->reset(s->in);
    log_clear(s);
    s->broken = s->no_replay = false;
    s->epoch++;
}

int fo_preview_debug(backend_session *s, float *hidden, uint8_t *kept, clover_error *err) {
    if (!ops_of(s)->preview_debug)
        return error_set(err, CLOVER_E_UNSUPPORTED, "preview_debug: not offered by the %s backend", ops_of(s)->name);
    return ops_of(s)->preview_debug(s->in, hidden, kept, err);
}

int fo_last_logits(backend_session *s, float *out, clover_error *err) {
    if (!ops_of(s)->last_logits)
        return error_set(err, CLOVER_E_UNSUPPORTED, "last_logits: not offered by the %s backend", ops_of(s)->name);
    if (s->broken) return error_set(err, CLOVER_E_DEVICE, "last_logits: this session's state was lost");
    return ops_of(s)->last_logits(s->in, out, err);
}

size_t fo_state_bytes(const backend_session *s) { return ops_of(s)->state_bytes ? ops_of(s)->state_bytes(s->in) : 0; }

int fo_state_export(const backend_session *s, void *buf, size_t len, clover_error *err) {
    if (s->broken) return error_set(err, CLOVER_E_DEVICE, "state_export: this session's state was lost");
    if (s->on == FO_PRIMARY && fault_state_lost(&s->fb->fault))
        return error_set(err, CLOVER_E_DEVICE, "state_export: injected fault: the device is gone");
    return ops_of(s)->state_export(s->in, buf, len, err);
}

int fo_state_import(backend_session *s, const void *buf, size_t len, clover_error *err) {
    uint8_t *copy = mem_alloc(len ? len : 1);
    if (!copy) return error_set(err, CLOVER_E_NOMEM, "failover: no memory to keep an imported state of %zu bytes", len);
    int rc = ops_of(s)->state_import(s->in, buf, len, err);
    if (rc) {
        mem_free(copy);
        return rc;
    }
    memcpy(copy, buf, len);
    log_clear(s);
    s->base = copy;
    s->base_bytes = len;
    s->base_len = ops_of(s)->session_length(s->in);
    s->broken = s->no_replay = false;
    s->epoch++;
    return CLOVER_OK;
}

struct backend_state_copy {
    const backend_ops *ops;  /* the side that made in */
    backend_state_copy *in;  /* its copy */
    const backend_session *s;
    /* the saved session's replay log when it holds no imported base (a prompt committed from empty, the
     * engine's snapshots): a load takes it over, so a session whose state came from a device copy can still be
     * rebuilt on the fallback if the device fails (n_ids 0 and replayable false: not rebuildable) */
    int32_t *ids;
    size_t *cuts;
    size_t n_ids, n_cuts;
    bool replayable;
};

/* The copy keeps s's log (no base, not truncated below one); on no memory it keeps none (a load then marks the
 * session not rebuildable, as before). */
static void copy_keep_log(backend_state_copy *c, const backend_session *s) {
    mem_free(c->ids), mem_free(c->cuts);
    c->ids = NULL, c->cuts = NULL, c->n_ids = c->n_cuts = 0, c->replayable = false;
    if (s->base || s->no_replay) return;
    if (s->n_ids && (!(c->ids = mem_alloc(s->n_ids * sizeof *c->ids)) ||
                     !(c->cuts = mem_alloc(s->n_cuts * sizeof *c->cuts)))) {
        mem_free(c->ids), c->ids = NULL;
        return;
    }
    if (s->n_ids) {
        memcpy(c->ids, s->ids, s->n_ids * sizeof *c->ids);
        memcpy(c->cuts, s->cuts, s->n_cuts * sizeof *c->cuts);
    }
    c->n_ids = s->n_ids, c->n_cuts = s->n_cuts, c->replayable = true;
}

int fo_state_save(const backend_session *s, backend_state_copy **copy, clover_error *err) {
    if (!s || !copy) return error_set(err, CLOVER_E_INVALID, "state_save: no session or no copy pointer");
    if (s->broken) return error_set(err, CLOVER_E_DEVICE, "state_save: this session's state was lost");
    const backend_ops *ops = ops_of(s);
    if (!ops->state_save)
        return error_set(err, CLOVER_E_UNSUPPORTED, "state_save: not offered by the %s backend", ops->name);
    if (!*copy && !(*copy = mem_calloc(1, sizeof **copy)))
        return error_set(err, CLOVER_E_NOMEM, "state_save: no memory");
    backend_state_copy *c = *copy;
    c->s = NULL;
    if (c->in && c->ops != ops) { /* made on the other side: of no use here */
        c->ops->state_copy_free(c->in);
        c->in = NULL;
    }
    c->ops = ops;
    int rc = ops->state_save(s->in, &c->in, err);
    if (!rc) c->s = s, copy_keep_log(c, s);
    return rc;
}

int fo_state_load(backend_session *s, const backend_state_copy *c, clover_error *err) {
    if (!s || !c) return error_set(err, CLOVER_E_INVALID, "state_load: no session or no copy");
    if (c->s != s || c->ops != ops_of(s) || !c->in)
        return error_set(err, CLOVER_E_INVALID, "state_load: the copy is not this session's on its %s backend",
                         ops_of(s)->name);
    int rc = ops_of(s)->state_load(s->in, c->in, err);
    if (rc) return rc;
    log_clear(s);
    s->broken = false;
    s->epoch++;
    /* the copy's own log where it kept one (the committed length must agree), else the state is the copy's,
     * which no log can rebuild */
    const size_t len = ops_of(s)->session_length(s->in);
    clover_error ge = {0}; /* no memory for the log: the session just cannot be rebuilt, the load stands */
    if (c->replayable && c->n_ids == len && !grow((void **)&s->ids, &s->cap_ids, c->n_ids, sizeof *s->ids, &ge) &&
        !grow((void **)&s->cuts, &s->cap_cuts, c->n_cuts, sizeof *s->cuts, &ge)) {
        if (c->n_ids) {
            memcpy(s->ids, c->ids, c->n_ids * sizeof *s->ids);
            memcpy(s->cuts, c->cuts, c->n_cuts * sizeof *s->cuts);
        }
        s->n_ids = c->n_ids, s->n_cuts = c->n_cuts;
        s->no_replay = false;
        return CLOVER_OK;
    }
    s->base_len = len;
    s->no_replay = s->base_len != 0;
    return CLOVER_OK;
}

void fo_state_copy_free(backend_state_copy *c) {
    if (!c) return;
    if (c->in) c->ops->state_copy_free(c->in);
    mem_free(c->ids), mem_free(c->cuts);
    mem_free(c);
}

int fo_checkpoint_create(backend_session *s, backend_checkpoint **out, clover_error *err) {
    if (!s || !out) return error_set(err, CLOVER_E_INVALID, "checkpoint: no session or no output pointer");
    backend_checkpoint *c = mem_calloc(1, sizeof *c);
    if (!c) return error_set(err, CLOVER_E_NOMEM, "checkpoint: no memory");
    c->s = s;
    c->next = s->ckpts;
    s->ckpts = c;
    *out = c;
    return CLOVER_OK;
}

void fo_checkpoint_free(backend_checkpoint *c) {
    if (!c) return;
    backend_session *s = c->s;
    for (backend_checkpoint **p = &s->ckpts; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    if (c->in) s->fb->ops[c->on]->checkpoint_free(c->in);
    mem_free(c);
}

int fo_checkpoint_save(backend_session *s, backend_checkpoint *c, clover_error *err) {
    if (!s || !c || c->s != s) return error_set(err, CLOVER_E_INVALID, "checkpoint_save: not this session's checkpoint");
    if (s->broken) return error_set(err, CLOVER_E_DEVICE, "checkpoint_save: this session's state was lost");
    const backend_ops *ops = ops_of(s);
    if (c->in && c->on != s->on) { /* made before the move */
        s->fb->ops[c->on]->checkpoint_free(c->in);
        c->in = NULL;
    }
    c->valid = false;
    int rc = CLOVER_OK;
    if (!c->in) rc = ops->checkpoint_create(s->in, &c->in, err);
    c->on = s->on;
    if (!rc) rc = ops->checkpoint_save(s->in, c->in, err);
    if (rc && s->on == FO_PRIMARY && failover_is_device_error(rc)) { /* the device failed here: move, save there */
        clover_error why = *err;
        if ((rc = fo_device_failed(s->fb, s, &why, true, err))) return rc;
        return fo_checkpoint_save(s, c, err);
    }
    if (rc) return rc;
    c->len = log_length(s);
    c->epoch = s->epoch;
    c->valid = true;
    return CLOVER_OK;
}

int fo_checkpoint_restore(backend_session *s, const backend_checkpoint *c, clover_error *err) {
    if (!s || !c || c->s != s)
        return error_set(err, CLOVER_E_INVALID, "checkpoint_restore: not this session's checkpoint");
    if (!c->valid || c->epoch != s->epoch || c->len > log_length(s) || c->len < s->base_len || s->broken)
        return error_set(err, CLOVER_E_INVALID, "checkpoint_restore: the checkpoint is stale (reset, import or "
                                                "restore since it was saved)");
    int rc;
    if (c->in && c->on == s->on) {
        rc = ops_of(s)->checkpoint_restore(s->in, c->in, err);
    } else { /* saved on the device before the move: rebuild it from the log */
        rc = replay(s, s->on, s->in, c->len, err);
        if (rc) s->broken = true;
    }
    if (rc) return rc;
    log_truncate(s, c->len);
    s->epoch++;
    ((backend_checkpoint *)c)->epoch = s->epoch; /* it stays valid for another restore, as the backends' */
    return CLOVER_OK;
}

int fo_truncate(backend_session *s, size_t n, clover_error *err) {
    if (s->broken) return error_set(err, CLOVER_E_DEVICE, "truncate: this session's state was lost");
    int rc = ops_of(s)->truncate(s->in, n, err);
    if (rc) return rc;
    if (n < s->base_len) { /* below the imported state: the log cannot rebuild this one */
        log_clear(s);
        s->no_replay = n != 0;
        return CLOVER_OK;
    }
    if (n < log_length(s)) log_truncate(s, n);
    return CLOVER_OK;
}

const char *failover_session_backend(const backend_session *s) { return s ? ops_of(s)->name : "none"; }

bool failover_session_moved(const backend_session *s) { return s && s->on == FO_FALLBACK; }
