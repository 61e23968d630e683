/*
 * cmd_synth.c: `clover synth`, a thin front over clover_synth: options in,
 * one line out (the file and its size) or one error line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clover.h"
#include "cli_cancel.h"
#include "cli_opts.h"
#include "commands.h"

static const cli_opt synth_opts[] = {
    {"--output", "-o", CLI_STR, 0, 0, "FILE", NULL},
    {"--preset", NULL, CLI_STR, 0, 0, "NAME", NULL},
    {"--type", NULL, CLI_STR, 0, 0, "T", NULL},
    {"--seed", "-s", CLI_UINT, 0, 0, "N", NULL},
    {"--no-diffusion", NULL, CLI_FLAG, 0, 0, NULL, NULL},
    {"--layers", NULL, CLI_UINT, 1, 4294967295.0, "N", NULL},
    {"--hidden", NULL, CLI_UINT, 1, 4294967295.0, "N", NULL},
    {"--experts", NULL, CLI_UINT, 1, 4294967295.0, "N", NULL},
    {"--expert-ff", NULL, CLI_UINT, 1, 4294967295.0, "N", NULL},
    {"--route-skew", NULL, CLI_FLOAT, 0, 64, "S", NULL},
    {"--threads", "-t", CLI_UINT, 1, 4294967295.0, "N", NULL},
    {"--sparse", NULL, CLI_FLAG, 0, 0, NULL, NULL},
};
static void synth_usage(FILE *out) {
    fprintf(out, "usage: clover synth -o FILE [options]\n"
                 "\n"
                 "Writes a deterministic GGUF model with random weights (the same options give a\n"
                 "byte-identical file): llama.cpp's qwen35moe layout, a byte-level tokenizer and,\n"
                 "unless --no-diffusion, the Clover block-diffusion record and tensors.\n"
                 "\n"
                 "options:\n"
                 "  -o, --output FILE     the file to write (required)\n"
                 "  --preset NAME         tiny (default: 4 layers, hidden 64, a few MB) or\n"
                 "                        qwen3.5-35b-a3b (the full geometry, about 19 GB at q4_k_m;\n"
                 "                        its Q4_K experts are drawn as blocks straight from the\n"
                 "                        random stream, not quantised from f32, which takes hours),\n"
                 "                        qwen3.5-122b-a10b (~70 GB) or qwen3.5-397b-a17b (~220 GB):\n"
                 "                        the multi-GPU siblings (docs/MULTI_GPU.md); use --sparse\n"
                 "                        for load tests where the disk cannot hold them\n"
                 "  --type T              f32, f16, bf16, q8_0 or q4_k_m (routed experts q4_K, other\n"
                 "                        matrices q8_0); default f32 for tiny, q4_k_m for the 35B\n"
                 "  -s, --seed N          random seed (default 0)\n"
                 "  --no-diffusion        no Clover record or tensors: an autoregressive model\n"
                 "  --layers N            override the layer count\n"
                 "  --hidden N            override the hidden size\n"
                 "  --experts N           override the routed expert count\n"
                 "  --expert-ff N         override the expert and shared-expert width\n"
                 "  --route-skew S        skewed routing, as trained models show (default 0: none):\n"
                 "                        per MoE layer the router row of the expert of rank r (a\n"
                 "                        random order per layer, from the seed) is scaled by\n"
                 "                        1 + S / (1 + r), so a few experts win most rows; 0..64\n"
                 "  -t, --threads N       threads generating and quantising (default: one per CPU;\n"
                 "                        the file does not depend on it)\n"
                 "  --sparse              write the header and tables, then extend the file to its full\n"
                 "                        size without writing the data (all zeros, no disk blocks):\n"
                 "                        a loadable full-geometry file for tests\n"
                 "  -h, --help            this text\n");
}

static int parse_u64(const char *opt, const char *s, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = s && *s != '-' ? strtoull(s, &end, 10) : 0;
    if (!s || *s == '-' || errno || *end || end == s || v > max) {
        fprintf(stderr, "clover synth: %s needs a number up to %llu, not '%s'\n", opt, (unsigned long long)max,
                s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

int cmd_synth(int argc, char **argv) {
    clover_synth_options opts;
    memset(&opts, 0, sizeof opts);
    const char *out = NULL;
    {
        const cli_opt_table tables[] = {{synth_opts, sizeof synth_opts / sizeof synth_opts[0]}};
        int nrc = cli_opts_normalize("synth", tables, 1, &argc, &argv);
        if (nrc > 0) synth_usage(stdout);
        if (nrc > 0) return 0;
        if (nrc < 0) return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            synth_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--no-diffusion")) {
            opts.no_diffusion = 1;
            continue;
        } else if (!strcmp(a, "--sparse")) {
            opts.sparse = 1;
            continue;
        } else if (a[0] != '-') {
            fprintf(stderr, "clover synth: unexpected argument '%s' (the output goes after -o)\n", a);
            return 2;
        }
        if (!val) {
            fprintf(stderr, "clover synth: %s needs a value (clover synth --help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = val;
        } else if (!strcmp(a, "--preset")) {
            opts.preset = val;
        } else if (!strcmp(a, "--type")) {
            opts.type = val;
        } else if (!strcmp(a, "--seed")) {
            if (parse_u64(a, val, UINT64_MAX, &opts.seed)) return 2;
        } else if (!strcmp(a, "--route-skew")) {
            char *end;
            errno = 0;
            double v = strtod(val, &end);
            if (errno || *end || end == val || !(v >= 0.0 && v <= 64.0)) {
                fprintf(stderr, "clover synth: --route-skew needs a number from 0 to 64, not '%s'\n", val);
                return 2;
            }
            opts.route_skew = (float)v;
        } else if (!strcmp(a, "--layers") || !strcmp(a, "--hidden") || !strcmp(a, "--experts") ||
                   !strcmp(a, "--expert-ff") || !strcmp(a, "--threads")) {
            if (parse_u64(a, val, UINT32_MAX, &x)) return 2;
            if (x == 0) {
                fprintf(stderr, "clover synth: %s must be at least 1\n", a);
                return 2;
            }
            uint32_t *field = !strcmp(a, "--layers")    ? &opts.n_layer
                              : !strcmp(a, "--hidden")  ? &opts.n_embd
                              : !strcmp(a, "--experts") ? &opts.n_expert
                              : !strcmp(a, "--threads") ? &opts.n_threads
                                                        : &opts.n_ff_exp;
            *field = (uint32_t)x;
        } else {
            fprintf(stderr, "clover synth: unknown option '%s' (clover synth --help)\n", a);
            return 2;
        }
    }
    if (!out) {
        fprintf(stderr, "clover synth: no output file (-o FILE)\n");
        return 2;
    }
    cli_cancel_install_writer();
    clover_error err = {0};
    clover_synth_params pc;
    if (clover_synth_count(&opts, &pc, &err) != CLOVER_OK) { /* the options do not make a model: usage */
        fprintf(stderr, "clover synth: %s\n", strncmp(err.message, "synth: ", 7) ? err.message : err.message + 7);
        return 2;
    }
    if (clover_synth(out, &opts, &err) != CLOVER_OK) {
        fprintf(stderr, "clover synth: %s\n", strncmp(err.message, "synth: ", 7) ? err.message : err.message + 7);
        return 1;
    }
    struct stat st;
    if (stat(out, &st) == 0)
        printf("wrote %s (%lld bytes%s)\n", out, (long long)st.st_size, opts.sparse ? ", sparse" : "");
    printf("parameters: %.3f B total (%.3f B in routed experts), %.3f B active per token\n", pc.total / 1e9,
           pc.experts / 1e9, pc.active / 1e9);
    return 0;
}
