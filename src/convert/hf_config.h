/*
 * hf_config.h: the config.json of a Hugging Face Qwen3.5-MoE checkpoint,
 * reduced to what the GGUF needs, plus its Clover `block_diffusion` record.
 *
 * The text model's fields sit at the top level (a Qwen3_5MoeForCausalLM
 * save) or under `text_config` (the released multimodal checkpoints); a
 * field is looked up under text_config first, as llama.cpp's converter
 * merges them. Every field is type-checked: a wrong type or a missing
 * required field is an error naming the field, never a default.
 */
#ifndef CLOVER_CONVERT_HF_CONFIG_H
#define CLOVER_CONVERT_HF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"

/* Sanity limits: a config beyond them is rejected before any allocation. */
#define HF_MAX_LAYERS 4096u
#define HF_MAX_DIM (1u << 24)

typedef struct hf_block_diffusion {
    bool present;
    char *algorithm; /* owned */
    uint32_t block_size;
    float threshold;
    uint32_t mask_token_id;
    bool coreset_enabled;
    float coreset_top_p;
    float presence_penalty;
    float frequency_penalty;
    float repetition_penalty;
    float length_penalty;
    uint32_t length_penalty_start;
    uint32_t length_penalty_window;
    float think_end_bias;
    uint32_t think_end_start;
    uint32_t think_end_window;
    int32_t think_end_token_id; /* -1: none */
    uint32_t *stop_token_ids;   /* owned, [n_stop_token_ids] */
    size_t n_stop_token_ids;
    char *decode_rule;          /* owned; NULL: absent (clover's extension: "threshold" or "causal_fallback") */
} hf_block_diffusion;

typedef struct hf_config {
    uint32_t vocab_size;
    uint32_t hidden_size;
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t lin_n_k_heads;   /* linear_num_key_heads */
    uint32_t lin_n_v_heads;   /* linear_num_value_heads */
    uint32_t lin_k_head_dim;  /* linear_key_head_dim */
    uint32_t lin_v_head_dim;  /* linear_value_head_dim */
    uint32_t conv_kernel;     /* linear_conv_kernel_dim */
    uint32_t n_experts;
    uint32_t n_experts_used;
    uint32_t moe_ffn;         /* moe_intermediate_size */
    uint32_t shared_ffn;      /* shared_expert_intermediate_size */
    uint32_t ffn;             /* intermediate_size, 0 when absent */
    uint32_t max_positions;   /* max_position_embeddings */
    uint32_t full_attention_interval; /* k when full attention is exactly every k-th layer, else 0 */
    float rms_eps;
    float rope_theta;
    float partial_rotary_factor;
    int32_t rope_sections[4]; /* mrope_section padded with zeros */
    char *rope_type;          /* owned; NULL when absent ("default") */
    float rope_factor;        /* yarn / linear */
    uint32_t rope_orig_ctx;   /* yarn */
    bool tie_word_embeddings;
    int64_t bos_token_id;     /* -1 when absent */
    int64_t eos_token_id;
    int64_t pad_token_id;
    uint8_t *layer_is_linear; /* owned, [n_layers]: 1 = Gated DeltaNet, 0 = full attention */
    hf_block_diffusion bd;
} hf_config;

/* Parses the text of a config.json; name is used in messages. On failure
 * *out is left empty (nothing to free). */
int hf_config_parse(hf_config *out, const char *json, size_t len, const char *name, clover_error *err);
/* Reads and parses path. */
int hf_config_load(hf_config *out, const char *path, clover_error *err);
void hf_config_free(hf_config *c);

/* conv_dim = 2 * nk * dk + nv * dv, the channels of the GDN convolution. */
uint64_t hf_config_conv_dim(const hf_config *c);

#endif
