/*
 * backend_cpu_moe.c: the MoE of a pass. A commit routes every row over all
 * experts; a preview with the coreset on first computes the block's router
 * logits, keeps the coreset of SPEC.md 2.2 (cpu_moe_coreset), and routes
 * every row inside it (the shared expert is unchanged). The router product
 * is computed twice in that case (here and inside cpu_moe_forward), by the
 * same matmul on the same rows, so both see identical logits; it is E rows
 * of H, small next to the experts.
 */
#include <string.h>

#include "cpu/backend_cpu_internal.h"
#include "parallel/ep_cpu.h"
#include "quant/matmul.h"

size_t cpu_layer_moe(backend *be, size_t il, size_t n, bool coreset, float top_p) {
    cpu_scratch *sc = &be->sc;
    const cpu_moe_weights *w = &be->layers[il].moe_w;
    const size_t E = w->n_expert;
    size_t kept = 0;
    const uint8_t *allowed = NULL;
    if (coreset) {
        matmul(be->pool, w->router_type, w->router, E, w->n_embd, sc->x, n, sc->router);
        cpu_moe_coreset(sc->allowed, sc->router, n, E, w->n_used, top_p, sc->totals, sc->order);
        for (size_t e = 0; e < E; e++) kept += sc->allowed[e] != 0;
        allowed = sc->allowed;
    } else {
        memset(sc->allowed, 1, E);
    }
    if (be->ep) /* the simulated expert-parallel MoE (parallel/ep_cpu.h), bit-identical */
        ep_cpu_forward(be->ep, sc->y, sc->x, n, w, allowed, be->pool);
    else
        cpu_moe_forward(sc->y, sc->x, n, w, allowed, be->pool, sc->moe);
    return kept;
}
