/*
 * prefill.c: prefill progress on a terminal. A long prompt is committed a few chunks
 * at a time by requests with max_tokens 0 (each reuses what the one before
 * committed), with a progress line between them. The steps are multiples
 * of the session's chunk, and the last chunk is left to the real request,
 * so every pass is the one the request would have run alone: the answer is
 * the same. The statistics are put back as one request would report them.
 */
#include "prefill.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli_cancel.h"
#include "visual.h"

#define PREFILL_SHOWN 2048 /* prompts shorter than this go without a progress line */
#define PREFILL_STEP 512  /* a multiple of every default chunk (512 on the CPU, 64 on a GPU) */

/* The tokens committed here; *secs the time it took. */
static size_t prefill(clover_session *s, const int32_t *ids, size_t n, const clover_generate_params *p, size_t chunk,
                      double *secs) {
    *secs = 0;
    if (n < PREFILL_SHOWN || !isatty(STDERR_FILENO) || cli_term_plain()) return 0;
    size_t step = chunk ? chunk * ((PREFILL_STEP + chunk - 1) / chunk) : PREFILL_STEP;
    clover_generate_params q = *p;
    q.max_tokens = 0;
    q.on_token = NULL;
    q.on_pass = NULL;
    q.dump_first_preview = NULL;
    size_t done = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t k = step; k < n && !cli_cancel_flag; k += step) {
        clover_generate_result r;
        clover_error err = {0};
        if (clover_generate(s, ids, k, &q, &r, &err) != CLOVER_OK) break; /* the real request reports it */
        int cancelled = r.finish == CLOVER_FINISH_CANCELLED;
        clover_generate_result_free(&r);
        if (cancelled) break;
        done = k;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        *secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        fprintf(stderr, "\rprompt: %zu of %zu tokens (%.0f tok/s)\033[K", k, n, (double)k / *secs);
        fflush(stderr);
    }
    if (done) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    return done;
}

int cli_generate(clover_session *s, const int32_t *ids, size_t n, const clover_generate_params *p, size_t chunk,
                 clover_generate_result *r, clover_error *err) {
    double prefill_s;
    size_t prefilled = prefill(s, ids, n, p, chunk, &prefill_s);
    int rc = clover_generate(s, ids, n, p, r, err);
    if (!rc && prefilled && r->stats.reused_tokens >= prefilled) { /* as if one request had done it all */
        r->stats.reused_tokens -= prefilled;
        r->stats.prompt_s += prefill_s;
        r->stats.total_s += prefill_s;
        if (r->stats.prompt_s > 0)
            r->stats.prompt_tok_s = (double)(r->stats.prompt_tokens - r->stats.reused_tokens) / r->stats.prompt_s;
    }
    return rc;
}
