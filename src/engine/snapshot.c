/*
 * snapshot.c: the prompt snapshot's buffers. Taking one is a copy of the
 * state (no pass), so it is cheap next to the prompt it saves; the buffers
 * outlive a snapshot so a chat's turns reuse one allocation while the
 * conversation grows. A backend that keeps copies itself (state_save) holds
 * it; one that cannot make a copy now gets the host export as before.
 */
#include "engine/snapshot.h"

#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

void engine_snapshot_free(engine_snapshot *sn) {
    if (sn->copy && sn->copy_be) sn->copy_be->state_copy_free(sn->copy);
    mem_free(sn->state);
    mem_free(sn->ids);
    memset(sn, 0, sizeof *sn);
}

void engine_snapshot_drop(engine_snapshot *sn) {
    sn->valid = false;
    sn->in_copy = false;
    sn->n_ids = 0;
    sn->bytes = 0;
}

size_t engine_snapshot_match(const engine_snapshot *sn, const int32_t *prompt, size_t n) {
    if (!sn->valid || sn->n_ids == 0 || sn->n_ids > n) return 0;
    return memcmp(sn->ids, prompt, sn->n_ids * sizeof *prompt) == 0 ? sn->n_ids : 0;
}

bool engine_snapshot_holds(const engine_snapshot *sn, const int32_t *ids, size_t n) {
    return sn->valid && sn->n_ids == n && (n == 0 || memcmp(sn->ids, ids, n * sizeof *ids) == 0);
}

/* Grows a buffer to at least need bytes (contents not kept). */
static int grow(void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return CLOVER_OK;
    size_t c = need + need / 4; /* a little room: the next turn's state is longer */
    if (c < need) c = need;
    void *p = mem_alloc(c);
    if (!p) return CLOVER_E_NOMEM;
    mem_free(*buf);
    *buf = p;
    *cap = c;
    return CLOVER_OK;
}

int engine_snapshot_take(engine_snapshot *sn, const backend_ops *be, const backend_session *bs, const int32_t *ids,
                         size_t n, size_t max_bytes, clover_error *err) {
    engine_snapshot_drop(sn);
    if (n == 0 || !be->state_bytes || !be->state_export) return CLOVER_OK;
    size_t bytes = be->state_bytes(bs), id_bytes;
    if (bytes == 0 || bytes > max_bytes) return CLOVER_OK; /* over the cap: no snapshot */
    if (!mem_mul_ok(n, sizeof *ids, &id_bytes))
        return error_set(err, CLOVER_E_NOMEM, "prompt snapshot: %zu ids overflow", n);
    void *idv = sn->ids;
    size_t cap_ids_bytes = sn->cap_ids * sizeof *ids;
    int rc = grow(&idv, &cap_ids_bytes, id_bytes);
    sn->ids = idv;
    sn->cap_ids = cap_ids_bytes / sizeof *ids;
    if (rc) return error_set(err, CLOVER_E_NOMEM, "prompt snapshot: no memory for %zu ids", n);
    clover_error e2 = {0};
    if (be->state_save && (!sn->copy || sn->copy_be == be) && be->state_save(bs, &sn->copy, &e2) == CLOVER_OK) {
        sn->copy_be = be;
        sn->in_copy = true;
    } else { /* no copy the backend keeps (or it could not make one: its memory is full): host bytes */
        if (sn->copy && !sn->copy_be) sn->copy_be = be;
        void *state = sn->state;
        rc = grow(&state, &sn->cap_bytes, bytes);
        sn->state = state;
        if (rc)
            return error_set(err, CLOVER_E_NOMEM, "prompt snapshot: no memory for a %zu-byte state of %zu ids",
                             bytes, n);
        rc = be->state_export(bs, sn->state, bytes, err);
        if (rc) return error_prefix(err, "prompt snapshot");
    }
    memcpy(sn->ids, ids, id_bytes);
    sn->n_ids = n;
    sn->bytes = bytes;
    sn->valid = true;
    return CLOVER_OK;
}

int engine_snapshot_restore(const engine_snapshot *sn, const backend_ops *be, backend_session *bs,
                            clover_error *err) {
    if (!sn->valid || !be->state_import)
        return error_set(err, CLOVER_E_INTERNAL, "prompt snapshot: nothing to restore");
    int rc = sn->in_copy ? be->state_load(bs, sn->copy, err) : be->state_import(bs, sn->state, sn->bytes, err);
    if (rc) return error_prefix(err, "prompt snapshot");
    return CLOVER_OK;
}
