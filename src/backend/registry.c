/*
 * registry.c: --device resolved once (registry.h). The probe is the
 * backend's own (backend_ops.probe): the registry adds only the words a
 * user reads and the rule that an explicit CUDA never falls back.
 */
#include "backend/registry.h"

#include <stdio.h>
#include <string.h>

#include "base/error.h"

const backend_ops *backend_registry_cuda(void) {
#ifdef CLOVER_HAVE_CUDA
    return &backend_cuda;
#else
    return NULL;
#endif
}

const char *backend_device_name(int device) {
    switch (device) {
    case CLOVER_DEVICE_AUTO: return "auto";
    case CLOVER_DEVICE_CPU: return "cpu";
    case CLOVER_DEVICE_CUDA: return "cuda";
    default: return "?";
    }
}

#define NO_CUDA_BUILD "this build has no CUDA backend (built without a CUDA toolkit, or with -DCLOVER_CUDA=OFF)"

int backend_registry_resolve(int device, const clover_model *model, const backend_config *cfg, backend_choice *out,
                             clover_error *err) {
    memset(out, 0, sizeof *out);
    if (device != CLOVER_DEVICE_AUTO && device != CLOVER_DEVICE_CPU && device != CLOVER_DEVICE_CUDA)
        return error_set(err, CLOVER_E_INVALID, "device %d is not one of auto, cpu, cuda", device);
    if (!model) return error_set(err, CLOVER_E_INVALID, "no model");
    out->ops = &backend_cpu;
    out->device = CLOVER_DEVICE_CPU;
    if (device == CLOVER_DEVICE_CPU) {
        snprintf(out->why, sizeof out->why, "asked for");
        return CLOVER_OK;
    }
    const backend_ops *cuda = backend_registry_cuda();
    clover_error probe = {0};
    int rc = cuda ? cuda->probe(model, cfg, &probe) : error_set(&probe, CLOVER_E_UNSUPPORTED, NO_CUDA_BUILD);
    if (rc == CLOVER_OK) {
        out->ops = cuda;
        out->device = CLOVER_DEVICE_CUDA;
        snprintf(out->why, sizeof out->why, "%s", device == CLOVER_DEVICE_CUDA ? "asked for" : "auto: a CUDA device is there and the model fits");
        return CLOVER_OK;
    }
    if (device == CLOVER_DEVICE_CUDA) {
        if (!err) return rc;
        *err = probe;
        return error_prefix(err, "--device cuda");
    }
    snprintf(out->why, sizeof out->why, "auto: %s", probe.message);
    return CLOVER_OK;
}

size_t backend_registry_report(const clover_model *model, size_t max_context, char *buf, size_t n) {
    const backend_ops *cuda = backend_registry_cuda();
    if (cuda && cuda->report) return cuda->report(model, max_context, buf, n);
    const char *t = "backend     cpu only (built without CUDA)\n";
    if (buf && n) {
        strncpy(buf, t, n - 1);
        buf[n - 1] = '\0';
    }
    return strlen(t);
}
