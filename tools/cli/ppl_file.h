/*
 * ppl_file.h: `clover ppl -f FILE`: the perplexity of a text file computed
 * the way llama.cpp's `llama-perplexity` computes it, so the two engines'
 * figures can be set side by side.
 */
#ifndef CLOVER_CLI_PPL_FILE_H
#define CLOVER_CLI_PPL_FILE_H

#include <stddef.h>

#include "clover.h"

typedef struct ppl_file_result {
    size_t n_tokens;  /* the whole text, tokenized */
    size_t n_chunks;  /* windows of n_ctx tokens scored */
    size_t n_scored;  /* tokens scored: n_chunks * (n_ctx - n_ctx/2 - 1) */
    double mean_nll;
    double perplexity;
    double ppl_error; /* llama-perplexity's "+/-" (its standard error of the mean NLL, times the perplexity) */
    double seconds;
} ppl_file_result;

/* Scores text[0..len) in windows of n_ctx tokens (n_ctx even, >= 4); progress
 * on stderr when it is a terminal. Fails (err set) on a text shorter than
 * 2 * n_ctx tokens, as llama-perplexity does. */
int ppl_file_run(clover_session *s, const clover_model *m, const char *text, size_t len, size_t n_ctx,
                 ppl_file_result *out, clover_error *err);

#endif
