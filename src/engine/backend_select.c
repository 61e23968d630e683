/*
 * backend_select.c: which backend a public session runs on
 * (clover_session_params.device), and the device report of
 * `clover info --device`. Kept apart from session.c so tests can build
 * sessions over a fake backend without linking any real one.
 *
 * The CUDA backend (src/cuda/, built with CLOVER_HAVE_CUDA) implements
 * passes over one sequence at a time (contract v1's shape, cuda_solo in
 * cuda_backend.h); it is not yet wired to the batched contract v2 the
 * engine runs on, so every public session runs on the CPU for now: AUTO
 * takes the CPU, and CUDA asked for explicitly fails with that reason
 * instead of silently running elsewhere.
 */
#include <string.h>

#include "base/error.h"
#include "engine/session.h"
#include "model/model.h"
#ifdef CLOVER_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

const backend_ops *engine_default_backend(void) { return &backend_cpu; }

int clover_device_from_name(const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "auto")) return CLOVER_DEVICE_AUTO;
    if (!strcmp(name, "cpu")) return CLOVER_DEVICE_CPU;
    if (!strcmp(name, "cuda")) return CLOVER_DEVICE_CUDA;
    return -1;
}

const char *clover_session_backend(const clover_session *s) { return s && s->be ? s->be->name : "none"; }

int clover_session_create(clover_session **out, const clover_model *model, const clover_session_params *params,
                          clover_error *err) {
    int device = params ? params->device : CLOVER_DEVICE_AUTO;
    if (device != CLOVER_DEVICE_AUTO && device != CLOVER_DEVICE_CPU && device != CLOVER_DEVICE_CUDA)
        return error_set(err, CLOVER_E_INVALID, "clover_session_create: device %d, expected auto, cpu or cuda", device);
    if (device == CLOVER_DEVICE_CUDA) {
        if (out) *out = NULL;
#ifdef CLOVER_HAVE_CUDA
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "clover_session_create: the CUDA backend is built in but not yet wired to the engine's "
                         "batched backend contract (v2); sessions run on the CPU (--device cpu or auto)");
#else
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "clover_session_create: this build has no CUDA backend (no CUDA toolkit at configure, or "
                         "-DCLOVER_CUDA=OFF)");
#endif
    }
    return engine_session_create(out, model, engine_default_backend(), params, err);
}

size_t clover_device_report(const clover_model *model, size_t max_context, char *buf, size_t n) {
#ifdef CLOVER_HAVE_CUDA
    return cuda_backend_report(model, max_context, buf, n);
#else
    (void)model, (void)max_context;
    const char *t = "backend     cpu only (built without CUDA)\n";
    if (buf && n) {
        strncpy(buf, t, n - 1);
        buf[n - 1] = '\0';
    }
    return strlen(t);
#endif
}
