/*
 * cmd_ppl.c: `clover ppl`: SPEC.md 5 scoring of a token-id sequence:
 * teacher-forced NLL on the commit path, printed as mean NLL and perplexity
 * (text, or --json).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clover.h"
#include "cli_args.h"
#include "commands.h"

static void ppl_usage(FILE *out) {
    fprintf(out, "usage: clover ppl [-m MODEL] --ids 1,2,3 [options]\n"
                 "\n"
                 "Scores a sequence of token ids with the causal trunk (row r predicts token r+1)\n"
                 "and prints the mean negative log-likelihood (nats per token) and the perplexity.\n"
                 "\n"
                 "options:\n"
                 "  -m, --model FILE   GGUF model (default: the model built into this binary)\n"
                 "  --ids LIST         comma-separated token ids, at least 2 (required)\n"
                 "  --threads N        CPU threads (default: every CPU)\n"
                 "  --device D         auto (default: CUDA for a model without the Clover record\n"
                 "                     when a GPU fits it, else the CPU), cpu or cuda\n"
                 "  --json             print {\"tokens\", \"mean_nll\", \"perplexity\", \"seconds\"}\n"
                 "  -h, --help         this text\n"
                 "\n"
                 "Exit codes: 0 done, 1 the model or the scoring failed (one error line), 2 usage.\n");
}

int cmd_ppl(int argc, char **argv) {
    const char *model = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    uint64_t threads = 0;
    int json = 0, device = CLOVER_DEVICE_AUTO;
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
        } else if (!strcmp(a, "--threads")) {
            bad = cli_parse_u64("ppl", a, v, 4096, &threads) != 0;
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
    if (!ids) {
        fprintf(stderr, "clover ppl: no text (--ids 1,2,3)\n");
        return 2;
    }
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
