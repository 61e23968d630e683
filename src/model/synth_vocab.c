/*
 * synth_vocab.c: the byte-level vocabulary of synthetic models. With no
 * merges, every byte string encodes as its bytes, so the file is runnable end
 * to end (prompt in, text out) while the token ids of single bytes and of the
 * special tokens are the ones Qwen3.5's real tokenizer uses (when
 * special_base is 248044), which keeps ids in tests and logs recognisable.
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/model.h"
#include "model/synth.h"

/* The added tokens of Qwen3.5 (TRUNK.md 6), from id 248044 on, then ours. */
static const struct {
    const char *text;
    bool user_defined; /* special: false in tokenizer.json (still atomic) */
} specials[SYNTH_N_SPECIAL] = {
    {"<|endoftext|>", false},
    {"<|im_start|>", false},
    {"<|im_end|>", false},
    {"<|object_ref_start|>", false},
    {"<|object_ref_end|>", false},
    {"<|box_start|>", false},
    {"<|box_end|>", false},
    {"<|quad_start|>", false},
    {"<|quad_end|>", false},
    {"<|vision_start|>", false},
    {"<|vision_end|>", false},
    {"<|vision_pad|>", false},
    {"<|image_pad|>", false},
    {"<|video_pad|>", false},
    {"<tool_call>", true},
    {"</tool_call>", true},
    {"<|fim_prefix|>", false},
    {"<|fim_middle|>", false},
    {"<|fim_suffix|>", false},
    {"<|fim_pad|>", false},
    {"<|repo_name|>", false},
    {"<|file_sep|>", false},
    {"<tool_response>", true},
    {"</tool_response>", true},
    {"<think>", true},
    {"</think>", true},
    {"<|audio_start|>", false},
    {"<|audio_end|>", false},
    {"<tts_pad>", false},
    {"<tts_text_bos>", false},
    {"<tts_text_eod>", false},
    {"<tts_text_bos_single>", false},
    {"<|audio_pad|>", false},
    {"<|mask|>", false},
};

/* GPT-2's byte-to-unicode table in its own order: the printable bytes map
 * to themselves and come first, the rest map to 256, 257, ... in byte order.
 * Entry i is the code point of the token with id i. */
static void byte_table(uint32_t cps[256]) {
    size_t n = 0;
    bool printable[256] = {false};
    for (uint32_t b = 0; b < 256; b++) {
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
            cps[n++] = b;
            printable[b] = true;
        }
    }
    uint32_t extra = 0;
    for (uint32_t b = 0; b < 256; b++)
        if (!printable[b]) cps[n++] = 256 + extra++;
}

/* UTF-8 of a code point below 0x800. */
static size_t utf8_put(char *dst, uint32_t cp) {
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    dst[0] = (char)(0xC0 | (cp >> 6));
    dst[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

int synth_vocab_build(const synth_geometry *g, synth_vocab *v, clover_error *err) {
    memset(v, 0, sizeof *v);
    if (g->special_base < 256 || (uint64_t)g->special_base + SYNTH_N_SPECIAL > g->n_vocab)
        return error_set(err, CLOVER_E_INTERNAL, "synth: vocabulary of %u cannot hold the special tokens at %u",
                         g->n_vocab, g->special_base);
    size_t cap = (size_t)g->n_vocab * 16 + 1024;
    v->n = g->n_vocab;
    v->tokens = mem_calloc(v->n, sizeof *v->tokens);
    v->types = mem_calloc(v->n, sizeof *v->types);
    v->chars = mem_alloc(cap);
    if (!v->tokens || !v->types || !v->chars) {
        synth_vocab_free(v);
        return error_set(err, CLOVER_E_NOMEM, "synth: out of memory for a vocabulary of %u", g->n_vocab);
    }
    uint32_t cps[256];
    byte_table(cps);
    size_t used = 0;
    for (uint32_t id = 0; id < v->n; id++) {
        char *s = v->chars + used;
        size_t len;
        if (id < 256) {
            len = utf8_put(s, cps[id]);
            v->types[id] = MODEL_TOKEN_NORMAL;
        } else if (id >= g->special_base && id < g->special_base + SYNTH_N_SPECIAL) {
            const char *text = specials[id - g->special_base].text;
            len = strlen(text);
            memcpy(s, text, len);
            v->types[id] = specials[id - g->special_base].user_defined ? MODEL_TOKEN_USER_DEFINED : MODEL_TOKEN_CONTROL;
        } else {
            len = (size_t)snprintf(s, 16, "[PAD%u]", id);
            v->types[id] = MODEL_TOKEN_UNUSED;
        }
        s[len] = '\0';
        v->tokens[id] = s;
        used += len + 1;
    }
    return CLOVER_OK;
}

void synth_vocab_free(synth_vocab *v) {
    mem_free((void *)v->tokens);
    mem_free(v->types);
    mem_free(v->chars);
    memset(v, 0, sizeof *v);
}
