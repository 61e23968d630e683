/*
 * requantize.h: `clover quantize`: one GGUF to another of a chosen type, as
 * llama-quantize does. The input (any tensor types, one file or a split
 * set) stays mapped; every tensor is dequantised row by row to f32 and
 * quantised to its new type on a thread pool, then written in order, so
 * memory stays a few megabytes for any model. The metadata is copied (the
 * split.* keys dropped, general.file_type set), and the written file is
 * loaded back before success is reported.
 */
#ifndef CLOVER_CONVERT_REQUANTIZE_H
#define CLOVER_CONVERT_REQUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"
#include "convert/convert.h"

typedef enum requant_type {
    REQUANT_Q8_0,   /* every matrix Q8_0 */
    REQUANT_Q6_K,   /* every matrix Q6_K */
    REQUANT_Q5_K_M, /* routed experts Q5_K, output Q6_K, other matrices Q8_0 */
    REQUANT_Q4_K_M, /* clover convert --type q4_k_m's recipe: experts and token_embd Q4_K, output Q6_K, others Q8_0 */
} requant_type;

/* "q8_0", "q6_k", "q5_k_m", "q4_k_m" (case-insensitive) -> type; -1 when unknown. */
int requant_type_from_name(const char *name);
const char *requant_type_name(requant_type t);

/* The ggml type a tensor gets: F32 for 1-D tensors, conv taps
 * (ssm_conv1d*) and routers (ffn_gate_inp*) whatever the type; a row length
 * the chosen block does not divide falls back to Q8_0, then F16. */
uint32_t requant_pick_type(requant_type t, const char *name, uint32_t n_dims, uint64_t ne0);

typedef struct requant_options {
    const char *input_path;
    const char *output_path;
    requant_type type;
    bool allow_requantize; /* a quantised input tensor (not F32/F16/BF16) is refused without it */
    size_t n_threads;      /* 0: every CPU */
    convert_progress_fn progress;
    void *progress_user;
} requant_options;

typedef struct requant_report {
    size_t n_tensors;
    size_t n_quantised; /* tensors given a quantised type */
    uint64_t in_bytes, out_bytes;
} requant_report;

int requant_run(const requant_options *opt, requant_report *report, clover_error *err);

#endif
