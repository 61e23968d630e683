/*
 * synth_params.c: the parameter totals `clover synth` prints: every element
 * of the planned tensors (the file's own count, Clover's tensors included),
 * and those a token reads: all of it except the routed experts, of which a
 * token uses n_expert_used of n_expert. Counted from the plan, so the figure
 * is the file's, not a formula kept beside it.
 */
#include <string.h>

#include "base/alloc.h"
#include "model/synth.h"

int clover_synth_count(const clover_synth_options *opts, clover_synth_params *out, clover_error *err) {
    synth_geometry g;
    int rc = synth_geometry_make(opts, &g, err);
    if (rc) return rc;
    synth_tensor *plan = NULL;
    size_t n = 0;
    if ((rc = synth_plan_make(&g, !(opts && opts->no_diffusion), &plan, &n, err))) return rc;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        const synth_tensor *t = &plan[i];
        uint64_t elems = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        out->total += elems;
        if (strstr(t->name, "_exps.")) {
            out->experts += elems;
            out->active += elems / g.n_expert * g.n_expert_used; /* ne[2] = n_expert: exact */
        } else {
            out->active += elems;
        }
    }
    out->n_tensors = n;
    mem_free(plan);
    return CLOVER_OK;
}
