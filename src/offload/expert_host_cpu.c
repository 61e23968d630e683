/*
 * expert_host_cpu.c: the host CPU computing the (row, expert) pairs a device
 * backend hands it (backend/expert_host.h, --gpu-mem's misses). Each layer's
 * routed experts are bound once at open exactly as the CPU backend binds them
 * (cpu_moe_weights_bind: views of the mapped GGUF, nothing copied), and every
 * call goes through cpu_moe_experts, the CPU backend's own MoE driver with
 * the routing given: a pair's result is the CPU backend's bits for that
 * expert and row, and only the experts some row asked for are read, once
 * each for all their rows.
 *
 * The arguments come from another backend, so every call is checked before
 * any work (the layer, the row count, each id) and a bad one is a one-line
 * message, never a read out of bounds. Scratch, the pool and the id
 * bookkeeping are sized at open: a call allocates nothing.
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/threadpool.h"
#include "cpu/moe.h"
#include "model/model.h"
#include "offload/expert_host_cpu.h"

typedef struct eh_cpu {
    uint32_t n_layer;
    size_t n_expert, n_used, max_rows;
    cpu_moe_weights *w; /* [n_layer]; gate_exps NULL: a layer without routed experts */
    threadpool *pool;
    void *scratch;      /* cpu_moe_scratch_bytes of the largest layer at max_rows, 64-byte aligned */
    uint8_t *seen;      /* [n_expert] a call's experts, for the counts */
    expert_host_cpu_counts counts;
} eh_cpu;

static void eh_close(void *ctx) {
    eh_cpu *h = ctx;
    if (!h) return;
    threadpool_free(h->pool);
    mem_free(h->scratch);
    mem_free(h->seen);
    mem_free(h->w);
    mem_free(h);
}

static int eh_compute(void *ctx, uint32_t layer, float *out, const float *x, size_t n, const int32_t *ids,
                      const float *wts, clover_error *err) {
    eh_cpu *h = ctx;
    if (layer >= h->n_layer)
        return error_set(err, CLOVER_E_INVALID, "host experts: layer %u, but the model has %u layers", layer,
                         h->n_layer);
    const cpu_moe_weights *w = &h->w[layer];
    if (!w->gate_exps) return error_set(err, CLOVER_E_INVALID, "host experts: layer %u has no routed experts", layer);
    if (n > h->max_rows)
        return error_set(err, CLOVER_E_INVALID, "host experts: layer %u: %zu rows in one call, more than max_rows %zu",
                         layer, n, h->max_rows);
    if (n == 0) return CLOVER_OK;
    if (!out || !x || !ids || !wts)
        return error_set(err, CLOVER_E_INVALID, "host experts: layer %u: out, x, ids or wts is NULL for %zu rows",
                         layer, n);
    const size_t k = h->n_used, E = h->n_expert;
    memset(h->seen, 0, E);
    uint64_t pairs = 0, experts = 0;
    for (size_t i = 0; i < n * k; i++) { /* every id before any work: cpu_moe_experts indexes with them */
        const int32_t e = ids[i];
        if (e < -1 || (e >= 0 && (size_t)e >= E))
            return error_set(err, CLOVER_E_INVALID,
                             "host experts: layer %u, row %zu, slot %zu: expert id %d, expected -1 (none) or 0..%zu",
                             layer, i / k, i % k, (int)e, E - 1);
        if (e < 0) continue;
        pairs++;
        if (!h->seen[e]) h->seen[e] = 1, experts++;
    }
    cpu_moe_experts(out, x, n, w, ids, wts, h->pool, h->scratch);
    h->counts.calls++;
    h->counts.rows += n;
    h->counts.pairs += pairs;
    h->counts.experts += experts;
    return CLOVER_OK;
}

int expert_host_cpu_open(const clover_model *m, size_t n_threads, size_t max_rows, expert_host *out,
                         clover_error *err) {
    if (!out) return error_set(err, CLOVER_E_INVALID, "host experts: no output hook");
    *out = (expert_host){0};
    if (!m) return error_set(err, CLOVER_E_INVALID, "host experts: no model");
    if (max_rows == 0 || max_rows > EXPERT_HOST_CPU_MAX_ROWS)
        return error_set(err, CLOVER_E_INVALID, "host experts: max_rows %zu, expected 1..%u", max_rows,
                         EXPERT_HOST_CPU_MAX_ROWS);
    const model_hparams *hp = &m->hp;
    if (hp->n_expert == 0 || hp->n_expert_used == 0 || hp->n_layer == 0 || !m->layers)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "host experts: the model has no routed experts (%u experts, %u a token, %u layers)",
                         hp->n_expert, hp->n_expert_used, hp->n_layer);
    eh_cpu *h = mem_calloc(1, sizeof *h);
    if (!h) return error_set(err, CLOVER_E_NOMEM, "host experts: out of memory");
    h->n_layer = hp->n_layer;
    h->n_expert = hp->n_expert;
    h->n_used = hp->n_expert_used;
    h->max_rows = max_rows;
    int rc = CLOVER_OK;
    h->w = mem_calloc(hp->n_layer, sizeof *h->w);
    h->seen = mem_calloc(hp->n_expert, 1);
    if (!h->w || !h->seen) {
        rc = error_set(err, CLOVER_E_NOMEM, "host experts: out of memory for %u layers", hp->n_layer);
        goto fail;
    }
    size_t scratch = 0;
    uint32_t n_moe = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        cpu_moe_weights w;
        cpu_moe_weights_bind(&w, &m->layers[l], hp, l);
        if (!w.gate_exps && !w.up_exps && !w.down_exps) continue; /* not a MoE layer: compute refuses it */
        w.n_ff_shexp = 0; /* the shared expert stays the device's: not checked, never read */
        if ((rc = cpu_moe_weights_check(&w, err))) {
            error_prefix(err, "host experts: layer %u", l);
            goto fail;
        }
        const size_t b = cpu_moe_scratch_bytes(&w, max_rows);
        scratch = b > scratch ? b : scratch;
        h->w[l] = w;
        n_moe++;
    }
    if (n_moe == 0) {
        rc = error_set(err, CLOVER_E_UNSUPPORTED, "host experts: none of the model's %u layers has routed experts",
                       hp->n_layer);
        goto fail;
    }
    h->scratch = mem_alloc(scratch);
    if (!h->scratch) {
        rc = error_set(err, CLOVER_E_NOMEM, "host experts: cannot allocate %zu bytes of scratch (max_rows %zu)",
                       scratch, max_rows);
        goto fail;
    }
    if ((rc = threadpool_create(&h->pool, n_threads, err))) {
        error_prefix(err, "host experts");
        goto fail;
    }
    *out = (expert_host){.ctx = h, .compute = eh_compute, .close = eh_close};
    return CLOVER_OK;
fail:
    eh_close(h);
    return rc;
}

bool expert_host_cpu_get_counts(const expert_host *h, expert_host_cpu_counts *out) {
    *out = (expert_host_cpu_counts){0};
    if (!h || h->compute != eh_compute || !h->ctx) return false;
    *out = ((const eh_cpu *)h->ctx)->counts;
    return true;
}
