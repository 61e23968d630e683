/*
 * cmd_ppl.c: `clover ppl`: SPEC.md 5 scoring of a token-id sequence
 * (--ids: teacher-forced NLL on the commit path, mean NLL and perplexity),
 * or of a text file the way llama-perplexity scores one (-f, ppl_file.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clover.h"
#include "cli_args.h"
#include "cli_opts.h"
#include "commands.h"
#include "ppl_file.h"

static const cli_opt ppl_opts[] = {
    {"--model", "-m", CLI_STR, 0, 0, "FILE", NULL},
    {"--ids", NULL, CLI_STR, 0, 0, "LIST", NULL},
    {"--file", "-f", CLI_STR, 0, 0, "FILE", NULL},
    {"--ctx-size", "-c --ctx", CLI_UINT, 4, 1 << 20, "N", NULL},
    {"--threads", "-t", CLI_UINT, 0, 4096, "N", NULL},
    {"--device", NULL, CLI_STR, 0, 0, "D", NULL},
    {"--gpu-mem", NULL, CLI_STR, 0, 0, "N", NULL},
    {"--json", NULL, CLI_FLAG, 0, 0, NULL, NULL},
};
static void ppl_usage(FILE *out) {
    fprintf(out, "usage: clover ppl [-m MODEL] (--ids 1,2,3 | -f FILE [-c N]) [options]\n"
                 "\n"
                 "--ids: scores a sequence of token ids with the causal trunk (row r predicts token\n"
                 "r+1) and prints the mean negative log-likelihood (nats per token) and the perplexity.\n"
                 "\n"
                 "-f: the perplexity of a text file as llama.cpp's llama-perplexity computes it: the\n"
                 "text is tokenized (BOS as the tokenizer asks), cut into windows of N tokens (the\n"
                 "tail dropped), each window a fresh context with its first token made BOS when the\n"
                 "tokenizer adds one, and only each window's second half scored; prints the\n"
                 "perplexity with llama-perplexity's +/- estimate. Needs at least 2N tokens.\n"
                 "\n"
                 "options:\n"
                 "  -m, --model FILE   GGUF model (default: the model built into this binary)\n"
                 "  --ids LIST         comma-separated token ids, at least 2\n"
                 "  -f, --file FILE    a UTF-8 text file\n"
                 "  -c, --ctx-size N   -f's window, even, 4..1048576 (default 512, as llama-perplexity)\n"
                 "  -t, --threads N    CPU threads (default: every CPU)\n"
                 "  --device D         auto (default: CUDA for a model without the Clover record\n"
                 "                     when a GPU fits it, else the CPU), cpu or cuda\n"
                 "  --gpu-mem N        a GPU smaller than the model: at most N GiB of it, the routed\n"
                 "                     experts cached there (--device cuda; docs/OFFLOAD.md)\n"
                 "  --json             print {\"tokens\", \"mean_nll\", \"perplexity\", \"seconds\"} (-f adds\n"
                 "                     \"text_tokens\", \"chunks\", \"ctx\", \"ppl_error\")\n"
                 "  -h, --help         this text\n"
                 "\n"
                 "Exit codes: 0 done, 1 the model or the scoring failed (one error line), 2 usage.\n");
}

static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *b = cap < ((size_t)1 << 32) ? realloc(buf, cap * 2) : NULL;
        if (!b) free(buf);
        buf = b;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static int ppl_of_file(const char *model, const char *file, size_t ctx, size_t threads, int device, uint64_t gpu_mem,
                       int json) {
    size_t len = 0;
    char *text = read_text(file, &len);
    if (!text) {
        fprintf(stderr, "clover ppl: cannot read %s\n", file);
        return 1;
    }
    clover_model *m = NULL;
    clover_session *s = NULL;
    clover_error err = {0};
    ppl_file_result r;
    int code = 1;
    if (cli_load_model("ppl", model, &m)) goto done;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = threads;
    sp.device = device;
    sp.gpu_mem = gpu_mem;
    sp.max_rows = ctx < 512 ? ctx : 512;
    sp.max_context = ctx;
    sp.no_snapshot = 1;
    if (clover_session_create(&s, m, &sp, &err) || ppl_file_run(s, m, text, len, ctx, &r, &err)) {
        fprintf(stderr, "clover ppl: %s: %s\n", file, err.message);
        goto done;
    }
    if (json)
        printf("{\"text_tokens\":%zu,\"chunks\":%zu,\"ctx\":%zu,\"tokens\":%zu,\"mean_nll\":%.9g,"
               "\"perplexity\":%.9g,\"ppl_error\":%.9g,\"seconds\":%.6f}\n",
               r.n_tokens, r.n_chunks, ctx, r.n_scored, r.mean_nll, r.perplexity, r.ppl_error, r.seconds);
    else
        printf("text tokens   %zu (%zu chunks of %zu)\ntokens scored %zu\nmean NLL      %.6f\n"
               "perplexity    %.4f +/- %.5f\ntime          %.2f s (%.1f tok/s)\n",
               r.n_tokens, r.n_chunks, ctx, r.n_scored, r.mean_nll, r.perplexity, r.ppl_error, r.seconds,
               r.seconds > 0 ? (double)(r.n_chunks * ctx) / r.seconds : 0.0);
    code = 0;
done:
    clover_session_free(s);
    clover_model_free(m);
    free(text);
    return code;
}

int cmd_ppl(int argc, char **argv) {
    const char *model = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    uint64_t threads = 0, ctx = 512, gpu_mem = 0;
    const char *file = NULL;
    int json = 0, device = CLOVER_DEVICE_AUTO;
    {
        const cli_opt_table tables[] = {{ppl_opts, sizeof ppl_opts / sizeof ppl_opts[0]}};
        int nrc = cli_opts_normalize("ppl", tables, 1, &argc, &argv);
        if (nrc > 0) ppl_usage(stdout);
        if (nrc > 0) return 0;
        if (nrc < 0) return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ppl_usage(stdout);
            free(ids);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (a[0] != '-') {
            fprintf(stderr, "clover ppl: unexpected argument '%s' (clover ppl --help)\n", a);
            bad = 1;
        } else if (!v) {
            fprintf(stderr, "clover ppl: %s needs a value (clover ppl --help)\n", a);
            bad = 1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model = v;
        } else if (!strcmp(a, "--ids")) {
            free(ids);
            bad = cli_parse_ids("ppl", a, v, &ids, &n) != 0;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            file = v;
        } else if (!strcmp(a, "--ctx-size")) {
            bad = cli_parse_u64("ppl", a, v, 1u << 20, &ctx) != 0;
            if (!bad && (ctx < 4 || ctx % 2)) {
                fprintf(stderr, "clover ppl: --ctx-size %llu is not an even window of at least 4 tokens\n",
                        (unsigned long long)ctx);
                bad = 1;
            }
        } else if (!strcmp(a, "--threads")) {
            bad = cli_parse_u64("ppl", a, v, 4096, &threads) != 0;
        } else if (!strcmp(a, "--gpu-mem")) {
            bad = cli_parse_gib("ppl", a, v, &gpu_mem) != 0;
        } else if (!strcmp(a, "--device")) {
            device = clover_device_from_name(v);
            if (device < 0) {
                fprintf(stderr, "clover ppl: --device '%s' is not one of auto, cpu, cuda\n", v);
                bad = 1;
            }
        } else {
            fprintf(stderr, "clover ppl: unknown option '%s' (clover ppl --help)\n", a);
            bad = 1;
        }
        if (bad) {
            free(ids);
            return 2;
        }
        i++;
    }
    if (!ids == !file) {
        fprintf(stderr, "clover ppl: %s\n", file ? "--ids and -f are exclusive" : "no text (--ids 1,2,3 or -f FILE)");
        free(ids);
        return 2;
    }
    if (file) return ppl_of_file(model, file, (size_t)ctx, (size_t)threads, device, gpu_mem, json);
    clover_model *m = NULL;
    clover_session *s = NULL;
    clover_error err = {0};
    clover_score_result sr;
    int code = 1;
    if (cli_load_model("ppl", model, &m)) goto done;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = (size_t)threads;
    sp.device = device;
    sp.gpu_mem = gpu_mem;
    sp.no_snapshot = 1; /* one request per process: a prompt snapshot would never be reused */
    if (clover_session_create(&s, m, &sp, &err) || clover_score(s, ids, n, &sr, &err)) {
        fprintf(stderr, "clover ppl: %s\n", err.message);
        goto done;
    }
    if (json)
        printf("{\"tokens\":%zu,\"mean_nll\":%.9g,\"perplexity\":%.9g,\"seconds\":%.6f}\n", sr.n_scored, sr.mean_nll,
               sr.perplexity, sr.seconds);
    else
        printf("tokens scored %zu\nmean NLL      %.6f\nperplexity    %.6f\ntime          %.4f s (%.1f tok/s)\n",
               sr.n_scored, sr.mean_nll, sr.perplexity, sr.seconds,
               sr.seconds > 0 ? (double)(sr.n_scored + 1) / sr.seconds : 0.0);
    code = 0;
done:
    clover_session_free(s);
    clover_model_free(m);
    free(ids);
    return code;
}
