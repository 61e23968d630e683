/*
 * cmd_info.c: `clover info [FILE]`: loads the model (FILE, or the default
 * model embedded in the binary) with every check a real run does, then
 * describes it. A file that does not load is the one-line error and exit 1,
 * so `clover info` doubles as a validator.
 */
#include <stdio.h>
#include <string.h>

#include "clover.h"
#include "cli_args.h"
#include "cli_opts.h"
#include "commands.h"

#define LABEL "%-16s"

static const cli_opt info_opts[] = {
    {"--model", "-m", CLI_STR, 0, 0, "FILE", NULL},
    {"--device", NULL, CLI_FLAG, 0, 0, NULL, NULL},
};
static void info_usage(FILE *out) {
    fprintf(out, "usage: clover info [FILE | -m FILE] [--device]\n"
                 "\n"
                 "Loads a GGUF model and describes it: architecture, geometry, layer pattern,\n"
                 "the block-diffusion record (or autoregressive), tensors by type, parameters and\n"
                 "the tokenizer. Without FILE, the default model built into this binary.\n"
                 "--device adds the devices (the CUDA backend: each GPU and its memory) and what\n"
                 "the model needs on them (weights, KV per token, state per session), and whether\n"
                 "it fits.\n"
                 "Exit code 1 (and one error line) when the file does not load.\n");
}

/* "1.23 G" style, for big counts. */
static const char *human(double x, char *buf, size_t n) {
    static const char *const units[] = {"", " K", " M", " G", " T"};
    int u = 0;
    while (x >= 1000.0 && u < 4) {
        x /= 1000.0;
        u++;
    }
    snprintf(buf, n, u ? "%.2f%s" : "%.0f%s", x, units[u]);
    return buf;
}

static void print_record(const clover_record *r) {
    printf(LABEL "block diffusion (Clover record)\n", "mode");
    printf(LABEL "%s, block size %u, threshold %g, mask id %u\n", "algorithm", r->algorithm, r->block_size,
           (double)r->threshold, r->mask_token_id);
    printf(LABEL "%s\n", "decode rule",
           r->decode_rule == CLOVER_RULE_CAUSAL ? "causal_fallback (clover.decode_rule)" : "threshold");
    if (r->coreset_enabled)
        printf(LABEL "on, top_p %g\n", "expert coreset", (double)r->coreset_top_p);
    else
        printf(LABEL "off\n", "expert coreset");
    printf(LABEL "presence %g, frequency %g, repetition %g\n", "penalties", (double)r->presence_penalty,
           (double)r->frequency_penalty, (double)r->repetition_penalty);
    printf(LABEL "%g (start %u, window %u)\n", "length penalty", (double)r->length_penalty, r->length_penalty_start,
           r->length_penalty_window);
    if (r->think_end_token_id >= 0)
        printf(LABEL "%g on id %d (start %u, window %u)\n", "think-end bias", (double)r->think_end_bias,
               r->think_end_token_id, r->think_end_start, r->think_end_window);
    else
        printf(LABEL "%g, no token (start %u, window %u)\n", "think-end bias", (double)r->think_end_bias,
               r->think_end_start, r->think_end_window);
    printf(LABEL, "stop ids");
    for (size_t i = 0; i < r->n_stop_token_ids; i++)
        printf("%s%u", i ? " " : "", r->stop_token_ids[i]);
    printf("%s\n", r->n_stop_token_ids ? "" : "none");
}

static void print_id(const char *name, int32_t id, int *first) {
    if (id < 0) return;
    printf("%s%s %d", *first ? "" : ", ", name, id);
    *first = 0;
}

static void print_info(const clover_model_info *in) {
    char h1[32], h2[32];
    printf(LABEL "%s (%llu bytes)\n", "file", in->source, (unsigned long long)in->file_bytes);
    if (in->name) printf(LABEL "%s\n", "name", in->name);
    printf(LABEL "%s\n", "architecture", in->architecture);
    uint32_t n_attn = 0;
    for (uint32_t i = 0; i < in->n_layer; i++)
        n_attn += in->layer_kinds[i] == 'A';
    printf(LABEL "%u: %u Gated DeltaNet + %u full attention", "layers", in->n_layer, in->n_layer - n_attn, n_attn);
    if (in->full_attention_interval)
        printf(" (full_attention_interval %u)\n", in->full_attention_interval);
    else
        printf(" (listed in the file)\n");
    printf(LABEL "%s\n", "layer pattern", in->layer_kinds);
    printf(LABEL "%u\n", "hidden", in->n_embd);
    printf(LABEL "%u\n", "vocabulary", in->n_vocab);
    printf(LABEL "%u\n", "context", in->n_ctx_train);
    printf(LABEL "%g\n", "rms eps", (double)in->rms_eps);
    printf(LABEL "%u query heads, %u kv heads, head dim %u, rotary %u dims, rope base %g\n", "attention", in->n_head,
           in->n_head_kv, in->head_dim, in->n_rot, (double)in->rope_freq_base);
    printf(LABEL "%u key heads x %u, %u value heads x %u, conv kernel %u\n", "gated deltanet", in->gdn_key_heads,
           in->gdn_key_dim, in->gdn_value_heads, in->gdn_value_dim, in->gdn_conv_kernel);
    printf(LABEL "%u routed, top %u, width %u; shared expert width %u\n", "experts", in->n_expert, in->n_expert_used,
           in->expert_ff, in->shared_expert_ff);
    if (in->record)
        print_record(in->record);
    else
        printf(LABEL "autoregressive (no Clover record)\n", "mode");
    printf(LABEL "%zu tensors, %llu parameters (%s), %llu bytes (%sB)\n", "tensors", in->n_tensors,
           (unsigned long long)in->n_params, human((double)in->n_params, h1, sizeof h1),
           (unsigned long long)in->n_bytes, human((double)in->n_bytes, h2, sizeof h2));
    for (size_t i = 0; i < in->n_types; i++) {
        const clover_type_stats *t = &in->types[i];
        printf("  %-14s %6zu tensors %16llu parameters %16llu bytes\n", t->type, t->n_tensors,
               (unsigned long long)t->n_params, (unsigned long long)t->n_bytes);
    }
    if (!in->tokenizer_model) {
        printf(LABEL "none\n", "tokenizer");
        return;
    }
    printf(LABEL "%s (pre %s), %llu tokens, %llu merges\n", "tokenizer", in->tokenizer_model,
           in->tokenizer_pre ? in->tokenizer_pre : "none", (unsigned long long)in->n_tokens,
           (unsigned long long)in->n_merges);
    printf(LABEL, "special ids");
    int first = 1;
    print_id("bos", in->bos_id, &first);
    print_id("eos", in->eos_id, &first);
    print_id("eot", in->eot_id, &first);
    print_id("pad", in->pad_id, &first);
    printf("%sadd bos %s\n", first ? "" : ", ", in->add_bos ? "yes" : "no");
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    int device = 0;
    {
        const cli_opt_table tables[] = {{info_opts, sizeof info_opts / sizeof info_opts[0]}};
        int nrc = cli_opts_normalize("info", tables, 1, &argc, &argv);
        if (nrc > 0) info_usage(stdout);
        if (nrc > 0) return 0;
        if (nrc < 0) return 2;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            info_usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--device")) {
            device = 1;
            continue;
        }
        if (!strcmp(argv[i], "--model")) i++; /* -m FILE: the same as FILE (the parser gave it a value) */
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "clover info: unknown option '%s' (clover info --help)\n", argv[i]);
            return 2;
        }
        if (path) {
            fprintf(stderr, "clover info: one FILE at most (clover info --help)\n");
            return 2;
        }
        path = argv[i];
    }
    clover_model *m = NULL;
    if (cli_load_model_for("info", path, "a FILE", 0, &m)) return 1;
    clover_model_info info;
    clover_model_get_info(m, &info);
    print_info(&info);
    if (device) {
        char text[4096];
        clover_device_report(m, 0, text, sizeof text);
        fputs(text, stdout);
    }
    clover_model_free(m);
    return 0;
}
