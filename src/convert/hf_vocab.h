/*
 * hf_vocab.h: a Hugging Face tokenizer directory turned into the values of
 * llama.cpp's `tokenizer.ggml.*` keys, exactly as its converter writes them
 * for a GPT-2-style byte-level BPE:
 *  - tokens: the vocabulary strings as tokenizer.json spells them (byte-level
 *    unicode, e.g. "Ġthe"), added tokens at their ids, "[PAD<id>]" for every
 *    id up to config.json's vocab_size that names no token;
 *  - token_type: NORMAL (1), CONTROL (3) for special added tokens (and added
 *    tokens that look like "<|...|>"), USER_DEFINED (4) for the other added
 *    tokens, UNUSED (5) for the padding;
 *  - merges as "left right" (the newer [left, right] pair form is joined,
 *    a space inside a part written as U+0120 the way llama.cpp does);
 *  - bos / eos / padding ids from tokenizer_config.json's tokens, then
 *    generation_config.json, then config.json; add_bos_token; the chat
 *    template (tokenizer_config.json, else chat_template.jinja / .json).
 *
 * This reads raw strings only; encoding text is src/text's business (its
 * tokenizer.json loader compiles a vocabulary of decoded bytes and keeps no
 * merge list, which is not what a GGUF stores).
 */
#ifndef CLOVER_CONVERT_HF_VOCAB_H
#define CLOVER_CONVERT_HF_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"
#include "convert/hf_config.h"

/* llama.cpp's token type codes. */
enum { HF_TOKEN_NORMAL = 1, HF_TOKEN_CONTROL = 3, HF_TOKEN_USER_DEFINED = 4, HF_TOKEN_UNUSED = 5 };

typedef struct hf_vocab {
    uint32_t n_tokens;
    const char **tokens;  /* [n_tokens] */
    int32_t *types;       /* [n_tokens] */
    uint64_t n_merges;
    const char **merges;  /* [n_merges] */
    const char *pre;      /* "qwen35" or "qwen2" */
    int64_t bos_id;       /* -1: none */
    int64_t eos_id;
    int64_t pad_id;
    bool add_bos;
    const char *chat_template; /* NULL: none */

    /* owned storage */
    void *json[4];        /* parsed files the strings point into */
    char *arena;
    size_t arena_used, arena_cap;
} hf_vocab;

/* Reads dir/tokenizer.json (required) and, when present, tokenizer_config.json,
 * generation_config.json and chat_template.jinja / chat_template.json. Token
 * ids must be below cfg->vocab_size. */
int hf_vocab_load(hf_vocab *v, const char *dir, const hf_config *cfg, clover_error *err);
void hf_vocab_free(hf_vocab *v);

#endif
