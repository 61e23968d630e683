/*
 * moe_hook.h: another MoE the CPU backend can route every MoE layer
 * through, installed from above. The simulated expert-parallel MoE
 * (CLOVER_SIM_RANKS, parallel/ep_cpu.c) is one: it lives in parallel/, which
 * sits above cpu/, so the CPU backend cannot call it by name; the layer that
 * opens a CPU backend (the engine, clover check, a test) installs it here.
 * The hook must give each row's result bit for bit as cpu_moe_forward does.
 */
#ifndef CLOVER_CPU_MOE_HOOK_H
#define CLOVER_CPU_MOE_HOOK_H

#include "backend/backend.h"
#include "base/threadpool.h"
#include "cpu/moe.h"

typedef struct cpu_moe_hook {
    void *ctx; /* owned by the backend once installed (freed with free_ctx) */
    /* cpu_moe_forward's arguments; on failure out is zeroed and the failure latched for status */
    void (*forward)(void *ctx, float *out, const float *x, size_t n, const cpu_moe_weights *w, const uint8_t *allowed,
                    threadpool *pool);
    int (*status)(const void *ctx, clover_error *err); /* CLOVER_OK, or the latched failure */
    void (*free_ctx)(void *ctx);
} cpu_moe_hook;

/* Installs hook on a CPU backend object (backend_cpu's) before its first
 * pass; the backend frees the hook's context when it is destroyed. */
void backend_cpu_set_moe_hook(backend *be, const cpu_moe_hook *hook);

#endif
