/*
 * state_copy_shim.h: the CPU backend with state copies of its own (backend_ops.state_save / state_load /
 * state_copy_free over its export / import into host memory), standing in for CUDA's device copies where no GPU
 * is: test_engine_snapshot (the engine's snapshot through the copies) and test_failover (a session loaded from a
 * copy, then its device lost). shim_saves / shim_loads count the calls; shim_fail makes a save fail after it made
 * its copy (a device out of memory). Header-only: one test file includes it.
 */
#ifndef CLOVER_TEST_STATE_COPY_SHIM_H
#define CLOVER_TEST_STATE_COPY_SHIM_H

#include <stdlib.h>

#include "backend/backend.h"
#include "base/error.h"

struct backend_state_copy {
    unsigned char *b;
    size_t len;
    const backend_session *s;
};
static int shim_saves, shim_loads, shim_fail;

static int shim_save(const backend_session *s, backend_state_copy **c, clover_error *err) {
    if (!*c && !(*c = calloc(1, sizeof **c))) return error_set(err, CLOVER_E_NOMEM, "shim: no memory");
    backend_state_copy *k = *c;
    size_t len = backend_cpu.state_bytes(s);
    unsigned char *b = realloc(k->b, len ? len : 1);
    if (!b) return error_set(err, CLOVER_E_NOMEM, "shim: no memory");
    k->b = b;
    k->s = NULL;
    if (shim_fail) return error_set(err, CLOVER_E_NOMEM, "shim: no room for a copy"); /* *c stays freeable */
    int rc = backend_cpu.state_export(s, k->b, len, err);
    if (rc) return rc;
    k->len = len;
    k->s = s;
    shim_saves++;
    return CLOVER_OK;
}

static int shim_load(backend_session *s, const backend_state_copy *c, clover_error *err) {
    if (c->s != s) return error_set(err, CLOVER_E_INVALID, "shim: another session's copy");
    shim_loads++;
    return backend_cpu.state_import(s, c->b, c->len, err);
}

static void shim_free(backend_state_copy *c) {
    if (c) free(c->b);
    free(c);
}

/* The CPU backend's table with the three copy ops. */
static backend_ops shim_ops(void) {
    backend_ops o = backend_cpu;
    o.state_save = shim_save, o.state_load = shim_load, o.state_copy_free = shim_free;
    return o;
}

#endif
