/*
 * failover_internal.h: the failover's objects (failover.h), shared by the
 * dispatch (failover.c) and the sessions with their log, moves and
 * checkpoints (failover_session.c).
 */
#ifndef CLOVER_OFFLOAD_FAILOVER_INTERNAL_H
#define CLOVER_OFFLOAD_FAILOVER_INTERNAL_H

#include <stdint.h>

#include "offload/failover.h"
#include "offload/fault_inject.h"

enum { FO_PRIMARY = 0, FO_FALLBACK = 1 };
enum { FO_DROP_AFTER = 2 }; /* failures that drop a device whose state survived them */

struct backend {
    const clover_model *model;
    backend_config cfg;
    const backend_ops *ops[2];
    backend *be[2];   /* be[FO_FALLBACK] is made on the first failure */
    size_t max_rows;
    fault_plan fault;
    unsigned failures;
    bool dropped;     /* no more calls to the primary */
    void *scratch;    /* per-call copies of the sequences, grown on demand */
    size_t scratch_bytes;
};

struct backend_checkpoint {
    backend_session *s;
    backend_checkpoint *next; /* the session's checkpoints */
    int on;                   /* the backend in holds a copy on */
    backend_checkpoint *in;   /* NULL: none there yet */
    size_t len;
    uint64_t epoch;
    bool valid;
};

struct backend_session {
    backend *fb;
    int on;               /* FO_PRIMARY or FO_FALLBACK */
    backend_session *in;  /* the session on backend `on` */
    /* the replay log: the state is base (an imported state, or none) then
     * the ids committed since, in commit calls ending at cuts[] */
    uint8_t *base;
    size_t base_bytes, base_len;
    int32_t *ids;
    size_t n_ids, cap_ids;
    size_t *cuts;
    size_t n_cuts, cap_cuts;
    bool broken;          /* a move failed half way: the state is gone until a reset */
    bool no_replay;       /* truncated below the base: the log cannot rebuild the state */
    uint64_t epoch;       /* bumped by reset, import and restore */
    backend_checkpoint *ckpts;
};

/* Makes the fallback backend object (once). */
int fo_fallback_ready(backend *fb, clover_error *err);
/* After the device failed s (why: its error): moves s to the fallback and,
 * with count, counts the failure (dropping the device when due, with its
 * log line; a call failing several sequences is one failure). */
int fo_device_failed(backend *fb, backend_session *s, const clover_error *why, bool count, clover_error *err);
/* Moves s to the fallback (export, else replay); *lost: the replay was needed. */
int fo_session_move(backend_session *s, bool *lost, clover_error *err);
/* Appends a successful commit of ids[0..n) to the log. */
int fo_log_commit(backend_session *s, const int32_t *ids, size_t n, clover_error *err);
/* Counts a device failure that had no session to move (load, session creation). */
void fo_note_failure(backend *fb, const clover_error *why, bool lost);

/* The session half of backend_failover's ops (failover_session.c). */
int fo_session_create(backend *fb, backend_session **out, clover_error *err);
void fo_session_free(backend_session *s);
size_t fo_session_length(const backend_session *s);
void fo_reset(backend_session *s);
int fo_preview_debug(backend_session *s, float *hidden, uint8_t *kept, clover_error *err);
int fo_last_logits(backend_session *s, float *out, clover_error *err);
size_t fo_state_bytes(const backend_session *s);
int fo_state_export(const backend_session *s, void *buf, size_t len, clover_error *err);
int fo_state_import(backend_session *s, const void *buf, size_t len, clover_error *err);
/* State copies (backend_ops.state_save): the primary's, wrapped with the side that made them. A loaded copy is
 * not in the replay log (no host bytes of it), so the session cannot be rebuilt on the fallback until its next
 * reset or import: a device failure then loses that session's request, as a truncation below an import does. */
int fo_state_save(const backend_session *s, backend_state_copy **copy, clover_error *err);
int fo_state_load(backend_session *s, const backend_state_copy *copy, clover_error *err);
void fo_state_copy_free(backend_state_copy *copy);
int fo_checkpoint_create(backend_session *s, backend_checkpoint **out, clover_error *err);
void fo_checkpoint_free(backend_checkpoint *c);
int fo_checkpoint_save(backend_session *s, backend_checkpoint *c, clover_error *err);
int fo_checkpoint_restore(backend_session *s, const backend_checkpoint *c, clover_error *err);
int fo_truncate(backend_session *s, size_t n, clover_error *err);

#endif
