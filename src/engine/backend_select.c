/*
 * backend_select.c: which backend a public session runs on
 * (clover_session_params.device), and the device report of
 * `clover info --device`. Kept apart from session.c so tests can build
 * sessions over a fake backend without linking any real one.
 *
 * Choice: CPU and CUDA (src/cuda/, built with CLOVER_HAVE_CUDA;
 * backend_cuda of cuda_backend.h) both run everything: commits, scoring,
 * autoregressive decoding and block diffusion's preview and resolve. AUTO
 * takes CUDA when its probe passes (a device is there, the model's types
 * are ones the kernels take, the weights fit), else the CPU, silently (AUTO
 * promises nothing). CUDA asked for explicitly runs there or fails with the
 * probe's reason rather than moving to the CPU behind the caller's back.
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
#ifdef CLOVER_HAVE_CUDA
    if (device == CLOVER_DEVICE_CUDA) {
        if (out) *out = NULL;
        if (!model) return error_set(err, CLOVER_E_INVALID, "clover_session_create: model must not be NULL");
        int rc = backend_cuda.probe(model, NULL, err);
        if (rc) {
            error_prefix(err, "clover_session_create: --device cuda");
            return rc;
        }
        return engine_session_create(out, model, &backend_cuda, params, err);
    }
    if (device == CLOVER_DEVICE_AUTO && model && backend_cuda.probe(model, NULL, NULL) == 0)
        return engine_session_create(out, model, &backend_cuda, params, err);
#else
    if (device == CLOVER_DEVICE_CUDA) {
        if (out) *out = NULL;
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "clover_session_create: this build has no CUDA backend (no CUDA toolkit at configure, or "
                         "-DCLOVER_CUDA=OFF)");
    }
#endif
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
