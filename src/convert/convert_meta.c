/*
 * convert_meta.c: the GGUF metadata of a converted model, key for key what
 * llama.cpp's converter writes for qwen35moe (general.*, qwen35moe.*,
 * tokenizer.ggml.*, tokenizer.chat_template), plus the Clover record as
 * clover.* keys with the types SPEC.md 6 fixes.
 */
#include <stdio.h>

#include "base/error.h"
#include "convert/convert_internal.h"

#define ARCH "qwen35moe"

typedef struct meta_ctx {
    gguf_writer *w;
    clover_error *err;
} meta_ctx;

static int u32(meta_ctx *m, const char *key, uint32_t v) { return gguf_writer_set_u32(m->w, key, v, m->err); }
static int f32(meta_ctx *m, const char *key, float v) { return gguf_writer_set_f32(m->w, key, v, m->err); }

static int arch_u32(meta_ctx *m, const char *suffix, uint32_t v) {
    char key[128];
    snprintf(key, sizeof key, ARCH ".%s", suffix);
    return u32(m, key, v);
}

static int arch_f32(meta_ctx *m, const char *suffix, float v) {
    char key[128];
    snprintf(key, sizeof key, ARCH ".%s", suffix);
    return f32(m, key, v);
}

static int write_general(meta_ctx *m, const char *name, convert_type type) {
    int rc;
    if ((rc = gguf_writer_set_string(m->w, "general.architecture", ARCH, m->err)) ||
        (rc = gguf_writer_set_string(m->w, "general.type", "model", m->err)) ||
        (rc = gguf_writer_set_string(m->w, "general.name", name, m->err)) ||
        (rc = u32(m, "general.file_type", convert_file_type(type))) ||
        (rc = u32(m, "general.quantization_version", 2)))
        return rc;
    return CLOVER_OK;
}

static int write_hparams(meta_ctx *m, const hf_config *c) {
    int rc;
    if ((rc = arch_u32(m, "block_count", c->n_layers)) || (rc = arch_u32(m, "context_length", c->max_positions)) ||
        (rc = arch_u32(m, "embedding_length", c->hidden_size)) ||
        (c->ffn && (rc = arch_u32(m, "feed_forward_length", c->ffn))) ||
        (rc = arch_u32(m, "attention.head_count", c->n_heads)) ||
        (rc = arch_u32(m, "attention.head_count_kv", c->n_kv_heads)) ||
        (rc = arch_f32(m, "rope.freq_base", c->rope_theta)) ||
        (rc = arch_f32(m, "attention.layer_norm_rms_epsilon", c->rms_eps)) ||
        (rc = arch_u32(m, "expert_count", c->n_experts)) ||
        (rc = arch_u32(m, "expert_used_count", c->n_experts_used)) ||
        (rc = arch_u32(m, "attention.key_length", c->head_dim)) ||
        (rc = arch_u32(m, "attention.value_length", c->head_dim)) ||
        (rc = arch_u32(m, "expert_feed_forward_length", c->moe_ffn)) ||
        (rc = arch_u32(m, "expert_shared_feed_forward_length", c->shared_ffn)) ||
        (rc = arch_u32(m, "ssm.conv_kernel", c->conv_kernel)) ||
        (rc = arch_u32(m, "ssm.state_size", c->lin_k_head_dim)) ||
        (rc = arch_u32(m, "ssm.group_count", c->lin_n_k_heads)) ||
        (rc = arch_u32(m, "ssm.time_step_rank", c->lin_n_v_heads)) ||
        (rc = arch_u32(m, "ssm.inner_size", c->lin_v_head_dim * c->lin_n_v_heads)) ||
        (c->full_attention_interval && (rc = arch_u32(m, "full_attention_interval", c->full_attention_interval))) ||
        /* int(head_dim * partial_rotary_factor), as Python truncates */
        (rc = arch_u32(m, "rope.dimension_count", (uint32_t)((double)c->head_dim * (double)c->partial_rotary_factor))))
        return rc;
    /* An irregular pattern: one bool per layer, true for Gated DeltaNet, as
     * llama.cpp's loader reads it (and its own saver writes it). */
    if (!c->full_attention_interval &&
        (rc = gguf_writer_set_array(m->w, ARCH ".attention.recurrent_layers", GGUF_VT_BOOL, c->layer_is_linear,
                                    c->n_layers, m->err)))
        return rc;
    if ((rc = gguf_writer_set_array(m->w, ARCH ".rope.dimension_sections", GGUF_VT_I32, c->rope_sections, 4, m->err)))
        return rc;
    if (c->rope_type) {
        if ((rc = gguf_writer_set_string(m->w, ARCH ".rope.scaling.type", c->rope_type, m->err)) ||
            (rc = arch_f32(m, "rope.scaling.factor", c->rope_factor)))
            return rc;
        if (c->rope_orig_ctx && (rc = arch_u32(m, "rope.scaling.original_context_length", c->rope_orig_ctx)))
            return rc;
    }
    return CLOVER_OK;
}

static int write_tokenizer(meta_ctx *m, const hf_vocab *v) {
    int rc;
    if ((rc = gguf_writer_set_string(m->w, "tokenizer.ggml.model", "gpt2", m->err)) ||
        (rc = gguf_writer_set_string(m->w, "tokenizer.ggml.pre", v->pre, m->err)) ||
        (rc = gguf_writer_set_string_array(m->w, "tokenizer.ggml.tokens", v->tokens, v->n_tokens, m->err)) ||
        (rc = gguf_writer_set_array(m->w, "tokenizer.ggml.token_type", GGUF_VT_I32, v->types, v->n_tokens, m->err)) ||
        (rc = gguf_writer_set_string_array(m->w, "tokenizer.ggml.merges", v->merges, v->n_merges, m->err)))
        return rc;
    if (v->bos_id >= 0 && (rc = u32(m, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos_id))) return rc;
    if (v->eos_id >= 0 && (rc = u32(m, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos_id))) return rc;
    if (v->pad_id >= 0 && (rc = u32(m, "tokenizer.ggml.padding_token_id", (uint32_t)v->pad_id))) return rc;
    if ((rc = gguf_writer_set_bool(m->w, "tokenizer.ggml.add_bos_token", v->add_bos, m->err))) return rc;
    if (v->chat_template && (rc = gguf_writer_set_string(m->w, "tokenizer.chat_template", v->chat_template, m->err)))
        return rc;
    return CLOVER_OK;
}

static int write_record(meta_ctx *m, const hf_block_diffusion *b) {
    int rc;
    if ((rc = gguf_writer_set_string(m->w, "clover.algorithm", b->algorithm, m->err)) ||
        (rc = u32(m, "clover.block_size", b->block_size)) || (rc = f32(m, "clover.threshold", b->threshold)) ||
        (rc = u32(m, "clover.mask_token_id", b->mask_token_id)) ||
        (rc = gguf_writer_set_bool(m->w, "clover.coreset_enabled", b->coreset_enabled, m->err)) ||
        (rc = f32(m, "clover.coreset_top_p", b->coreset_top_p)) ||
        (rc = f32(m, "clover.presence_penalty", b->presence_penalty)) ||
        (rc = f32(m, "clover.frequency_penalty", b->frequency_penalty)) ||
        (rc = f32(m, "clover.repetition_penalty", b->repetition_penalty)) ||
        (rc = f32(m, "clover.length_penalty", b->length_penalty)) ||
        (rc = f32(m, "clover.think_end_bias", b->think_end_bias)) ||
        (rc = u32(m, "clover.length_penalty_start", b->length_penalty_start)) ||
        (rc = u32(m, "clover.length_penalty_window", b->length_penalty_window)) ||
        (rc = u32(m, "clover.think_end_start", b->think_end_start)) ||
        (rc = u32(m, "clover.think_end_window", b->think_end_window)) ||
        (rc = gguf_writer_set_i32(m->w, "clover.think_end_token_id", b->think_end_token_id, m->err)) ||
        (rc = gguf_writer_set_array(m->w, "clover.stop_token_ids", GGUF_VT_U32, b->stop_token_ids,
                                    b->n_stop_token_ids, m->err)))
        return rc;
    if (b->decode_rule && (rc = gguf_writer_set_string(m->w, "clover.decode_rule", b->decode_rule, m->err))) return rc;
    return CLOVER_OK;
}

int convert_write_metadata(gguf_writer *w, const hf_config *cfg, const hf_vocab *vocab, const char *model_name,
                           convert_type type, clover_error *err) {
    meta_ctx m = {w, err};
    int rc;
    if ((rc = write_general(&m, model_name, type)) || (rc = write_hparams(&m, cfg)) ||
        (rc = write_tokenizer(&m, vocab)))
        return rc;
    if (cfg->bd.present && (rc = write_record(&m, &cfg->bd))) return rc;
    return CLOVER_OK;
}
