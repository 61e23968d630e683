/*
 * backend_cpu.c: the CPU backend's passes (backend.h): commit in chunks of
 * max_rows, the read-only preview, the preview diagnostics, and the ops
 * table. Every argument is checked before anything changes, so a failing
 * call leaves the session exactly as it was; after the checks (and the KV
 * reservation, the only allocation a pass may make) nothing can fail.
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/timer.h"
#include "cpu/backend_cpu_internal.h"

static int check_ids(const char *what, const int32_t *ids, size_t n, uint32_t n_vocab, clover_error *err) {
    for (size_t r = 0; r < n; r++)
        if (ids[r] < 0 || (uint32_t)ids[r] >= n_vocab)
            return error_set(err, CLOVER_E_INVALID, "%s: token id %d at row %zu is outside the vocabulary 0..%u", what,
                             (int)ids[r], r, n_vocab - 1);
    return CLOVER_OK;
}

static int check_room(const backend_session *s, const char *what, size_t n, clover_error *err) {
    if (n > s->max_context - s->n_past)
        return error_set(err, CLOVER_E_INVALID, "%s: %zu rows after %zu committed exceed the session's context of %zu",
                         what, n, s->n_past, s->max_context);
    return CLOVER_OK;
}

/* The head over a committed chunk: the logits the caller asked for, and the NLL. */
static void commit_head(backend_session *s, size_t r0, size_t nr, size_t n, const backend_commit_out *out) {
    const size_t V = s->hp->n_vocab;
    bool last_chunk = r0 + nr == n;
    if (out->all_logits || out->nll) {
        float *lg = out->all_logits ? out->all_logits + r0 * V : s->sc.logits;
        cpu_head_logits(s, 0, nr, lg);
        if (out->nll)
            for (size_t r = 0; r < nr; r++) out->nll[r0 + r] = cpu_head_nll(lg + r * V, V, out->targets[r0 + r]);
        if (out->last_logits && last_chunk) memcpy(out->last_logits, lg + (nr - 1) * V, V * sizeof(float));
    } else if (out->last_logits && last_chunk) {
        cpu_head_logits(s, nr - 1, 1, out->last_logits); /* one row: matmul's vector path */
    }
}

static int backend_cpu_commit(backend_session *s, const int32_t *ids, size_t n, const backend_commit_out *out,
                              backend_pass_stats *stats, clover_error *err) {
    if (!s) return error_set(err, CLOVER_E_INVALID, "commit: no session");
    backend_commit_out none = {0};
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
    if ((rc = check_room(s, "commit", n, err))) return rc;
    if ((rc = cpu_session_reserve(s, s->n_past + n, err))) return error_prefix(err, "commit");

    for (size_t r0 = 0; r0 < n; r0 += s->max_rows) {
        size_t nr = n - r0 < s->max_rows ? n - r0 : s->max_rows;
        cpu_pass p = {.mode = CPU_PASS_COMMIT,
                      .pos = s->n_past,
                      .hidden = out->hidden,
                      .hidden_rows = n,
                      .row0 = r0,
                      .stats = stats};
        cpu_pass_run(s, ids + r0, nr, &p);
        s->n_past += nr;
        double t0 = timer_now();
        commit_head(s, r0, nr, n, out);
        if (stats) stats->head_s += timer_now() - t0;
    }
    return CLOVER_OK;
}

static int backend_cpu_preview(backend_session *s, const int32_t *block, size_t b, const backend_preview_opts *opts,
                               float *logits, backend_pass_stats *stats, clover_error *err) {
    if (!s || !block || !opts || !logits)
        return error_set(err, CLOVER_E_INVALID,
                         "preview: a session, block ids, options and a logits buffer are required");
    if (!s->can_preview)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "preview: the model's GDN layers lack the block-diffusion tensors (ssm_conv1d_right, "
                         "bd_logit_scale, bd_history_bias, bd_history_c): an autoregressive model has no preview");
    if (b == 0 || b > s->max_rows)
        return error_set(err, CLOVER_E_INVALID,
                         "preview: a block of %zu rows, expected 1..%zu (the session's max_rows)", b, s->max_rows);
    if (opts->record_block_size == 0)
        return error_set(err, CLOVER_E_INVALID, "preview: record_block_size is 0 (the history slot needs ln(b/B))");
    if (opts->coreset && !(opts->coreset_top_p >= 0.0f && opts->coreset_top_p <= 1.0f))
        return error_set(err, CLOVER_E_INVALID, "preview: coreset_top_p %g, expected 0..1",
                         (double)opts->coreset_top_p);
    int rc;
    if ((rc = check_ids("preview", block, b, s->hp->n_vocab, err))) return rc;
    if ((rc = check_room(s, "preview", b, err))) return rc;
    if ((rc = cpu_session_reserve(s, s->n_past + b, err))) return error_prefix(err, "preview");

    cpu_pass p = {.mode = CPU_PASS_PREVIEW,
                  .pos = s->n_past,
                  .ln_ratio = gdn_block_ln_ratio(b, opts->record_block_size),
                  .coreset = opts->coreset,
                  .top_p = opts->coreset_top_p,
                  .hidden = s->dbg_hidden,
                  .hidden_rows = b,
                  .row0 = 0,
                  .kept = s->dbg_kept,
                  .stats = stats};
    cpu_pass_run(s, block, b, &p);
    double t0 = timer_now();
    cpu_head_logits(s, 0, b, logits);
    if (stats) stats->head_s += timer_now() - t0;
    s->has_preview = true;
    s->preview_b = b;
    return CLOVER_OK;
}

static int backend_cpu_preview_debug(backend_session *s, float *hidden, uint8_t *kept, clover_error *err) {
    if (!s) return error_set(err, CLOVER_E_INVALID, "preview_debug: no session");
    if (!s->has_preview) return error_set(err, CLOVER_E_INVALID, "preview_debug: no preview has run on this session");
    const size_t L = s->hp->n_layer;
    if (hidden) memcpy(hidden, s->dbg_hidden, (L + 1) * s->preview_b * s->hp->n_embd * sizeof(float));
    if (kept) memcpy(kept, s->dbg_kept, L * s->hp->n_expert);
    return CLOVER_OK;
}

const backend_ops backend_cpu = {
    .name = "cpu",
    .session_create = backend_cpu_session_create,
    .session_free = backend_cpu_session_free,
    .session_length = backend_cpu_session_length,
    .commit = backend_cpu_commit,
    .preview = backend_cpu_preview,
    .preview_debug = backend_cpu_preview_debug,
    .reset = backend_cpu_reset,
    .state_bytes = backend_cpu_state_bytes,
    .state_export = backend_cpu_state_export,
    .state_import = backend_cpu_state_import,
};
