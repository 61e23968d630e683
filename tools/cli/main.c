/*
 * main.c: `clover SUBCOMMAND ...`: dispatches to the table below. Every
 * subcommand answers --help; errors are one line and a non-zero exit code.
 */
#include <stdio.h>
#include <string.h>

#include "clover.h"
#include "cli_opts.h"
#include "commands.h"
#include "version.h"

static const cli_command commands[] = {
    {"convert", "convert a Hugging Face Qwen3.5-MoE checkpoint directory to GGUF", cmd_convert},
    {"quantize", "rewrite a GGUF at another type (q8_0, q6_k, q5_k_m, q4_k_m), as llama-quantize", cmd_quantize},
    {"info", "describe a model file: architecture, geometry, record, tensors, tokenizer", cmd_info},
    {"synth", "write a deterministic random model at any geometry (GGUF)", cmd_synth},
    {"run", "generate an answer to a prompt (text or ids), block diffusion or autoregressive", cmd_run},
    {"chat", "an interactive conversation that reuses the session's committed prefix", cmd_chat},
    {"tokenize", "text to token ids and back, with a model's tokenizer or a tokenizer.json", cmd_tokenize},
    {"ppl", "perplexity of token ids or of a text file (as llama-perplexity)", cmd_ppl},
    {"serve", "serve the model over HTTP with OpenAI's API (chat, completions, streaming)", cmd_serve},
    {"bench", "time a model's passes on a device beside their memory floors", cmd_bench},
    {"check", "compare a device backend with the CPU backend on the same commits, layer by layer", cmd_check},
};

static void print_usage(FILE *out) {
    fprintf(out, "clover %s: block-diffusion and autoregressive inference for Qwen3.5-MoE models\n\n",
            clover_version());
    fprintf(out, "usage: clover COMMAND [options]   (clover COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  %-10s %s\n", "version", "the version, the commit and the backends built in (also --version)");
    fprintf(out, "\nA GPU smaller than the model: --gpu-mem N (GiB) with --device cuda on run, chat, ppl, serve and\n"
                 "bench keeps the routed experts in a cache of N GiB minus the rest (docs/OFFLOAD.md).\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        print_usage(stdout);
        return 0;
    }
    if (!strcmp(name, "version") || !strcmp(name, "--version") || !strcmp(name, "-V")) {
        cli_print_version(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(name, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    enum { N = sizeof commands / sizeof commands[0] };
    cli_opt names[N];
    for (size_t i = 0; i < N; i++) names[i] = (cli_opt){.name = commands[i].name};
    const cli_opt_table t = {names, N};
    const char *near = cli_opts_nearest(&t, 1, name);
    fprintf(stderr, "clover: unknown command '%s'%s%s%s (clover --help lists them)\n", name, near ? " (did you mean " : "",
            near ? near : "", near ? "?)" : "");
    return 2;
}
