/*
 * convert_internal.h: what the converter's files share: the type policy
 * (convert_policy.c), the metadata writer (convert_meta.c) and the tensor
 * streamer (convert_write.c), which convert.c ties together.
 */
#ifndef CLOVER_CONVERT_INTERNAL_H
#define CLOVER_CONVERT_INTERNAL_H

#include "convert/convert.h"
#include "convert/hf_config.h"
#include "convert/hf_vocab.h"
#include "convert/tensor_map.h"
#include "gguf/gguf.h"

/* The index of name in names[0..count) ignoring case (names are lower case),
 * or -1: the --type lookup of both convert and quantize. */
int convert_name_index(const char *name, const char *const *names, int count);

/* llama.cpp's general.file_type code of a --type. */
uint32_t convert_file_type(convert_type t);
/* The quant_type a tensor of this role and row length gets. */
uint32_t convert_pick_type(convert_type want, conv_role role, uint64_t ne0);

/* general.*, qwen35moe.*, tokenizer.* and clover.* keys. */
int convert_write_metadata(gguf_writer *w, const hf_config *cfg, const hf_vocab *vocab, const char *model_name,
                           convert_type type, clover_error *err);

/* Streams every tensor of the plan (already declared to w, writer begun). */
int convert_write_tensors(gguf_writer *w, const conv_plan *plan, const convert_options *opt, uint64_t total_bytes,
                          clover_error *err);

/* The gguf_writer verify callback of convert and quantize: the finished
 * temporary must load as a model, else it is refused (and removed). */
int convert_verify_loads(const char *tmp_path, void *user, clover_error *err);

#endif
