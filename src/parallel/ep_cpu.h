/*
 * ep_cpu.h: the simulated expert-parallel MoE as an option of the CPU
 * backend, for tests: CLOVER_SIM_RANKS=N (1..64) makes every MoE of the
 * backend go through ep_moe over a simulated group of N ranks (results bit-
 * identical to the plain CPU MoE). CLOVER_SIM_TIMEOUT_MS sets the deadline
 * of each collective (default 30000); CLOVER_SIM_FAULT=error:R:K or
 * stall:R:K plants a fault on rank R after K collectives. A failure inside a
 * pass is latched (the MoE's output is zeroed) and the pass's caller turns
 * it into the request's error; the group stays broken after it.
 * (--devices is the CUDA backend's option; the simulation is the CPU's.)
 */
#ifndef CLOVER_PARALLEL_EP_CPU_H
#define CLOVER_PARALLEL_EP_CPU_H

#include "parallel/ep_moe.h"

typedef struct ep_cpu ep_cpu;

/* *out = NULL when CLOVER_SIM_RANKS is unset or empty; an error for a bad value. */
int ep_cpu_from_env(ep_cpu **out, clover_error *err);
void ep_cpu_free(ep_cpu *c);
/* cpu_moe_forward's arguments; on failure out is zeroed and the error latched. */
void ep_cpu_forward(ep_cpu *c, float *out, const float *x, size_t n, const cpu_moe_weights *w,
                    const uint8_t *allowed, threadpool *pool);
/* CLOVER_OK, or the latched failure (message prefixed with "expert-parallel MoE"). */
int ep_cpu_status(const ep_cpu *c, clover_error *err);

#endif
