/*
 * convert.h: a Hugging Face Qwen3.5-MoE checkpoint directory (config.json,
 * safetensors, tokenizer files; optionally Clover's block_diffusion record
 * and preview tensors) to one llama.cpp `qwen35moe` GGUF file.
 *
 * The conversion streams: the safetensors stay mapped, each output tensor is
 * produced row by row (type conversion, llama.cpp's transformations,
 * quantisation on a thread pool) and written as it goes, so memory stays a
 * few megabytes however large the model; a 67 GB checkpoint needs no more
 * RAM than a small one. Progress is reported through a callback: the
 * library itself prints nothing.
 */
#ifndef CLOVER_CONVERT_CONVERT_H
#define CLOVER_CONVERT_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"

/* The output types `clover convert --type` offers. */
typedef enum convert_type {
    CONVERT_F32,    /* every tensor F32 */
    CONVERT_BF16,   /* matrices BF16; norms, vectors, conv taps and routers F32 */
    CONVERT_Q8_0,   /* matrices Q8_0; the same F32 tensors */
    CONVERT_Q4_K_M, /* routed experts and token_embd Q4_K, output Q6_K, other matrices Q8_0 */
} convert_type;

/* "f32", "bf16", "q8_0", "q4_k_m" (case-insensitive) -> type; -1 when unknown. */
int convert_type_from_name(const char *name);
const char *convert_type_name(convert_type t);

/* Called after every written piece (and once at 0 before the first). */
typedef void (*convert_progress_fn)(void *user, const char *tensor, size_t index, size_t count, uint64_t done_bytes,
                                    uint64_t total_bytes);

typedef struct convert_options {
    const char *input_dir;
    const char *output_path;
    convert_type type;
    size_t n_threads;            /* 0: every CPU */
    convert_progress_fn progress; /* may be NULL */
    void *progress_user;
} convert_options;

typedef struct convert_report {
    size_t n_tensors;       /* written */
    uint64_t n_bytes;       /* tensor data written */
    size_t n_vision_skipped;
    size_t n_mtp_skipped;
    bool has_record;        /* Clover block-diffusion record written */
    uint32_t n_layers;
    uint32_t n_vocab;
    bool dk_ne_dv;          /* GDN key head dim != value head dim: llama.cpp's loader refuses such a file */
} convert_report;

/* Converts; on failure no output file is left behind and err names the
 * file, tensor or field at fault. report may be NULL. */
int convert_run(const convert_options *opt, convert_report *report, clover_error *err);

#endif
