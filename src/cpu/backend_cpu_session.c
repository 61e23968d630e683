/*
 * backend_cpu_session.c: a CPU session's life (create, reset, free) and the
 * growth of its KV caches.
 *
 * A session is state only: the GDN rings and states and the preview
 * diagnostics in one arena (known at creation), and the KV caches, which
 * grow by doubling up to max_context: a 262144-token context is about 10 GB
 * of K/V for the released model, which a session must not take before it
 * needs it. The attention scratch depends on the longest cache and lives on
 * the backend, grown here when a session's cache outgrows it.
 */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "cpu/backend_cpu_internal.h"

/* Rows of KV a cache starts with at its first reservation (at most max_context). */
#define CPU_KV_MIN_ROWS 256u

size_t cpu_gdn_state_floats(const backend *be) {
    const cpu_gdn_dims *gd = &be->gdn_dims;
    return (gd->conv_k - 1) * cpu_gdn_conv_dim(gd) + gd->n_v_heads * gd->k_dim * gd->v_dim;
}

void backend_cpu_session_free(backend_session *s) {
    if (!s) return;
    if (s->layers) {
        for (uint32_t l = 0; l < s->hp->n_layer; l++) {
            mem_free(s->layers[l].k_cache);
            mem_free(s->layers[l].v_cache);
        }
    }
    mem_free(s->arena);
    mem_free(s->dbg_hidden);
    mem_free(s->layers);
    mem_free(s);
}

int backend_cpu_session_create(backend *be, backend_session **out, clover_error *err) {
    if (!out) return error_set(err, CLOVER_E_INVALID, "cpu session: no output pointer");
    *out = NULL;
    if (!be) return error_set(err, CLOVER_E_INVALID, "cpu session: no backend");
    const model_hparams *hp = be->hp;
    const size_t L = hp->n_layer, f = sizeof(float);
    backend_session *s = mem_calloc(1, sizeof *s);
    if (!s) return error_set(err, CLOVER_E_NOMEM, "cpu session: out of memory");
    s->be = be;
    s->hp = hp;
    int rc;
    s->layers = mem_calloc(L ? L : 1, sizeof *s->layers);
    size_t n_gdn = 0;
    for (size_t l = 0; l < L; l++) n_gdn += be->layers[l].kind == MODEL_LAYER_GDN;
    const size_t gdn_floats = cpu_gdn_state_floats(be);
    const size_t kept = L * hp->n_expert;
    const size_t bytes = n_gdn * gdn_floats * f + kept + 64;
    s->arena = mem_calloc(1, bytes);
    if (!s->layers || !s->arena) {
        rc = error_set(err, CLOVER_E_NOMEM, "cpu session: cannot allocate %zu bytes of state", bytes);
        goto fail;
    }
    float *p = s->arena;
    const size_t ring = (be->gdn_dims.conv_k - 1) * cpu_gdn_conv_dim(&be->gdn_dims);
    for (size_t l = 0; l < L; l++) {
        cpu_layer *ly = &s->layers[l];
        ly->kind = be->layers[l].kind;
        if (ly->kind != MODEL_LAYER_GDN) continue;
        ly->ring = p;
        ly->state = p + ring;
        p += gdn_floats;
    }
    s->dbg_kept = (uint8_t *)p;
    size_t first = be->max_context < CPU_KV_MIN_ROWS ? be->max_context : CPU_KV_MIN_ROWS;
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
    const cpu_gdn_dims *gd = &s->be->gdn_dims;
    for (uint32_t l = 0; l < s->hp->n_layer; l++) {
        cpu_layer *ly = &s->layers[l];
        if (ly->kind != MODEL_LAYER_GDN) continue;
        memset(ly->ring, 0, (gd->conv_k - 1) * cpu_gdn_conv_dim(gd) * sizeof(float));
        memset(ly->state, 0, gd->n_v_heads * gd->k_dim * gd->v_dim * sizeof(float));
    }
    s->n_past = 0;
    s->epoch++;
    s->has_preview = false;
}

int cpu_session_preview_room(backend_session *s, size_t b, clover_error *err) {
    if (b <= s->dbg_rows) return CLOVER_OK;
    size_t floats, bytes;
    if (!mem_mul_ok((size_t)(s->hp->n_layer + 1) * s->hp->n_embd, b, &floats) ||
        !mem_mul_ok(floats, sizeof(float), &bytes))
        return error_set(err, CLOVER_E_NOMEM, "cpu session: preview diagnostics for %zu rows overflow", b);
    float *h = mem_alloc(bytes);
    if (!h) return error_set(err, CLOVER_E_NOMEM, "cpu session: cannot allocate %zu bytes for a %zu-row preview", bytes, b);
    if (s->has_preview) /* the last preview's rows stay readable (preview_debug): [n_layer+1][preview_b][n_embd] */
        memcpy(h, s->dbg_hidden, (s->hp->n_layer + 1) * s->preview_b * s->hp->n_embd * sizeof(float));
    mem_free(s->dbg_hidden);
    s->dbg_hidden = h;
    s->dbg_rows = b;
    return CLOVER_OK;
}

int cpu_session_reserve(backend_session *s, size_t need, clover_error *err) {
    backend *be = s->be;
    if (!be->has_attn) return CLOVER_OK;
    const size_t row = be->attn_dims.n_head_kv * be->attn_dims.head_dim * sizeof(float);
    size_t top = 0; /* the longest cache after growing: the attention scratch must cover it */
    for (uint32_t l = 0; l < s->hp->n_layer; l++) {
        cpu_layer *ly = &s->layers[l];
        if (ly->kind != MODEL_LAYER_ATTENTION) continue;
        if (ly->kv_cap < need) {
            size_t cap = ly->kv_cap * 2;
            if (cap < CPU_KV_MIN_ROWS) cap = CPU_KV_MIN_ROWS;
            if (cap < need) cap = need;
            if (cap > be->max_context) cap = be->max_context > need ? be->max_context : need;
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
    if (top > be->attn_ctx || !be->attn_scratch) {
        size_t per = cpu_attn_scratch_floats(&be->attn_dims, top), floats, bytes;
        if (!mem_mul_ok(per, be->n_threads, &floats) || !mem_mul_ok(floats, sizeof(float), &bytes))
            return error_set(err, CLOVER_E_NOMEM, "cpu session: attention scratch for %zu rows overflows", top);
        float *sc = mem_alloc(bytes);
        if (!sc)
            return error_set(err, CLOVER_E_NOMEM, "cpu session: cannot allocate %zu bytes of attention scratch", bytes);
        mem_free(be->attn_scratch);
        be->attn_scratch = sc;
        be->attn_ctx = top;
    }
    return CLOVER_OK;
}
