/*
 * cmd_run.c: `clover run`: one generation request from token ids (block
 * diffusion on a Clover model, autoregressive otherwise or with --ar),
 * printing the generated ids and the request's statistics, as text or (with
 * --json, written by jansson) one object holding every field of the result.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clover.h"
#include "cli_args.h"
#include "commands.h"

static void run_usage(FILE *out) {
    fprintf(out, "usage: clover run [-m MODEL] --ids 1,2,3 [options]\n"
                 "\n"
                 "Generates from a prompt of token ids and prints the generated ids and the\n"
                 "statistics. A Clover model runs block diffusion (the record's LowConfidence\n"
                 "loop); a model without the record, or --ar, decodes token by token.\n"
                 "\n"
                 "options:\n"
                 "  -m, --model FILE            GGUF model (default: the model built into this binary)\n"
                 "  --ids LIST                  the prompt: comma-separated token ids (required)\n"
                 "  --max-tokens N              tokens to generate at most (default 256)\n"
                 "  --temperature T             0 (default) is greedy; above, sampling\n"
                 "  --top-k K                   sampling: keep logits >= the K-th (0: off)\n"
                 "  --top-p P                   sampling: nucleus mass (1: off)\n"
                 "  --seed N                    the sampler's SplitMix64 seed (default 0)\n"
                 "  --threshold T               block diffusion: override the record's threshold (0..1)\n"
                 "  --block N                   block diffusion: override the block size (a divisor of\n"
                 "                              the record's)\n"
                 "  --ar                        autoregressive decoding on a Clover model\n"
                 "  --ignore-eos                stop ids do not end the answer\n"
                 "  --stop LIST                 extra ids that end the answer\n"
                 "  --suppress LIST             ids never generated\n"
                 "  --threads N                 CPU threads (default: every CPU)\n"
                 "  --dump-first-preview FILE   write the prompt ids and each row's top-10 logits of\n"
                 "                              the first pass as JSON (parity probe)\n"
                 "  --json                      print one JSON object with every field\n"
                 "  -h, --help                  this text\n"
                 "\n"
                 "Exit codes: 0 done, 1 the model or the request failed (one error line), 2 usage.\n");
}

typedef struct run_options {
    const char *model;
    int32_t *ids, *stop, *suppress;
    size_t n_ids, n_stop, n_suppress;
    uint64_t threads;
    int json;
    clover_generate_params p;
} run_options;

static void run_options_free(run_options *o) {
    free(o->ids);
    free(o->stop);
    free(o->suppress);
}

/* 0 ok, 1 --help shown, -1 usage error (already reported). */
static int run_parse(int argc, char **argv, run_options *o) {
    clover_generate_params_init(&o->p);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            run_usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--ar")) {
            o->p.mode = CLOVER_MODE_AUTOREGRESSIVE;
            continue;
        }
        if (!strcmp(a, "--ignore-eos")) {
            o->p.ignore_eos = 1;
            continue;
        }
        if (!strcmp(a, "--json")) {
            o->json = 1;
            continue;
        }
        if (a[0] != '-') {
            fprintf(stderr, "clover run: unexpected argument '%s' (clover run --help)\n", a);
            return -1;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "clover run: %s needs a value (clover run --help)\n", a);
            return -1;
        }
        i++;
        uint64_t x = 0;
        int rc = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            o->model = v;
        } else if (!strcmp(a, "--ids")) {
            free(o->ids);
            rc = cli_parse_ids("run", a, v, &o->ids, &o->n_ids);
        } else if (!strcmp(a, "--stop")) {
            free(o->stop);
            rc = cli_parse_ids("run", a, v, &o->stop, &o->n_stop);
        } else if (!strcmp(a, "--suppress")) {
            free(o->suppress);
            rc = cli_parse_ids("run", a, v, &o->suppress, &o->n_suppress);
        } else if (!strcmp(a, "--max-tokens")) {
            rc = cli_parse_u64("run", a, v, 1u << 30, &x);
            o->p.max_tokens = (size_t)x;
        } else if (!strcmp(a, "--temperature")) {
            rc = cli_parse_float("run", a, v, &o->p.temperature);
        } else if (!strcmp(a, "--top-k")) {
            rc = cli_parse_u64("run", a, v, INT32_MAX, &x);
            o->p.top_k = (int32_t)x;
        } else if (!strcmp(a, "--top-p")) {
            rc = cli_parse_float("run", a, v, &o->p.top_p);
        } else if (!strcmp(a, "--seed")) {
            rc = cli_parse_u64("run", a, v, UINT64_MAX, &o->p.seed);
        } else if (!strcmp(a, "--threshold")) {
            rc = cli_parse_float("run", a, v, &o->p.threshold);
            if (!rc && !(o->p.threshold >= 0.0f && o->p.threshold <= 1.0f)) {
                fprintf(stderr, "clover run: --threshold %s: expected a value in [0, 1]\n", v);
                rc = -1;
            }
        } else if (!strcmp(a, "--block")) {
            rc = cli_parse_u64("run", a, v, UINT32_MAX, &x);
            if (!rc && x == 0) {
                fprintf(stderr, "clover run: --block must be at least 1\n");
                rc = -1;
            }
            o->p.block_size = (uint32_t)x;
        } else if (!strcmp(a, "--threads")) {
            rc = cli_parse_u64("run", a, v, 4096, &o->threads);
        } else if (!strcmp(a, "--dump-first-preview")) {
            o->p.dump_first_preview = v;
        } else {
            fprintf(stderr, "clover run: unknown option '%s' (clover run --help)\n", a);
            return -1;
        }
        if (rc) return -1;
    }
    if (!o->ids) {
        fprintf(stderr, "clover run: no prompt (--ids 1,2,3)\n");
        return -1;
    }
    o->p.stop_ids = o->stop;
    o->p.n_stop_ids = o->n_stop;
    o->p.suppress_ids = o->suppress;
    o->p.n_suppress_ids = o->n_suppress;
    return 0;
}

static const char *mode_name(clover_mode m) {
    return m == CLOVER_MODE_DIFFUSION ? "diffusion" : m == CLOVER_MODE_AUTOREGRESSIVE ? "autoregressive" : "auto";
}

static json_t *ops_json(const clover_op_seconds *o) {
    return json_pack("{s:f,s:f,s:f,s:f}", "gdn_s", o->gdn_s, "attn_s", o->attn_s, "moe_s", o->moe_s, "head_s",
                     o->head_s);
}

static int print_json(const clover_generate_result *r) {
    const clover_generate_stats *s = &r->stats;
    json_t *ids = json_array(), *conf = json_array(), *ppb = json_array();
    for (size_t i = 0; i < r->n_generated; i++) {
        json_array_append_new(ids, json_integer(r->ids[i]));
        json_array_append_new(conf, json_real((double)r->confidences[i]));
    }
    for (size_t i = 0; i < r->n_blocks; i++)
        json_array_append_new(ppb, json_integer(r->passes_per_block[i]));
    json_t *stats = json_pack(
        "{s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:o,s:o,s:I,s:I,s:f,s:f,s:f,s:f}", "prompt_tokens",
        (json_int_t)s->prompt_tokens, "reused_tokens", (json_int_t)s->reused_tokens, "passes", (json_int_t)s->passes,
        "blocks", (json_int_t)s->blocks, "prompt_s", s->prompt_s, "preview_s", s->preview_s, "pick_s", s->pick_s,
        "commit_s", s->commit_s, "total_s", s->total_s, "preview_ops", ops_json(&s->preview_ops), "commit_ops",
        ops_json(&s->commit_ops), "coreset_kept", (json_int_t)s->coreset_kept, "coreset_layers",
        (json_int_t)s->coreset_layers, "coreset_mean", s->coreset_mean, "prompt_tok_s", s->prompt_tok_s,
        "gen_tok_s", s->gen_tok_s, "denoise_tok_s", s->denoise_tok_s);
    json_t *root = json_pack("{s:s,s:s,s:o,s:o,s:I,s:I,s:I,s:o,s:I,s:o}", "mode", mode_name(r->mode),
                             "finish_reason", clover_finish_name(r->finish), "ids", ids, "confidences", conf,
                             "prompt_tokens", (json_int_t)r->n_prompt, "generated_tokens", (json_int_t)r->n_generated,
                             "blocks", (json_int_t)r->n_blocks, "passes_per_block", ppb, "committed_after",
                             (json_int_t)r->committed_after, "stats", stats);
    if (!root) {
        fprintf(stderr, "clover run: could not build the JSON output\n");
        return 1;
    }
    char *text = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (!text) {
        fprintf(stderr, "clover run: could not write the JSON output\n");
        return 1;
    }
    printf("%s\n", text);
    free(text);
    return 0;
}

static void print_ops(const char *what, const clover_op_seconds *o) {
    printf("%-12s gdn %.4f s, attention %.4f s, moe %.4f s, head %.4f s\n", what, o->gdn_s, o->attn_s, o->moe_s,
           o->head_s);
}

static void print_text(const clover_generate_result *r) {
    const clover_generate_stats *s = &r->stats;
    printf("ids:");
    for (size_t i = 0; i < r->n_generated; i++)
        printf(" %d", r->ids[i]);
    printf("\n%-12s %s, %zu tokens (prompt %zu, reused %zu), mode %s\n", "finish", clover_finish_name(r->finish),
           r->n_generated, r->n_prompt, s->reused_tokens, mode_name(r->mode));
    if (r->mode == CLOVER_MODE_DIFFUSION) {
        printf("%-12s %zu blocks, %zu passes (per block:", "passes", s->blocks, s->passes);
        for (size_t i = 0; i < r->n_blocks; i++)
            printf(" %u", r->passes_per_block[i]);
        printf(")\n");
        printf("%-12s prompt %.4f s (%.1f tok/s), preview %.4f s, pick %.4f s, commit %.4f s, total %.4f s\n", "time",
               s->prompt_s, s->prompt_tok_s, s->preview_s, s->pick_s, s->commit_s, s->total_s);
        printf("%-12s denoise %.1f tok/s, generation %.1f tok/s\n", "rate", s->denoise_tok_s, s->gen_tok_s);
        print_ops("preview ops", &s->preview_ops);
        if (s->coreset_layers)
            printf("%-12s %.2f experts kept per MoE layer (mean over %llu layer passes)\n", "coreset", s->coreset_mean,
                   (unsigned long long)s->coreset_layers);
        else
            printf("%-12s off\n", "coreset");
    } else {
        printf("%-12s %zu decoding passes\n", "passes", s->passes);
        printf("%-12s prompt %.4f s (%.1f tok/s), decode %.4f s, pick %.4f s, total %.4f s\n", "time", s->prompt_s,
               s->prompt_tok_s, s->commit_s, s->pick_s, s->total_s);
        printf("%-12s generation %.1f tok/s\n", "rate", s->gen_tok_s);
    }
    print_ops("commit ops", &s->commit_ops);
    printf("%-12s %zu committed in the session\n", "session", r->committed_after);
}

int cmd_run(int argc, char **argv) {
    run_options o;
    memset(&o, 0, sizeof o);
    int prc = run_parse(argc, argv, &o);
    if (prc) {
        run_options_free(&o);
        return prc > 0 ? 0 : 2;
    }
    clover_model *m = NULL;
    clover_session *s = NULL;
    clover_generate_result r;
    memset(&r, 0, sizeof r);
    clover_error err = {0};
    int code = 1;
    if (cli_load_model("run", o.model, &m)) goto done;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = (size_t)o.threads;
    if (clover_session_create(&s, m, &sp, &err) || clover_generate(s, o.ids, o.n_ids, &o.p, &r, &err)) {
        fprintf(stderr, "clover run: %s\n", err.message);
        goto done;
    }
    code = o.json ? print_json(&r) : (print_text(&r), 0);
done:
    clover_generate_result_free(&r);
    clover_session_free(s);
    clover_model_free(m);
    run_options_free(&o);
    return code;
}
