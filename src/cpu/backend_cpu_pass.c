/*
 * backend_cpu_pass.c: one run of rows through the trunk, shared by commit and
 * preview (they differ only inside the three operators SPEC.md 2 changes,
 * which the layer steps select by mode). HF's layer, exactly:
 * h += mixer(norm_in(h)); h += moe(norm_post(h)); each step over all rows of
 * the run at once so every weight is read once per run.
 */
#include <string.h>

#include "base/timer.h"
#include "cpu/backend_cpu_internal.h"
#include "cpu/norm.h"
#include "quant/quant.h"

static void pass_hidden_store(const cpu_pass *p, size_t slot, const float *h, size_t n, size_t H) {
    if (!p->hidden) return;
    memcpy(p->hidden + (slot * p->hidden_rows + p->row0) * H, h, n * H * sizeof *h);
}

static void pass_residual_add(float *h, const float *y, size_t count) {
    for (size_t i = 0; i < count; i++) h[i] = h[i] + y[i];
}

void cpu_pass_run(backend_session *s, const int32_t *ids, size_t n, const cpu_pass *p) {
    backend *be = s->be;
    const clover_model *m = be->model;
    const size_t H = be->hp->n_embd, L = be->hp->n_layer, E = be->hp->n_expert;
    const float eps = be->hp->rms_eps;
    cpu_scratch *sc = &be->sc;
    backend_pass_stats unused = {0};
    backend_pass_stats *st = p->stats ? p->stats : &unused;

    const size_t row_bytes = quant_row_bytes(m->token_embd.type, H);
    for (size_t r = 0; r < n; r++)
        quant_dequantize_row(m->token_embd.type, (const char *)m->token_embd.data + (size_t)ids[r] * row_bytes,
                             sc->h + r * H, H);
    pass_hidden_store(p, 0, sc->h, n, H);

    for (size_t l = 0; l < L; l++) {
        const model_layer *ml = &m->layers[l];
        cpu_rms_norm(sc->x, sc->h, ml->attn_norm.data, n, H, eps);
        double t0 = timer_now();
        if (ml->kind == MODEL_LAYER_ATTENTION) {
            cpu_layer_attention(s, l, n, p->pos, p->mode);
            st->attn_s += timer_now() - t0;
        } else {
            cpu_layer_gdn(s, l, n, p->mode, p->ln_ratio);
            st->gdn_s += timer_now() - t0;
        }
        pass_residual_add(sc->h, sc->y, n * H);

        cpu_rms_norm(sc->x, sc->h, ml->post_norm.data, n, H, eps);
        t0 = timer_now();
        size_t kept = cpu_layer_moe(be, l, n, p->coreset, p->top_p);
        st->moe_s += timer_now() - t0;
        if (p->coreset) {
            st->coreset_kept += kept;
            st->coreset_layers++;
        }
        if (p->kept) memcpy(p->kept + l * E, sc->allowed, E);
        pass_residual_add(sc->h, sc->y, n * H);
        pass_hidden_store(p, l + 1, sc->h, n, H);
    }
}
