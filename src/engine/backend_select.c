/*
 * backend_select.c: a public session on the backend its device setting
 * (clover_session_params.device) resolves to, and the device report of
 * `clover info --device`. Kept apart from session.c so tests can build
 * sessions over a fake backend without linking any real one.
 *
 * The choice itself is the registry's (backend/registry.h), the same for
 * sessions and engines: CPU and CUDA both run everything; AUTO takes CUDA
 * when its probe passes, else the CPU; CUDA asked for explicitly runs there
 * or fails with one line naming CUDA, never moving to the CPU behind the
 * caller's back.
 *
 * A device backend runs inside the failover (offload/failover.h): a device
 * that fails mid-request moves its sessions to the CPU, and one dropped
 * earlier in the process is not used again. CLOVER_FAULT_INJECT (a
 * diagnostic) puts the CPU backend itself in the failover, as the device,
 * so the failover is tested where there is no GPU.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/registry.h"
#include "base/error.h"
#include "engine/session.h"
#include "model/model.h"
#include "offload/failover.h"
#include "offload/fault_inject.h"
#include "offload/split.h"
#include "parallel/ep_cpu.h"

int clover_device_from_name(const char *name) { /* the registry's names (backend_device_name) */
    if (!name) return -1;
    if (!strcmp(name, "auto")) return CLOVER_DEVICE_AUTO;
    if (!strcmp(name, "cpu")) return CLOVER_DEVICE_CPU;
    if (!strcmp(name, "cuda")) return CLOVER_DEVICE_CUDA;
    return -1;
}

const char *clover_session_backend(const clover_session *s) {
    if (!s || !s->be) return "none";
    return s->be == &backend_failover ? failover_session_backend(s->bs) : s->be->name;
}

int engine_backend_open(const clover_model *model, const backend_config *cfg, const backend_ops *chosen,
                        const backend_ops **ops, backend **bk, clover_error *err) {
    fault_plan plan;
    int rc = fault_plan_from_env(&plan, err);
    if (rc) return rc;
    if (chosen != &backend_cpu && failover_dropped(chosen)) chosen = &backend_cpu;
    if (chosen == &backend_cpu && !plan.armed) {
        *ops = chosen;
        rc = chosen->create(model, cfg, bk, err);
        if (!rc && !cfg->plain && (rc = ep_cpu_attach(*bk, err))) { /* CLOVER_SIM_RANKS, a diagnostic */
            chosen->destroy(*bk);
            *bk = NULL;
        }
        return rc;
    }
    *ops = &backend_failover;
    return failover_create(model, cfg, chosen, &backend_cpu, bk, err);
}

/* A session on its own backend object, opened as engine_backend_open says. */
static int session_on(clover_session **out, const clover_model *model, const backend_ops *chosen,
                      const clover_session_params *params, clover_error *err) {
    clover_session_params def;
    clover_session_params_init(&def);
    if (!out || !model) return engine_session_create(out, model, chosen, params, err); /* its own messages */
    backend_config cfg;
    engine_backend_config(model, params ? params : &def, chosen, &cfg);
    const backend_ops *ops;
    backend *bk = NULL;
    int rc = engine_backend_open(model, &cfg, chosen, &ops, &bk, err);
    if (rc) return error_prefix(err, "session on the %s backend", chosen->name);
    rc = engine_session_create_on(out, model, ops, bk, params, err);
    if (rc) {
        ops->destroy(bk);
        return rc;
    }
    (*out)->own_bk = true;
    return CLOVER_OK;
}

/* --gpu-layers: the device's first layers, the CPU's the rest (offload/split.h). */
static int session_split(clover_session **out, const clover_model *model, const backend_ops *dev,
                         const clover_session_params *params, clover_error *err) {
    if (!out || !model) return engine_session_create(out, model, dev, params, err);
    *out = NULL;
    backend_config cfg;
    engine_backend_config(model, params, dev, &cfg);
    backend *bk = NULL;
    int rc = split_create(model, &cfg, dev, &backend_cpu, params->gpu_layers, &bk, err);
    if (rc) return error_prefix(err, "--gpu-layers %u", params->gpu_layers);
    rc = engine_session_create_on(out, model, &backend_split, bk, params, err);
    if (rc) {
        backend_split.destroy(bk);
        return rc;
    }
    (*out)->own_bk = true;
    return CLOVER_OK;
}

int engine_gpu_mem_check(const clover_session_params *params, clover_error *err) {
    if (params->device != CLOVER_DEVICE_CUDA)
        return error_set(err, CLOVER_E_INVALID, "--gpu-mem needs --device cuda (a budget of the CUDA device's memory)");
    if (params->gpu_layers)
        return error_set(err, CLOVER_E_INVALID,
                         "--gpu-mem and --gpu-layers do not go together: --gpu-mem keeps every layer on the GPU and "
                         "pages the routed experts");
    if (!backend_registry_cuda())
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "--gpu-mem: this build has no CUDA backend (built without a CUDA toolkit, or with "
                         "-DCLOVER_CUDA=OFF)");
    return CLOVER_OK;
}

int clover_session_create(clover_session **out, const clover_model *model, const clover_session_params *params,
                          clover_error *err) {
    clover_error local;
    if (!err) err = &local;
    int device = params ? params->device : CLOVER_DEVICE_AUTO;
    if (out) *out = NULL;
    if (!out || !model) return engine_session_create(out, model, &backend_cpu, params, err); /* its own messages */
    if (params && params->gpu_mem) { /* the CUDA backend with its expert pool (its probe checks the budget) */
        int rc = engine_gpu_mem_check(params, err);
        if (rc) return rc;
        backend_config cfg;
        engine_backend_config(model, params, backend_registry_cuda(), &cfg);
        backend_choice ch;
        if ((rc = backend_registry_resolve(device, model, &cfg, &ch, err))) return rc;
        return session_on(out, model, ch.ops, params, err);
    }
    if (params && params->gpu_layers) {
        const backend_ops *cuda = backend_registry_cuda();
        if (device == CLOVER_DEVICE_CPU)
            return error_set(err, CLOVER_E_INVALID, "--gpu-layers needs the CUDA device, not --device cpu");
        if (!cuda)
            return error_set(err, CLOVER_E_UNSUPPORTED,
                             "--gpu-layers: this build has no CUDA backend (built without a CUDA toolkit, or with "
                             "-DCLOVER_CUDA=OFF)");
        /* The CUDA side of a split (on since its H200 run, 2026-12-07; CLOVER_CUDA_LAYER_RANGE=0 turns it
         * off): every layer asked for (N >= the model's layers, llama.cpp's -ngl 99) is the whole model on the
         * device, a plain CUDA session; with the switch at 0 the split refuses N >= n_layer */
        const char *off = getenv("CLOVER_CUDA_LAYER_RANGE");
        if (!(off && !strcmp(off, "0")) && params->gpu_layers >= model->hp.n_layer)
            return session_on(out, model, cuda, params, err);
        return session_split(out, model, cuda, params, err);
    }
    backend_choice ch;
    int rc = backend_registry_resolve(device, model, NULL, &ch, err);
    if (rc) return rc;
    return session_on(out, model, ch.ops, params, err);
}

size_t clover_device_report(const clover_model *model, size_t max_context, char *buf, size_t n) {
    return backend_registry_report(model, max_context, buf, n);
}
