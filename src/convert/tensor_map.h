/*
 * tensor_map.h: which GGUF tensor each Hugging Face tensor becomes, and how.
 *
 * A conversion is a list of output tensors, each described as "row r of
 * the output is row f(r) of some source tensor, with its columns perhaps
 * permuted and one element-wise op applied". Every transformation
 * llama.cpp's qwen35moe converter makes fits that shape:
 *  - transposition never happens (HF [out, in] is ggml {in, out});
 *  - expert stacking and the gate/up split of a fused gate_up_proj pick
 *    rows from one or several sources (groups of rows_per_group rows);
 *  - the value-head reorder (HF's grouped order to llama.cpp's tiled order,
 *    see model.h) permutes rows (the v part of in_proj_qkv and of the conv
 *    channels, in_proj_z, in_proj_a/b) or columns (out_proj, and the
 *    per-head vectors A_log, dt_bias, bd_*, which are a single row);
 *  - +1 on zero-centred norms, -exp() on A_log.
 * So the writer streams any tensor row by row straight out of the mapped
 * safetensors, holding one row per thread, never a whole tensor.
 */
#ifndef CLOVER_CONVERT_TENSOR_MAP_H
#define CLOVER_CONVERT_TENSOR_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "clover.h"
#include "convert/hf_checkpoint.h"
#include "convert/hf_config.h"
#include "gguf/gguf.h"

typedef enum conv_op {
    CONV_OP_COPY,
    CONV_OP_ADD_ONE, /* zero-centred RMSNorm weights: GGUF stores 1 + w */
    CONV_OP_NEG_EXP, /* A_log -> ssm_a = -exp(A_log) */
} conv_op;

/* What a tensor is, for the choice of its output type. */
typedef enum conv_role {
    CONV_ROLE_SMALL,   /* norms, conv taps, per-head vectors: always F32 */
    CONV_ROLE_ROUTER,  /* ffn_gate_inp, ffn_gate_inp_shexp: F32 as llama.cpp keeps them */
    CONV_ROLE_MATRIX,  /* attention, GDN projections, shared expert */
    CONV_ROLE_EXPERTS, /* ffn_{gate,up,down}_exps */
    CONV_ROLE_EMBED,   /* token_embd */
    CONV_ROLE_HEAD,    /* output */
} conv_role;

typedef struct conv_tensor {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ggml order; unused dims 1 */
    conv_role role;
    conv_op op;
    uint32_t type;              /* output quant_type, set by the caller's policy */

    /* Rows: output row r (after the value-head permutation below) lies in
     * group g = r / rows_per_group at index i = r % rows_per_group; it reads
     * row row_offset + i of src[g] when there are several sources (one per
     * expert), else row g * group_stride + row_offset + i of src[0]. */
    hf_entry **src;             /* [n_src], owned array */
    uint32_t n_src;
    uint64_t rows_per_group;
    uint64_t group_stride;
    uint64_t row_offset;

    /* Value-head reorder, grouped -> tiled, with vk key heads and vr value
     * heads per key head: rows from vrow_begin on in heads of vrow_head rows,
     * and/or columns in heads of vcol_head columns (0: none). */
    uint32_t vk, vr;
    uint64_t vrow_begin;
    uint32_t vrow_head;
    uint32_t vcol_head;
} conv_tensor;

typedef struct conv_plan {
    conv_tensor *t; /* [n] in output order */
    size_t n, cap;
} conv_plan;

/* Builds the plan for a checkpoint: every tensor the config calls for must
 * be there (float dtype, exact shape); every trunk tensor of the checkpoint
 * must be claimed. Errors name the file and the tensor. */
int tensor_map_plan(conv_plan *p, hf_checkpoint *ck, const hf_config *cfg, clover_error *err);
void tensor_map_free(conv_plan *p);

/* Rows of an output tensor (ne[1] * ne[2] * ne[3]). */
uint64_t conv_tensor_rows(const conv_tensor *t);

/* Output row r as f32: ne[0] floats into dst; tmp is scratch of ne[0]. */
void conv_tensor_read_row(const conv_tensor *t, uint64_t r, float *dst, float *tmp);

/* The grouped (Hugging Face) index of tiled position rel, for heads of hs
 * entries, vk key heads and vr value heads per key head. */
uint64_t conv_vhead_source(uint64_t rel, uint32_t hs, uint32_t vk, uint32_t vr);

#endif
