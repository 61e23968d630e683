/*
 * failover.c: the failover backend (failover.h): its object, the dispatch
 * of the batched calls between the device and the fallback, and the
 * process-wide record of dropped devices.
 *
 * One call of N sequences: the sequences still on the device go to it in
 * one call (unless fault injection fails that call); those it fails with a
 * device error move to the fallback and join the sequences already there
 * in one fallback call. Each sequence's rc and err are its own, as
 * backend.h asks; a commit that succeeded is added to its session's log.
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/log.h"
#include "offload/failover_internal.h"

/* ---- dropped devices, for the whole process ---- */

enum { FO_MAX_DROPPED = 8 };
static pthread_mutex_t drop_lock = PTHREAD_MUTEX_INITIALIZER;
static const backend_ops *dropped_ops[FO_MAX_DROPPED];

static void mark_dropped(const backend_ops *ops) {
    pthread_mutex_lock(&drop_lock);
    bool have = false;
    for (size_t i = 0; i < FO_MAX_DROPPED; i++) have |= dropped_ops[i] == ops;
    for (size_t i = 0; !have && i < FO_MAX_DROPPED; i++)
        if (!dropped_ops[i]) {
            dropped_ops[i] = ops;
            have = true;
        }
    pthread_mutex_unlock(&drop_lock);
}

bool failover_dropped(const backend_ops *primary) {
    pthread_mutex_lock(&drop_lock);
    bool have = false;
    for (size_t i = 0; i < FO_MAX_DROPPED; i++) have |= primary && dropped_ops[i] == primary;
    pthread_mutex_unlock(&drop_lock);
    return have;
}

void failover_forget_drops(void) {
    pthread_mutex_lock(&drop_lock);
    memset(dropped_ops, 0, sizeof dropped_ops);
    pthread_mutex_unlock(&drop_lock);
}

bool failover_is_device_error(int rc) { return rc == CLOVER_E_DEVICE || rc == CLOVER_E_INTERNAL; }

/* ---- failures ---- */

void fo_note_failure(backend *fb, const clover_error *why, bool lost) {
    fb->failures++;
    const char *dev = fb->ops[FO_PRIMARY]->name, *to = fb->ops[FO_FALLBACK]->name;
    if (fb->dropped) return;
    if (lost || fb->failures >= FO_DROP_AFTER) {
        fb->dropped = true;
        mark_dropped(fb->ops[FO_PRIMARY]);
        log_line(LOG_WARN, "the %s backend failed (%s); dropped for the rest of the process: its sessions run on the %s backend",
                 dev, why->message, to);
    } else {
        log_line(LOG_WARN, "the %s backend failed (%s); the session moved to the %s backend", dev, why->message, to);
    }
}

int fo_fallback_ready(backend *fb, clover_error *err) {
    if (fb->be[FO_FALLBACK]) return CLOVER_OK;
    int rc = fb->ops[FO_FALLBACK]->create(fb->model, &fb->cfg, &fb->be[FO_FALLBACK], err);
    if (rc) return error_prefix(err, "failover to the %s backend", fb->ops[FO_FALLBACK]->name);
    if (fb->ops[FO_FALLBACK]->max_rows(fb->be[FO_FALLBACK]) < fb->max_rows) {
        fb->ops[FO_FALLBACK]->destroy(fb->be[FO_FALLBACK]);
        fb->be[FO_FALLBACK] = NULL;
        return error_set(err, CLOVER_E_UNSUPPORTED, "failover: the %s backend takes fewer rows per pass than the %s one",
                         fb->ops[FO_FALLBACK]->name, fb->ops[FO_PRIMARY]->name);
    }
    return CLOVER_OK;
}

int fo_device_failed(backend *fb, backend_session *s, const clover_error *why, bool count, clover_error *err) {
    bool lost = false;
    int rc = fo_session_move(s, &lost, err);
    if (count) fo_note_failure(fb, why, lost || rc != CLOVER_OK);
    if (rc) error_prefix(err, "%s; then", why->message);
    return rc;
}

/* ---- the object ---- */

int failover_create(const clover_model *model, const backend_config *cfg, const backend_ops *primary,
                    const backend_ops *fallback, backend **out, clover_error *err) {
    if (!out || !model || !cfg || !primary || !fallback)
        return error_set(err, CLOVER_E_INVALID, "failover: model, config, both backends and out are required");
    *out = NULL;
    backend *fb = mem_calloc(1, sizeof *fb);
    if (!fb) return error_set(err, CLOVER_E_NOMEM, "failover: no memory");
    *fb = (backend){.model = model, .cfg = *cfg, .ops = {primary, fallback}};
    int rc = fault_plan_from_env(&fb->fault, err);
    if (rc) {
        mem_free(fb);
        return rc;
    }
    clover_error why = {0};
    if (fault_hit(&fb->fault, FAULT_LOAD, &why)) rc = why.code;
    else rc = primary->create(model, cfg, &fb->be[FO_PRIMARY], &why);
    if (rc && !failover_is_device_error(rc)) {
        *err = why;
        mem_free(fb);
        return rc;
    }
    if (!rc) {
        fb->max_rows = primary->max_rows(fb->be[FO_PRIMARY]);
    } else { /* the device failed at load: everything on the fallback */
        fb->be[FO_PRIMARY] = NULL;
        fb->max_rows = cfg->max_rows;
        fo_note_failure(fb, &why, true);
        if ((rc = fo_fallback_ready(fb, err))) {
            mem_free(fb);
            return rc;
        }
        fb->max_rows = fallback->max_rows(fb->be[FO_FALLBACK]);
    }
    *out = fb;
    return CLOVER_OK;
}

static int fo_create(const clover_model *model, const backend_config *cfg, backend **out, clover_error *err) {
    (void)model, (void)cfg, (void)out;
    return error_set(err, CLOVER_E_INVALID, "failover: made by failover_create (it needs its two backends)");
}

static void fo_destroy(backend *fb) {
    if (!fb) return;
    for (int i = 0; i < 2; i++)
        if (fb->be[i]) fb->ops[i]->destroy(fb->be[i]);
    mem_free(fb->scratch);
    mem_free(fb);
}

static size_t fo_max_rows(const backend *fb) { return fb ? fb->max_rows : 0; }

/* ---- the dispatch ---- */

/* What differs between the three batched calls. */
typedef struct fo_kind {
    size_t size, off_s, off_rc, off_err;
    int fault_op;
    void (*run)(const backend_ops *ops, backend *be, void *seqs, size_t n, const volatile int *cancel,
                backend_pass_stats *st);
} fo_kind;

#define SEQ_AT(k, seqs, i) ((char *)(seqs) + (i) * (k)->size)
#define SEQ_S(k, p) (*(backend_session **)((char *)(p) + (k)->off_s))
#define SEQ_RC(k, p) (*(int *)((char *)(p) + (k)->off_rc))
#define SEQ_ERR(k, p) ((clover_error *)((char *)(p) + (k)->off_err))

static void run_commit(const backend_ops *ops, backend *be, void *seqs, size_t n, const volatile int *cancel,
                       backend_pass_stats *st) {
    (void)cancel;
    ops->commit(be, seqs, n, st);
}

static void run_preview(const backend_ops *ops, backend *be, void *seqs, size_t n, const volatile int *cancel,
                        backend_pass_stats *st) {
    (void)cancel;
    ops->preview(be, seqs, n, st);
}

static void run_resolve(const backend_ops *ops, backend *be, void *seqs, size_t n, const volatile int *cancel,
                        backend_pass_stats *st) {
    if (ops->resolve) ops->resolve(be, seqs, n, cancel, st);
    else backend_resolve_by_preview(ops, be, seqs, n, cancel, st);
}

static const fo_kind kind_commit = {sizeof(backend_commit_seq), offsetof(backend_commit_seq, s),
                                    offsetof(backend_commit_seq, rc), offsetof(backend_commit_seq, err),
                                    FAULT_COMMIT, run_commit};
static const fo_kind kind_preview = {sizeof(backend_preview_seq), offsetof(backend_preview_seq, s),
                                     offsetof(backend_preview_seq, rc), offsetof(backend_preview_seq, err),
                                     FAULT_PREVIEW, run_preview};
static const fo_kind kind_resolve = {sizeof(backend_resolve_seq), offsetof(backend_resolve_seq, s),
                                     offsetof(backend_resolve_seq, rc), offsetof(backend_resolve_seq, err),
                                     FAULT_PREVIEW, run_resolve};

enum { RESOLVE_ROWS = 255 }; /* the most rows a resolve takes (backend/resolve.c) */

/* A resolve's inputs that its passes overwrite, kept to run it again. */
typedef struct resolve_keep {
    uint64_t rng;
    int32_t block[RESOLVE_ROWS];
} resolve_keep;

/* The call's scratch: copies of the sequences, their indices, flags, and a
 * resolve's kept inputs, each part aligned. */
typedef struct fo_scratch {
    char *tmp;
    size_t *map;
    uint8_t *want;
    resolve_keep *keep; /* NULL unless a resolve */
} fo_scratch;

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static int scratch_for(backend *fb, const fo_kind *k, size_t n, bool resolve, fo_scratch *sc, clover_error *err) {
    if (n > ((size_t)1 << 20)) return error_set(err, CLOVER_E_INVALID, "failover: %zu sequences in one call", n);
    size_t o_map = align_up(n * k->size, _Alignof(size_t)), o_want = o_map + n * sizeof(size_t);
    size_t o_keep = align_up(o_want + n, _Alignof(resolve_keep));
    size_t need = (resolve ? o_keep + n * sizeof(resolve_keep) : o_want + n) + 1;
    if (need > fb->scratch_bytes) {
        void *p = mem_alloc(need);
        if (!p) return error_set(err, CLOVER_E_NOMEM, "failover: no memory for a call of %zu sequences", n);
        mem_free(fb->scratch);
        fb->scratch = p;
        fb->scratch_bytes = need;
    }
    char *b = fb->scratch;
    *sc = (fo_scratch){.tmp = b, .map = (size_t *)(b + o_map), .want = (uint8_t *)(b + o_want),
                       .keep = resolve ? (resolve_keep *)(b + o_keep) : NULL};
    return CLOVER_OK;
}

/* Runs the sequences of seqs marked want[i] on backend `on` in one call
 * (copies with the inner sessions); results back into seqs. */
static void run_group(backend *fb, const fo_kind *k, int on, void *seqs, size_t n, const uint8_t *want, void *tmp,
                      size_t *map, const volatile int *cancel, backend_pass_stats *st) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!want[i]) continue;
        memcpy(SEQ_AT(k, tmp, m), SEQ_AT(k, seqs, i), k->size);
        SEQ_S(k, SEQ_AT(k, tmp, m)) = SEQ_S(k, SEQ_AT(k, seqs, i))->in;
        map[m++] = i;
    }
    if (!m) return;
    clover_error why = {0};
    if (on == FO_PRIMARY && fault_hit(&fb->fault, k->fault_op, &why)) {
        for (size_t j = 0; j < m; j++) {
            SEQ_RC(k, SEQ_AT(k, tmp, j)) = why.code;
            *SEQ_ERR(k, SEQ_AT(k, tmp, j)) = why;
        }
    } else {
        k->run(fb->ops[on], fb->be[on], tmp, m, cancel, st);
    }
    for (size_t j = 0; j < m; j++) { /* the outcome (and a resolve's outputs) back, the outer session kept */
        backend_session *outer = SEQ_S(k, SEQ_AT(k, seqs, map[j]));
        memcpy(SEQ_AT(k, seqs, map[j]), SEQ_AT(k, tmp, j), k->size);
        SEQ_S(k, SEQ_AT(k, seqs, map[j])) = outer;
    }
}

static void seq_fail(const fo_kind *k, void *seq, const clover_error *e) {
    SEQ_RC(k, seq) = e->code;
    *SEQ_ERR(k, seq) = *e;
}

static int fo_call(backend *fb, const fo_kind *k, void *seqs, size_t n, const volatile int *cancel,
                   backend_pass_stats *st) {
    clover_error e = {0};
    fo_scratch sc = {0};
    if (scratch_for(fb, k, n, k == &kind_resolve, &sc, &e)) {
        for (size_t i = 0; i < n; i++) seq_fail(k, SEQ_AT(k, seqs, i), &e);
        return n ? e.code : CLOVER_OK;
    }
    char *tmp = sc.tmp;
    size_t *map = sc.map;
    uint8_t *want = sc.want;
    resolve_keep *keep = sc.keep;
    /* Sessions of a dropped device leave it first; a session whose state is gone fails alone. */
    for (size_t i = 0; i < n; i++) {
        void *q = SEQ_AT(k, seqs, i);
        backend_session *s = SEQ_S(k, q);
        want[i] = 0;
        bool lost;
        if (s->broken) {
            error_set(&e, CLOVER_E_DEVICE, "failover: this session's state was lost with the %s backend; reset it",
                      fb->ops[FO_PRIMARY]->name);
            seq_fail(k, q, &e);
        } else if (s->on == FO_PRIMARY && fb->dropped && fo_session_move(s, &lost, &e)) {
            seq_fail(k, q, &e);
        } else {
            want[i] = s->on == FO_PRIMARY;
        }
        if (keep && want[i]) {
            backend_resolve_seq *r = q;
            if (r->b <= RESOLVE_ROWS && r->block) memcpy(keep[i].block, r->block, r->b * sizeof *r->block);
            if (r->rng) keep[i].rng = *r->rng;
        }
    }
    run_group(fb, k, FO_PRIMARY, seqs, n, want, tmp, map, cancel, st);
    /* The device's failures move (one failure of the device however many
     * sequences the call had); the rest (and those already there) run on
     * the fallback. */
    bool counted = false;
    for (size_t i = 0; i < n; i++) {
        void *q = SEQ_AT(k, seqs, i);
        backend_session *s = SEQ_S(k, q);
        if (want[i]) {
            want[i] = 0;
            if (SEQ_RC(k, q) == CLOVER_OK || !failover_is_device_error(SEQ_RC(k, q))) continue;
            clover_error why = *SEQ_ERR(k, q);
            bool count = !counted;
            counted = true;
            if (fo_device_failed(fb, s, &why, count, &e)) {
                seq_fail(k, q, &e);
                continue;
            }
            if (keep) {
                backend_resolve_seq *r = q;
                if (r->b <= RESOLVE_ROWS && r->block) memcpy(r->block, keep[i].block, r->b * sizeof *r->block);
                if (r->rng) *r->rng = keep[i].rng;
            }
            want[i] = 1;
        } else if (s->on == FO_FALLBACK && !s->broken) {
            want[i] = 1;
        }
    }
    run_group(fb, k, FO_FALLBACK, seqs, n, want, tmp, map, cancel, st);
    int rc = CLOVER_OK;
    for (size_t i = 0; i < n; i++) {
        void *q = SEQ_AT(k, seqs, i);
        if (k == &kind_commit && SEQ_RC(k, q) == CLOVER_OK) {
            backend_commit_seq *c = q;
            if (fo_log_commit(c->s, c->ids, c->n, &e)) seq_fail(k, q, &e);
        }
        if (!rc) rc = SEQ_RC(k, q);
    }
    return rc;
}

static int fo_commit(backend *fb, backend_commit_seq *seqs, size_t n, backend_pass_stats *st) {
    return fo_call(fb, &kind_commit, seqs, n, NULL, st);
}

static int fo_preview(backend *fb, backend_preview_seq *seqs, size_t n, backend_pass_stats *st) {
    return fo_call(fb, &kind_preview, seqs, n, NULL, st);
}

static int fo_resolve(backend *fb, backend_resolve_seq *seqs, size_t n, const volatile int *cancel,
                      backend_pass_stats *st) {
    return fo_call(fb, &kind_resolve, seqs, n, cancel, st);
}

const backend_ops backend_failover = {
    .name = "failover",
    .probe = NULL,
    .create = fo_create,
    .destroy = fo_destroy,
    .max_rows = fo_max_rows,
    .session_create = fo_session_create,
    .session_free = fo_session_free,
    .session_length = fo_session_length,
    .reset = fo_reset,
    .commit = fo_commit,
    .preview = fo_preview,
    .resolve = fo_resolve,
    .preview_debug = fo_preview_debug,
    .last_logits = fo_last_logits,
    .state_bytes = fo_state_bytes,
    .state_export = fo_state_export,
    .state_import = fo_state_import,
    .state_save = fo_state_save,
    .state_load = fo_state_load,
    .state_copy_free = fo_state_copy_free,
    .checkpoint_create = fo_checkpoint_create,
    .checkpoint_free = fo_checkpoint_free,
    .checkpoint_save = fo_checkpoint_save,
    .checkpoint_restore = fo_checkpoint_restore,
    .truncate = fo_truncate,
};
