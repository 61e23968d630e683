/*
 * backend_cuda_state.c: the session's state as host bytes in backend.h's
 * layout, byte for byte what the CPU backend writes and reads (u64 committed
 * length; per layer K rows then V rows, or the conv ring then S). The device
 * KV caches are position-major [n_ctx][nkv][hd] f32 and the rings and states
 * have the CPU's layouts (cuda_attention.h, cuda_gdn.h), so each piece is
 * one straight copy. A failed import leaves the session empty (length 0,
 * fresh states), never half-imported. A session of layers [0, n_run) (the
 * front of a split) exports and imports those layers only, as backend.h
 * says of a range.
 *
 * State copies (backend_ops.state_save / state_load, the engine's prompt
 * snapshot): the same pieces into one device buffer of the copy, device to
 * device on the session's stream (~63 MiB for the 35B-A3B: tens of
 * microseconds, against a pageable export or import of the same bytes over
 * the host link between the scheduler's passes). The stream is synchronised
 * before (the session's last pass) and after (the stacked executor writes
 * the session's caches on a stream of its own).
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_mem.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "backend_cuda_state.c copies floats as little-endian bytes"
#endif

static size_t kv_half(const backend_session *s, size_t n) {
    return n * (size_t)s->hp->n_head_kv * s->hp->head_dim * sizeof(float);
}
static size_t ring_bytes(const backend_session *s) {
    return (size_t)(s->hp->ssm_conv_kernel - 1) * s->hp->gdn_conv_dim * sizeof(float);
}
static size_t st_bytes(const backend_session *s) {
    return (size_t)s->hp->gdn_nv * s->hp->gdn_dk * s->hp->gdn_dv * sizeof(float);
}

static size_t state_size(const backend_session *s, size_t n) {
    size_t total = 8;
    for (uint32_t l = 0; l < s->n_run; l++)
        total += s->layers[l].kind == MODEL_LAYER_ATTENTION ? 2 * kv_half(s, n) : ring_bytes(s) + st_bytes(s);
    return total;
}

size_t backend_cuda_state_bytes(const backend_session *s) { return s ? state_size(s, s->n_past) : 0; }

int backend_cuda_state_export(const backend_session *s, void *buf, size_t len, clover_error *err) {
    if (!s || !buf) return error_set(err, CLOVER_E_INVALID, "state_export: no session or no buffer");
    size_t need = backend_cuda_state_bytes(s);
    if (len < need)
        return error_set(err, CLOVER_E_INVALID, "state_export: a buffer of %zu bytes, the state needs %zu", len, need);
    char why[CUDA_WHY];
    if (cuda_stream_sync(s->stream, why)) return error_set(err, CLOVER_E_INTERNAL, "state_export: %s", why);
    unsigned char *p = buf;
    uint64_t n = s->n_past;
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(n >> (8 * i));
    p += 8;
    const size_t half = kv_half(s, s->n_past), ring = ring_bytes(s), st = st_bytes(s);
    for (uint32_t l = 0; l < s->n_run; l++) {
        const cuda_layer *ly = &s->layers[l];
        int bad;
        if (ly->kind == MODEL_LAYER_ATTENTION) {
            bad = half && (cuda_d2h(p, ly->k_cache, half, why) || cuda_d2h(p + half, ly->v_cache, half, why));
            p += 2 * half;
        } else {
            bad = (ring && cuda_d2h(p, ly->ring, ring, why)) || cuda_d2h(p + ring, ly->state, st, why);
            p += ring + st;
        }
        if (bad) return error_set(err, CLOVER_E_INTERNAL, "state_export: layer %u: %s", l, why);
    }
    return CLOVER_OK;
}

int backend_cuda_state_import(backend_session *s, const void *buf, size_t len, clover_error *err) {
    if (!s || !buf) return error_set(err, CLOVER_E_INVALID, "state_import: no session or no buffer");
    if (len < 8)
        return error_set(err, CLOVER_E_FORMAT, "state_import: %zu bytes, shorter than the 8-byte committed length",
                         len);
    const unsigned char *p = buf;
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)p[i] << (8 * i);
    if (n > s->max_context)
        return error_set(err, CLOVER_E_FORMAT,
                         "state_import: committed length %llu exceeds this session's context of %zu",
                         (unsigned long long)n, s->max_context);
    size_t need = state_size(s, (size_t)n);
    if (len != need)
        return error_set(err, CLOVER_E_FORMAT,
                         "state_import: %zu bytes, but a state of committed length %llu for this model has %zu", len,
                         (unsigned long long)n, need);
    char why[CUDA_WHY];
    if (cuda_stream_sync(s->stream, why)) return error_set(err, CLOVER_E_INTERNAL, "state_import: %s", why);
    p += 8;
    const size_t half = kv_half(s, (size_t)n), ring = ring_bytes(s), st = st_bytes(s);
    for (uint32_t l = 0; l < s->n_run; l++) {
        cuda_layer *ly = &s->layers[l];
        int bad;
        if (ly->kind == MODEL_LAYER_ATTENTION) {
            bad = half && (cuda_h2d(ly->k_cache, p, half, why) || cuda_h2d(ly->v_cache, p + half, half, why));
            p += 2 * half;
        } else {
            bad = (ring && cuda_h2d(ly->ring, p, ring, why)) || cuda_h2d(ly->state, p + ring, st, why);
            p += ring + st;
        }
        if (bad) {
            backend_cuda_reset(s);
            return error_set(err, CLOVER_E_INTERNAL, "state_import: layer %u: %s", l, why);
        }
    }
    s->n_past = (size_t)n;
    s->epoch++; /* checkpoints saved before the import are stale */
    return CLOVER_OK;
}

struct backend_state_copy {
    void *dev;         /* [cap] device bytes: the pieces in export's order, without the length word */
    size_t cap, bytes; /* bytes: the copy's, for n committed rows */
    size_t n;          /* committed length */
    const backend_session *s; /* the session it was taken from (it loads into that one only) */
};

/* The pieces of a state of n rows between the session and the copy's buffer p (save: session -> p). */
static int copy_pieces(const backend_session *s, unsigned char *p, size_t n, bool save, char *why) {
    const size_t half = kv_half(s, n), ring = ring_bytes(s), st = st_bytes(s);
    for (uint32_t l = 0; l < s->n_run; l++) {
        const cuda_layer *ly = &s->layers[l];
        if (ly->kind == MODEL_LAYER_ATTENTION) {
            if (half && (save ? cuda_d2d(p, ly->k_cache, half, s->stream, why) ||
                                    cuda_d2d(p + half, ly->v_cache, half, s->stream, why)
                              : cuda_d2d(ly->k_cache, p, half, s->stream, why) ||
                                    cuda_d2d(ly->v_cache, p + half, half, s->stream, why)))
                return -1;
            p += 2 * half;
        } else {
            if (ring && (save ? cuda_d2d(p, ly->ring, ring, s->stream, why)
                              : cuda_d2d(ly->ring, p, ring, s->stream, why)))
                return -1;
            if (save ? cuda_d2d(p + ring, ly->state, st, s->stream, why)
                     : cuda_d2d(ly->state, p + ring, st, s->stream, why))
                return -1;
            p += ring + st;
        }
    }
    return cuda_stream_sync(s->stream, why);
}

int backend_cuda_state_save(const backend_session *s, backend_state_copy **copy, clover_error *err) {
    if (!s || !copy) return error_set(err, CLOVER_E_INVALID, "state_save: no session or no copy pointer");
    char why[CUDA_WHY] = "";
    if (!*copy && !(*copy = mem_calloc(1, sizeof **copy)))
        return error_set(err, CLOVER_E_NOMEM, "state_save: no memory");
    backend_state_copy *c = *copy;
    const size_t bytes = state_size(s, s->n_past) - 8;
    c->n = 0;
    c->s = NULL; /* not loadable until the copy is whole */
    if (c->cap < bytes) {
        cuda_free(c->dev);
        c->dev = NULL;
        c->cap = 0;
        if (cuda_alloc(&c->dev, bytes, why))
            return error_set(err, CLOVER_E_NOMEM, "state_save: %zu bytes of device memory: %s", bytes, why);
        c->cap = bytes;
    }
    if (cuda_stream_sync(s->stream, why) || copy_pieces(s, c->dev, s->n_past, true, why))
        return error_set(err, CLOVER_E_INTERNAL, "state_save: %s", why);
    c->bytes = bytes;
    c->n = s->n_past;
    c->s = s;
    return CLOVER_OK;
}

int backend_cuda_state_load(backend_session *s, const backend_state_copy *c, clover_error *err) {
    if (!s || !c) return error_set(err, CLOVER_E_INVALID, "state_load: no session or no copy");
    if (c->s != s) return error_set(err, CLOVER_E_INVALID, "state_load: the copy is another session's (or not whole)");
    if (c->n > s->max_context)
        return error_set(err, CLOVER_E_FORMAT, "state_load: committed length %zu exceeds this session's context of %zu",
                         c->n, s->max_context);
    char why[CUDA_WHY] = "";
    if (cuda_stream_sync(s->stream, why) || copy_pieces(s, c->dev, c->n, false, why)) {
        backend_cuda_reset(s); /* never half-loaded */
        return error_set(err, CLOVER_E_INTERNAL, "state_load: %s (the session was reset)", why);
    }
    s->n_past = c->n;
    s->epoch++; /* checkpoints saved before the load are stale, as after an import */
    return CLOVER_OK;
}

void backend_cuda_state_copy_free(backend_state_copy *c) {
    if (!c) return;
    cuda_free(c->dev);
    mem_free(c);
}
