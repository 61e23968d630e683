/*
 * backend_cpu_head.c: the final norm, the head, and the NLL of a row.
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
#include "cpu/norm.h"
#include "quant/matmul.h"

void cpu_head_logits(backend *be, size_t r0, size_t nr, float *logits) {
    const clover_model *m = be->model;
    const size_t H = be->hp->n_embd;
    float *x = be->sc.x + r0 * H;
    cpu_rms_norm(x, be->sc.h + r0 * H, m->output_norm.data, nr, H, be->hp->rms_eps);
    matmul(be->pool, m->output.type, m->output.data, be->hp->n_vocab, H, x, nr, logits);
}

float cpu_head_nll(const float *logits, size_t n_vocab, int32_t target) {
    double mx = -INFINITY;
    for (size_t i = 0; i < n_vocab; i++)
        if ((double)logits[i] > mx) mx = (double)logits[i];
    double sum = 0.0;
    for (size_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    return (float)(mx + log(sum) - (double)logits[target]);
}
