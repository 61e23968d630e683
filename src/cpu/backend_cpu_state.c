/*
 * backend_cpu_state.c: the session's state as host bytes in backend.h's
 * layout (u64 committed length; per layer K rows then V rows, or the conv
 * ring then S; the backend's own layers only when it runs a range), so states move between backends and processes. The layout
 * is little-endian f32; the length is written byte by byte and the floats
 * copied as they are, which is that layout on the little-endian hosts the
 * backend builds for (checked at compile time).
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "cpu/backend_cpu_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "backend_cpu_state.c copies floats as little-endian bytes"
#endif

/* Bytes of one attention layer's rows per position, and of one GDN layer's state. */
static size_t state_kv_row_bytes(const backend_session *s) {
    return 2 * s->be->attn_dims.n_head_kv * s->be->attn_dims.head_dim * sizeof(float);
}

static size_t state_gdn_bytes(const backend_session *s) {
    const cpu_gdn_dims *d = &s->be->gdn_dims;
    return ((d->conv_k - 1) * cpu_gdn_conv_dim(d) + d->n_v_heads * d->k_dim * d->v_dim) * sizeof(float);
}

/* The state's size for a committed length n; false on overflow. */
static bool state_size(const backend_session *s, size_t n, size_t *out) {
    size_t total = 8, kv;
    if (!mem_mul_ok(n, state_kv_row_bytes(s), &kv)) return false;
    for (uint32_t l = s->be->layer_lo; l < s->be->layer_hi; l++)
        if (!mem_add_ok(total, s->layers[l].kind == MODEL_LAYER_ATTENTION ? kv : state_gdn_bytes(s), &total))
            return false;
    *out = total;
    return true;
}

size_t backend_cpu_state_bytes(const backend_session *s) {
    size_t n = 0;
    if (s) state_size(s, s->n_past, &n);
    return n;
}

int backend_cpu_state_export(const backend_session *s, void *buf, size_t len, clover_error *err) {
    if (!s || !buf) return error_set(err, CLOVER_E_INVALID, "state_export: no session or no buffer");
    size_t need = backend_cpu_state_bytes(s);
    if (len < need)
        return error_set(err, CLOVER_E_INVALID, "state_export: a buffer of %zu bytes, the state needs %zu", len, need);
    unsigned char *p = buf;
    uint64_t n = s->n_past;
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(n >> (8 * i));
    p += 8;
    const size_t half = state_kv_row_bytes(s) / 2 * s->n_past;
    const size_t K1 = s->be->gdn_dims.conv_k - 1, cd = cpu_gdn_conv_dim(&s->be->gdn_dims);
    const size_t ring = K1 * cd * sizeof(float), st = state_gdn_bytes(s) - ring;
    for (uint32_t l = s->be->layer_lo; l < s->be->layer_hi; l++) {
        const cpu_layer *ly = &s->layers[l];
        if (ly->kind == MODEL_LAYER_ATTENTION) {
            if (half) {
                memcpy(p, ly->k_cache, half);
                memcpy(p + half, ly->v_cache, half);
            }
            p += 2 * half;
        } else {
            memcpy(p, ly->ring, ring);
            memcpy(p + ring, ly->state, st);
            p += ring + st;
        }
    }
    return CLOVER_OK;
}

int backend_cpu_state_import(backend_session *s, const void *buf, size_t len, clover_error *err) {
    if (!s || !buf) return error_set(err, CLOVER_E_INVALID, "state_import: no session or no buffer");
    if (len < 8)
        return error_set(err, CLOVER_E_FORMAT, "state_import: %zu bytes, shorter than the 8-byte committed length",
                         len);
    const unsigned char *p = buf;
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)p[i] << (8 * i);
    if (n > s->be->max_context)
        return error_set(err, CLOVER_E_FORMAT,
                         "state_import: committed length %llu exceeds this session's context of %zu",
                         (unsigned long long)n, s->be->max_context);
    size_t need;
    if (!state_size(s, (size_t)n, &need) || len != need)
        return error_set(err, CLOVER_E_FORMAT,
                         "state_import: %zu bytes, but a state of committed length %llu for this model has %zu", len,
                         (unsigned long long)n, need);
    int rc = cpu_session_reserve(s, (size_t)n, err);
    if (rc) return error_prefix(err, "state_import");
    p += 8;
    const size_t half = state_kv_row_bytes(s) / 2 * (size_t)n;
    const size_t K1 = s->be->gdn_dims.conv_k - 1, cd = cpu_gdn_conv_dim(&s->be->gdn_dims);
    const size_t ring = K1 * cd * sizeof(float), st = state_gdn_bytes(s) - ring;
    for (uint32_t l = s->be->layer_lo; l < s->be->layer_hi; l++) {
        cpu_layer *ly = &s->layers[l];
        if (ly->kind == MODEL_LAYER_ATTENTION) {
            if (half) {
                memcpy(ly->k_cache, p, half);
                memcpy(ly->v_cache, p + half, half);
            }
            p += 2 * half;
        } else {
            memcpy(ly->ring, p, ring);
            memcpy(ly->state, p + ring, st);
            p += ring + st;
        }
    }
    s->n_past = (size_t)n;
    s->epoch++;
    s->has_preview = false;
    return CLOVER_OK;
}
