/*
 * stats.c: accumulating what the backend reports per pass, and the rates.
 * Rates divide by wall time actually measured; a zero time gives a zero
 * rate rather than an infinity, so JSON and text output stay finite.
 */
#include "engine/stats.h"

#include "engine/session.h"

void engine_ops_add(clover_op_seconds *ops, const backend_pass_stats *st) {
    if (!ops) return;
    ops->gdn_s += st->gdn_s;
    ops->attn_s += st->attn_s;
    ops->moe_s += st->moe_s;
    ops->head_s += st->head_s;
    ops->expert_hits += st->expert_hits;
    ops->expert_misses += st->expert_misses;
    ops->expert_copy_bytes += st->expert_copy_bytes;
    ops->expert_copy_s += st->expert_copy_s;
    ops->expert_host += st->expert_host;
    ops->expert_host_s += st->expert_host_s;
}

void engine_stats_add_preview(clover_generate_stats *st, const backend_pass_stats *pass) {
    engine_ops_add(&st->preview_ops, pass);
    st->coreset_kept += pass->coreset_kept;
    st->coreset_layers += pass->coreset_layers;
}

static double rate(double n, double seconds) { return seconds > 0.0 ? n / seconds : 0.0; }

void engine_stats_finish(clover_generate_stats *st, size_t n_generated) {
    st->coreset_mean = st->coreset_layers ? (double)st->coreset_kept / (double)st->coreset_layers : 0.0;
    st->prompt_tok_s = rate((double)(st->prompt_tokens - st->reused_tokens), st->prompt_s);
    st->gen_tok_s = rate((double)n_generated, st->total_s - st->prompt_s);
    st->denoise_tok_s = rate((double)n_generated, st->preview_s + st->pick_s + st->commit_s);
}
