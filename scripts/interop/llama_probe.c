/*
 * llama_probe.c: the numbers scripts/interop.sh asks llama.cpp for, through
 * its public C API (llama.h) so that nothing but llama.cpp's own code paths
 * are measured: the teacher-forced NLL of a token-id sequence (row r's
 * logits against token r+1, log-softmax in double of the float logits, as
 * clover ppl --ids) and greedy decoding after it (the first maximum wins).
 * Built by interop.sh against the llama.cpp it builds; not part of clover.
 *
 *   llama_probe MODEL.gguf IDS(comma-separated) N_GREEDY  ->  one JSON line
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

static double nll_of(const float *l, int n, int tok) {
    float mx = l[argmax(l, n)];
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)(l[i] - mx));
    return -((double)(l[tok] - mx) - log(s));
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: llama_probe MODEL.gguf IDS N_GREEDY\n");
        return 2;
    }
    int cap = 16, n = 0, n_gen = atoi(argv[3]);
    llama_token *ids = malloc(cap * sizeof *ids);
    for (char *p = argv[2]; *p;) {
        if (n == cap) ids = realloc(ids, (cap *= 2) * sizeof *ids);
        ids[n++] = (llama_token)strtol(p, &p, 10);
        if (*p == ',') p++;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "llama_probe: cannot load %s\n", argv[1]);
        return 1;
    }
    const int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n + n_gen + 8);
    cp.n_batch = cp.n_ubatch = (uint32_t)(n + 8);
    cp.n_threads = cp.n_threads_batch = 1;
    cp.type_k = cp.type_v = GGML_TYPE_F32; /* llama.cpp's default F16 cache would round the keys and values */
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama_probe: cannot create a context\n");
        return 1;
    }
    struct llama_batch b = llama_batch_init(n > 1 ? n : 1, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b)) {
        fprintf(stderr, "llama_probe: decode failed\n");
        return 1;
    }
    printf("{\"n_vocab\":%d,\"nll\":[", V);
    double sum = 0;
    for (int i = 0; i + 1 < n; i++) {
        double v = nll_of(llama_get_logits_ith(ctx, i), V, ids[i + 1]);
        sum += v;
        printf("%s%.9g", i ? "," : "", v);
    }
    printf("],\"mean_nll\":%.9g,\"greedy\":[", n > 1 ? sum / (n - 1) : 0.0);
    int tok = argmax(llama_get_logits_ith(ctx, n - 1), V);
    for (int g = 0; g < n_gen; g++) {
        printf("%s%d", g ? "," : "", tok);
        if (g + 1 == n_gen) break;
        struct llama_batch one = llama_batch_get_one(&tok, 1);
        if (llama_decode(ctx, one)) {
            fprintf(stderr, "llama_probe: decode failed\n");
            return 1;
        }
        tok = argmax(llama_get_logits_ith(ctx, -1), V);
    }
    printf("]}\n");
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(ids);
    return 0;
}
