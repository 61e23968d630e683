/*
 * backend_cpu_checkpoint.c: a cheap checkpoint of one session (backend.h)
 * and KV truncation. A checkpoint copies only the GDN rings and states
 * (~63 MiB for the 35B geometry, a memcpy) and the committed length: the KV
 * rows below that length are never rewritten by later commits (they only
 * append), so restoring truncates the caches back to it instead of copying
 * them. The session's epoch (bumped by reset, import and restore) tells a
 * stale checkpoint from a valid one.
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "cpu/backend_cpu_internal.h"

static size_t gdn_layers(const backend_session *s) {
    size_t n = 0;
    for (uint32_t l = 0; l < s->hp->n_layer; l++) n += s->layers[l].kind == MODEL_LAYER_GDN;
    return n;
}

int backend_cpu_checkpoint_create(backend_session *s, backend_checkpoint **out, clover_error *err) {
    if (!s || !out) return error_set(err, CLOVER_E_INVALID, "checkpoint: no session or no output pointer");
    *out = NULL;
    backend_checkpoint *c = mem_calloc(1, sizeof *c);
    size_t floats = gdn_layers(s) * cpu_gdn_state_floats(s->be);
    if (c) c->gdn = mem_calloc(floats ? floats : 1, sizeof(float));
    if (!c || !c->gdn) {
        if (c) mem_free(c);
        return error_set(err, CLOVER_E_NOMEM, "checkpoint: cannot allocate %zu bytes", floats * sizeof(float));
    }
    c->s = s;
    *out = c;
    return CLOVER_OK;
}

void backend_cpu_checkpoint_free(backend_checkpoint *c) {
    if (!c) return;
    mem_free(c->gdn);
    mem_free(c);
}

int backend_cpu_checkpoint_save(backend_session *s, backend_checkpoint *c, clover_error *err) {
    if (!s || !c || c->s != s) return error_set(err, CLOVER_E_INVALID, "checkpoint_save: not this session's checkpoint");
    const size_t per = cpu_gdn_state_floats(s->be);
    float *p = c->gdn;
    for (uint32_t l = 0; l < s->hp->n_layer; l++) {
        if (s->layers[l].kind != MODEL_LAYER_GDN) continue;
        memcpy(p, s->layers[l].ring, per * sizeof(float)); /* ring and state are adjacent in the arena */
        p += per;
    }
    c->n_past = s->n_past;
    c->epoch = s->epoch;
    c->valid = true;
    return CLOVER_OK;
}

int backend_cpu_checkpoint_restore(backend_session *s, const backend_checkpoint *c, clover_error *err) {
    if (!s || !c || c->s != s)
        return error_set(err, CLOVER_E_INVALID, "checkpoint_restore: not this session's checkpoint");
    if (!c->valid || c->epoch != s->epoch || c->n_past > s->n_past)
        return error_set(err, CLOVER_E_INVALID,
                         "checkpoint_restore: the checkpoint (length %zu) is stale: the session was reset, imported "
                         "or restored since it was saved",
                         c->n_past);
    const size_t per = cpu_gdn_state_floats(s->be);
    const float *p = c->gdn;
    for (uint32_t l = 0; l < s->hp->n_layer; l++) {
        if (s->layers[l].kind != MODEL_LAYER_GDN) continue;
        memcpy(s->layers[l].ring, p, per * sizeof(float));
        p += per;
    }
    s->n_past = c->n_past; /* the KV rows below it are the checkpoint's: commits only append */
    s->epoch++;
    ((backend_checkpoint *)c)->epoch = s->epoch; /* the checkpoint stays valid for another restore */
    s->has_preview = false;
    return CLOVER_OK;
}

int backend_cpu_truncate(backend_session *s, size_t n, clover_error *err) {
    if (!s) return error_set(err, CLOVER_E_INVALID, "truncate: no session");
    if (n > s->n_past)
        return error_set(err, CLOVER_E_INVALID, "truncate: to %zu rows, but the session holds %zu", n, s->n_past);
    if (n == s->n_past) return CLOVER_OK;
    if (gdn_layers(s))
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "truncate: the model's GDN states cannot be rewound; restore a checkpoint instead");
    s->n_past = n;
    s->has_preview = false;
    return CLOVER_OK;
}
