/*
 * score.c: SPEC.md 5: teacher-forced negative log-likelihood on the commit
 * path. The text is committed from an empty sequence in chunks of the
 * session's rows per pass; row r's logits score token r+1, so every chunk's
 * targets are the ids shifted by one and the text's last row scores nothing
 * (its target slot holds a placeholder id and is ignored). The backend
 * returns each row's NLL: the engine never holds a [rows x vocab] block.
 * Afterwards the session holds the whole text, reusable by a request whose
 * prompt extends it.
 */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "engine/session.h"

static int score_run(clover_session *s, const int32_t *ids, size_t n, double *nll_out, clover_score_result *out,
                     clover_error *err) {
    size_t chunk = s->max_rows;
    int32_t *targets = mem_calloc(chunk, sizeof *targets);
    float *nll = mem_calloc(chunk, sizeof *nll);
    if (!targets || !nll) {
        mem_free(targets);
        mem_free(nll);
        return error_set(err, CLOVER_E_NOMEM, "score: no memory for a chunk of %zu rows", chunk);
    }
    double t0 = timer_now(), sum = 0.0;
    int rc = CLOVER_OK;
    engine_session_forget(s);
    for (size_t a = 0; a < n && !rc; a += chunk) {
        size_t m = n - a < chunk ? n - a : chunk;
        for (size_t r = 0; r < m; r++)
            targets[r] = a + r + 1 < n ? ids[a + r + 1] : 0; /* the text's last row: a placeholder */
        if ((rc = engine_session_reserve(s, m, err))) break;
        backend_commit_seq co = {.s = s->bs, .ids = ids + a, .n = m, .targets = targets, .nll = nll};
        backend_pass_stats st = {0};
        rc = backend_commit1(s->be, s->bk, &co, &st, err);
        if (rc) {
            error_prefix(err, "score: rows %zu..%zu", a, a + m - 1);
            break;
        }
        memcpy(s->ids + s->n_ids, ids + a, m * sizeof *ids);
        s->n_ids += m;
        for (size_t r = 0; r < m && a + r + 1 < n; r++) {
            double v = (double)nll[r];
            if (!isfinite(v)) {
                rc = error_set(err, CLOVER_E_INTERNAL, "score: token %zu has a non-finite NLL", a + r + 1);
                break;
            }
            sum += v;
            if (nll_out) nll_out[a + r] = v;
        }
    }
    mem_free(targets);
    mem_free(nll);
    if (rc) {
        engine_session_forget(s);
        return rc;
    }
    out->n_scored = n - 1;
    out->mean_nll = sum / (double)(n - 1);
    out->perplexity = exp(out->mean_nll);
    out->seconds = timer_now() - t0;
    return CLOVER_OK;
}

int clover_score_tokens(clover_session *s, const int32_t *ids, size_t n, double *nll, clover_score_result *out,
                        clover_error *err) {
    clover_error local; /* the codes travel through err: keep one even when the caller gives none */
    if (!err) err = &local;
    if (!s || !out) return error_set(err, CLOVER_E_INVALID, "scoring: session and out must not be NULL");
    memset(out, 0, sizeof *out);
    if (n < 2) return error_set(err, CLOVER_E_INVALID, "scoring needs at least 2 tokens, got %zu", n);
    if (!ids) return error_set(err, CLOVER_E_INVALID, "scoring: no ids");
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= s->n_vocab)
            return error_set(err, CLOVER_E_INVALID, "scoring: token %zu is id %d, expected 0..%zu", i, ids[i],
                             s->n_vocab - 1);
    return score_run(s, ids, n, nll, out, err);
}

int clover_score(clover_session *s, const int32_t *ids, size_t n, clover_score_result *out, clover_error *err) {
    return clover_score_tokens(s, ids, n, NULL, out, err);
}
