/*
 * clover.h: the public interface of libclover, the inference engine for
 * block-diffusion (Clover) and plain autoregressive Qwen3.5-MoE models.
 *
 * Design: opaque handles, int status codes (0 = ok, negative = error) and a
 * caller-owned clover_error that receives a readable message naming the file,
 * tensor or field at fault. Nothing here aborts or exits on bad input.
 * This header is the only one the CLI, the server and users include.
 */
#ifndef CLOVER_H
#define CLOVER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CLOVER_BUILDING_LIBRARY) && defined(__GNUC__)
#define CLOVER_API __attribute__((visibility("default")))
#else
#define CLOVER_API
#endif

#define CLOVER_VERSION_STRING "0.1.0"

/* Status codes. Every failing call also fills a clover_error. */
enum clover_status {
    CLOVER_OK = 0,
    CLOVER_E_INVALID = -1,     /* a bad argument or option */
    CLOVER_E_IO = -2,          /* a file could not be opened, read or written */
    CLOVER_E_FORMAT = -3,      /* a file is malformed or truncated */
    CLOVER_E_UNSUPPORTED = -4, /* valid but not supported (a tensor type, an algorithm) */
    CLOVER_E_NOMEM = -5,       /* an allocation failed */
    CLOVER_E_CANCELLED = -6,   /* the caller cancelled */
    CLOVER_E_INTERNAL = -7,    /* a broken invariant: a bug in clover */
};

typedef struct clover_error {
    int code;           /* one of enum clover_status */
    char message[1024]; /* NUL-terminated, one line */
} clover_error;

CLOVER_API const char *clover_version(void);
CLOVER_API const char *clover_status_name(int code);

/* Diagnostics: a hook that receives the library's log lines (level 0 = error,
 * 1 = warning, 2 = info, 3 = debug). NULL restores the default (stderr,
 * warnings and errors only). */
typedef void (*clover_log_fn)(int level, const char *line, void *user);
CLOVER_API void clover_set_log(clover_log_fn fn, void *user, int max_level);

/* ---- models ----
 * A model is immutable after load and may be shared by sessions and threads.
 * Loading maps the GGUF file and checks everything before anything is used:
 * the qwen35moe hyper-parameters, the block-diffusion record (clover.* keys;
 * none means an autoregressive model), the tokenizer metadata and every
 * tensor of every layer (name, shape, type). A failure names the file and
 * the key or tensor at fault and what was expected. */
typedef struct clover_model clover_model;

CLOVER_API int clover_model_load(clover_model **out, const char *path, clover_error *err);
/* The same over a caller's buffer (an embedded model), which must outlive the
 * model; name is used in messages. */
CLOVER_API int clover_model_load_memory(clover_model **out, const void *buf, size_t len, const char *name,
                                        clover_error *err);
CLOVER_API void clover_model_free(clover_model *m);

/* The block-diffusion record (SPEC.md 1.2), as read from the clover.* keys. */
typedef struct clover_record {
    const char *algorithm;       /* "low_confidence" (the only one) */
    uint32_t block_size;         /* B >= 1 */
    float threshold;             /* in [0, 1] */
    uint32_t mask_token_id;      /* < vocabulary size */
    int coreset_enabled;         /* 0 or 1 */
    float coreset_top_p;         /* in (0, 1] */
    float presence_penalty;
    float frequency_penalty;
    float repetition_penalty;    /* > 0; 1 = none */
    float length_penalty;
    uint32_t length_penalty_start;
    uint32_t length_penalty_window;
    float think_end_bias;
    uint32_t think_end_start;
    uint32_t think_end_window;
    int32_t think_end_token_id;  /* -1: none */
    const uint32_t *stop_token_ids;
    size_t n_stop_token_ids;
} clover_record;

/* Bytes and parameters of the tensors of one type. */
typedef struct clover_type_stats {
    const char *type;   /* "f32", "q4_K", ... */
    size_t n_tensors;
    uint64_t n_params;
    uint64_t n_bytes;
} clover_type_stats;

#define CLOVER_MAX_TYPE_STATS 40

/* What `clover info` shows. Strings and pointers stay valid while the model lives. */
typedef struct clover_model_info {
    const char *source;          /* the path, or the name given to clover_model_load_memory */
    const char *architecture;    /* general.architecture: "qwen35moe" */
    const char *name;            /* general.name, or NULL */
    uint64_t file_bytes;

    /* geometry */
    uint32_t n_layer, n_embd, n_vocab, n_ctx_train;
    float rms_eps;
    uint32_t n_head, n_head_kv, head_dim, n_rot;
    float rope_freq_base;
    uint32_t gdn_key_heads, gdn_value_heads, gdn_key_dim, gdn_value_dim, gdn_conv_kernel;
    uint32_t n_expert, n_expert_used, expert_ff, shared_expert_ff;
    uint32_t full_attention_interval; /* 0 when the file lists the recurrent layers */
    const char *layer_kinds;     /* one char per layer: 'G' Gated DeltaNet, 'A' full attention */

    const clover_record *record; /* NULL: an autoregressive model */

    /* tensors (all of the file's, bound or not) */
    size_t n_tensors;
    uint64_t n_params, n_bytes;
    size_t n_types;
    clover_type_stats types[CLOVER_MAX_TYPE_STATS]; /* in order of type code */

    /* tokenizer (model NULL when the file has none) */
    const char *tokenizer_model, *tokenizer_pre;
    uint64_t n_tokens, n_merges;
    int32_t bos_id, eos_id, eot_id, pad_id; /* -1: none */
    int add_bos;
} clover_model_info;

CLOVER_API void clover_model_get_info(const clover_model *m, clover_model_info *out);

/* ---- synthetic models ----
 * A deterministic GGUF (same options: byte-identical file) with random
 * weights in realistic ranges, a byte-level tokenizer and, unless
 * no_diffusion, the Clover record and tensors. Written by streaming: memory
 * stays small at any size. */
typedef struct clover_synth_options {
    const char *preset;   /* "tiny" (NULL: tiny) or "qwen3.5-35b-a3b" */
    const char *type;     /* "f32", "f16", "bf16", "q8_0", "q4_k_m"; NULL: the preset's (f32 / q4_k_m) */
    uint64_t seed;
    int no_diffusion;     /* nonzero: no record, no Clover tensors (autoregressive) */
    int sparse;           /* nonzero: header and tables only, then the file is extended to
                             its full size with zeros that take no disk blocks (ftruncate);
                             zeros are valid blocks of every type */
    /* geometry overrides, 0: the preset's */
    uint32_t n_layer, n_embd, n_expert, n_ff_exp;
    uint32_t n_threads;   /* threads generating and quantising; 0: one per CPU (the bytes do not depend on it) */
} clover_synth_options;

CLOVER_API int clover_synth(const char *path, const clover_synth_options *opts, clover_error *err);

#ifdef __cplusplus
}
#endif
#endif /* CLOVER_H */
