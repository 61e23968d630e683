/*
 * backend_cpu_session.c: creating, resetting and freeing a CPU session, and
 * growing its KV caches.
 *
 * Everything whose size is known at creation (the GDN rings and states, the
 * per-pass scratch for max_rows rows, the preview diagnostics) lives in one
 * arena carved by a single layout function, so sizing and carving cannot
 * disagree. The KV caches are separate and grow by doubling up to
 * max_context: a 262144-token context is about 10 GB of K/V for the released
 * model, which a session must not take before it needs it.
 */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "cpu/backend_cpu_internal.h"
#include "cpu/rope.h"
#include "quant/quant.h"

/* The largest rows per pass a session accepts (scratch grows linearly with it). */
#define CPU_MAX_ROWS_LIMIT 65536u
/* Rows of KV a cache starts with at its first reservation (at most max_context). */
#define CPU_KV_MIN_ROWS 256u

static size_t round64(size_t bytes) { return (bytes + 63) / 64 * 64; }

/* Lays out the arena (sizes in bytes, each rounded to 64); assigns pointers when base is set. */
typedef struct carver {
    char *base;
    size_t off;
} carver;

static void *carve(carver *c, size_t bytes) {
    void *p = c->base ? c->base + c->off : NULL;
    c->off += round64(bytes ? bytes : 1);
    return p;
}

static size_t session_layout(backend_session *s, char *base) {
    const model_hparams *hp = s->hp;
    const size_t R = s->max_rows, H = hp->n_embd, L = hp->n_layer, E = hp->n_expert, V = hp->n_vocab, T = s->n_threads;
    const size_t nh = hp->n_head, nkv = hp->n_head_kv, hd = hp->head_dim, rot = hp->n_rot;
    const cpu_gdn_dims *gd = &s->gdn_dims;
    const size_t cd = cpu_gdn_conv_dim(gd), nv = gd->n_v_heads, dv = gd->v_dim, K = gd->conv_k;
    const size_t f = sizeof(float);
    carver c = {base, 0};
    cpu_scratch *sc = &s->sc;

    sc->h = carve(&c, R * H * f);
    sc->x = carve(&c, R * H * f);
    sc->y = carve(&c, R * H * f);
    sc->qg = carve(&c, R * nh * 2 * hd * f);
    sc->k = carve(&c, R * nkv * hd * f);
    sc->v = carve(&c, R * nkv * hd * f);
    sc->q = carve(&c, R * nh * hd * f);
    sc->gate = carve(&c, R * nh * hd * f);
    sc->att = carve(&c, R * nh * hd * f);
    sc->cs = carve(&c, rot * f);
    s->inv_freq = carve(&c, (rot / 2) * f);

    sc->mixed = carve(&c, R * cd * f);
    sc->z = carve(&c, R * nv * dv * f);
    sc->gb = carve(&c, R * nv * f);
    sc->ga = carve(&c, R * nv * f);
    sc->gout = carve(&c, R * nv * dv * f);
    size_t gmix = cpu_gdn_mix_scratch_floats(gd, R, T), gblk = gdn_block_scratch_floats(gd, R, T);
    sc->gdn = carve(&c, (gmix > gblk ? gmix : gblk) * f);

    size_t moe_bytes = 0;
    for (size_t l = 0; l < L; l++) {
        size_t m = cpu_moe_scratch_bytes(&s->layers[l].moe_w, R);
        if (m > moe_bytes) moe_bytes = m;
    }
    sc->moe = carve(&c, moe_bytes);
    sc->router = carve(&c, R * E * f);
    sc->totals = carve(&c, E * sizeof(double));
    sc->order = carve(&c, E * sizeof(int32_t));
    sc->allowed = carve(&c, E);
    sc->logits = carve(&c, R * V * f);

    s->dbg_hidden = carve(&c, (L + 1) * R * H * f);
    s->dbg_kept = carve(&c, L * E);

    for (size_t l = 0; l < L; l++) {
        cpu_layer *ly = &s->layers[l];
        if (ly->kind != MODEL_LAYER_GDN) continue;
        ly->ring = carve(&c, (K - 1) * cd * f);
        ly->state = carve(&c, nv * gd->k_dim * dv * f);
    }
    return c.off;
}

/* Binds one layer's weight views; false when the Clover tensors are missing. */
static bool layer_bind(cpu_layer *ly, const model_layer *ml, const model_hparams *hp) {
    const model_moe_weights *mw = &ml->moe;
    const size_t H = hp->n_embd, F = hp->n_ff_exp;
    ly->kind = ml->kind;
    ly->moe_w = (cpu_moe_weights){
        .n_embd = H,
        .n_ff = F,
        .n_expert = hp->n_expert,
        .n_used = hp->n_expert_used,
        .n_ff_shexp = hp->n_ff_shexp,
        .router_type = mw->gate_inp.type,
        .router = mw->gate_inp.data,
        .gate_type = mw->gate_exps.type,
        .up_type = mw->up_exps.type,
        .down_type = mw->down_exps.type,
        .gate_exps = mw->gate_exps.data,
        .up_exps = mw->up_exps.data,
        .down_exps = mw->down_exps.data,
        .gate_stride = quant_row_bytes(mw->gate_exps.type, H) * F,
        .up_stride = quant_row_bytes(mw->up_exps.type, H) * F,
        .down_stride = quant_row_bytes(mw->down_exps.type, F) * H,
        .sh_gate_type = mw->gate_shexp.type,
        .sh_up_type = mw->up_shexp.type,
        .sh_down_type = mw->down_shexp.type,
        .sh_inp_type = mw->gate_inp_shexp.type,
        .sh_gate = mw->gate_shexp.data,
        .sh_up = mw->up_shexp.data,
        .sh_down = mw->down_shexp.data,
        .sh_inp = mw->gate_inp_shexp.data,
    };
    if (ml->kind != MODEL_LAYER_GDN) return true;
    const model_gdn_weights *g = &ml->gdn;
    ly->gdn_w = (cpu_gdn_weights){.conv_w = g->conv.data, .ssm_a = g->a.data, .dt_bias = g->dt_bias.data,
                                  .norm_w = g->norm.data};
    ly->block_w = (gdn_block_weights){.conv_w = g->conv.data, .conv_right = g->conv_right.data,
                                      .ssm_a = g->a.data, .dt_bias = g->dt_bias.data, .norm_w = g->norm.data,
                                      .logit_scale = g->logit_scale.data, .history_bias = g->history_bias.data,
                                      .history_c = g->history_c.data};
    return g->conv_right.data && g->logit_scale.data && g->history_bias.data && g->history_c.data;
}

void backend_cpu_session_free(backend_session *s) {
    if (!s) return;
    if (s->layers) {
        for (uint32_t l = 0; l < s->hp->n_layer; l++) {
            mem_free(s->layers[l].k_cache);
            mem_free(s->layers[l].v_cache);
        }
    }
    mem_free(s->attn_scratch);
    mem_free(s->arena);
    mem_free(s->layers);
    threadpool_free(s->pool);
    mem_free(s);
}

static int session_check_dims(backend_session *s, clover_error *err) {
    const model_hparams *hp = s->hp;
    bool has_gdn = false;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        s->has_attn |= s->model->layers[l].kind == MODEL_LAYER_ATTENTION;
        has_gdn |= s->model->layers[l].kind == MODEL_LAYER_GDN;
    }
    int rc;
    if (s->has_attn && (rc = cpu_attn_dims_check(&s->attn_dims, err))) return rc;
    if (has_gdn && (rc = cpu_gdn_dims_check(&s->gdn_dims, err))) return rc;
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if ((rc = cpu_moe_weights_check(&s->layers[l].moe_w, err))) return error_prefix(err, "layer %u", l);
    return CLOVER_OK;
}

int backend_cpu_session_create(const clover_model *model, const backend_config *cfg, backend_session **out,
                               clover_error *err) {
    if (!out) return error_set(err, CLOVER_E_INVALID, "cpu session: no output pointer");
    *out = NULL;
    if (!model) return error_set(err, CLOVER_E_INVALID, "cpu session: no model");
    backend_config def = {0};
    if (!cfg) cfg = &def;
    const model_hparams *hp = &model->hp;
    size_t max_rows = cfg->max_rows ? cfg->max_rows : 64;
    if (max_rows > CPU_MAX_ROWS_LIMIT)
        return error_set(err, CLOVER_E_INVALID, "cpu session: max_rows %zu, expected 1..%u", max_rows,
                         CPU_MAX_ROWS_LIMIT);
    size_t max_context = cfg->max_context ? cfg->max_context : hp->n_ctx_train;
    if (max_context == 0) return error_set(err, CLOVER_E_INVALID, "cpu session: max_context is 0");

    backend_session *s = mem_calloc(1, sizeof *s);
    if (!s) return error_set(err, CLOVER_E_NOMEM, "cpu session: out of memory");
    s->model = model;
    s->hp = hp;
    s->max_rows = max_rows;
    s->max_context = max_context;
    int rc = threadpool_create(&s->pool, cfg->n_threads, err);
    if (rc) goto fail;
    s->n_threads = threadpool_size(s->pool);

    s->attn_dims = (cpu_attn_dims){.n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
                                   .rot = hp->n_rot, .eps = hp->rms_eps};
    s->gdn_dims = (cpu_gdn_dims){.n_k_heads = hp->gdn_nk, .n_v_heads = hp->gdn_nv, .k_dim = hp->gdn_dk,
                                 .v_dim = hp->gdn_dv, .conv_k = hp->ssm_conv_kernel, .eps = hp->rms_eps,
                                 .order = CPU_GDN_TILED};
    s->layers = mem_calloc(hp->n_layer ? hp->n_layer : 1, sizeof *s->layers);
    if (!s->layers) {
        rc = error_set(err, CLOVER_E_NOMEM, "cpu session: out of memory for %u layers", hp->n_layer);
        goto fail;
    }
    s->can_preview = true;
    for (uint32_t l = 0; l < hp->n_layer; l++) s->can_preview &= layer_bind(&s->layers[l], &model->layers[l], hp);
    if ((rc = session_check_dims(s, err))) goto fail;

    size_t bytes = session_layout(s, NULL);
    s->arena = mem_calloc(1, bytes);
    if (!s->arena) {
        rc = error_set(err, CLOVER_E_NOMEM, "cpu session: cannot allocate %zu bytes of state and scratch "
                                            "(max_rows %zu)", bytes, max_rows);
        goto fail;
    }
    session_layout(s, s->arena);
    if (hp->n_rot) cpu_rope_inv_freq(s->inv_freq, hp->n_rot, hp->rope_freq_base);
    size_t first = max_context < CPU_KV_MIN_ROWS ? max_context : CPU_KV_MIN_ROWS;
    if ((rc = cpu_session_reserve(s, first, err))) goto fail;
    *out = s;
    return CLOVER_OK;
fail:
    backend_cpu_session_free(s);
    return rc;
}

size_t backend_cpu_session_length(const backend_session *s) { return s ? s->n_past : 0; }

void backend_cpu_reset(backend_session *s) {
    if (!s) return;
    const cpu_gdn_dims *gd = &s->gdn_dims;
    for (uint32_t l = 0; l < s->hp->n_layer; l++) {
        cpu_layer *ly = &s->layers[l];
        if (ly->kind != MODEL_LAYER_GDN) continue;
        memset(ly->ring, 0, (gd->conv_k - 1) * cpu_gdn_conv_dim(gd) * sizeof(float));
        memset(ly->state, 0, gd->n_v_heads * gd->k_dim * gd->v_dim * sizeof(float));
    }
    s->n_past = 0;
    s->has_preview = false;
}

int cpu_session_reserve(backend_session *s, size_t need, clover_error *err) {
    if (!s->has_attn) return CLOVER_OK;
    const size_t row = s->attn_dims.n_head_kv * s->attn_dims.head_dim * sizeof(float);
    size_t top = 0; /* the longest cache after growing: the attention scratch must cover it */
    for (uint32_t l = 0; l < s->hp->n_layer; l++) {
        cpu_layer *ly = &s->layers[l];
        if (ly->kind != MODEL_LAYER_ATTENTION) continue;
        if (ly->kv_cap < need) {
            size_t cap = ly->kv_cap * 2;
            if (cap < CPU_KV_MIN_ROWS) cap = CPU_KV_MIN_ROWS;
            if (cap < need) cap = need;
            if (cap > s->max_context) cap = s->max_context > need ? s->max_context : need;
            size_t bytes;
            if (!mem_mul_ok(cap, row, &bytes))
                return error_set(err, CLOVER_E_NOMEM, "cpu session: a KV cache of %zu rows overflows", cap);
            float *k = mem_alloc(bytes), *v = mem_alloc(bytes);
            if (!k || !v) {
                mem_free(k);
                mem_free(v);
                return error_set(err, CLOVER_E_NOMEM,
                                 "cpu session: cannot grow layer %u's KV cache to %zu rows (%zu bytes)", l, cap,
                                 2 * bytes);
            }
            if (s->n_past) { /* the committed rows; a preview's rows past them are scratch */
                memcpy(k, ly->k_cache, s->n_past * row);
                memcpy(v, ly->v_cache, s->n_past * row);
            }
            mem_free(ly->k_cache);
            mem_free(ly->v_cache);
            ly->k_cache = k;
            ly->v_cache = v;
            ly->kv_cap = cap;
        }
        if (ly->kv_cap > top) top = ly->kv_cap;
    }
    if (top > s->attn_ctx || !s->attn_scratch) {
        size_t per = cpu_attn_scratch_floats(&s->attn_dims, top), floats, bytes;
        if (!mem_mul_ok(per, s->n_threads, &floats) || !mem_mul_ok(floats, sizeof(float), &bytes))
            return error_set(err, CLOVER_E_NOMEM, "cpu session: attention scratch for %zu rows overflows", top);
        float *sc = mem_alloc(bytes);
        if (!sc)
            return error_set(err, CLOVER_E_NOMEM, "cpu session: cannot allocate %zu bytes of attention scratch", bytes);
        mem_free(s->attn_scratch);
        s->attn_scratch = sc;
        s->attn_ctx = top;
    }
    return CLOVER_OK;
}
