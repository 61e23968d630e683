/*
 * gen_opts.c: see gen_opts.h. Values are checked here as far as the CLI
 * can (numbers, ranges that never depend on the model); what depends on the
 * model (a block size that must divide the record's, ids below the
 * vocabulary) is the engine's to check, with its own message.
 */
#include "gen_opts.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/safe_output.h"
#include "cli_args.h"
#include "cli_opts.h"

#define U32 4294967295.0
static const cli_opt gen_table[] = {
    {"--max-tokens", "-n --n-predict", CLI_UINT, 0, 1 << 30, "N", "tokens to generate at most (default 256)"},
    {"--temperature", "--temp", CLI_FLOAT, 0, 100, "T", "0 (default) is greedy; above, sampling"},
    {"--top-k", NULL, CLI_UINT, 0, 2147483647.0, "K", "sampling: keep logits >= the K-th (0: off)"},
    {"--top-p", NULL, CLI_FLOAT, 0, 1, "P", "sampling: nucleus mass, 0..1 (1: off)"},
    {"--min-p", NULL, CLI_FLOAT, 0, 1, "P", "accepted for llama.cpp's scripts; clover's sampler has no min-p (a note says so)"},
    {"--seed", "-s", CLI_UINT, 0, 0, "N", "the sampler's SplitMix64 seed (default 0)"},
    {"--threshold", NULL, CLI_FLOAT, 0, 1, "T", "block diffusion: override the record's threshold (0..1)"},
    {"--block", NULL, CLI_UINT, 1, U32, "N", "block diffusion: override the block size (a divisor of the record's)"},
    {"--rule", NULL, CLI_STR, 0, 0, "R", "block diffusion: threshold (every row above it, else the most confident) or causal (the confident run from the first open row, else its autoregressive pick); default: the model's"},
    {"--ar", NULL, CLI_FLAG, 0, 0, NULL, "autoregressive decoding on a Clover model"},
    {"--lossless", NULL, CLI_FLAG, 0, 0, NULL, "block diffusion drafts, each block verified by the causal trunk (= --ar's answer)"},
    {"--ignore-eos", NULL, CLI_FLAG, 0, 0, NULL, "stop ids do not end the answer"},
    {"--stop", NULL, CLI_STR, 0, 0, "LIST", "extra ids (comma-separated) that end the answer"},
    {"--suppress", NULL, CLI_STR, 0, 0, "LIST", "ids never generated"},
    {"--presence-penalty", NULL, CLI_FLOAT, -1e6, 1e6, "X", "block diffusion: override one of the record's penalties"},
    {"--frequency-penalty", NULL, CLI_FLOAT, -1e6, 1e6, "X", "  (the same)"},
    {"--repetition-penalty", "--repeat-penalty", CLI_FLOAT, 0, 1e6, "X", "  (the same)"},
    {"--length-penalty", NULL, CLI_FLOAT, -1e6, 1e6, "X", "  (the same)"},
    {"--length-penalty-start", NULL, CLI_UINT, 0, U32, "N", "  (the same)"},
    {"--length-penalty-window", NULL, CLI_UINT, 0, U32, "N", "  (the same)"},
    {"--think-end-bias", NULL, CLI_FLOAT, -1e6, 1e6, "X", "  (the same)"},
    {"--think-end-start", NULL, CLI_UINT, 0, U32, "N", "  (the same)"},
    {"--think-end-window", NULL, CLI_UINT, 0, U32, "N", "  (the same)"},
    {"--no-penalties", NULL, CLI_FLAG, 0, 0, NULL, "block diffusion: no penalties (those given above still apply)"},
    {"--skip-special", NULL, CLI_FLAG, 0, 0, NULL, "leave control tokens (like <|im_start|>) out of the text"},
    {"--threads", "-t", CLI_UINT, 0, 4096, "N", "CPU threads (default: every CPU)"},
    {"--device", NULL, CLI_STR, 0, 0, "D", "auto (default: CUDA when a GPU fits the model, else the CPU), cpu or cuda"},
    {"--gpu-layers", "-ngl --n-gpu-layers", CLI_UINT, 0, 4096, "N", "the first N layers on the GPU, the rest on the CPU (docs/OFFLOAD.md)"},
    {"--gpu-mem", NULL, CLI_STR, 0, 0, "N", "a GPU smaller than the model: at most N GiB of GPU memory, the routed experts cached there (--device cuda; docs/OFFLOAD.md)"},
    {"--devices", NULL, CLI_STR, 0, 0, "0,1,...", "a GPU group, experts spread over it (docs/MULTI_GPU.md)"},
    {"--ctx-size", "-c --max-context --ctx", CLI_UINT, 0, 2147483647.0, "N", "context: prompt + answer tokens at most (default: the model's)"},
    {"--batch-size", "-b", CLI_UINT, 1, 65536, "N", "prompt rows per pass (default 512 on the CPU, 64 on a GPU)"},
    {"--dump-first-preview", NULL, CLI_STR, 0, 0, "FILE", "write the first pass's prompt ids and top-10 logits as JSON"},
    {"--json-schema", NULL, CLI_STR, 0, 0, "FILE", "structured output: one JSON document valid under this JSON schema (docs/STRUCTURED_OUTPUT.md)"},
    {"--grammar", NULL, CLI_STR, 0, 0, "json", "structured output: the answer is any JSON object"},
};
const cli_opt_table GEN_OPTS_TABLE = {gen_table, sizeof gen_table / sizeof gen_table[0]};

void gen_opts_init(gen_opts *g) {
    memset(g, 0, sizeof *g);
    clover_generate_params_init(&g->p);
}

void gen_opts_free(gen_opts *g) {
    free(g->json_schema);
    free(g->stop);
    free(g->suppress);
    memset(g, 0, sizeof *g);
}

/* The penalty options: a float or a count each, in the order of pen_set's bits. */
static const struct {
    const char *opt;
    size_t off;
    int is_count;
} penalty_opts[] = {
    {"--presence-penalty", offsetof(clover_penalties, presence_penalty), 0},
    {"--frequency-penalty", offsetof(clover_penalties, frequency_penalty), 0},
    {"--repetition-penalty", offsetof(clover_penalties, repetition_penalty), 0},
    {"--length-penalty", offsetof(clover_penalties, length_penalty), 0},
    {"--length-penalty-start", offsetof(clover_penalties, length_penalty_start), 1},
    {"--length-penalty-window", offsetof(clover_penalties, length_penalty_window), 1},
    {"--think-end-bias", offsetof(clover_penalties, think_end_bias), 0},
    {"--think-end-start", offsetof(clover_penalties, think_end_start), 1},
    {"--think-end-window", offsetof(clover_penalties, think_end_window), 1},
};
#define N_PENALTY_OPTS (sizeof penalty_opts / sizeof penalty_opts[0])
_Static_assert(sizeof(float) == 4 && sizeof(uint32_t) == 4, "penalty fields are copied as 4 bytes");

/* 0 taken, -1 a bad value, 1 not a penalty option. */
static int penalty_valued(gen_opts *g, const char *cmd, const char *a, const char *v) {
    for (size_t i = 0; i < N_PENALTY_OPTS; i++) {
        if (strcmp(a, penalty_opts[i].opt) != 0) continue;
        char *field = (char *)&g->pen + penalty_opts[i].off;
        if (penalty_opts[i].is_count) {
            uint64_t x;
            if (cli_parse_u64(cmd, a, v, UINT32_MAX, &x)) return -1;
            uint32_t u = (uint32_t)x;
            memcpy(field, &u, sizeof u);
        } else {
            float f;
            if (cli_parse_float(cmd, a, v, &f)) return -1;
            memcpy(field, &f, sizeof f);
        }
        g->pen_set |= 1u << i;
        if (!g->diffusion_only) g->diffusion_only = penalty_opts[i].opt;
        return 0;
    }
    return 1;
}

int gen_opts_bind(gen_opts *g, const char *cmd, const clover_model *m) {
    clover_model_info info;
    clover_model_get_info(m, &info);
    int diffusion = info.record && g->p.mode != CLOVER_MODE_AUTOREGRESSIVE;
    if (g->min_p_given)
        fprintf(stderr, "clover %s: note: --min-p is not part of clover's sampler (temperature, top-k, top-p); "
                        "ignored\n", cmd);
    if (g->diffusion_only && !diffusion)
        fprintf(stderr, "clover %s: note: %s applies to block diffusion only; %s, so it is ignored\n", cmd,
                g->diffusion_only, info.record ? "--ar decodes token by token" : "this model is autoregressive");
    if (diffusion && g->p.block_size && info.record->block_size % g->p.block_size != 0) {
        fprintf(stderr, "clover %s: --block %u does not divide the model's block size %u\n", cmd,
                (unsigned)g->p.block_size, (unsigned)info.record->block_size);
        return 2;
    }
    if (!g->pen_set && !g->no_penalties) return 0; /* the record's own (p.penalties NULL) */
    clover_penalties base;
    clover_penalties_from_record(g->no_penalties ? NULL : info.record, &base);
    for (size_t i = 0; i < N_PENALTY_OPTS; i++) /* the given fields over the base */
        if (g->pen_set & (1u << i))
            memcpy((char *)&base + penalty_opts[i].off, (const char *)&g->pen + penalty_opts[i].off, 4);
    g->pen = base;
    g->p.penalties = &g->pen;
    return 0;
}

int gen_opts_flag(gen_opts *g, const char *a) {
    if (!strcmp(a, "--ar")) g->p.mode = CLOVER_MODE_AUTOREGRESSIVE;
    else if (!strcmp(a, "--lossless")) g->p.lossless = 1;
    else if (!strcmp(a, "--no-penalties")) g->no_penalties = 1, g->diffusion_only = g->diffusion_only ? g->diffusion_only : "--no-penalties";
    else if (!strcmp(a, "--ignore-eos")) g->p.ignore_eos = 1;
    else if (!strcmp(a, "--skip-special")) g->p.skip_special = 1;
    else return 0;
    return 1;
}

/* --json-schema FILE / --grammar json (structured output): the schema
 * text, checked here so a bad one is a one-line error before the model loads. */
static int structured_valued(gen_opts *g, const char *cmd, const char *a, const char *v) {
    char *text = NULL;
    if (!strcmp(a, "--grammar")) {
        if (strcmp(v, "json") != 0) {
            fprintf(stderr, "clover %s: --grammar '%s': only 'json' (any JSON object) is supported; "
                            "use --json-schema FILE for a schema\n", cmd, v);
            return -1;
        }
        text = strdup("{\"type\": \"object\"}");
    } else {
        FILE *f = fopen(v, "rb");
        long n = -1;
        if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
        if (!f || n < 0 || n > (1l << 20) || fseek(f, 0, SEEK_SET) != 0) {
            fprintf(stderr, "clover %s: --json-schema %s: %s\n", cmd, v,
                    !f ? "cannot open the file" : "cannot read it (or it is over 1 MiB)");
            if (f) fclose(f);
            return -1;
        }
        text = malloc((size_t)n + 1);
        if (text && fread(text, 1, (size_t)n, f) != (size_t)n) {
            free(text);
            text = NULL;
        }
        fclose(f);
        if (text) text[n] = 0;
    }
    if (!text) {
        fprintf(stderr, "clover %s: %s %s: cannot read it\n", cmd, a, v);
        return -1;
    }
    clover_error err = {0};
    if (clover_json_schema_check(text, &err) != CLOVER_OK) {
        fprintf(stderr, "clover %s: %s %s: %s\n", cmd, a, v, err.message);
        free(text);
        return -1;
    }
    free(g->json_schema);
    g->json_schema = text;
    g->p.json_schema = text;
    g->json_schema_path = strcmp(a, "--json-schema") ? NULL : v;
    return 0;
}

int gen_opts_valued(gen_opts *g, const char *cmd, const char *a, const char *v) {
    uint64_t x = 0;
    int rc = 0;
    if (!strcmp(a, "--json-schema") || !strcmp(a, "--grammar")) return structured_valued(g, cmd, a, v);
    if (!strcmp(a, "--stop")) {
        free(g->stop);
        rc = cli_parse_ids(cmd, a, v, &g->stop, &g->n_stop);
    } else if (!strcmp(a, "--suppress")) {
        free(g->suppress);
        rc = cli_parse_ids(cmd, a, v, &g->suppress, &g->n_suppress);
    } else if (!strcmp(a, "--max-tokens")) {
        rc = cli_parse_u64(cmd, a, v, 1u << 30, &x);
        g->p.max_tokens = (size_t)x;
    } else if (!strcmp(a, "--temperature")) {
        rc = cli_parse_float(cmd, a, v, &g->p.temperature);
    } else if (!strcmp(a, "--top-k")) {
        rc = cli_parse_u64(cmd, a, v, INT32_MAX, &x);
        g->p.top_k = (int32_t)x;
    } else if (!strcmp(a, "--top-p")) {
        rc = cli_parse_float(cmd, a, v, &g->p.top_p);
    } else if (!strcmp(a, "--seed")) {
        rc = cli_parse_u64(cmd, a, v, UINT64_MAX, &g->p.seed);
    } else if (!strcmp(a, "--min-p")) {
        float unused;
        rc = cli_parse_float(cmd, a, v, &unused);
        g->min_p_given = 1;
    } else if (!strcmp(a, "--batch-size")) {
        rc = cli_parse_u64(cmd, a, v, 65536, &g->batch_size);
    } else if (!strcmp(a, "--threshold")) {
        if (!g->diffusion_only) g->diffusion_only = "--threshold";
        rc = cli_parse_float(cmd, a, v, &g->p.threshold);
        if (!rc && !(g->p.threshold >= 0.0f && g->p.threshold <= 1.0f)) {
            fprintf(stderr, "clover %s: --threshold %s: expected a value in [0, 1]\n", cmd, v);
            rc = -1;
        }
    } else if (!strcmp(a, "--rule")) {
        if (!g->diffusion_only) g->diffusion_only = "--rule";
        if (!strcmp(v, "threshold")) {
            g->p.rule = CLOVER_RULE_THRESHOLD;
        } else if (!strcmp(v, "causal")) {
            g->p.rule = CLOVER_RULE_CAUSAL;
        } else {
            fprintf(stderr, "clover %s: --rule '%s': expected threshold or causal\n", cmd, v);
            rc = -1;
        }
    } else if (!strcmp(a, "--block")) {
        if (!g->diffusion_only) g->diffusion_only = "--block";
        rc = cli_parse_u64(cmd, a, v, UINT32_MAX, &x);
        if (!rc && x == 0) {
            fprintf(stderr, "clover %s: --block must be at least 1\n", cmd);
            rc = -1;
        }
        g->p.block_size = (uint32_t)x;
    } else if (!strcmp(a, "--threads")) {
        rc = cli_parse_u64(cmd, a, v, 4096, &g->threads);
    } else if (!strcmp(a, "--device")) {
        g->device = clover_device_from_name(v);
        if (g->device < 0) {
            fprintf(stderr, "clover %s: --device '%s' is not one of auto, cpu, cuda\n", cmd, v);
            rc = -1;
        }
    } else if (!strcmp(a, "--gpu-layers")) {
        rc = cli_parse_u64(cmd, a, v, 4096, &g->gpu_layers);
    } else if (!strcmp(a, "--gpu-mem")) {
        rc = cli_parse_gib(cmd, a, v, &g->gpu_mem);
    } else if (!strcmp(a, "--devices")) {
        clover_error err = {0};
        if (clover_devices_check(v, &err) != CLOVER_OK) {
            fprintf(stderr, "clover %s: %s\n", cmd, err.message);
            rc = -1;
        }
    } else if (!strcmp(a, "--ctx-size")) {
        rc = cli_parse_u64(cmd, a, v, INT32_MAX, &g->max_context);
    } else if (!strcmp(a, "--dump-first-preview")) {
        g->p.dump_first_preview = v;
    } else {
        return penalty_valued(g, cmd, a, v);
    }
    return rc ? -1 : 0;
}

int gen_opts_check_outputs(const gen_opts *g, const char *cmd, const char *model, const char *prompt_file) {
    const char *inputs[3] = {model, prompt_file, g->json_schema_path};
    const char *trace = getenv("CLOVER_ROUTE_TRACE");
    const char *outputs[2] = {g->p.dump_first_preview, trace && *trace ? trace : NULL};
    const char *what[2] = {"--dump-first-preview", "CLOVER_ROUTE_TRACE"};
    for (int i = 0; i < 2; i++) {
        clover_error err = {0};
        if (outputs[i] && safe_output_check_inputs(outputs[i], inputs, 3, &err) != CLOVER_OK) {
            fprintf(stderr, "clover %s: %s %s\n", cmd, what[i], err.message);
            return -1;
        }
    }
    return 0;
}

void gen_opts_finish(gen_opts *g) {
    g->p.stop_ids = g->stop;
    g->p.n_stop_ids = g->n_stop;
    g->p.suppress_ids = g->suppress;
    g->p.n_suppress_ids = g->n_suppress;
}
