/*
 * run_report.c: printing a generation result (run_report.h). The JSON is
 * built with jansson so strings are escaped correctly whatever the model
 * wrote (the text is valid UTF-8: the engine replaces invalid bytes).
 */
#include "run_report.h"

#include <string.h>

#include <jansson.h>
#include <stdlib.h>

const char *run_mode_name(clover_mode m) {
    return m == CLOVER_MODE_DIFFUSION ? "diffusion" : m == CLOVER_MODE_AUTOREGRESSIVE ? "autoregressive" : "auto";
}

static json_t *ops_json(const clover_op_seconds *o) {
    return json_pack("{s:f,s:f,s:f,s:f}", "gdn_s", o->gdn_s, "attn_s", o->attn_s, "moe_s", o->moe_s, "head_s",
                     o->head_s);
}

static json_t *stats_json(const clover_generate_stats *s) {
    json_t *o = json_pack(
        "{s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:o,s:o,s:I,s:I,s:f,s:f,s:f,s:f}", "prompt_tokens",
        (json_int_t)s->prompt_tokens, "reused_tokens", (json_int_t)s->reused_tokens, "passes", (json_int_t)s->passes,
        "blocks", (json_int_t)s->blocks, "prompt_s", s->prompt_s, "preview_s", s->preview_s, "pick_s", s->pick_s,
        "commit_s", s->commit_s, "total_s", s->total_s, "preview_ops", ops_json(&s->preview_ops), "commit_ops",
        ops_json(&s->commit_ops), "coreset_kept", (json_int_t)s->coreset_kept, "coreset_layers",
        (json_int_t)s->coreset_layers, "coreset_mean", s->coreset_mean, "prompt_tok_s", s->prompt_tok_s,
        "gen_tok_s", s->gen_tok_s, "denoise_tok_s", s->denoise_tok_s);
    if (o) json_object_set_new(o, "causal_steps", json_integer((json_int_t)s->causal_steps));
    return o;
}

/* text, and in chat mode its reasoning / content split */
static void add_text(json_t *root, const clover_generate_result *r, const run_text_info *t) {
    if (!r->text) {
        json_object_set_new(root, "text", json_null());
        return;
    }
    json_object_set_new(root, "text", json_stringn(r->text, r->text_len));
    if (!t) return;
    json_t *prompt = json_array();
    for (size_t i = 0; i < t->n_prompt; i++) json_array_append_new(prompt, json_integer(t->prompt_ids[i]));
    json_object_set_new(root, "prompt_ids", prompt);
    if (!t->chat) return;
    clover_answer_parts p;
    clover_answer_split(r->text, r->text_len, t->thinking, &p);
    json_object_set_new(root, "reasoning", json_stringn(r->text + p.reasoning_off, p.reasoning_len));
    json_object_set_new(root, "content", json_stringn(r->text + p.content_off, p.content_len));
    json_object_set_new(root, "think_closed", json_boolean(p.think_closed));
}

int run_print_json(const clover_generate_result *r, const run_text_info *t) {
    json_t *ids = json_array(), *conf = json_array(), *ppb = json_array();
    for (size_t i = 0; i < r->n_generated; i++) {
        json_array_append_new(ids, json_integer(r->ids[i]));
        json_array_append_new(conf, json_real((double)r->confidences[i]));
    }
    for (size_t i = 0; i < r->n_blocks; i++) json_array_append_new(ppb, json_integer(r->passes_per_block[i]));
    json_t *root = json_pack("{s:s,s:s,s:o,s:o,s:I,s:I,s:I,s:o,s:I,s:o}", "mode", run_mode_name(r->mode),
                             "finish_reason", clover_finish_name(r->finish), "ids", ids, "confidences", conf,
                             "prompt_tokens", (json_int_t)r->n_prompt, "generated_tokens", (json_int_t)r->n_generated,
                             "blocks", (json_int_t)r->n_blocks, "passes_per_block", ppb, "committed_after",
                             (json_int_t)r->committed_after, "stats", stats_json(&r->stats));
    if (!root) {
        fprintf(stderr, "clover: could not build the JSON output\n");
        return 1;
    }
    if (r->lossless) {
        json_t *acc = json_array(), *com = json_array();
        for (size_t i = 0; i < r->n_blocks; i++) {
            json_array_append_new(acc, json_integer(r->accepted_per_block[i]));
            json_array_append_new(com, json_integer(r->commits_per_block[i]));
        }
        json_object_set_new(root, "lossless", json_true());
        json_object_set_new(root, "accepted_per_block", acc);
        json_object_set_new(root, "commits_per_block", com);
    }
    add_text(root, r, t);
    char *text = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (!text) {
        fprintf(stderr, "clover: could not write the JSON output\n");
        return 1;
    }
    printf("%s\n", text);
    free(text);
    return 0;
}

static void print_ops(const char *what, const clover_op_seconds *o) {
    printf("%-12s gdn %.4f s, attention %.4f s, moe %.4f s, head %.4f s\n", what, o->gdn_s, o->attn_s, o->moe_s,
           o->head_s);
    const uint64_t uses = o->expert_hits + o->expert_misses + o->expert_host;
    if (uses) /* --gpu-mem */
        printf("%-12s expert cache: hit rate %.1f%% of %llu uses, %.3f GB copied at %.1f GB/s, %llu computed by the "
               "CPU\n",
               "", 100.0 * (double)o->expert_hits / (double)uses, (unsigned long long)uses,
               (double)o->expert_copy_bytes * 1e-9,
               o->expert_copy_s > 0 ? (double)o->expert_copy_bytes / o->expert_copy_s * 1e-9 : 0.0,
               (unsigned long long)o->expert_host);
}

void run_print_ids_and_stats(const clover_generate_result *r) {
    const clover_generate_stats *s = &r->stats;
    printf("ids:");
    for (size_t i = 0; i < r->n_generated; i++) printf(" %d", r->ids[i]);
    printf("\n%-12s %s, %zu tokens (prompt %zu, reused %zu), mode %s\n", "finish", clover_finish_name(r->finish),
           r->n_generated, r->n_prompt, s->reused_tokens, run_mode_name(r->mode));
    if (r->mode == CLOVER_MODE_DIFFUSION) {
        printf("%-12s %zu blocks, %zu passes (per block:", "passes", s->blocks, s->passes);
        for (size_t i = 0; i < r->n_blocks; i++) printf(" %u", r->passes_per_block[i]);
        printf(")\n");
        if (s->causal_steps)
            printf("%-12s %zu causal steps (rule causal: %.2f tokens per pass, %.2f per pass or step)\n", "",
                   s->causal_steps, s->passes ? (double)r->n_generated / (double)s->passes : 0.0,
                   (double)r->n_generated / (double)(s->passes + s->causal_steps));
        if (r->lossless) {
            printf("%-12s %zu drafted tokens accepted, %zu recommits (emitted per block:", "lossless",
                   s->accepted_drafts, s->recommits);
            for (size_t i = 0; i < r->n_blocks; i++) printf(" %u", r->accepted_per_block[i]);
            printf(")\n");
        }
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

void run_print_summary(FILE *f, const clover_generate_result *r) {
    const clover_generate_stats *s = &r->stats;
    fprintf(f, "[%s, %zu tokens", clover_finish_name(r->finish), r->n_generated);
    if (r->mode == CLOVER_MODE_DIFFUSION) {
        fprintf(f, "; %zu block%s, passes per block", r->n_blocks, r->n_blocks == 1 ? "" : "s");
        for (size_t i = 0; i < r->n_blocks; i++) fprintf(f, " %u", r->passes_per_block[i]);
        fprintf(f, " (%.2f tokens per pass)", s->passes ? (double)r->n_generated / (double)s->passes : 0.0);
        if (s->causal_steps)
            fprintf(f, "; %zu causal steps (%.2f tokens per pass or step)", s->causal_steps,
                    (double)r->n_generated / (double)(s->passes + s->causal_steps));
        if (r->lossless) {
            fprintf(f, "; lossless, emitted per block");
            for (size_t i = 0; i < r->n_blocks; i++) fprintf(f, " %u", r->accepted_per_block[i]);
            fprintf(f, ", %zu recommits", s->recommits);
        }
        fprintf(f, "; %.1f tok/s (denoise %.1f tok/s)", s->gen_tok_s, s->denoise_tok_s);
    } else {
        fprintf(f, "; autoregressive, %.1f tok/s", s->gen_tok_s);
    }
    fprintf(f, "; prompt %zu tokens (%zu reused) in %.3f s; total %.3f s]\n", s->prompt_tokens, s->reused_tokens,
            s->prompt_s, s->total_s);
}

void run_print_error(const char *cmd, const clover_error *err, const char *hint) {
    if (strstr(err->message, "more than the context"))
        fprintf(stderr, "clover %s: %s; %s\n", cmd, err->message, hint);
    else
        fprintf(stderr, "clover %s: %s\n", cmd, err->message);
}

int run_note_context_full(const char *cmd, const clover_generate_result *r, size_t max_tokens, const char *hint) {
    if (r->finish != CLOVER_FINISH_LENGTH || r->n_generated >= max_tokens) return 0;
    fprintf(stderr, "clover %s: the answer stopped at the end of the context (%zu tokens held); %s\n", cmd,
            r->committed_after, hint);
    return 1;
}
