/*
 * ppl_file.c: llama-perplexity's method (tools/perplexity/perplexity.cpp,
 * its default path), step for step:
 *
 *  - the text is tokenized with the tokenizer's own BOS rule
 *    (tokenizer.ggml.add_bos_token) and special tokens not parsed (their
 *    text is ordinary text; user-defined added tokens still match whole);
 *  - it is cut into n_chunk = n_tokens / n_ctx windows of n_ctx tokens (the
 *    tail is dropped); each window starts a fresh context, and when the
 *    tokenizer adds a BOS its first token is replaced by BOS;
 *  - only the second half is scored: the logits at positions
 *    n_ctx/2 .. n_ctx-2 against the next token, n_ctx - n_ctx/2 - 1 tokens
 *    a window, so every scored token has at least n_ctx/2 of context;
 *  - perplexity = exp(mean NLL), and the "+/-" is
 *    sqrt((E[nll^2] - E[nll]^2) / (count - 1)) * perplexity.
 *
 * The per-token NLL comes from clover_score_tokens (float32 logits,
 * log-softmax in double), one call per window.
 */
#include "ppl_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void draw_bar(size_t done, size_t total, double nll, size_t count, double t0) {
    enum { W = 30 };
    size_t fill = total ? done * W / total : W;
    char bar[W + 1];
    for (size_t i = 0; i < W; i++) bar[i] = i < fill ? '#' : '-';
    bar[W] = '\0';
    double el = now_s() - t0, eta = done ? el * (double)(total - done) / (double)done : 0;
    fprintf(stderr, "\r\033[Kppl [%s] %zu/%zu chunks  ppl %.4f  %.0f s left", bar, done, total,
            count ? exp(nll / (double)count) : 0.0, eta);
    fflush(stderr);
}

int ppl_file_run(clover_session *s, const clover_model *m, const char *text, size_t len, size_t n_ctx,
                 ppl_file_result *out, clover_error *err) {
    memset(out, 0, sizeof *out);
    clover_model_info info;
    clover_model_get_info(m, &info);
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = clover_tokenize(m, text, len, 0, &ids, &n, err);
    if (rc) return rc;
    /* clover_tokenize adds no BOS; llama.cpp's common_tokenize(add_special) does when the tokenizer asks */
    const int add_bos = info.add_bos && info.bos_id >= 0;
    int32_t *w = malloc((n + 1) * sizeof *w);
    if (w) {
        w[0] = info.bos_id;
        memcpy(w + add_bos, ids, n * sizeof *w);
        n += (size_t)add_bos;
    }
    clover_free(ids);
    ids = w;
    if (!ids) {
        err->code = CLOVER_E_NOMEM;
        snprintf(err->message, sizeof err->message, "out of memory for %zu tokens", n + 1);
        return CLOVER_E_NOMEM;
    }
    out->n_tokens = n;
    if (n < 2 * n_ctx) {
        free(ids);
        err->code = CLOVER_E_INVALID;
        snprintf(err->message, sizeof err->message,
                 "the text is %zu tokens; a context of %zu needs at least %zu (2 x --ctx), as llama-perplexity", n,
                 n_ctx, 2 * n_ctx);
        return CLOVER_E_INVALID;
    }
    const size_t n_chunk = n / n_ctx, first = n_ctx / 2;
    double *nll = malloc((n_ctx - 1) * sizeof *nll);
    int32_t *win = malloc(n_ctx * sizeof *win);
    if (!nll || !win) {
        free(nll), free(win), free(ids);
        err->code = CLOVER_E_NOMEM;
        snprintf(err->message, sizeof err->message, "out of memory for a window of %zu tokens", n_ctx);
        return CLOVER_E_NOMEM;
    }
    const int tty = isatty(STDERR_FILENO);
    double sum = 0, sum2 = 0, t0 = now_s();
    size_t count = 0;
    if (tty) draw_bar(0, n_chunk, 0, 0, t0);
    for (size_t c = 0; c < n_chunk && !rc; c++) {
        memcpy(win, ids + c * n_ctx, n_ctx * sizeof *win);
        if (add_bos) win[0] = info.bos_id;
        clover_score_result sr;
        rc = clover_score_tokens(s, win, n_ctx, nll, &sr, err);
        if (rc) break;
        /* nll[r] scores win[r + 1]: rows first .. n_ctx - 2 */
        for (size_t r = first; r + 1 < n_ctx; r++) {
            sum += nll[r];
            sum2 += nll[r] * nll[r];
            count++;
        }
        if (tty) draw_bar(c + 1, n_chunk, sum, count, t0);
    }
    if (tty) fputs("\r\033[K", stderr);
    free(nll), free(win), free(ids);
    if (rc) return rc;
    out->n_chunks = n_chunk;
    out->n_scored = count;
    out->mean_nll = sum / (double)count;
    out->perplexity = exp(out->mean_nll);
    double var = sum2 / (double)count - out->mean_nll * out->mean_nll;
    out->ppl_error = var > 0 && count > 1 ? sqrt(var / (double)(count - 1)) * out->perplexity : 0.0;
    out->seconds = now_s() - t0;
    return CLOVER_OK;
}
