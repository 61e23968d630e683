/*
 * backend_cpu.c: the CPU backend's per-model object (backend.h): the weight
 * views bound once per model (the GGUF's mapped tensors, nothing copied),
 * one thread pool, and one arena of per-pass scratch for max_rows rows,
 * carved by a single layout function so sizing and carving cannot disagree.
 * Every session on the backend runs its passes on these (one call at a
 * time), so a session costs only its state. Also the ops table.
 */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "cpu/backend_cpu_internal.h"
#include "cpu/rope.h"

/* The largest rows per pass a backend accepts (scratch grows linearly with it). */
#define CPU_MAX_ROWS_LIMIT 65536u

static size_t round64(size_t bytes) { return (bytes + 63) / 64 * 64; }

typedef struct carver {
    char *base;
    size_t off;
} carver;

static void *carve(carver *c, size_t bytes) {
    void *p = c->base ? c->base + c->off : NULL;
    c->off += round64(bytes ? bytes : 1);
    return p;
}

/* Lays out the arena (sizes in bytes, each rounded to 64); assigns pointers when base is set. */
static size_t backend_layout(backend *be, char *base) {
    const model_hparams *hp = be->hp;
    const size_t R = be->max_rows, H = hp->n_embd, L = hp->n_layer, E = hp->n_expert, V = hp->n_vocab;
    const size_t T = be->n_threads;
    const size_t nh = hp->n_head, nkv = hp->n_head_kv, hd = hp->head_dim, rot = hp->n_rot;
    const cpu_gdn_dims *gd = &be->gdn_dims;
    const size_t cd = cpu_gdn_conv_dim(gd), nv = gd->n_v_heads, dv = gd->v_dim;
    const size_t f = sizeof(float);
    carver c = {base, 0};
    cpu_scratch *sc = &be->sc;

    sc->h = carve(&c, R * H * f);
    sc->x = carve(&c, R * H * f);
    sc->y = carve(&c, R * H * f);
    sc->qg = carve(&c, R * nh * 2 * hd * f);
    sc->k = carve(&c, R * nkv * hd * f);
    sc->v = carve(&c, R * nkv * hd * f);
    sc->q = carve(&c, R * nh * hd * f);
    sc->gate = carve(&c, R * nh * hd * f);
    sc->att = carve(&c, R * nh * hd * f);
    sc->cs = carve(&c, T * rot * f); /* a thread's [rot] (cpu_attn_prepare_pool) */
    be->inv_freq = carve(&c, (rot / 2) * f);

    sc->mixed = carve(&c, R * cd * f);
    sc->z = carve(&c, R * nv * dv * f);
    sc->gb = carve(&c, R * nv * f);
    sc->ga = carve(&c, R * nv * f);
    sc->gout = carve(&c, R * nv * dv * f);
    size_t gmix = cpu_gdn_mix_scratch_floats(gd, R, T), gblk = gdn_block_scratch_floats(gd, R, T);
    sc->gdn = carve(&c, (gmix > gblk ? gmix : gblk) * f);

    size_t moe_bytes = 0;
    for (size_t l = 0; l < L; l++) {
        size_t m = cpu_moe_scratch_bytes(&be->layers[l].moe_w, R);
        if (m > moe_bytes) moe_bytes = m;
    }
    sc->moe = carve(&c, moe_bytes);
    sc->router = carve(&c, R * E * f);
    sc->totals = carve(&c, E * sizeof(double));
    sc->order = carve(&c, E * sizeof(int32_t));
    sc->core_idx = carve(&c, R * hp->n_expert_used * sizeof(int32_t));
    sc->core_ms = carve(&c, R * 2 * sizeof(double));
    sc->core_m = carve(&c, R * sizeof(uint32_t));
    sc->allowed = carve(&c, E);
    sc->group = carve(&c, R * sizeof(uint32_t));
    sc->own = carve(&c, R * sizeof(uint32_t));
    sc->head_rows = carve(&c, R * sizeof(size_t));
    sc->allowed_seq = carve(&c, R * E);
    sc->allowed_of = carve(&c, R * sizeof(uint8_t *));
    sc->logits = carve(&c, be->logit_rows * V * f);
    sc->counts = carve(&c, V * sizeof(uint32_t));
    return c.off;
}

/* Binds one layer's weight views; false when the Clover tensors are missing. */
static bool layer_bind(cpu_layer_w *ly, const model_layer *ml, const model_hparams *hp, uint32_t layer) {
    ly->kind = ml->kind;
    cpu_moe_weights_bind(&ly->moe_w, ml, hp, layer);
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

void backend_cpu_destroy(backend *be) {
    if (!be) return;
    host_pick_ctx_free(&be->pick);
    if (be->moe_hook.ctx) be->moe_hook.free_ctx(be->moe_hook.ctx);
    mem_free(be->attn_scratch);
    mem_free(be->arena);
    mem_free(be->layers);
    threadpool_free(be->pool);
    mem_free(be);
}

static int backend_check_dims(backend *be, clover_error *err) {
    const model_hparams *hp = be->hp;
    bool has_gdn = false;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        be->has_attn |= be->model->layers[l].kind == MODEL_LAYER_ATTENTION;
        has_gdn |= be->model->layers[l].kind == MODEL_LAYER_GDN;
    }
    int rc;
    if (be->has_attn && (rc = cpu_attn_dims_check(&be->attn_dims, err))) return rc;
    if (has_gdn && (rc = cpu_gdn_dims_check(&be->gdn_dims, err))) return rc;
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if ((rc = cpu_moe_weights_check(&be->layers[l].moe_w, err))) return error_prefix(err, "layer %u", l);
    return CLOVER_OK;
}

/* Everything create() checks that costs no allocation of scratch. */
static int backend_bind(backend *be, const clover_model *model, const backend_config *cfg, clover_error *err) {
    const model_hparams *hp = &model->hp;
    be->model = model;
    be->hp = hp;
    be->max_rows = cfg->max_rows ? cfg->max_rows : 64;
    if (be->max_rows > CPU_MAX_ROWS_LIMIT)
        return error_set(err, CLOVER_E_INVALID, "cpu backend: max_rows %zu, expected 1..%u", be->max_rows,
                         CPU_MAX_ROWS_LIMIT);
    const size_t window = cfg->head_window ? cfg->head_window : CPU_LOGIT_ROWS;
    be->logit_rows = be->max_rows < window ? be->max_rows : window;
    be->max_context = cfg->max_context ? cfg->max_context : hp->n_ctx_train;
    be->layer_lo = cfg->layer_begin;
    be->layer_hi = cfg->layer_end ? cfg->layer_end : hp->n_layer;
    if (be->layer_lo >= be->layer_hi || be->layer_hi > hp->n_layer)
        return error_set(err, CLOVER_E_INVALID, "cpu backend: layers %u..%u of a %u-layer model", be->layer_lo,
                         be->layer_hi, hp->n_layer);
    if (be->max_context == 0) return error_set(err, CLOVER_E_INVALID, "cpu backend: max_context is 0");
    be->attn_dims = (cpu_attn_dims){.n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
                                    .rot = hp->n_rot, .eps = hp->rms_eps};
    be->gdn_dims = (cpu_gdn_dims){.n_k_heads = hp->gdn_nk, .n_v_heads = hp->gdn_nv, .k_dim = hp->gdn_dk,
                                  .v_dim = hp->gdn_dv, .conv_k = hp->ssm_conv_kernel, .eps = hp->rms_eps,
                                  .order = CPU_GDN_TILED};
    be->layers = mem_calloc(hp->n_layer ? hp->n_layer : 1, sizeof *be->layers);
    if (!be->layers) return error_set(err, CLOVER_E_NOMEM, "cpu backend: out of memory for %u layers", hp->n_layer);
    be->can_preview = true;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        be->can_preview &= layer_bind(&be->layers[l], &model->layers[l], hp, l);
    }
    return backend_check_dims(be, err);
}

int backend_cpu_probe(const clover_model *model, const backend_config *cfg, clover_error *err) {
    if (!model) return error_set(err, CLOVER_E_INVALID, "cpu backend: no model");
    backend_config def = {0};
    backend be = {0};
    int rc = backend_bind(&be, model, cfg ? cfg : &def, err);
    mem_free(be.layers);
    return rc;
}

void backend_cpu_set_moe_hook(backend *be, const cpu_moe_hook *hook) {
    if (be->moe_hook.ctx) be->moe_hook.free_ctx(be->moe_hook.ctx);
    be->moe_hook = hook ? *hook : (cpu_moe_hook){0};
}

int backend_cpu_create(const clover_model *model, const backend_config *cfg, backend **out, clover_error *err) {
    if (!out) return error_set(err, CLOVER_E_INVALID, "cpu backend: no output pointer");
    *out = NULL;
    if (!model) return error_set(err, CLOVER_E_INVALID, "cpu backend: no model");
    backend_config def = {0};
    if (!cfg) cfg = &def;
    backend *be = mem_calloc(1, sizeof *be);
    if (!be) return error_set(err, CLOVER_E_NOMEM, "cpu backend: out of memory");
    int rc = backend_bind(be, model, cfg, err);
    if (!rc) rc = threadpool_create(&be->pool, cfg->n_threads, err);
    if (rc) goto fail;
    be->n_threads = threadpool_size(be->pool);
    size_t bytes = backend_layout(be, NULL);
    be->arena = mem_calloc(1, bytes);
    if (!be->arena) {
        rc = error_set(err, CLOVER_E_NOMEM, "cpu backend: cannot allocate %zu bytes of scratch (max_rows %zu)", bytes,
                       be->max_rows);
        goto fail;
    }
    backend_layout(be, be->arena);
    be->pick = (host_pick_ctx){.pool = be->pool, .n_vocab = be->hp->n_vocab, .counts = be->sc.counts,
                               .n_samp = be->n_threads};
    if (be->hp->n_rot) rope_inv_freq(be->inv_freq, be->hp->n_rot, be->hp->rope_freq_base);
    *out = be;
    return CLOVER_OK;
fail:
    backend_cpu_destroy(be);
    return rc;
}

static size_t backend_cpu_max_rows(const backend *be) { return be ? be->max_rows : 0; }

const backend_ops backend_cpu = {
    .name = "cpu",
    .default_rows = 512,
    .probe = backend_cpu_probe,
    .create = backend_cpu_create,
    .destroy = backend_cpu_destroy,
    .max_rows = backend_cpu_max_rows,
    .session_create = backend_cpu_session_create,
    .session_free = backend_cpu_session_free,
    .session_length = backend_cpu_session_length,
    .reset = backend_cpu_reset,
    .commit = backend_cpu_commit,
    .preview = backend_cpu_preview,
    .resolve = backend_cpu_resolve,
    .preview_debug = backend_cpu_preview_debug,
    .state_bytes = backend_cpu_state_bytes,
    .state_export = backend_cpu_state_export,
    .state_import = backend_cpu_state_import,
    .checkpoint_create = backend_cpu_checkpoint_create,
    .checkpoint_free = backend_cpu_checkpoint_free,
    .checkpoint_save = backend_cpu_checkpoint_save,
    .checkpoint_restore = backend_cpu_checkpoint_restore,
    .truncate = backend_cpu_truncate,
};
