/*
 * backend_cpu_gdn.c: a Gated DeltaNet layer of a pass. The input projections
 * run over all rows at once, in one run of the pool (matmul_batch); then the
 * causal mixer (commit: advances the ring and the state) or the block
 * operator (preview: reads them only), then out_proj.
 *
 * The commit picks the recurrence for a single row and the chunked form for
 * more, as transformers does (decode vs prefill): the fixtures were made
 * that way, and the two forms agree to float32 rounding anyway (gdn.h).
 * A preview does not use in_proj_b (SPEC.md 2.1: no write, so no beta).
 */
#include "cpu/backend_cpu_internal.h"
#include "quant/matmul.h"

void cpu_layer_gdn(backend_session *s, size_t il, size_t n, cpu_pass_mode mode, float ln_ratio) {
    backend *be = s->be;
    const model_gdn_weights *w = &be->model->layers[il].gdn;
    const cpu_layer_w *lw = &be->layers[il];
    cpu_layer *ly = &s->layers[il];
    cpu_scratch *sc = &be->sc;
    const cpu_gdn_dims *d = &be->gdn_dims;
    const size_t H = be->hp->n_embd, cd = cpu_gdn_conv_dim(d), nv = d->n_v_heads, vd = nv * d->v_dim;

    const matmul_item in[4] = {
        {w->qkv.type, w->qkv.data, cd, H, sc->x, n, sc->mixed},
        {w->z.type, w->z.data, vd, H, sc->x, n, sc->z},
        {w->alpha.type, w->alpha.data, nv, H, sc->x, n, sc->ga},
        {w->beta.type, w->beta.data, nv, H, sc->x, n, sc->gb},
    };
    matmul_batch(be->pool, in, mode == CPU_PASS_COMMIT ? 4 : 3);
    if (mode == CPU_PASS_COMMIT) {
        cpu_gdn_mix(sc->gout, sc->mixed, sc->z, sc->gb, sc->ga, &lw->gdn_w, ly->ring, ly->state, d, n,
                    n == 1 ? CPU_GDN_RECURRENT : CPU_GDN_CHUNKED, be->pool, sc->gdn);
    } else {
        gdn_block(sc->gout, sc->mixed, sc->z, sc->ga, ly->ring, ly->state, &lw->block_w, d, n, ln_ratio, be->pool,
                  sc->gdn);
    }
    matmul(be->pool, w->out.type, w->out.data, H, vd, sc->gout, n, sc->y);
}
