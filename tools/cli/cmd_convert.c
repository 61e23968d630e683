/*
 * cmd_convert.c: `clover convert DIR -o OUT.gguf [--type T] [--threads N]`:
 * a Hugging Face Qwen3.5-MoE checkpoint directory to a qwen35moe GGUF.
 * The library does the work and reports progress through a callback; this
 * file draws the progress bar (only when stderr is a terminal) and prints
 * the summary, the line about skipped vision / MTP tensors included.
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
#include "convert/convert.h"

static const cli_opt convert_opts[] = {
    {"--output", "-o", CLI_STR, 0, 0, "FILE", NULL},
    {"--type", NULL, CLI_STR, 0, 0, "T", NULL},
    {"--threads", "-t", CLI_UINT, 0, 4096, "N", NULL},
};
static void convert_usage(FILE *out) {
    fprintf(out,
            "usage: clover convert DIR -o OUT.gguf [--type f32|bf16|q8_0|q4_k_m] [--threads N]\n"
            "\n"
            "Converts a Hugging Face Qwen3.5-MoE checkpoint (config.json, *.safetensors, tokenizer\n"
            "files; a Clover block_diffusion record and preview tensors when present) to a\n"
            "llama.cpp qwen35moe GGUF. Streams tensor by tensor: memory stays small.\n"
            "\n"
            "  -o, --output FILE   the GGUF to write (required)\n"
            "  --type T            f32, bf16 (default), q8_0 or q4_k_m\n"
            "                      (q4_k_m: routed experts and token_embd Q4_K, output Q6_K, other\n"
            "                      matrices Q8_0; norms, vectors, conv taps and routers stay F32)\n"
            "  -t, --threads N     quantisation threads (default: every CPU)\n");
}

int cmd_convert(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *type_name = "bf16";
    long threads = 0;
    {
        const cli_opt_table tables[] = {{convert_opts, sizeof convert_opts / sizeof convert_opts[0]}};
        int nrc = cli_opts_normalize("convert", tables, 1, &argc, &argv);
        if (nrc > 0) convert_usage(stdout);
        if (nrc > 0) return 0;
        if (nrc < 0) return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            convert_usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(a, "--type") && i + 1 < argc) {
            type_name = argv[++i];
        } else if (!strcmp(a, "--threads") && i + 1 < argc) {
            if (cli_parse_threads("convert", argv[++i], &threads)) return 2;
        } else if (a[0] == '-') {
            fprintf(stderr, "clover convert: unknown option '%s' (clover convert --help)\n", a);
            return 2;
        } else if (!in) {
            in = a;
        } else {
            fprintf(stderr, "clover convert: one input directory expected, got '%s' and '%s'\n", in, a);
            return 2;
        }
    }
    if (!in || !out) {
        convert_usage(stderr);
        return 2;
    }
    int type = convert_type_from_name(type_name);
    if (type < 0) {
        fprintf(stderr, "clover convert: --type '%s' is not one of f32, bf16, q8_0, q4_k_m\n", type_name);
        return 2;
    }

    cli_cancel_install_writer();
    cli_tensor_progress ps;
    cli_tensor_progress_start(&ps);
    convert_options opt = {
        .input_dir = in, .output_path = out, .type = (convert_type)type, .n_threads = (size_t)threads};
    if (isatty(STDERR_FILENO)) {
        opt.progress = cli_tensor_progress_draw;
        opt.progress_user = &ps;
    }
    convert_report rep;
    clover_error err = {0};
    int rc = convert_run(&opt, &rep, &err);
    cli_tensor_progress_end(&ps);
    if (rc) {
        fprintf(stderr, "clover convert: %s\n", err.message);
        return 1;
    }
    if (rep.n_vision_skipped || rep.n_mtp_skipped)
        fprintf(stderr, "clover convert: skipped %zu vision tensor%s (model.visual.*) and %zu MTP tensor%s (mtp.*)\n",
                rep.n_vision_skipped, rep.n_vision_skipped == 1 ? "" : "s", rep.n_mtp_skipped,
                rep.n_mtp_skipped == 1 ? "" : "s");
    if (rep.dk_ne_dv)
        fprintf(stderr, "clover convert: note: the linear-attention key and value head dims differ; clover runs this "
                        "file, llama.cpp's loader cannot\n");
    printf("wrote %s: %s, %u layers, vocab %u, %zu tensors, %.3f GB of tensor data, %s, in %.1f s\n", out,
           rep.has_record ? "Clover block-diffusion model" : "autoregressive model", rep.n_layers, rep.n_vocab,
           rep.n_tensors, (double)rep.n_bytes / 1e9, convert_type_name((convert_type)type), timer_now() - ps.t0);
    return 0;
}
