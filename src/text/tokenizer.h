/*
 * tokenizer.h: byte-level BPE text <-> token ids, the tokenizer the engine,
 * the CLI and the server share.
 *
 * One immutable `tokenizer` is loaded per model (from a Hugging Face
 * tokenizer.json or from a GGUF's tokenizer.ggml.* metadata) and may be used
 * from many threads at once. Everything that changes while encoding (regex
 * match state, scratch buffers, the cache of already-merged words) lives in
 * a `tokenizer_encoder`, one per thread; `tokenizer_encode` makes a
 * temporary one for a single call.
 *
 * The pipeline mirrors Hugging Face `tokenizers` (tests check id-for-id
 * parity against it): added tokens matched whole first (longest match at
 * the leftmost position; special ones only when allowed), then on the text
 * between them the normalizer (NFC), the Split pre-tokenizer regex
 * (PCRE2, Oniguruma's meaning of \s), the GPT-2 byte mapping and BPE
 * merges by rank.
 *
 * Input that is not valid UTF-8 never fails: every maximal run of bytes
 * that is not valid UTF-8 is treated as a word of its own (it bounds the
 * normalizer and the regex like an added token does) and encoded by BPE
 * from its byte tokens, so decoding gives the exact bytes back.
 *
 * Decoding returns bytes (a sequence of ids may end inside a UTF-8
 * character). The stream decoder returns only whole UTF-8 characters: it
 * holds an incomplete but still valid prefix (at most 3 bytes) until it
 * completes; bytes that can never complete become U+FFFD at once, one per
 * maximal invalid subpart (the Unicode "substitution of maximal subparts",
 * as Python's errors='replace' and Rust's from_utf8_lossy do), and a prefix
 * still held at flush becomes one U+FFFD.
 */
#ifndef CLOVER_TEXT_TOKENIZER_H
#define CLOVER_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"
#include "gguf/gguf.h"

typedef struct tokenizer tokenizer;
typedef struct tokenizer_encoder tokenizer_encoder;

enum { TOKENIZER_MAX_EOS = 8 };

/* Ids the engine needs by role; -1 where the vocabulary has none. */
typedef struct tokenizer_specials {
    int32_t bos, eos, pad, unk;         /* from the file (GGUF keys; tokenizer_config.json beside a tokenizer.json) */
    int32_t im_start, im_end;           /* <|im_start|>, <|im_end|> */
    int32_t endoftext;                  /* <|endoftext|> */
    int32_t think, think_end;           /* <think>, </think> */
    int32_t mask;                       /* <|mask|>, <mask> or [MASK]; a model's own record overrides it */
    bool add_bos;                       /* the file asks for BOS before a prompt */
    int32_t eos_ids[TOKENIZER_MAX_EOS]; /* every id that ends generation: eos, eot, im_end, endoftext */
    size_t n_eos;
} tokenizer_specials;

/* What an id is. */
typedef enum tokenizer_kind {
    TOKENIZER_KIND_NONE = 0,    /* no token (a hole in the id range, or an unused GGUF token) */
    TOKENIZER_KIND_NORMAL = 1,  /* a BPE vocabulary token */
    TOKENIZER_KIND_SPECIAL = 2, /* an added special (control) token: matched only when allowed, skippable */
    TOKENIZER_KIND_ADDED = 3,   /* an added non-special token: always matched whole, never skipped */
} tokenizer_kind;

/* A growable id array the encoder appends to (so segments can be joined). */
typedef struct token_ids {
    int32_t *v;
    size_t n, cap;
} token_ids;

/* A growable byte buffer the decoders append to; v[n] is always '\0' once
 * anything was appended. */
typedef struct text_bytes {
    char *v;
    size_t n, cap;
} text_bytes;

void token_ids_free(token_ids *ids);
int token_ids_push(token_ids *ids, int32_t id, clover_error *err);
void text_bytes_free(text_bytes *b);
int text_bytes_append(text_bytes *b, const void *data, size_t n, clover_error *err);

/* ---- loading ---- */

/* A Hugging Face tokenizer.json (BPE model, byte-level). If a
 * tokenizer_config.json sits beside it, its eos/bos/pad tokens and
 * add_bos_token are read too. Unsupported features (another model type,
 * byte fallback, a normalizer other than NF[K]C/NF[K]D, a Split behaviour
 * other than Isolated, ...) fail with CLOVER_E_UNSUPPORTED naming the field. */
int tokenizer_load_json(tokenizer **out, const char *path, clover_error *err);
/* The same from a buffer (name is used in messages); no config file is read. */
int tokenizer_load_json_memory(tokenizer **out, const char *json, size_t len, const char *name, clover_error *err);
/* A GGUF's tokenizer.ggml.* metadata: model "gpt2", pre "qwen35" or "qwen2"
 * (mapped to their Split patterns; NFC as the Hugging Face files do),
 * tokens, token_type (CONTROL = special, USER_DEFINED = added, UNUSED =
 * no token), merges ("a b"), bos/eos/eot/padding ids, add_bos_token. */
int tokenizer_load_gguf(tokenizer **out, const gguf_file *f, clover_error *err);
void tokenizer_free(tokenizer *t);

/* ---- lookup ---- */

/* Ids are 0 .. tokenizer_n_tokens()-1 (some may be TOKENIZER_KIND_NONE). */
int32_t tokenizer_n_tokens(const tokenizer *t);
const tokenizer_specials *tokenizer_get_specials(const tokenizer *t);
tokenizer_kind tokenizer_token_kind(const tokenizer *t, int32_t id);
/* The bytes an id decodes to (an added token's content as written); NULL
 * for an id out of range, *len = 0 for KIND_NONE. Not NUL-terminated. */
const char *tokenizer_token_bytes(const tokenizer *t, int32_t id, size_t *len);
/* The id of the token that decodes to exactly these bytes (added tokens
 * first, then the BPE vocabulary), or -1. */
int32_t tokenizer_find(const tokenizer *t, const char *text, size_t len);

/* ---- encoding ---- */

enum {
    TOKENIZER_ALLOW_SPECIAL = 1u, /* match special tokens written in the text (else they are plain text) */
};

/* Appends the ids of text[0..len) to out. Fails only on allocation or a
 * regex engine limit (CLOVER_E_NOMEM / CLOVER_E_INTERNAL); out keeps what
 * was appended before the call. */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, unsigned flags, token_ids *out,
                     clover_error *err);

/* A reusable encoder (one per thread): keeps its buffers and a cache of
 * merged words across calls. */
int tokenizer_encoder_create(tokenizer_encoder **out, const tokenizer *t, clover_error *err);
int tokenizer_encoder_run(tokenizer_encoder *e, const char *text, size_t len, unsigned flags, token_ids *out,
                          clover_error *err);
void tokenizer_encoder_free(tokenizer_encoder *e);

/* ---- decoding ---- */

enum {
    TOKENIZER_SKIP_SPECIAL = 1u,    /* leave out KIND_SPECIAL tokens */
    TOKENIZER_REPLACE_INVALID = 2u, /* tokenizer_decode: invalid UTF-8 becomes U+FFFD (maximal subparts) */
};

/* Appends the bytes of ids[0..n) to out. An id outside 0..n_tokens-1 is
 * CLOVER_E_INVALID (naming its position); KIND_NONE ids add nothing. */
int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, text_bytes *out,
                     clover_error *err);

/* The streaming decoder: push ids one by one, get whole UTF-8 characters. */
typedef struct tokenizer_stream {
    const tokenizer *tok;
    unsigned flags;     /* TOKENIZER_SKIP_SPECIAL */
    uint8_t pending[4]; /* a valid but incomplete UTF-8 prefix */
    uint8_t n_pending;
} tokenizer_stream;

void tokenizer_stream_init(tokenizer_stream *s, const tokenizer *t, unsigned flags);
/* Appends to out the text that id completes. A bad id is CLOVER_E_INVALID
 * and leaves the stream unchanged. */
int tokenizer_stream_push(tokenizer_stream *s, int32_t id, text_bytes *out, clover_error *err);
/* Appends U+FFFD if an incomplete character is held, and resets. */
int tokenizer_stream_flush(tokenizer_stream *s, text_bytes *out, clover_error *err);

#endif
