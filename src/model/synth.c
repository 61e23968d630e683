/*
 * synth.c: clover_synth, a deterministic synthetic model written through the
 * GGUF writer. The metadata is what llama.cpp's converter writes for a
 * Qwen3.5-MoE (plus the Clover record), the tensors come from the plan, and
 * their bytes are generated and quantised a group of row chunks at a time
 * (synth_stream.c), so the 19 GB geometry streams through a few megabytes.
 *
 * Sparse files (opts->sparse): the writer writes the header and tables,
 * then gguf_writer_finish_sparse extends the file to its full size. The data
 * reads as zeros, a valid block of every type, and takes no disk blocks.
 * Either way the file appears under its name only when complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/synth.h"
#include "quant/quant.h"

#define ARCH "qwen35moe."

/* llama.cpp's general.file_type codes (LLAMA_FTYPE_*). */
static uint32_t file_type(synth_mix mix) {
    switch (mix) {
    case SYNTH_MIX_F16: return 1;
    case SYNTH_MIX_Q8_0: return 7;
    case SYNTH_MIX_Q4_K_M: return 15;
    case SYNTH_MIX_BF16: return 32;
    case SYNTH_MIX_F32: break;
    }
    return 0;
}

static int set_hparams(gguf_writer *w, const synth_geometry *g, clover_error *err) {
    int rc = 0;
    /* MRoPE sections over the rotary pairs, in Qwen3.5's 11:11:10 proportion */
    uint32_t pairs = g->n_rot / 2, s0 = (pairs * 11 + 16) / 32;
    int32_t sections[4] = {(int32_t)s0, (int32_t)s0, (int32_t)(pairs - 2 * s0), 0};
    (void)((rc = gguf_writer_set_string(w, "general.architecture", "qwen35moe", err)) ||
           (rc = gguf_writer_set_string(w, "general.name", g->name, err)) ||
           (rc = gguf_writer_set_u32(w, "general.file_type", file_type(g->mix), err)) ||
           (rc = gguf_writer_set_u32(w, "general.quantization_version", 2, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "block_count", g->n_layer, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "context_length", g->n_ctx, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "embedding_length", g->n_embd, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "attention.head_count", g->n_head, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "attention.head_count_kv", g->n_head_kv, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "attention.key_length", g->head_dim, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "attention.value_length", g->head_dim, err)) ||
           (rc = gguf_writer_set_f32(w, ARCH "attention.layer_norm_rms_epsilon", g->rms_eps, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "rope.dimension_count", g->n_rot, err)) ||
           (rc = gguf_writer_set_f32(w, ARCH "rope.freq_base", g->rope_freq_base, err)) ||
           (rc = gguf_writer_set_array(w, ARCH "rope.dimension_sections", GGUF_VT_I32, sections, 4, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "expert_count", g->n_expert, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "expert_used_count", g->n_expert_used, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "expert_feed_forward_length", g->n_ff_exp, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "expert_shared_feed_forward_length", g->n_ff_shexp, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "ssm.conv_kernel", g->conv_kernel, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "ssm.state_size", g->gdn_dk, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "ssm.group_count", g->gdn_nk, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "ssm.time_step_rank", g->gdn_nv, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "ssm.inner_size", g->gdn_nv * g->gdn_dv, err)) ||
           (rc = gguf_writer_set_u32(w, ARCH "full_attention_interval", g->full_attention_interval, err)));
    return rc;
}

static int set_tokenizer(gguf_writer *w, const synth_geometry *g, const synth_vocab *v, clover_error *err) {
    int rc = 0;
    (void)((rc = gguf_writer_set_string(w, "tokenizer.ggml.model", "gpt2", err)) ||
           (rc = gguf_writer_set_string(w, "tokenizer.ggml.pre", "qwen35", err)) ||
           (rc = gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", v->tokens, v->n, err)) ||
           (rc = gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_VT_I32, v->types, v->n, err)) ||
           (rc = gguf_writer_set_string_array(w, "tokenizer.ggml.merges", NULL, 0, err)) ||
           (rc = gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", g->special_base + SYNTH_ENDOFTEXT, err)) ||
           (rc = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", g->special_base + SYNTH_IM_END, err)) ||
           (rc = gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", g->special_base + SYNTH_ENDOFTEXT, err)) ||
           (rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false, err)));
    return rc;
}

/* The record with the release's settings (SPEC.md 1.2). */
static int set_record(gguf_writer *w, const synth_geometry *g, clover_error *err) {
    uint32_t stop[2] = {g->special_base + SYNTH_IM_END, g->special_base + SYNTH_ENDOFTEXT};
    int rc = 0;
    (void)((rc = gguf_writer_set_string(w, "clover.algorithm", "low_confidence", err)) ||
           (rc = gguf_writer_set_u32(w, "clover.block_size", 32, err)) ||
           (rc = gguf_writer_set_f32(w, "clover.threshold", 0.9f, err)) ||
           (rc = gguf_writer_set_u32(w, "clover.mask_token_id", g->special_base + SYNTH_MASK, err)) ||
           (rc = gguf_writer_set_bool(w, "clover.coreset_enabled", true, err)) ||
           (rc = gguf_writer_set_f32(w, "clover.coreset_top_p", 0.9f, err)) ||
           (rc = gguf_writer_set_f32(w, "clover.presence_penalty", 0.0f, err)) ||
           (rc = gguf_writer_set_f32(w, "clover.frequency_penalty", 0.0f, err)) ||
           (rc = gguf_writer_set_f32(w, "clover.repetition_penalty", 1.0f, err)) ||
           (rc = gguf_writer_set_f32(w, "clover.length_penalty", 0.0f, err)) ||
           (rc = gguf_writer_set_u32(w, "clover.length_penalty_start", 0, err)) ||
           (rc = gguf_writer_set_u32(w, "clover.length_penalty_window", 1, err)) ||
           (rc = gguf_writer_set_f32(w, "clover.think_end_bias", 0.0f, err)) ||
           (rc = gguf_writer_set_u32(w, "clover.think_end_start", 0, err)) ||
           (rc = gguf_writer_set_u32(w, "clover.think_end_window", 1, err)) ||
           (rc = gguf_writer_set_i32(w, "clover.think_end_token_id", (int32_t)(g->special_base + SYNTH_THINK_END),
                                     err)) ||
           (rc = gguf_writer_set_array(w, "clover.stop_token_ids", GGUF_VT_U32, stop, 2, err)));
    return rc;
}

int clover_synth(const char *path, const clover_synth_options *opts, clover_error *err) {
    if (!path) return error_set(err, CLOVER_E_INVALID, "clover_synth: path is NULL");
    synth_geometry g;
    int rc = synth_geometry_make(opts, &g, err);
    if (rc) return rc;
    bool diffusion = !(opts && opts->no_diffusion);
    uint64_t seed = opts ? opts->seed : 0;

    synth_vocab vocab;
    synth_tensor *plan = NULL;
    size_t n = 0;
    gguf_writer *w = NULL;
    if ((rc = synth_vocab_build(&g, &vocab, err))) return rc;
    if ((rc = synth_plan_make(&g, diffusion, &plan, &n, err))) goto done;
    if (!(w = gguf_writer_create())) {
        rc = error_set(err, CLOVER_E_NOMEM, "synth: out of memory for the writer");
        goto done;
    }
    if ((rc = set_hparams(w, &g, err)) || (rc = set_tokenizer(w, &g, &vocab, err))) goto done;
    if (diffusion && (rc = set_record(w, &g, err))) goto done;
    for (size_t i = 0; i < n && !rc; i++)
        rc = gguf_writer_add_tensor(w, plan[i].name, plan[i].n_dims, plan[i].ne, plan[i].type, err);
    if (rc) goto done;
    if (opts && opts->sparse) {
        if (!(rc = gguf_writer_begin(w, path, err))) rc = gguf_writer_finish_sparse(w, err);
    } else if (!(rc = gguf_writer_begin(w, path, err)) &&
               !(rc = synth_stream_tensors(w, plan, n, seed, opts ? opts->n_threads : 0, err))) {
        rc = gguf_writer_finish(w, err);
    }
done:
    gguf_writer_free(w); /* removes a file left unfinished by a failure */
    mem_free(plan);
    synth_vocab_free(&vocab);
    return rc;
}
