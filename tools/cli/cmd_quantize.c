/*
 * cmd_quantize.c: `clover quantize IN.gguf OUT.gguf --type T`: one GGUF to
 * another type, as llama-quantize (the work is src/convert/requantize.c);
 * this file parses the options, draws the progress bar when stderr is a
 * terminal and prints the summary.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/timer.h"
#include "cli_cancel.h"
#include "cli_opts.h"
#include "commands.h"
#include "tensor_progress.h"
#include "convert/requantize.h"

static const cli_opt quantize_opts[] = {
    {"--type", NULL, CLI_STR, 0, 0, "T", NULL},
    {"--allow-requantize", NULL, CLI_FLAG, 0, 0, NULL, NULL},
    {"--threads", "-t", CLI_UINT, 0, 4096, "N", NULL},
};
static void quantize_usage(FILE *out) {
    fprintf(out,
            "usage: clover quantize IN.gguf OUT.gguf --type q8_0|q6_k|q5_k_m|q4_k_m [options]\n"
            "\n"
            "Rewrites a qwen35moe GGUF (one file, or the first shard of a split set) at another\n"
            "type, streaming tensor by tensor (memory stays small). Each tensor's type:\n"
            "\n"
            "  tensor                         q8_0   q6_k   q5_k_m   q4_k_m\n"
            "  routed experts (*_exps)        Q8_0   Q6_K   Q5_K     Q4_K\n"
            "  token_embd                     Q8_0   Q6_K   Q8_0     Q4_K\n"
            "  output (the head)              Q8_0   Q6_K   Q6_K     Q6_K\n"
            "  other matrices (attention,     Q8_0   Q6_K   Q8_0     Q8_0\n"
            "    GDN projections, shared expert)\n"
            "  norms, vectors, routers (ffn_gate_inp*), conv taps (ssm_conv1d*),\n"
            "    the Clover tensors           F32 in every type\n"
            "\n"
            "A row length the block does not divide falls back to Q8_0, then F16. q4_k_m is\n"
            "`clover convert --type q4_k_m`'s recipe.\n"
            "\n"
            "options:\n"
            "  --type T             the output type (required)\n"
            "  --allow-requantize   accept an input whose tensors are already quantised (each is\n"
            "                       dequantised to f32 first, which compounds the rounding)\n"
            "  -t, --threads N      quantisation threads (default: every CPU)\n"
            "  -h, --help           this text\n"
            "\n"
            "Exit codes: 0 done, 1 the input or the writing failed (one error line), 2 usage.\n");
}

int cmd_quantize(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *type_name = NULL;
    int allow = 0;
    long threads = 0;
    {
        const cli_opt_table tables[] = {{quantize_opts, sizeof quantize_opts / sizeof quantize_opts[0]}};
        int nrc = cli_opts_normalize("quantize", tables, 1, &argc, &argv);
        if (nrc > 0) quantize_usage(stdout);
        if (nrc > 0) return 0;
        if (nrc < 0) return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            quantize_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--allow-requantize")) {
            allow = 1;
        } else if (!strcmp(a, "--type") && i + 1 < argc) {
            type_name = argv[++i];
        } else if (!strcmp(a, "--threads") && i + 1 < argc) {
            if (cli_parse_threads("quantize", argv[++i], &threads)) return 2;
        } else if (a[0] == '-') {
            fprintf(stderr, "clover quantize: unknown option or missing value '%s' (clover quantize --help)\n", a);
            return 2;
        } else if (!in) {
            in = a;
        } else if (!out) {
            out = a;
        } else {
            fprintf(stderr, "clover quantize: unexpected argument '%s' (IN.gguf OUT.gguf)\n", a);
            return 2;
        }
    }
    if (!in || !out || !type_name) {
        fprintf(stderr, "clover quantize: %s (clover quantize --help)\n",
                !in || !out ? "an input and an output file are required" : "--type is required");
        return 2;
    }
    int type = requant_type_from_name(type_name);
    if (type < 0) {
        fprintf(stderr, "clover quantize: --type '%s' is not one of q8_0, q6_k, q5_k_m, q4_k_m\n", type_name);
        return 2;
    }
    cli_cancel_install_writer();
    cli_tensor_progress ps;
    cli_tensor_progress_start(&ps);
    requant_options opt = {.input_path = in,
                           .output_path = out,
                           .type = (requant_type)type,
                           .allow_requantize = allow,
                           .n_threads = (size_t)threads};
    if (isatty(STDERR_FILENO)) {
        opt.progress = cli_tensor_progress_draw;
        opt.progress_user = &ps;
    }
    requant_report rep;
    clover_error err = {0};
    int rc = requant_run(&opt, &rep, &err);
    cli_tensor_progress_end(&ps);
    if (rc) {
        fprintf(stderr, "clover quantize: %s\n", err.message);
        return 1;
    }
    printf("wrote %s: %s, %zu tensors (%zu quantised), %.3f GB -> %.3f GB of tensor data, in %.1f s\n", out,
           requant_type_name((requant_type)type), rep.n_tensors, rep.n_quantised, (double)rep.in_bytes / 1e9,
           (double)rep.out_bytes / 1e9, timer_now() - ps.t0);
    return 0;
}
