/*
 * ep_cpu.c: the CPU backend's test hook for the simulated expert-parallel
 * MoE (ep_cpu.h): the environment parsed once when the backend is opened, the
 * group and the MoE owned here, a failure latched for the pass's caller.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "cpu/moe_hook.h"
#include "parallel/ep_cpu.h"

typedef struct ep_cpu {
    par_transport *t;
    ep_moe *ep;
    int failed;
    clover_error err;
} ep_cpu;

static int env_uint(const char *name, unsigned long lo, unsigned long hi, unsigned long *out, clover_error *err) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    unsigned long x = (*v >= '0' && *v <= '9') ? strtoul(v, &end, 10) : 0;
    if (errno || !(*v >= '0' && *v <= '9') || *end || x < lo || x > hi)
        return error_set(err, CLOVER_E_INVALID, "%s='%.32s': expected a number %lu..%lu", name, v, lo, hi);
    *out = x;
    return 1;
}

static int env_fault(par_config *cfg, clover_error *err) {
    const char *v = getenv("CLOVER_SIM_FAULT");
    if (!v || !*v) return CLOVER_OK;
    char kind[8] = {0};
    int rank = -1, used = 0;
    unsigned after = 0;
    if (sscanf(v, "%7[a-z]:%d:%u%n", kind, &rank, &after, &used) != 3 || v[used] ||
        (strcmp(kind, "error") && strcmp(kind, "stall")))
        return error_set(err, CLOVER_E_INVALID, "CLOVER_SIM_FAULT='%.32s': expected error:RANK:AFTER or "
                         "stall:RANK:AFTER", v);
    cfg->fault = !strcmp(kind, "error") ? PAR_FAULT_ERROR : PAR_FAULT_STALL;
    cfg->fail_rank = rank;
    cfg->fail_after = after;
    return CLOVER_OK;
}

static void ep_cpu_free(void *ctx);

static int ep_cpu_from_env(ep_cpu **out, clover_error *err) {
    *out = NULL;
    unsigned long ranks = 0, timeout = 30000;
    int rc = env_uint("CLOVER_SIM_RANKS", 1, PAR_MAX_RANKS, &ranks, err);
    if (rc <= 0) return rc;
    if ((rc = env_uint("CLOVER_SIM_TIMEOUT_MS", 1, 3600000, &timeout, err)) < 0) return rc;
    par_config cfg = {.kind = PAR_KIND_SIM, .n_ranks = ranks, .timeout_ms = (unsigned)timeout, .fail_rank = -1};
    if ((rc = env_fault(&cfg, err))) return rc;
    ep_cpu *c = mem_calloc(1, sizeof *c);
    if (!c) return error_set(err, CLOVER_E_NOMEM, "CLOVER_SIM_RANKS: out of memory");
    if ((rc = par_open(&cfg, &c->t, err)) || (rc = ep_moe_create(c->t, &c->ep, err))) {
        ep_cpu_free(c);
        return error_prefix(err, "CLOVER_SIM_RANKS=%lu", ranks);
    }
    *out = c;
    return CLOVER_OK;
}

static void ep_cpu_free(void *ctx) {
    ep_cpu *c = ctx;
    if (!c) return;
    ep_moe_free(c->ep);
    par_close(c->t);
    mem_free(c);
}

static void ep_cpu_forward(void *ctx, float *out, const float *x, size_t n, const cpu_moe_weights *w,
                           const uint8_t *allowed, threadpool *pool) {
    ep_cpu *c = ctx;
    int rc = c->failed ? c->failed : ep_moe_forward(c->ep, out, x, n, w, allowed, pool, &c->err);
    if (rc) {
        c->failed = rc;
        memset(out, 0, n * w->n_embd * sizeof *out);
    }
}

static int ep_cpu_status(const void *ctx, clover_error *err) {
    const ep_cpu *c = ctx;
    if (!c || !c->failed) return CLOVER_OK;
    return error_set(err, c->failed, "expert-parallel MoE: %s", c->err.message);
}

int ep_cpu_attach(backend *cpu_be, clover_error *err) {
    ep_cpu *c = NULL;
    int rc = ep_cpu_from_env(&c, err);
    if (rc || !c) return rc;
    cpu_moe_hook h = {.ctx = c, .forward = ep_cpu_forward, .status = ep_cpu_status, .free_ctx = ep_cpu_free};
    backend_cpu_set_moe_hook(cpu_be, &h);
    return CLOVER_OK;
}
