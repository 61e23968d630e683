/*
 * backend_select.c: which backend a public session runs on. The CPU backend
 * for now; a device backend (CUDA) will be chosen here when present, with
 * the CPU as the fallback for a model the device cannot take. Kept apart
 * from session.c so tests can build sessions over a fake backend without
 * linking any real one.
 */
#include "engine/session.h"

const backend_ops *engine_default_backend(void) { return &backend_cpu; }

int clover_session_create(clover_session **out, const clover_model *model, const clover_session_params *params,
                          clover_error *err) {
    return engine_session_create(out, model, engine_default_backend(), params, err);
}
