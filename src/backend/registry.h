/*
 * registry.h: the backends built into this library, and the one place a
 * device setting (--device cpu|cuda|auto, clover_session_params.device) is
 * resolved to one of them, for engines, sessions and every command alike,
 * so `clover serve --device cuda` and `clover run --device cuda` cannot
 * disagree (they once did: the engine ignored the setting).
 *
 * Rules: CPU is always there. CUDA asked for explicitly runs there or fails
 * with one line naming CUDA (no device found, the build has no CUDA backend,
 * the model's types or size): never a silent move to the CPU. AUTO takes
 * CUDA when its probe passes (a device is there, the kernels take the
 * model's types and the weights fit), else the CPU, and says why in the
 * choice's text, which the CLI and the server print.
 *
 * The registry names the backends' tables by their extern declarations in
 * backend.h only: it includes no backend's header (layers: backend/ sits
 * below cpu/ and cuda/; the link, not the include graph, joins them).
 */
#ifndef CLOVER_BACKEND_REGISTRY_H
#define CLOVER_BACKEND_REGISTRY_H

#include "backend/backend.h"

typedef struct backend_choice {
    const backend_ops *ops; /* the backend to open */
    int device;             /* CLOVER_DEVICE_CPU or CLOVER_DEVICE_CUDA */
    char why[1100];         /* the reason, in a user's words ("auto: no CUDA device found (...)") */
} backend_choice;

/* The CUDA backend's table when this build has one, else NULL. */
const backend_ops *backend_registry_cuda(void);

/* "cpu" / "cuda" / "auto" for a clover_device value ("?" otherwise). */
const char *backend_device_name(int device);

/* Resolves device for model (cfg: the configuration it will be opened
 * with, for the probe; may be NULL). CLOVER_OK and *out filled, or
 * CLOVER_E_INVALID (not a device) / CLOVER_E_UNSUPPORTED (CUDA asked for and
 * not usable here) with a one-line message naming CUDA. */
int backend_registry_resolve(int device, const clover_model *model, const backend_config *cfg, backend_choice *out,
                             clover_error *err);

/* clover_device_report's text: the CUDA backend's report (each device,
 * its memory, what the model needs there), or one line saying the build has
 * only the CPU. Returns the length the whole text needs. */
size_t backend_registry_report(const clover_model *model, size_t max_context, char *buf, size_t n);

#endif
