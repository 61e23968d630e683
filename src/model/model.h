/*
 * model.h: the loaded model as the backends see it. Immutable after load and
 * shared by every session: the mapped GGUF, the hyper-parameters, the
 * block-diffusion record (or none: an autoregressive model), the tokenizer
 * metadata and the tokenizer built from it (src/text), and every weight bound
 * by name with its shape and type checked.
 *
 * Everything follows llama.cpp's `qwen35moe` conventions, so a file converted
 * by llama.cpp loads here and ours load there:
 *  - shapes are ggml's ne[] (ne[0] is the contiguous row length, so a matrix
 *    that maps n_in to n_out is {n_in, n_out}: n_out rows of n_in);
 *  - the zero-centred norms (attn_norm, post_attention_norm, output_norm,
 *    attn_q_norm, attn_k_norm) store 1 + w; ssm_norm stores its plain weight;
 *  - ssm_a stores -exp(A_log); ssm_dt.bias stores dt_bias;
 *  - GDN value heads are in llama.cpp's TILED order: stored value head j
 *    reads key head j % nk (Hugging Face's grouped order has v-head h read
 *    key head h / (nv/nk)). The converter applies this to every per-value-head
 *    tensor and value channel (the v part of attn_qkv and ssm_conv1d, attn_gate,
 *    ssm_alpha, ssm_beta, ssm_a, ssm_dt, ssm_out's input columns) and so do the
 *    Clover tensors (ssm_conv1d_right, bd_*).
 */
#ifndef CLOVER_MODEL_MODEL_H
#define CLOVER_MODEL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

#define MODEL_ARCH "qwen35moe"

/* One bound tensor. data is NULL only for an optional tensor that is absent. */
typedef struct model_weight {
    const char *name;           /* GGUF tensor name (owned by the gguf_file) */
    const void *data;           /* into the mapping */
    uint32_t type;              /* quant_type */
    uint64_t ne[GGUF_MAX_DIMS]; /* ggml order; unused dims are 1 */
    uint64_t nbytes;
} model_weight;

/* Hyper-parameters (`qwen35moe.*` keys) and the sizes derived from them. */
typedef struct model_hparams {
    uint32_t n_layer;                 /* trunk layers: block_count - nextn_predict_layers */
    uint32_t n_layer_nextn;           /* MTP layers appended by llama.cpp's converter (not run, not bound) */
    uint32_t n_embd;                  /* embedding_length */
    uint32_t n_vocab;                 /* rows of token_embd */
    uint32_t n_ctx_train;             /* context_length */
    float rms_eps;                    /* attention.layer_norm_rms_epsilon (every norm) */
    uint32_t full_attention_interval; /* 0 when attention.recurrent_layers gave the pattern */

    /* full attention */
    uint32_t n_head;           /* attention.head_count */
    uint32_t n_head_kv;        /* attention.head_count_kv */
    uint32_t head_dim;         /* attention.key_length (= value_length) */
    uint32_t n_rot;            /* rope.dimension_count: rotated dims at the start of each head */
    float rope_freq_base;      /* rope.freq_base */
    uint32_t rope_sections[4]; /* rope.dimension_sections (MRoPE; text positions make it plain RoPE) */

    /* Gated DeltaNet (llama.cpp's ssm.* keys) */
    uint32_t ssm_conv_kernel;                /* ssm.conv_kernel: K */
    uint32_t ssm_d_state;                    /* ssm.state_size: key head dim dk */
    uint32_t ssm_n_group;                    /* ssm.group_count: key heads nk */
    uint32_t ssm_dt_rank;                    /* ssm.time_step_rank: value heads nv */
    uint32_t ssm_d_inner;                    /* ssm.inner_size: nv * dv */
    uint32_t gdn_nk, gdn_nv, gdn_dk, gdn_dv; /* the same, named as TRUNK.md does */
    uint32_t gdn_conv_dim;                   /* 2*nk*dk + nv*dv */

    /* mixture of experts (every layer) */
    uint32_t n_expert;      /* expert_count */
    uint32_t n_expert_used; /* expert_used_count */
    uint32_t n_ff_exp;      /* expert_feed_forward_length */
    uint32_t n_ff_shexp;    /* expert_shared_feed_forward_length */
} model_hparams;

/* The block-diffusion record (SPEC.md 1.2, keys clover.*): the public struct. */
typedef clover_record model_record;

/* Tokenizer metadata (tokenizer.ggml.*), kept raw: encoding lives in src/text. */
typedef struct model_tokenizer {
    const char *model;         /* tokenizer.ggml.model ("gpt2"); NULL: the file has no tokenizer */
    const char *pre;           /* tokenizer.ggml.pre or NULL */
    uint64_t n_tokens;         /* tokenizer.ggml.tokens length (<= n_vocab) */
    const gguf_string *tokens; /* [n_tokens] (owned by the gguf_file) */
    int32_t *token_types;      /* [n_tokens] owned copy, llama.cpp codes (1 normal .. 6 byte); NULL when absent */
    const float *scores;       /* [n_tokens] or NULL */
    uint64_t n_merges;
    const gguf_string *merges;                               /* [n_merges] "left right", or NULL */
    int32_t bos_id, eos_id, eot_id, pad_id, unk_id, mask_id; /* -1: none */
    bool add_bos, add_eos;
    const char *chat_template; /* tokenizer.chat_template or NULL */
} model_tokenizer;

/* llama.cpp's token type codes. */
enum {
    MODEL_TOKEN_NORMAL = 1,
    MODEL_TOKEN_UNKNOWN = 2,
    MODEL_TOKEN_CONTROL = 3,
    MODEL_TOKEN_USER_DEFINED = 4,
    MODEL_TOKEN_UNUSED = 5,
    MODEL_TOKEN_BYTE = 6,
};

typedef enum model_layer_kind {
    MODEL_LAYER_GDN = 0,       /* Gated DeltaNet (linear attention) */
    MODEL_LAYER_ATTENTION = 1, /* gated full attention */
} model_layer_kind;

/* Full attention: hd = head_dim, nh = n_head, nkv = n_head_kv. */
typedef struct model_attention_weights {
    model_weight q;      /* attn_q      {n_embd, 2*hd*nh}: per head, hd query rows then hd gate rows */
    model_weight k;      /* attn_k      {n_embd, hd*nkv} */
    model_weight v;      /* attn_v      {n_embd, hd*nkv} */
    model_weight o;      /* attn_output {hd*nh, n_embd} */
    model_weight q_norm; /* attn_q_norm {hd} F32, 1 + w, per head */
    model_weight k_norm; /* attn_k_norm {hd} F32, 1 + w, per head */
} model_attention_weights;

/* Gated DeltaNet: nk key heads of dk, nv value heads of dv, K conv taps. */
typedef struct model_gdn_weights {
    model_weight qkv;     /* attn_qkv   {n_embd, conv_dim}: q [nk*dk] | k [nk*dk] | v [nv*dv] */
    model_weight z;       /* attn_gate  {n_embd, nv*dv}: the output gate z */
    model_weight conv;    /* ssm_conv1d {K, conv_dim} F32: tap K-1 multiplies the current row */
    model_weight dt_bias; /* ssm_dt.bias {nv} F32 */
    model_weight a;       /* ssm_a      {nv} F32: -exp(A_log) */
    model_weight alpha;   /* ssm_alpha  {n_embd, nv}: the decay input a */
    model_weight beta;    /* ssm_beta   {n_embd, nv}: the write strength b */
    model_weight norm;    /* ssm_norm   {dv} F32: gated RMSNorm weight, shared by the heads */
    model_weight out;     /* ssm_out    {nv*dv, n_embd} */
    /* Clover (bound when the model has a record; data NULL otherwise). Names as
     * SPEC.md 6 spells them, without a .weight suffix (like ssm_a):
     * blk.N.ssm_conv1d_right, blk.N.bd_logit_scale, blk.N.bd_history_bias,
     * blk.N.bd_history_c. */
    model_weight conv_right;   /* ssm_conv1d_right {K-1, conv_dim} F32 */
    model_weight logit_scale;  /* bd_logit_scale  {nv} F32 */
    model_weight history_bias; /* bd_history_bias {nv} F32 */
    model_weight history_c;    /* bd_history_c    {nv} F32 */
} model_gdn_weights;

/* Sparse MoE with a gated shared expert. E = n_expert, I = n_ff_exp, S = n_ff_shexp. */
typedef struct model_moe_weights {
    model_weight gate_inp;       /* ffn_gate_inp       {n_embd, E}: router */
    model_weight gate_exps;      /* ffn_gate_exps      {n_embd, I, E} */
    model_weight up_exps;        /* ffn_up_exps        {n_embd, I, E} */
    model_weight down_exps;      /* ffn_down_exps      {I, n_embd, E} */
    model_weight gate_inp_shexp; /* ffn_gate_inp_shexp {n_embd} F32: shared-expert gate (one logit) */
    model_weight gate_shexp;     /* ffn_gate_shexp     {n_embd, S} */
    model_weight up_shexp;       /* ffn_up_shexp       {n_embd, S} */
    model_weight down_shexp;     /* ffn_down_shexp     {S, n_embd} */
} model_moe_weights;

typedef struct model_layer {
    model_layer_kind kind;
    model_weight attn_norm;       /* attn_norm           {n_embd} F32, 1 + w */
    model_weight post_norm;       /* post_attention_norm {n_embd} F32, 1 + w */
    model_attention_weights attn; /* kind == MODEL_LAYER_ATTENTION */
    model_gdn_weights gdn;        /* kind == MODEL_LAYER_GDN */
    model_moe_weights moe;
} model_layer;

struct clover_model {
    gguf_file *file;
    model_hparams hp;
    bool has_record;     /* false: an autoregressive model */
    model_record record; /* valid when has_record; stop_token_ids owned */
    model_tokenizer tok;
    tokenizer *tokenizer; /* built from tok at load; NULL when the file has no tokenizer.ggml.model */

    model_weight token_embd;  /* {n_embd, n_vocab} */
    model_weight output_norm; /* {n_embd} F32, 1 + w */
    model_weight output;      /* {n_embd, n_vocab}; token_embd's when the file ties them */
    bool output_tied;
    model_layer *layers; /* [n_layer] */
    char *layer_kinds;   /* n_layer chars + NUL: 'G' GDN, 'A' attention */
};

/* ---- the loading steps (one file each) ---- */

/* hparams.c: reads and checks the qwen35moe.* keys; n_vocab from token_embd. */
int model_hparams_read(const gguf_file *f, model_hparams *hp, clover_error *err);
/* hparams.c: the layer pattern (attention.recurrent_layers, else full_attention_interval). */
int model_layer_kinds_read(const gguf_file *f, const model_hparams *hp, model_layer_kind *kinds, clover_error *err);

/* record.c: the clover.* record. *present = false (and rec zeroed) when the
 * file has no clover.algorithm. rec->stop_token_ids is allocated (mem_free). */
int model_record_read(const gguf_file *f, uint32_t n_vocab, model_record *rec, bool *present, clover_error *err);
void model_record_free(model_record *rec);

/* tokenizer_meta.c: tokenizer.ggml.* checked against each other and n_vocab. */
int model_tokenizer_read(const gguf_file *f, uint32_t n_vocab, model_tokenizer *tok, clover_error *err);
void model_tokenizer_free(model_tokenizer *tok);

/* weights.c: binds every tensor of every layer, shapes and types checked. */
int model_weights_bind(clover_model *m, clover_error *err);

/* True for the types a weight matrix may have (quant_type_supported). */
bool model_matrix_type_ok(uint32_t type);

#endif
