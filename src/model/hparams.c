/*
 * hparams.c: the qwen35moe hyper-parameters, read under llama.cpp's key names
 * and meanings (llama.cpp's Qwen3NextModel converter writes ssm.state_size =
 * key head dim, ssm.group_count = key heads, ssm.time_step_rank = value heads,
 * ssm.inner_size = value heads x value head dim). Optional keys take
 * llama.cpp's defaults only where llama.cpp has one and a converted file may
 * omit the key; everything the math depends on without a safe default is
 * required, so a wrong file fails here and not with silently wrong logits.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "model/model.h"

static const char *arch_key(char *buf, size_t n, const char *suffix) {
    snprintf(buf, n, MODEL_ARCH ".%s", suffix);
    return buf;
}

/* A required unsigned key: present, integer, in [lo, hi]. */
static int get_u32_req(const gguf_file *f, const char *suffix, uint32_t lo, uint32_t hi, uint32_t *out,
                       clover_error *err) {
    char key[128];
    arch_key(key, sizeof key, suffix);
    if (!gguf_kv_find(f, key))
        return error_set(err, CLOVER_E_FORMAT, "missing hyper-parameter %s (required for a %s model)", key, MODEL_ARCH);
    int rc = gguf_get_u32(f, key, out, err);
    if (rc) return rc;
    if (*out < lo || *out > hi)
        return error_set(err, CLOVER_E_FORMAT, "hyper-parameter %s = %u is out of range (expected %u..%u)", key, *out,
                         lo, hi);
    return CLOVER_OK;
}

/* An optional unsigned key with a default, range-checked when present. */
static int get_u32_opt(const gguf_file *f, const char *suffix, uint32_t dflt, uint32_t lo, uint32_t hi, uint32_t *out,
                       clover_error *err) {
    char key[128];
    arch_key(key, sizeof key, suffix);
    if (!gguf_kv_find(f, key)) {
        *out = dflt;
        return CLOVER_OK;
    }
    return get_u32_req(f, suffix, lo, hi, out, err);
}

static int get_f32_req(const gguf_file *f, const char *suffix, float *out, clover_error *err) {
    char key[128];
    arch_key(key, sizeof key, suffix);
    if (!gguf_kv_find(f, key))
        return error_set(err, CLOVER_E_FORMAT, "missing hyper-parameter %s (required for a %s model)", key, MODEL_ARCH);
    int rc = gguf_get_f32(f, key, out, err);
    if (rc) return rc;
    if (!isfinite(*out) || *out <= 0.0f)
        return error_set(err, CLOVER_E_FORMAT, "hyper-parameter %s = %g is out of range (expected a positive number)",
                         key, (double)*out);
    return CLOVER_OK;
}

/* Element i of an integer or bool array as uint64 (false when not an integer type). */
static bool array_u64_at(const gguf_value *v, uint64_t i, uint64_t *out) {
    const void *d = v->v.arr.data;
    switch (v->v.arr.type) {
    case GGUF_VT_BOOL: *out = ((const bool *)d)[i]; return true;
    case GGUF_VT_U8: *out = ((const uint8_t *)d)[i]; return true;
    case GGUF_VT_I8: *out = (uint64_t)((const int8_t *)d)[i]; return ((const int8_t *)d)[i] >= 0;
    case GGUF_VT_U16: *out = ((const uint16_t *)d)[i]; return true;
    case GGUF_VT_I16: *out = (uint64_t)((const int16_t *)d)[i]; return ((const int16_t *)d)[i] >= 0;
    case GGUF_VT_U32: *out = ((const uint32_t *)d)[i]; return true;
    case GGUF_VT_I32: *out = (uint64_t)((const int32_t *)d)[i]; return ((const int32_t *)d)[i] >= 0;
    case GGUF_VT_U64: *out = ((const uint64_t *)d)[i]; return true;
    case GGUF_VT_I64: *out = (uint64_t)((const int64_t *)d)[i]; return ((const int64_t *)d)[i] >= 0;
    default: return false;
    }
}

int model_hparams_read(const gguf_file *f, model_hparams *hp, clover_error *err) {
    memset(hp, 0, sizeof *hp);
    const uint32_t big = 1u << 30; /* no dimension of a real model comes near */
    int rc;
    uint32_t block_count;
    if ((rc = get_u32_req(f, "block_count", 1, 100000, &block_count, err))) return rc;
    if ((rc = get_u32_opt(f, "nextn_predict_layers", 0, 0, block_count - 1, &hp->n_layer_nextn, err))) return rc;
    hp->n_layer = block_count - hp->n_layer_nextn;
    if ((rc = get_u32_req(f, "context_length", 1, UINT32_MAX, &hp->n_ctx_train, err))) return rc;
    if ((rc = get_u32_req(f, "embedding_length", 1, big, &hp->n_embd, err))) return rc;
    if ((rc = get_f32_req(f, "attention.layer_norm_rms_epsilon", &hp->rms_eps, err))) return rc;

    /* full attention */
    if ((rc = get_u32_req(f, "attention.head_count", 1, 65536, &hp->n_head, err))) return rc;
    if ((rc = get_u32_opt(f, "attention.head_count_kv", hp->n_head, 1, hp->n_head, &hp->n_head_kv, err))) return rc;
    if (hp->n_head % hp->n_head_kv)
        return error_set(err, CLOVER_E_FORMAT,
                         "hyper-parameters " MODEL_ARCH ".attention.head_count = %u is not a multiple of "
                         "attention.head_count_kv = %u",
                         hp->n_head, hp->n_head_kv);
    uint32_t dflt_hd = hp->n_embd / hp->n_head ? hp->n_embd / hp->n_head : 1;
    uint32_t value_length;
    if ((rc = get_u32_opt(f, "attention.key_length", dflt_hd, 1, 65536, &hp->head_dim, err))) return rc;
    if ((rc = get_u32_opt(f, "attention.value_length", hp->head_dim, 1, 65536, &value_length, err))) return rc;
    if (value_length != hp->head_dim)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "hyper-parameter " MODEL_ARCH ".attention.value_length = %u differs from key_length = %u "
                         "(the output gate needs them equal)",
                         value_length, hp->head_dim);
    if ((rc = get_u32_opt(f, "rope.dimension_count", hp->head_dim, 0, hp->head_dim, &hp->n_rot, err))) return rc;
    if (hp->n_rot % 2)
        return error_set(err, CLOVER_E_FORMAT, "hyper-parameter " MODEL_ARCH ".rope.dimension_count = %u is odd",
                         hp->n_rot);
    if ((rc = get_f32_req(f, "rope.freq_base", &hp->rope_freq_base, err))) return rc;
    {
        char key[128];
        arch_key(key, sizeof key, "rope.dimension_sections");
        const gguf_kv *kv = gguf_kv_find(f, key);
        if (kv) {
            const gguf_value *v;
            if ((rc = gguf_get_array(f, key, &v, err))) return rc;
            /* Any non-negative sizes, as llama.cpp takes them: for text all
             * three position components are equal, so the split of the
             * rotary dimensions between them does not change the math (and
             * llama.cpp's converter writes its default 11, 11, 10, 0 even
             * into a model with a handful of rotary dimensions). */
            for (uint64_t i = 0; i < v->v.arr.len && i < 4; i++) {
                uint64_t x;
                if (!array_u64_at(v, i, &x) || x > 65536)
                    return error_set(err, CLOVER_E_FORMAT,
                                     "hyper-parameter %s: element %llu is not a section size (a small non-negative "
                                     "integer)",
                                     key, (unsigned long long)i);
                hp->rope_sections[i] = (uint32_t)x;
            }
        }
    }

    /* Gated DeltaNet */
    if ((rc = get_u32_req(f, "ssm.conv_kernel", 1, 1024, &hp->ssm_conv_kernel, err))) return rc;
    if ((rc = get_u32_req(f, "ssm.state_size", 1, 65536, &hp->ssm_d_state, err))) return rc;
    if ((rc = get_u32_req(f, "ssm.group_count", 1, 65536, &hp->ssm_n_group, err))) return rc;
    if ((rc = get_u32_req(f, "ssm.time_step_rank", 1, 65536, &hp->ssm_dt_rank, err))) return rc;
    if ((rc = get_u32_req(f, "ssm.inner_size", 1, big, &hp->ssm_d_inner, err))) return rc;
    if (hp->ssm_dt_rank % hp->ssm_n_group)
        return error_set(err, CLOVER_E_FORMAT,
                         "hyper-parameter " MODEL_ARCH ".ssm.time_step_rank (value heads) = %u is not a multiple of "
                         "ssm.group_count (key heads) = %u",
                         hp->ssm_dt_rank, hp->ssm_n_group);
    if (hp->ssm_d_inner % hp->ssm_dt_rank)
        return error_set(err, CLOVER_E_FORMAT,
                         "hyper-parameter " MODEL_ARCH ".ssm.inner_size = %u is not a multiple of "
                         "ssm.time_step_rank (value heads) = %u",
                         hp->ssm_d_inner, hp->ssm_dt_rank);
    hp->gdn_nk = hp->ssm_n_group;
    hp->gdn_nv = hp->ssm_dt_rank;
    hp->gdn_dk = hp->ssm_d_state;
    hp->gdn_dv = hp->ssm_d_inner / hp->ssm_dt_rank;
    uint64_t conv_dim = 2ull * hp->gdn_nk * hp->gdn_dk + hp->ssm_d_inner;
    if (conv_dim > big)
        return error_set(err, CLOVER_E_FORMAT,
                         "hyper-parameters " MODEL_ARCH ".ssm.*: conv channels 2*%u*%u + %u are too many", hp->gdn_nk,
                         hp->gdn_dk, hp->ssm_d_inner);
    hp->gdn_conv_dim = (uint32_t)conv_dim;

    /* mixture of experts */
    if ((rc = get_u32_req(f, "expert_count", 1, 1u << 20, &hp->n_expert, err))) return rc;
    if ((rc = get_u32_req(f, "expert_used_count", 1, hp->n_expert, &hp->n_expert_used, err))) return rc;
    if ((rc = get_u32_req(f, "expert_feed_forward_length", 1, big, &hp->n_ff_exp, err))) return rc;
    if ((rc = get_u32_req(f, "expert_shared_feed_forward_length", 1, big, &hp->n_ff_shexp, err))) return rc;

    /* the layer pattern's interval (checked again by model_layer_kinds_read);
     * 4 when neither it nor attention.recurrent_layers is there, as llama.cpp */
    char key[128];
    if (!gguf_kv_find(f, arch_key(key, sizeof key, "attention.recurrent_layers"))) {
        if ((rc = get_u32_opt(f, "full_attention_interval", 4, 1, 65536, &hp->full_attention_interval, err)))
            return rc;
    }

    /* the vocabulary: the embedding's rows (the token list may be shorter) */
    const gguf_tensor *emb = gguf_tensor_find(f, "token_embd.weight");
    if (!emb) return error_set(err, CLOVER_E_FORMAT, "missing tensor token_embd.weight (the token embedding)");
    if (emb->n_dims != 2 || emb->ne[1] < 1 || emb->ne[1] > UINT32_MAX)
        return error_set(err, CLOVER_E_FORMAT,
                         "tensor token_embd.weight: expected a matrix {n_embd, n_vocab}, found %u dims "
                         "{%llu, %llu}",
                         emb->n_dims, (unsigned long long)emb->ne[0], (unsigned long long)emb->ne[1]);
    hp->n_vocab = (uint32_t)emb->ne[1];
    return CLOVER_OK;
}

int model_layer_kinds_read(const gguf_file *f, const model_hparams *hp, model_layer_kind *kinds, clover_error *err) {
    char key[128];
    arch_key(key, sizeof key, "attention.recurrent_layers");
    if (!gguf_kv_find(f, key)) {
        for (uint32_t i = 0; i < hp->n_layer; i++)
            kinds[i] = (i + 1) % hp->full_attention_interval == 0 ? MODEL_LAYER_ATTENTION : MODEL_LAYER_GDN;
        return CLOVER_OK;
    }
    const gguf_value *v;
    int rc = gguf_get_array(f, key, &v, err);
    if (rc) return rc;
    if (v->v.arr.len < hp->n_layer)
        return error_set(err, CLOVER_E_FORMAT, "hyper-parameter %s has %llu entries (expected one per layer, %u)", key,
                         (unsigned long long)v->v.arr.len, hp->n_layer);
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        uint64_t x;
        if (!array_u64_at(v, i, &x) || x > 1)
            return error_set(err, CLOVER_E_FORMAT, "hyper-parameter %s: entry %u is not a bool", key, i);
        kinds[i] = x ? MODEL_LAYER_GDN : MODEL_LAYER_ATTENTION;
    }
    return CLOVER_OK;
}
