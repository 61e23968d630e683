/*
 * backend_cpu_attention.c: a gated full-attention layer of a pass. The three
 * projections run over all rows of the pass at once (each weight read once)
 * in one run of the pool (matmul_batch), then the operators of attention.h:
 * cpu_attn_prepare writes the rows' keys and values into the cache at their
 * positions, cpu_attn_forward_pool attends, o_proj maps back.
 *
 * A preview writes its block's K/V at rows n_past.. of the cache, past the
 * committed end: the committed rows are untouched and the committed length
 * does not cover the block, so the next commit simply overwrites them.
 */
#include "cpu/backend_cpu_internal.h"
#include "quant/matmul.h"

void cpu_layer_attention(backend_session *s, size_t il, size_t n, size_t pos, cpu_pass_mode mode) {
    backend *be = s->be;
    const model_attention_weights *w = &be->model->layers[il].attn;
    cpu_layer *ly = &s->layers[il];
    cpu_scratch *sc = &be->sc;
    const cpu_attn_dims *d = &be->attn_dims;
    const size_t H = be->hp->n_embd, nh = d->n_head, nkv = d->n_head_kv, hd = d->head_dim;

    const matmul_item in[3] = {
        {w->q.type, w->q.data, 2 * nh * hd, H, sc->x, n, sc->qg},
        {w->k.type, w->k.data, nkv * hd, H, sc->x, n, sc->k},
        {w->v.type, w->v.data, nkv * hd, H, sc->x, n, sc->v},
    };
    matmul_batch(be->pool, in, 3);
    cpu_attn_prepare(sc->q, sc->gate, ly->k_cache, ly->v_cache, sc->qg, sc->k, sc->v, w->q_norm.data,
                     w->k_norm.data, be->inv_freq, d, (int64_t)pos, n, sc->cs);
    cpu_attn_forward_pool(be->pool, sc->att, sc->q, sc->gate, ly->k_cache, ly->v_cache, d, (int64_t)pos, n,
                          mode == CPU_PASS_COMMIT, be->attn_ctx, be->attn_scratch);
    matmul(be->pool, w->o.type, w->o.data, H, nh * hd, sc->att, n, sc->y);
}
