/*
 * bench_lossless.c: lossless block diffusion against its peer and floor on
 * one model and machine: --ar (the answer it reproduces: the floor to beat)
 * and lossy block diffusion (the peer: more tokens per pass, not exact), at
 * one or several thresholds, over one prompt or a file of prompts (summed).
 * Per mode: generated tokens per second after the prompt (summed tokens /
 * summed generation seconds), passes; lossy also tokens per pass; lossless
 * also the tokens emitted per block and their histogram (the acceptance per
 * block), passes and commits per block, the drafts accepted, and a check
 * that its ids equal --ar's on every prompt (exit 1 otherwise).
 *
 * Lossless beats --ar only when a block's previews plus its verify (and
 * recommit) cost less than the autoregressive steps of the tokens it
 * emits: emitted per block must exceed (previews + commits) x (a pass's
 * cost / a one-row step's cost). A random-weight model's drafts almost
 * never match its trunk, so there it emits about one token per block and
 * is slower. The load average is printed: the machine may be shared.
 *
 *   bench_lossless MODEL [--threads T] [--gen G] [--threshold X[,Y...]] [--temperature T] [--seed N]
 *                  [--prompt TEXT | --prompts FILE.json] [--n-prompts K] [--chat] [--no-think]
 *                  [--block B] [--device auto|cpu|cuda] [--stop-at-eos] [--bound X]
 *
 * --prompts reads a JSON array of strings or {"prompts": [{"prompt": ...}]}
 * (tools/train/heldout_prompts.json); --chat renders each as one user turn
 * with the model's chat template (--no-think: the empty think block).
 * Without --stop-at-eos every answer runs to --gen tokens (ignore_eos).
 *
 * The flip rule: the verify commits a block in one chunk where --ar
 * commits a row at a time, so the logits differ by float reassociation
 * (~1e-6 on f32 weights); with 8-bit activations (Q8_0 / K-quant weights)
 * a tiny difference can move an activation across a rounding step, so the
 * log-probabilities drift by up to ~2e-2 (measured, bench/RESULTS.md). A
 * prompt whose lossless answer first differs from --ar's at a token where
 * --ar's top-2 log-probability gap is at most --bound (default 0.1) is a
 * near-tie flip, reported as such; any other greedy difference fails
 * (exit 1). A sampled difference is printed but not classified (the draws
 * are the library's; tests/unit/test_lossless.c checks them).
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clover.h"

#define MAX_TH 8
#define HIST 65 /* emitted per block: 1..64, the last bucket also more */

static double loadavg(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

typedef struct prompt_set {
    int32_t **ids;
    size_t *n;
    size_t count;
} prompt_set;

/* One mode's sums over the prompts. */
typedef struct tally {
    size_t tokens, passes, blocks, emitted, commits, accepted, recommits;
    double gen_s;
    size_t hist[HIST];
} tally;

static void tally_add(tally *t, const clover_generate_result *r) {
    t->tokens += r->n_generated;
    t->passes += r->stats.passes;
    t->blocks += r->n_blocks;
    t->accepted += r->stats.accepted_drafts;
    t->recommits += r->stats.recommits;
    t->gen_s += r->stats.total_s - r->stats.prompt_s;
    if (r->lossless)
        for (size_t b = 0; b < r->n_blocks; b++) {
            uint32_t e = r->accepted_per_block[b];
            t->emitted += e;
            t->commits += r->commits_per_block[b];
            t->hist[e < HIST ? e : HIST - 1]++;
        }
}

static void tally_print(const tally *t, const char *name, int lossless) {
    const double nb = t->blocks ? (double)t->blocks : 1.0;
    printf("%-16s %5zu tokens  %8.1f tok/s  passes %5zu  blocks %4zu", name, t->tokens,
           t->gen_s > 0 ? (double)t->tokens / t->gen_s : 0.0, t->passes, t->blocks);
    if (t->blocks && !lossless) printf("  tokens/pass %.2f", t->passes ? (double)t->tokens / (double)t->passes : 0.0);
    if (lossless) {
        printf("  emitted/block %.2f  passes/block %.2f  commits/block %.2f  drafts accepted %zu  recommits %zu",
               (double)t->emitted / nb, (double)t->passes / nb, (double)t->commits / nb, t->accepted, t->recommits);
        printf("\n%-16s emitted per block:", "");
        for (size_t e = 1; e < HIST; e++)
            if (t->hist[e]) printf(" %zu%s:%zu", e, e == HIST - 1 ? "+" : "", t->hist[e]);
    }
    printf("\n");
}

/* The first token where r differs from ar (a length difference counts at
 * the shorter end), or SIZE_MAX when they are equal. */
static size_t first_difference(const clover_generate_result *r, const clover_generate_result *ar) {
    const size_t n = r->n_generated < ar->n_generated ? r->n_generated : ar->n_generated;
    for (size_t i = 0; i < n; i++)
        if (r->ids[i] != ar->ids[i]) return i;
    return r->n_generated == ar->n_generated ? SIZE_MAX : n;
}

/* --ar's top-2 log-probability gap at token i (its logits' gap: --ar has no
 * penalties), INFINITY when not recorded. */
static double margin(const clover_generate_result *ar, size_t i) {
    if (!ar->top_logprobs || ar->n_top_logprobs < 2 || i >= ar->n_generated) return INFINITY;
    return (double)ar->top_logprobs[i * ar->n_top_logprobs] - (double)ar->top_logprobs[i * ar->n_top_logprobs + 1];
}

static int generate(clover_session *s, const int32_t *prompt, size_t n, const clover_generate_params *p,
                    const char *name, clover_generate_result *r) {
    clover_error err = {0};
    clover_session_reset(s);
    if (clover_generate(s, prompt, n, p, r, &err)) {
        fprintf(stderr, "bench_lossless: %s: %s\n", name, err.message);
        return 1;
    }
    return 0;
}

/* The prompt texts: one given, or a JSON file's. */
static int read_texts(const char *file, const char *one, size_t limit, char ***out, size_t *count) {
    *out = NULL;
    *count = 0;
    if (!file) {
        *out = malloc(sizeof **out);
        if (!*out) return 1;
        (*out)[0] = strdup(one);
        *count = 1;
        return (*out)[0] == NULL;
    }
    json_error_t je;
    json_t *root = json_load_file(file, 0, &je), *arr;
    if (!root) {
        fprintf(stderr, "bench_lossless: --prompts %s: %s (line %d)\n", file, je.text, je.line);
        return 1;
    }
    arr = json_is_array(root) ? root : json_object_get(root, "prompts");
    size_t n = json_array_size(arr);
    if (!json_is_array(arr) || n == 0) {
        fprintf(stderr, "bench_lossless: --prompts %s: no prompts (an array, or an object with \"prompts\")\n", file);
        json_decref(root);
        return 1;
    }
    if (limit && limit < n) n = limit;
    *out = calloc(n, sizeof **out);
    for (size_t i = 0; *out && i < n; i++) {
        json_t *e = json_array_get(arr, i);
        const char *t = json_is_string(e) ? json_string_value(e) : json_string_value(json_object_get(e, "prompt"));
        if (!t) {
            fprintf(stderr, "bench_lossless: --prompts %s: entry %zu has no prompt string\n", file, i);
            json_decref(root);
            return 1;
        }
        (*out)[i] = strdup(t);
        (*count)++;
    }
    json_decref(root);
    return *out == NULL;
}

static int tokenize_all(const clover_model *m, char **texts, size_t count, int chat, int think, prompt_set *ps) {
    clover_error err = {0};
    ps->ids = calloc(count, sizeof *ps->ids);
    ps->n = calloc(count, sizeof *ps->n);
    ps->count = count;
    if (!ps->ids || !ps->n) return 1;
    for (size_t i = 0; i < count; i++) {
        char *text = texts[i];
        if (chat) {
            clover_chat_message msg = {.role = "user", .content = texts[i]};
            clover_chat_options o;
            clover_chat_options_init(&o);
            o.enable_thinking = think;
            if (clover_chat_render(m, &msg, 1, &o, &text, &err)) {
                fprintf(stderr, "bench_lossless: chat template: %s\n", err.message);
                return 1;
            }
        }
        int rc = clover_tokenize(m, text, strlen(text), chat, &ps->ids[i], &ps->n[i], &err);
        if (chat) clover_free(text);
        if (rc) {
            fprintf(stderr, "bench_lossless: tokenize: %s\n", err.message);
            return 1;
        }
    }
    return 0;
}

static int parse_thresholds(const char *v, float *th, size_t *n) {
    char *end;
    *n = 0;
    for (;;) {
        if (*n == MAX_TH) return 1;
        th[(*n)++] = strtof(v, &end);
        if (end == v) return 1;
        if (!*end) return 0;
        if (*end != ',') return 1;
        v = end + 1;
    }
}

static void free_all(char **texts, size_t n_texts, prompt_set *ps, clover_session *s, clover_model *m) {
    for (size_t i = 0; ps->ids && i < ps->count; i++) clover_free(ps->ids[i]);
    free(ps->ids);
    free(ps->n);
    for (size_t i = 0; i < n_texts; i++) free(texts[i]);
    free(texts);
    clover_session_free(s);
    clover_model_free(m);
}

static void usage(void) {
    fprintf(stderr, "usage: bench_lossless MODEL [--threads T] [--gen G] [--threshold X[,Y...]] [--temperature T] "
                    "[--seed N] [--prompt TEXT | --prompts FILE.json] [--n-prompts K] [--chat] [--no-think] "
                    "[--block B] [--device auto|cpu|cuda] [--stop-at-eos] [--bound X]\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        usage();
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* a run cut by a timeout keeps the lines it printed */
    size_t threads = 0, gen = 64, n_prompts = 0, n_th = 1;
    float th[MAX_TH] = {-1.0f}, temp = 0.0f;
    uint64_t seed = 1;
    uint32_t block = 0;
    double bound = 0.1;
    int chat = 0, think = 1, device = CLOVER_DEVICE_CPU, stop_eos = 0;
    const char *text = "Write a short story about a lighthouse keeper.", *file = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--chat")) chat = 1;
        else if (!strcmp(a, "--no-think")) think = 0;
        else if (!strcmp(a, "--stop-at-eos")) stop_eos = 1;
        else if (i + 1 >= argc) {
            fprintf(stderr, "bench_lossless: %s needs a value\n", a);
            return 2;
        } else {
            const char *v = argv[++i];
            if (!strcmp(a, "--threads")) threads = (size_t)atol(v);
            else if (!strcmp(a, "--gen")) gen = (size_t)atol(v);
            else if (!strcmp(a, "--temperature")) temp = (float)atof(v);
            else if (!strcmp(a, "--seed")) seed = (uint64_t)atoll(v);
            else if (!strcmp(a, "--prompt")) text = v;
            else if (!strcmp(a, "--prompts")) file = v;
            else if (!strcmp(a, "--n-prompts")) n_prompts = (size_t)atol(v);
            else if (!strcmp(a, "--block")) block = (uint32_t)atol(v);
            else if (!strcmp(a, "--bound")) bound = atof(v);
            else if (!strcmp(a, "--threshold")) {
                if (parse_thresholds(v, th, &n_th)) {
                    fprintf(stderr, "bench_lossless: --threshold '%s' is not a list of at most %d numbers\n", v,
                            MAX_TH);
                    return 2;
                }
            } else if (!strcmp(a, "--device")) {
                device = clover_device_from_name(v);
                if (device < 0) {
                    fprintf(stderr, "bench_lossless: --device '%s' is not one of auto, cpu, cuda\n", v);
                    return 2;
                }
            } else {
                fprintf(stderr, "bench_lossless: unknown option %s\n", a);
                usage();
                return 2;
            }
        }
    }
    char **texts = NULL;
    size_t n_texts = 0;
    clover_model *m = NULL;
    clover_session *s = NULL;
    prompt_set ps = {0};
    clover_error err = {0};
    if (read_texts(file, text, n_prompts, &texts, &n_texts)) {
        free_all(texts, n_texts, &ps, s, m);
        return 1;
    }
    if (clover_model_load(&m, argv[1], &err)) {
        fprintf(stderr, "bench_lossless: %s\n", err.message);
        free_all(texts, n_texts, &ps, s, m);
        return 1;
    }
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = threads;
    sp.device = device;
    if (clover_session_create(&s, m, &sp, &err) || tokenize_all(m, texts, n_texts, chat, think, &ps)) {
        if (err.message[0]) fprintf(stderr, "bench_lossless: %s\n", err.message);
        free_all(texts, n_texts, &ps, s, m);
        return 1;
    }
    size_t n_tok = 0;
    for (size_t i = 0; i < ps.count; i++) n_tok += ps.n[i];
    const char *dev = device == CLOVER_DEVICE_CUDA ? "cuda" : device == CLOVER_DEVICE_CPU ? "cpu" : "auto";
    printf("bench_lossless: %s, device %s, %zu prompt%s (%zu tokens%s%s), %zu generated each%s, temperature %g, "
           "seed %llu, block %u, load average %.2f\n",
           argv[1], dev, ps.count, ps.count == 1 ? "" : "s", n_tok, chat ? ", chat template" : "",
           chat && !think ? ", thinking off" : "", gen, stop_eos ? " at most" : "", (double)temp,
           (unsigned long long)seed, block, loadavg());
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.max_tokens = gen;
    p.ignore_eos = !stop_eos;
    p.temperature = temp;
    p.seed = seed;
    p.block_size = block;
    /* --ar once per prompt, kept for the comparisons */
    clover_generate_result *ar = calloc(ps.count, sizeof *ar);
    tally t_ar = {0};
    int rc = ar == NULL;
    size_t n_ar = 0; /* results held */
    p.mode = CLOVER_MODE_AUTOREGRESSIVE;
    p.top_logprobs = 2; /* the margins of the flip rule (the tokens are the same either way) */
    for (size_t i = 0; !rc && i < ps.count; i++) {
        rc = generate(s, ps.ids[i], ps.n[i], &p, "--ar", &ar[i]);
        if (!rc) tally_add(&t_ar, &ar[n_ar++]);
    }
    if (!rc) tally_print(&t_ar, "--ar", 0);
    p.top_logprobs = 0;
    for (size_t k = 0; !rc && k < n_th; k++) {
        tally t_lossy = {0}, t_ll = {0};
        size_t same = 0, flips = 0, sampled_diff = 0;
        char name[40];
        p.threshold = th[k];
        p.mode = CLOVER_MODE_AUTO;
        for (size_t i = 0; !rc && i < ps.count; i++) {
            clover_generate_result r;
            p.lossless = 0;
            if (!(rc = generate(s, ps.ids[i], ps.n[i], &p, "lossy", &r))) {
                tally_add(&t_lossy, &r);
                clover_generate_result_free(&r);
            }
            p.lossless = 1;
            if (!rc && !(rc = generate(s, ps.ids[i], ps.n[i], &p, "lossless", &r))) {
                tally_add(&t_ll, &r);
                const size_t at = first_difference(&r, &ar[i]);
                if (at == SIZE_MAX) {
                    same++;
                } else if (temp >= 1e-6f) { /* sampled: the draw's distance to a bucket edge is not known here */
                    printf("  prompt %zu: lossless differs from --ar at token %zu (sampled: whether the draw sat at a "
                           "bucket edge is test_lossless's check, not measured here)\n",
                           i, at);
                    sampled_diff++;
                } else { /* a flip is allowed only where --ar's top-2 margin is within the bound */
                    const double mg = margin(&ar[i], at);
                    printf("  prompt %zu: lossless differs from --ar at token %zu, where --ar's top-2 margin is %.3g "
                           "(%s the bound %g)\n",
                           i, at, mg, mg <= bound ? "within" : "OUTSIDE", bound);
                    if (mg <= bound) flips++;
                }
                clover_generate_result_free(&r);
            }
        }
        if (rc) break;
        if (th[k] < 0) snprintf(name, sizeof name, "record's");
        else snprintf(name, sizeof name, "%g", (double)th[k]);
        printf("threshold %s:\n", name);
        tally_print(&t_lossy, "  lossy", 0);
        tally_print(&t_ll, "  lossless", 1);
        const double ar_s = t_ar.gen_s > 0 ? (double)t_ar.tokens / t_ar.gen_s : 0.0;
        const double ll_s = t_ll.gen_s > 0 ? (double)t_ll.tokens / t_ll.gen_s : 0.0;
        const double lo_s = t_lossy.gen_s > 0 ? (double)t_lossy.tokens / t_lossy.gen_s : 0.0;
        printf("  lossless == --ar: %s (%zu of %zu prompts; %zu flipped within the margin bound%s); lossless / --ar "
               "speed %.2fx (floor 1.00x), lossy / --ar %.2fx (the peer)\n",
               same == ps.count                          ? "yes"
               : same + flips == ps.count                ? "yes up to near-ties"
               : same + flips + sampled_diff == ps.count ? "not shown (sampled)"
                                                         : "NO",
               same, ps.count, flips, sampled_diff ? ", the others sampled" : "", ar_s > 0 ? ll_s / ar_s : 0.0,
               ar_s > 0 ? lo_s / ar_s : 0.0);
        if (same + flips + sampled_diff != ps.count) rc = 1;
    }
    for (size_t i = 0; i < n_ar; i++) clover_generate_result_free(&ar[i]);
    free(ar);
    free_all(texts, n_texts, &ps, s, m);
    return rc;
}
