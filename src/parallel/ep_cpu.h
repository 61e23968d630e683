/*
 * ep_cpu.h: the simulated expert-parallel MoE as an option of the CPU
 * backend, for tests: CLOVER_SIM_RANKS=N (1..64) makes every MoE of the
 * backend go through ep_moe over a simulated group of N ranks (results bit-
 * identical to the plain CPU MoE). CLOVER_SIM_TIMEOUT_MS sets the deadline
 * of each collective (default 30000); CLOVER_SIM_FAULT=error:R:K or
 * stall:R:K plants a fault on rank R after K collectives. A failure inside a
 * pass is latched (the MoE's output is zeroed) and the pass's caller turns
 * it into the request's error; the group stays broken after it. It reaches
 * the CPU backend through cpu/moe_hook.h: parallel/ sits above cpu/, so the
 * CPU backend never names it.
 * (--devices is the CUDA backend's option; the simulation is the CPU's.)
 */
#ifndef CLOVER_PARALLEL_EP_CPU_H
#define CLOVER_PARALLEL_EP_CPU_H

#include "parallel/ep_moe.h"

#include "backend/backend.h"

/* Reads CLOVER_SIM_RANKS (and the two variables above) and, when it is set,
 * installs the simulated expert-parallel MoE on cpu_be, a backend object of
 * backend_cpu (cpu/moe_hook.h), which then owns it. CLOVER_OK also when the
 * variable is unset or empty (nothing installed); CLOVER_E_INVALID with one
 * line naming the variable for a bad value. Callers: whoever opens a CPU
 * backend that is not a plain reference (engine, clover check, tests). */
int ep_cpu_attach(backend *cpu_be, clover_error *err);

#endif
