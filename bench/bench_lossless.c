/*
 * bench_lossless.c: lossless block diffusion against its peer and floor on
 * one model and machine: --ar (the answer it reproduces: the floor to beat)
 * and lossy block diffusion (the peer: more tokens per pass, not exact).
 * Per mode: generated tokens per second after the prompt, passes; lossless
 * also the tokens emitted per block, commits per block, the drafts
 * accepted, and a check that its ids equal --ar's. Lossless beats --ar only
 * when a block's previews plus its verify (and recommit) cost less than the
 * autoregressive steps of the tokens it emits: emitted per block must
 * exceed (previews + commits) x (a pass's cost / a one-row step's cost).
 * A random-weight model's drafts almost never match its trunk, so there it
 * emits about one token per block and is slower. The load average is
 * printed: the machine may be shared.
 *
 *   bench_lossless MODEL [--threads T] [--gen G] [--threshold X] [--temperature T] [--seed N] [--prompt TEXT]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clover.h"

static double loadavg(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

static int run(clover_session *s, const int32_t *prompt, size_t n, clover_generate_params *p, const char *name,
               clover_generate_result *r) {
    clover_error err = {0};
    clover_session_reset(s);
    if (clover_generate(s, prompt, n, p, r, &err)) {
        fprintf(stderr, "bench_lossless: %s: %s\n", name, err.message);
        return 1;
    }
    const clover_generate_stats *st = &r->stats;
    printf("%-10s %4zu tokens  %8.1f tok/s  passes %4zu  blocks %3zu", name, r->n_generated, st->gen_tok_s,
           st->passes, r->n_blocks);
    if (r->lossless) {
        double e = 0, c = 0;
        for (size_t b = 0; b < r->n_blocks; b++) {
            e += r->accepted_per_block[b];
            c += r->commits_per_block[b];
        }
        printf("  emitted/block %.2f  passes/block %.2f  commits/block %.2f  drafts accepted %zu",
               r->n_blocks ? e / (double)r->n_blocks : 0.0,
               r->n_blocks ? (double)st->passes / (double)r->n_blocks : 0.0,
               r->n_blocks ? c / (double)r->n_blocks : 0.0, st->accepted_drafts);
    }
    printf("\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: bench_lossless MODEL [--threads T] [--gen G] [--threshold X] [--temperature T] "
                        "[--seed N] [--prompt TEXT]\n");
        return 2;
    }
    size_t threads = 0, gen = 64;
    float threshold = -1.0f, temp = 0.0f;
    uint64_t seed = 1;
    const char *text = "Write a short story about a lighthouse keeper.";
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--gen")) gen = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--threshold")) threshold = (float)atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--temperature")) temp = (float)atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) seed = (uint64_t)atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--prompt")) text = argv[i + 1];
        else {
            fprintf(stderr, "bench_lossless: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    clover_model *m = NULL;
    clover_session *s = NULL;
    clover_error err = {0};
    if (clover_model_load(&m, argv[1], &err)) {
        fprintf(stderr, "bench_lossless: %s\n", err.message);
        return 1;
    }
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = threads;
    if (clover_session_create(&s, m, &sp, &err)) {
        fprintf(stderr, "bench_lossless: %s\n", err.message);
        clover_model_free(m);
        return 1;
    }
    int32_t *prompt = NULL;
    size_t n = 0;
    if (clover_tokenize(m, text, strlen(text), 0, &prompt, &n, &err)) {
        fprintf(stderr, "bench_lossless: tokenize: %s\n", err.message);
        return 1;
    }
    printf("bench_lossless: %s, prompt %zu tokens, %zu generated, threshold %g, temperature %g, load average %.2f\n",
           argv[1], n, gen, (double)threshold, (double)temp, loadavg());
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.max_tokens = gen;
    p.ignore_eos = 1;
    p.temperature = temp;
    p.seed = seed;
    p.threshold = threshold;
    clover_generate_result ar, ll, lossy;
    int rc = 0;
    p.mode = CLOVER_MODE_AUTOREGRESSIVE;
    rc |= run(s, prompt, n, &p, "--ar", &ar);
    p.mode = CLOVER_MODE_AUTO;
    rc |= run(s, prompt, n, &p, "lossy", &lossy);
    p.lossless = 1;
    rc |= run(s, prompt, n, &p, "lossless", &ll);
    if (!rc) {
        int same = ar.n_generated == ll.n_generated && !memcmp(ar.ids, ll.ids, ar.n_generated * sizeof *ar.ids);
        printf("lossless == --ar: %s; lossless / --ar speed %.2fx (floor 1.00x), lossy / --ar %.2fx (the peer)\n",
               same ? "yes" : "NO", ll.stats.gen_tok_s / ar.stats.gen_tok_s,
               lossy.stats.gen_tok_s / ar.stats.gen_tok_s);
        if (!same) rc = 1;
        clover_generate_result_free(&ar);
        clover_generate_result_free(&ll);
        clover_generate_result_free(&lossy);
    }
    clover_free(prompt);
    clover_session_free(s);
    clover_model_free(m);
    return rc;
}
