/*
 * backend_cuda_commit.c: one sequence's committed rows on the GPU, in chunks
 * of max_rows, with the logits and NLL the caller asks for.
 * Every argument is checked before anything is enqueued, so a failing call
 * leaves the session as it was.
 *
 * A one-row commit that wants only the last logits (an autoregressive decode
 * step) is captured once as a CUDA graph, the whole step from the id's copy
 * to the logits' copy back, and replayed: the host only writes the id and
 * the positions into pinned buffers the graph copies from, launches, and
 * waits for the result. Any other commit is enqueued directly and synchronised
 * once at its end.
 *
 * The batched commit of backend.h (backend_cuda.c) runs this per
 * sequence and picks on top of it. A session running only layers
 * [0, n_run) (the front of a split) computes no head and copies each
 * chunk's residual stream after its last layer into out_hidden.
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_mem.h"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_backend.h"

static int check_ids(const char *what, const int32_t *ids, size_t n, uint32_t n_vocab, clover_error *err) {
    for (size_t r = 0; r < n; r++)
        if (ids[r] < 0 || (uint32_t)ids[r] >= n_vocab)
            return error_set(err, CLOVER_E_INVALID, "%s: token id %d at row %zu is outside the vocabulary 0..%u", what,
                             (int)ids[r], r, n_vocab - 1);
    return CLOVER_OK;
}

/* The decode step as a graph: captured on first use, replayed after. */
static int decode_step(backend_session *s, float *last_logits, clover_error *err) {
    const size_t V = s->hp->n_vocab;
    char why[CUDA_WHY] = "";
    cuda_pass p = {.pos = s->n_past, .n = 1, .head_r0 = 0};
    if (!s->decode_graph && !s->graph_failed) {
        if (cuda_graph_begin(s->stream, why) == 0) {
            int rc = cuda_pass_enqueue(s, &p, err);
            int copy = rc ? 0 : cuda_d2h_async(s->h_logits, s->sc.logits, V * sizeof(float), s->stream, why);
            void *exec = NULL;
            int end = cuda_graph_end(s->stream, &exec, why);
            if (rc) return rc;
            if (copy) return error_set(err, CLOVER_E_INTERNAL, "CUDA decode: %s", why);
            if (end == 0) s->decode_graph = exec;
        }
        if (!s->decode_graph) s->graph_failed = true; /* capture refused: run eagerly from now on */
    }
    if (s->decode_graph) {
        /* the graph copies ids and descriptors from the pinned mirrors, which the host fills here */
        for (size_t i = 0; i < s->n_attn; i++) s->h_aseq[i].pos = (int32_t)s->n_past, s->h_aseq[i].n = 1;
        for (size_t i = 0; i < s->n_gdn; i++) s->h_gseq[i].n = 1;
        if (cuda_graph_launch(s->decode_graph, s->stream, why))
            return error_set(err, CLOVER_E_INTERNAL, "CUDA decode: %s", why);
    } else {
        int rc = cuda_pass_enqueue(s, &p, err);
        if (rc) return rc;
        if (cuda_d2h_async(s->h_logits, s->sc.logits, V * sizeof(float), s->stream, why))
            return error_set(err, CLOVER_E_INTERNAL, "CUDA decode: %s", why);
    }
    if (cuda_stream_sync(s->stream, why)) return error_set(err, CLOVER_E_INTERNAL, "CUDA decode: %s", why);
    memcpy(last_logits, s->h_logits, V * sizeof(float));
    return CLOVER_OK;
}

int cuda_commit_rows(backend_session *s, const int32_t *ids, size_t n, const cuda_commit_out *out,
                     backend_pass_stats *stats, clover_error *err) {
    if (!s) return error_set(err, CLOVER_E_INVALID, "commit: no session");
    s->kept_valid = false; /* a replayed decode graph rewrites sc.logits */
    cuda_commit_out none = {0};
    if (!out) out = &none;
    if (n == 0) {
        if (out->last_logits) return error_set(err, CLOVER_E_INVALID, "commit: no rows, so there are no last logits");
        return CLOVER_OK;
    }
    const uint32_t V = s->hp->n_vocab;
    int rc;
    if (!ids) return error_set(err, CLOVER_E_INVALID, "commit: %zu rows but no ids", n);
    if ((rc = check_ids("commit", ids, n, V, err))) return rc;
    if ((out->nll != NULL) != (out->targets != NULL))
        return error_set(err, CLOVER_E_INVALID, "commit: targets and nll must be given together");
    if (out->targets && (rc = check_ids("commit targets", out->targets, n, V, err))) return rc;
    if (n > s->max_context - s->n_past)
        return error_set(err, CLOVER_E_INVALID, "commit: %zu rows after %zu committed exceed the session's context of %zu",
                         n, s->n_past, s->max_context);
    if (s->n_run < s->hp->n_layer && (!out->out_hidden || out->last_logits || out->all_logits || out->nll))
        return error_set(err, CLOVER_E_INVALID,
                         "commit: this session ends before layer %u: out_hidden is required, and no logits or NLL",
                         s->n_run);
    /* stats: per-family times would need events between the kernels, so this
     * backend leaves them at zero (bench_backend times whole passes); it counts the passes */
    char why[CUDA_WHY] = "";
    if (n == 1 && out->last_logits && !out->all_logits && !out->nll && !out->hidden) {
        s->h_ids[0] = ids[0];
        if (stats) stats->passes++;
        if ((rc = decode_step(s, out->last_logits, err))) return rc;
        s->n_past += 1;
        return CLOVER_OK;
    }
    for (size_t r0 = 0; r0 < n; r0 += s->max_rows) {
        const size_t nr = n - r0 < s->max_rows ? n - r0 : s->max_rows;
        const bool last_chunk = r0 + nr == n, every = out->all_logits || out->nll;
        memcpy(s->h_ids, ids + r0, nr * sizeof(int32_t));
        cuda_pass p = {.pos = s->n_past,
                       .n = nr,
                       .head_r0 = every ? 0 : (out->last_logits && last_chunk) ? nr - 1 : nr,
                       .hidden = out->hidden,
                       .hidden_rows = n,
                       .row0 = r0};
        if (stats) stats->passes++;
        if ((rc = cuda_pass_enqueue(s, &p, err))) return rc;
        const size_t hr = nr - p.head_r0; /* rows of logits computed */
        if (out->nll) {
            memcpy(s->h_targets, out->targets + r0, nr * sizeof(int32_t));
            if (cuda_h2d_async(s->sc.targets, s->h_targets, nr * sizeof(int32_t), s->stream, why) ||
                cuda_nll(s->sc.nll, s->sc.logits, s->sc.targets, nr, V, s->stream) ||
                cuda_d2h_async(s->h_nll, s->sc.nll, nr * sizeof(float), s->stream, why))
                return error_set(err, CLOVER_E_INTERNAL, "commit: NLL: %s%s", why, cuda_ops_last_error());
        }
        if (hr && (out->all_logits || out->last_logits) &&
            cuda_d2h_async(s->h_logits, s->sc.logits, hr * V * sizeof(float), s->stream, why))
            return error_set(err, CLOVER_E_INTERNAL, "commit: logits: %s", why);
        if (cuda_stream_sync(s->stream, why)) return error_set(err, CLOVER_E_INTERNAL, "commit: %s", why);
        /* the front of a split: the rows' residual stream after its last layer, for the back (split.c) */
        if (out->out_hidden &&
            cuda_d2h(out->out_hidden + r0 * s->hp->n_embd, s->sc.h, nr * s->hp->n_embd * sizeof(float), why))
            return error_set(err, CLOVER_E_INTERNAL, "commit: the residual stream: %s", why);
        s->n_past += nr;
        if (out->nll) memcpy(out->nll + r0, s->h_nll, nr * sizeof(float));
        if (out->all_logits) memcpy(out->all_logits + r0 * V, s->h_logits, nr * V * sizeof(float));
        if (out->last_logits && last_chunk) memcpy(out->last_logits, s->h_logits + (hr - 1) * V, V * sizeof(float));
    }
    return CLOVER_OK;
}
