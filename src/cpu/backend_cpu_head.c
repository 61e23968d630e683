/*
 * backend_cpu_head.c: the NLL of a row of the head's logits (the head itself
 * runs in backend_cpu_pass.c, over the head rows of a whole pass).
 *
 * The head is `output` ({n_embd, n_vocab}, token_embd's rows when the file
 * ties them; the loader checks that both have n_vocab rows). Logits cover
 * every row of it, including padding rows past the tokenizer's last id
 * (a Qwen3.5 tokenizer defines 248077 of 248320 ids; the fixtures 434 of
 * 448), as transformers computes them: tools/reference DECISIONS 13 leaves
 * them unmasked, and the logits rows are [n_vocab] wide everywhere.
 */
#include <math.h>

#include "cpu/backend_cpu_internal.h"

float cpu_head_nll(const float *logits, size_t n_vocab, int32_t target) {
    double mx = -INFINITY;
    for (size_t i = 0; i < n_vocab; i++)
        if ((double)logits[i] > mx) mx = (double)logits[i];
    double sum = 0.0;
    for (size_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    return (float)(mx + log(sum) - (double)logits[target]);
}
