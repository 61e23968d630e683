/*
 * expert_host_cpu.h: the host side of backend/expert_host.h, made with the
 * CPU backend's MoE code (cpu/moe.h). It lives in offload/, above both cpu/
 * and the device backends, because cuda/ never includes cpu/: the layer that
 * opens a device backend passes expert_host_cpu_open down as its
 * backend_config.expert_host_open, and the device backend calls it through
 * the expert_host_open_fn type alone.
 */
#ifndef CLOVER_OFFLOAD_EXPERT_HOST_CPU_H
#define CLOVER_OFFLOAD_EXPERT_HOST_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/expert_host.h"
#include "clover.h"

/* The largest max_rows the hook takes (the CPU backend's limit: its scratch grows linearly with it). */
#define EXPERT_HOST_CPU_MAX_ROWS 65536u

/* An expert_host_open_fn. Binds every layer's routed experts as the CPU backend does (cpu_moe_weights_bind;
 * the shared expert is not the hook's and is neither checked nor read), starts a pool of n_threads threads,
 * the calling thread included (0: every online CPU; the pool's workers spin briefly after each call, then
 * sleep: base/threadpool.h), and allocates scratch for max_rows rows (1..EXPERT_HOST_CPU_MAX_ROWS). The
 * products run at the process's SIMD level, the CPU backend's (cpu/cpu_simd.h, quant/simd_level.h). A model
 * without routed experts, or whose experts the host cannot compute with, is refused with a message. */
int expert_host_cpu_open(const clover_model *m, size_t n_threads, size_t max_rows, expert_host *out,
                         clover_error *err);

/* What a hook has computed since it was opened (calls that succeeded). */
typedef struct expert_host_cpu_counts {
    uint64_t calls;   /* compute calls with at least one row */
    uint64_t rows;    /* rows handed in (rows with no pair included) */
    uint64_t pairs;   /* (row, expert) pairs computed: ids >= 0 */
    uint64_t experts; /* distinct experts a call, summed over calls: expert weight reads from host memory */
} expert_host_cpu_counts;

/* Fills *out; false (and *out zeroed) when h was not made by expert_host_cpu_open. Not during a compute. */
bool expert_host_cpu_get_counts(const expert_host *h, expert_host_cpu_counts *out);

#endif
