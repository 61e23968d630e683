/*
 * backend_cpu_solo.c: cpu_solo (backend_cpu_solo.h): each session creates
 * its own backend object and frees it with itself; each call is a batch of
 * one sequence.
 */
#include "cpu/backend_cpu_solo.h"

#include "base/error.h"
#include "cpu/backend_cpu_internal.h"

static int solo_create(const clover_model *model, const backend_config *cfg, backend_session **out,
                       clover_error *err) {
    if (!out) return error_set(err, CLOVER_E_INVALID, "cpu session: no output pointer");
    *out = NULL;
    backend *be = NULL;
    int rc = backend_cpu_create(model, cfg, &be, err);
    if (rc) return rc;
    if ((rc = backend_cpu_session_create(be, out, err))) {
        backend_cpu_destroy(be);
        return rc;
    }
    (*out)->owns_be = true;
    return CLOVER_OK;
}

static int solo_commit(backend_session *s, const int32_t *ids, size_t n, const backend_commit_out *out,
                       backend_pass_stats *stats, clover_error *err) {
    if (!s) return error_set(err, CLOVER_E_INVALID, "commit: no session");
    backend_commit_out none = {0};
    if (!out) out = &none;
    backend_commit_seq q = {.s = s, .ids = ids, .n = n, .last_logits = out->last_logits,
                            .all_logits = out->all_logits, .targets = out->targets, .nll = out->nll,
                            .hidden = out->hidden};
    return backend_commit1(&backend_cpu, s->be, &q, stats, err);
}

static int solo_preview(backend_session *s, const int32_t *block, size_t b, const backend_preview_opts *opts,
                        float *logits, backend_pass_stats *stats, clover_error *err) {
    if (!s || !block || !opts || !logits)
        return error_set(err, CLOVER_E_INVALID,
                         "preview: a session, block ids, options and a logits buffer are required");
    backend_preview_seq q = {.s = s, .block = block, .b = b, .opts = *opts, .logits = logits};
    return backend_preview1(&backend_cpu, s->be, &q, stats, err);
}

backend *backend_cpu_session_backend(backend_session *s) { return s ? s->be : NULL; }

const cpu_solo_ops cpu_solo = {
    .session_create = solo_create,
    .session_free = backend_cpu_session_free,
    .session_length = backend_cpu_session_length,
    .commit = solo_commit,
    .preview = solo_preview,
    .preview_debug = backend_cpu_preview_debug,
    .reset = backend_cpu_reset,
    .state_bytes = backend_cpu_state_bytes,
    .state_export = backend_cpu_state_export,
    .state_import = backend_cpu_state_import,
};
