/*
 * backend_select.c: which backend a public session runs on (clover.h's
 * clover_session_params.device). CPU always exists; CUDA when the library
 * was built with it (CLOVER_HAVE_CUDA). AUTO takes CUDA when a device is
 * there, the model is autoregressive (the CUDA backend has no preview, so a
 * Clover model's block diffusion stays on the CPU) and the session can be
 * created there (it fits); otherwise the CPU. CUDA asked for explicitly
 * fails with the reason instead of falling back. Kept apart from session.c
 * so tests can build sessions over a fake backend without linking any real
 * one.
 */
#include <string.h>

#include "base/error.h"
#include "engine/session.h"
#include "model/model.h"
#ifdef CLOVER_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

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
#ifdef CLOVER_HAVE_CUDA
    if (device == CLOVER_DEVICE_CUDA) return engine_session_create(out, model, &backend_cuda, params, err);
    if (device == CLOVER_DEVICE_AUTO && model && !model->has_record && cuda_backend_usable(model, NULL) == 0) {
        if (engine_session_create(out, model, &backend_cuda, params, NULL) == CLOVER_OK) return CLOVER_OK;
        /* it does not fit (or the device failed): the CPU takes it */
    }
#else
    if (device == CLOVER_DEVICE_CUDA)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "clover_session_create: this build has no CUDA backend (no CUDA toolkit at configure, or "
                         "-DCLOVER_CUDA=OFF)");
#endif
    return engine_session_create(out, model, &backend_cpu, params, err);
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
