/*
 * cmd_check.c: `clover check --device X`: a device backend against the CPU
 * backend on the same commits (clover_device_check), printed per layer,
 * then the logits; exit 1 when any normalised error passes --tol.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "clover.h"
#include "cli_opts.h"
#include "commands.h"

static const cli_opt check_opts[] = {
    {"--device", NULL, CLI_STR, 0, 0, "D", NULL},
    {"--model", "-m", CLI_STR, 0, 0, "FILE", NULL},
    {"--prompt", "-p", CLI_STR, 0, 0, "TEXT", NULL},
    {"--ids", NULL, CLI_STR, 0, 0, "LIST", NULL},
    {"--blocks", NULL, CLI_UINT, 0, 4096, "N", NULL},
    {"--seed", "-s", CLI_UINT, 0, 0, "N", NULL},
    {"--rows", NULL, CLI_UINT, 0, 4096, "N", NULL},
    {"--threads", "-t", CLI_UINT, 0, 1024, "N", NULL},
    {"--tol", NULL, CLI_FLOAT, 0, 1e30, "X", NULL},
    {"--gpu-mem", NULL, CLI_STR, 0, 0, "N", NULL},
};
static void check_usage(FILE *out) {
    fprintf(out, "usage: clover check --device cpu|cuda [-m MODEL] [options]\n"
                 "\n"
                 "Commits a prompt and some blocks on the device and on the CPU backend and\n"
                 "prints the normalised error ||device - cpu|| / ||cpu|| (the largest over the\n"
                 "commit calls) of each layer's residual stream and state, and of the logits.\n"
                 "--device cpu checks the CPU backend as a device: with CLOVER_SIM_RANKS=N in the\n"
                 "environment its MoE runs over N simulated ranks (docs/MULTI_GPU.md), the\n"
                 "reference never does; --rows 1 runs its commits row by row.\n"
                 "\n"
                 "options:\n"
                 "  -m, --model FILE   the model (default: the embedded tiny model)\n"
                 "  -p, --prompt TEXT  the prompt, tokenized as it is (default: a fixed sentence)\n"
                 "  --ids 1,2,3        the prompt as token ids instead\n"
                 "  --blocks N         blocks committed after the prompt (default 2; the record's block\n"
                 "                     size, 8 without a record), their ids drawn from --seed\n"
                 "  -s, --seed N       (default 0)\n"
                 "  --rows N           rows per pass on the device (default 64)\n"
                 "  -t, --threads N    CPU threads (default: every CPU)\n"
                 "  --tol X            exit 1 when an error is above X (default 1e-3)\n"
                 "  --gpu-mem N        --device cuda with at most N GiB of GPU memory, the routed experts\n"
                 "                     cached there (docs/OFFLOAD.md): the same errors as without it\n"
                 "  -h, --help         this text\n");
}

int cmd_check(int argc, char **argv) {
    const char *model = NULL, *prompt = "The quick brown fox jumps over the lazy dog.", *ids_text = NULL;
    int device = -1;
    uint64_t blocks = 2, seed = 0, rows = 0, threads = 0, gpu_mem = 0;
    float tol = 1e-3f;
    {
        const cli_opt_table tables[] = {{check_opts, sizeof check_opts / sizeof check_opts[0]}};
        int nrc = cli_opts_normalize("check", tables, 1, &argc, &argv);
        if (nrc > 0) check_usage(stdout);
        if (nrc > 0) return 0;
        if (nrc < 0) return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            check_usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "clover check: %s needs a value (clover check --help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--device")) {
            device = clover_device_from_name(v);
            if (device != CLOVER_DEVICE_CPU && device != CLOVER_DEVICE_CUDA) {
                fprintf(stderr, "clover check: --device '%s' is not cpu or cuda\n", v);
                return 2;
            }
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model = v;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            prompt = v;
        } else if (!strcmp(a, "--ids")) {
            ids_text = v;
        } else if (!strcmp(a, "--blocks")) {
            if (cli_parse_u64("check", a, v, 4096, &blocks)) return 2;
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_u64("check", a, v, UINT64_MAX, &seed)) return 2;
        } else if (!strcmp(a, "--rows")) {
            if (cli_parse_u64("check", a, v, 4096, &rows)) return 2;
        } else if (!strcmp(a, "--threads")) {
            if (cli_parse_u64("check", a, v, 1024, &threads)) return 2;
        } else if (!strcmp(a, "--gpu-mem")) {
            if (cli_parse_gib("check", a, v, &gpu_mem)) return 2;
        } else if (!strcmp(a, "--tol")) {
            if (cli_parse_float("check", a, v, &tol)) return 2;
        } else {
            fprintf(stderr, "clover check: unknown option '%s' (clover check --help)\n", a);
            return 2;
        }
    }
    if (device < 0) {
        fprintf(stderr, "clover check: no device (--device cpu or --device cuda)\n");
        return 2;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (ids_text && cli_parse_ids("check", "--ids", ids_text, &ids, &n)) return 2;
    clover_model *m = NULL;
    clover_error err = {0};
    clover_check_result r = {0};
    int code = 1;
    if (cli_load_model("check", model, &m)) goto done;
    if (!ids && clover_tokenize(m, prompt, strlen(prompt), 0, &ids, &n, &err)) {
        fprintf(stderr, "clover check: %s\n", err.message);
        goto done;
    }
    clover_check_params p = {.device = device, .prompt = ids, .n_prompt = n, .n_blocks = (size_t)blocks,
                             .seed = seed, .device_rows = (size_t)rows, .n_threads = (size_t)threads,
                             .gpu_mem = gpu_mem};
    if (clover_device_check(m, &p, &r, &err)) {
        fprintf(stderr, "clover %s\n", err.message); /* the library's message starts "check: " */
        goto done;
    }
    printf("device %s against cpu: %zu commits, %zu rows (prompt %zu + %llu blocks)\n", r.device, r.n_commits, r.n_rows,
           n, (unsigned long long)blocks);
    printf("%-6s %-10s %-12s %-12s\n", "layer", "kind", "hidden", "state");
    double worst = r.logits_err;
    for (size_t l = 0; l < r.n_layer; l++) {
        printf("%-6zu %-10s %-12.3g %-12.3g\n", l, r.layer_kind[l] ? "attention" : "gdn", r.hidden_err[l],
               r.state_err[l]);
        if (!(r.hidden_err[l] <= worst)) worst = r.hidden_err[l];
        if (!(r.state_err[l] <= worst)) worst = r.state_err[l];
    }
    printf("logits %.3g (largest difference %.3g); the same top id in %zu of %zu rows\n", r.logits_err,
           r.logits_max_abs, r.argmax_equal, r.n_rows);
    code = worst <= tol ? 0 : 1;
    printf("%s: the largest error %.3g is %s the tolerance %.3g\n", code ? "differs" : "ok", worst,
           code ? "above" : "within", (double)tol);
done:
    clover_check_result_free(&r);
    if (ids_text) free(ids);
    else clover_free(ids);
    clover_model_free(m);
    return code;
}
