/*
 * expert_host.h: routed experts computed by the host CPU for a device
 * backend (--gpu-mem, issue 31: llama.cpp's --n-cpu-moe idea, decided per
 * layer). When a layer's routing asks for experts that are not in the
 * device's pool, copying each one over the bus can cost more than reading
 * it once from host memory on the CPU: the device backend then gives those
 * (row, expert) pairs to this hook, computes the rest itself, and adds the
 * hook's sum to its own.
 *
 * The hook is made by a layer above the device backend (offload/
 * expert_host_cpu.c, with the CPU backend's MoE code: cuda/ never includes
 * cpu/), handed down as a constructor in backend_config.expert_host_open,
 * and owned by the backend that opened it (close at its destroy).
 */
#ifndef CLOVER_BACKEND_EXPERT_HOST_H
#define CLOVER_BACKEND_EXPERT_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "clover.h"

typedef struct expert_host {
    void *ctx;
    /* out[r][0..H) = the sum, in ascending expert id, of wts[r*k + j] * expert_{ids[r*k + j]}(x[r]) over the
     * pairs j with ids[r*k + j] >= 0 (k: the model's experts per row; -1: a pair the device computes); a row
     * with no such pair gets zeros. x: [n][H], the MoE layer's input (after its norm); n <= the max_rows given
     * at open. The routed experts only: no router, no shared expert. 0, or a status with err set (out then
     * holds nothing useful). One call at a time per hook. */
    int (*compute)(void *ctx, uint32_t layer, float *out, const float *x, size_t n, const int32_t *ids,
                   const float *wts, clover_error *err);
    void (*close)(void *ctx);
} expert_host;

/* Makes a hook for model m: up to max_rows rows a call, on n_threads host threads (0: every online CPU).
 * A model without routed experts, or one the host cannot compute with, is refused with a message. */
typedef int (*expert_host_open_fn)(const clover_model *m, size_t n_threads, size_t max_rows, expert_host *out,
                                   clover_error *err);

#endif
