/*
 * stop_ids.h: the ids that end an answer (SPEC.md 3, reference DECISIONS
 * 7): the record's stop_token_ids plus the tokenizer's EOS ids, deduplicated,
 * ids past the vocabulary dropped. The length ramp applies to exactly this
 * set; a request may add ids that only end the answer.
 */
#ifndef CLOVER_ENGINE_STOP_IDS_H
#define CLOVER_ENGINE_STOP_IDS_H

#include <stddef.h>
#include <stdint.h>

#include "clover.h"

/* Builds the model's stop set, ascending, into a new array (mem_free). The
 * EOS ids are tokenizer.ggml.eos_token_id and eot_token_id plus the ids of
 * the tokens `<|endoftext|>` and `<|im_end|>` when the vocabulary has them
 * (a GGUF stores a single EOS id). *out is NULL when the set is empty. */
int engine_stop_ids_build(const clover_model *m, int32_t **out, size_t *n, clover_error *err);

#endif
