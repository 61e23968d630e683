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
    CLOVER_E_DEVICE = -8,      /* the device (GPU) failed; the engine moves the session to the CPU */
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

/* Block diffusion's decoding rule (clover_generate_params.rule, and the
 * record's clover.decode_rule: clover's own key beside SPEC.md 1.2's). */
typedef enum clover_rule {
    CLOVER_RULE_DEFAULT = 0,   /* the model's record (clover.decode_rule; absent: threshold) */
    CLOVER_RULE_THRESHOLD = 1, /* every pending row above the threshold, else the most confident one */
    CLOVER_RULE_CAUSAL = 2,    /* causal fallback: the run of confident rows that starts at the first
                                  pending row, else that row's causal (autoregressive) pick, one step */
} clover_rule;

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
    clover_rule decode_rule;     /* CLOVER_RULE_THRESHOLD or CLOVER_RULE_CAUSAL (clover.decode_rule) */
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
    const char *preset;   /* "tiny" (NULL: tiny), "qwen3.5-35b-a3b", "qwen3.5-122b-a10b", "qwen3.5-397b-a17b" */
    const char *type;     /* "f32", "f16", "bf16", "q8_0", "q4_k_m"; NULL: the preset's (f32 / q4_k_m) */
    uint64_t seed;
    int no_diffusion;     /* nonzero: no record, no Clover tensors (autoregressive) */
    int sparse;           /* nonzero: header and tables only, then the file is extended to
                             its full size with zeros that take no disk blocks (ftruncate);
                             zeros are valid blocks of every type */
    /* geometry overrides, 0: the preset's */
    uint32_t n_layer, n_embd, n_expert, n_ff_exp;
    uint32_t n_threads;   /* threads generating and quantising; 0: one per CPU (the bytes do not depend on it) */
    /* Skewed routing, as trained models show (0: none): in each MoE layer the
     * router row of the expert of rank r (a random order per layer, from the
     * seed) is scaled by 1 + route_skew / (1 + r), so a few experts win the
     * top-k far more often than the rest; 0..64. */
    float route_skew;
} clover_synth_options;

CLOVER_API int clover_synth(const char *path, const clover_synth_options *opts, clover_error *err);

/* The parameters of the model clover_synth would write for opts, without
 * writing it: every element of its tensors, the routed experts' share, and
 * those one token reads (all but the routed experts, plus n_expert_used of
 * n_expert of those). */
typedef struct clover_synth_params {
    uint64_t total, experts, active;
    size_t n_tensors;
} clover_synth_params;
CLOVER_API int clover_synth_count(const clover_synth_options *opts, clover_synth_params *out, clover_error *err);

/* ---- device check (clover check) ----
 * Commits the same ids on a device backend and on a plain CPU backend (the
 * reference: CLOVER_SIM_RANKS does not apply to it) and compares them after
 * every commit call: the prompt in calls of at most 64 rows, then n_blocks
 * blocks (the record's block size; 8 without a record) of ids drawn from
 * seed. Errors are normalised, ||device - cpu|| / ||cpu||, the largest over
 * the commit calls: per layer the residual stream after it (every row) and
 * its state (KV rows, or the conv ring and S), and every row's logits. */
typedef struct clover_check_params {
    int device;             /* CLOVER_DEVICE_CPU or CLOVER_DEVICE_CUDA */
    const int32_t *prompt;  /* [n_prompt], n_prompt >= 1 */
    size_t n_prompt;
    size_t n_blocks;
    uint64_t seed;
    size_t device_rows;     /* rows per pass on the device (0: 64; 1: every row alone) */
    size_t n_threads;       /* CPU threads (0: every CPU) */
    uint64_t gpu_mem;       /* CUDA: --gpu-mem's budget in bytes, the device's routed experts through its cache
                               (0: off; clover_session_params.gpu_mem) */
} clover_check_params;

typedef struct clover_check_result {
    const char *device;     /* the device backend's name */
    size_t n_layer, n_commits, n_rows;
    double *hidden_err;     /* [n_layer] */
    double *state_err;      /* [n_layer] */
    int *layer_kind;        /* [n_layer] 0: Gated DeltaNet, 1: full attention */
    double logits_err;
    double logits_max_abs;  /* the largest |device - cpu| of a logit */
    size_t argmax_equal;    /* rows whose largest logit is the same id on both */
} clover_check_result;

CLOVER_API int clover_device_check(const clover_model *m, const clover_check_params *p, clover_check_result *r,
                                   clover_error *err);
CLOVER_API void clover_check_result_free(clover_check_result *r);

/* ---- sessions ----
 * A session is one sequence over a model: the committed token ids and the
 * backend's state for them (KV rows, GDN conv rings and states). A request
 * whose prompt extends the session's committed ids, or the ids of its prompt
 * snapshot (below), commits only the tail (prefix reuse); any other prompt
 * starts the sequence afresh. A session is used by one thread at a time;
 * several sessions may share a model. */
typedef struct clover_session clover_session;

typedef struct clover_session_params {
    size_t n_threads;   /* backend threads; 0: every online CPU */
    size_t max_rows;    /* rows per pass (prompt chunk, largest block); 0: 512 on the CPU, 64 on a device; raised to the block size */
    size_t max_context; /* committed tokens at most; 0: the model's training context */
    /* Prompt snapshot: after a request commits its prompt the session keeps a
     * host copy of its state at one point of that prompt (the request's
     * snapshot_at), so that a later prompt which extends the ids up to there
     * but not the ids committed since (a chat re-rendered with the answer in
     * its final form) reuses them. Cost: the backend state for those ids,
     * for Qwen3.5-35B-A3B ~63 MiB of GDN state plus 40 KiB per token; one
     * memcpy per request, no pass. */
    int no_snapshot;           /* non-zero: keep none */
    size_t snapshot_max_bytes; /* a larger state is not kept; 0: 1 GiB */
    /* Where the session runs (clover_device): CPU and CUDA both run
     * everything (commits, scoring, autoregressive decoding, block
     * diffusion); CUDA fails to create with the reason (no device, a type
     * the kernels do not take, no room); AUTO (0, the default) takes CUDA
     * when it can, else the CPU (clover_device_report describes the
     * devices). */
    int device;
    /* Partial offload (--gpu-layers N, docs/OFFLOAD.md): the first N layers
     * on the device, the rest and the head on the CPU, in one pass. 0: off.
     * Needs device CUDA; refused with the reason while the CUDA backend has
     * no layer range (the split itself is tested CPU + CPU). */
    uint32_t gpu_layers;
    /* A GPU smaller than the model (--gpu-mem N, docs/OFFLOAD.md): the
     * device bytes the CUDA backend may take for the weights, the routed
     * experts' cache and the sessions; the dense weights, KV and states stay
     * on the device, the routed experts page through a pool of slots from
     * pinned host memory. 0: off (every weight on the device). Needs device
     * CUDA (asked for, not auto); refused with the reason when the dense
     * part does not fit or nothing is left for one layer's experts; not
     * with gpu_layers. */
    uint64_t gpu_mem;
} clover_session_params;

typedef enum clover_device { CLOVER_DEVICE_AUTO = 0, CLOVER_DEVICE_CPU = 1, CLOVER_DEVICE_CUDA = 2 } clover_device;
/* "auto", "cpu", "cuda" -> clover_device; -1 for any other name. */
CLOVER_API int clover_device_from_name(const char *name);
/* --devices LIST ("0,1"): a device group for expert parallelism over NCCL
 * (docs/MULTI_GPU.md). Checks the list against this host's CUDA devices and
 * that NCCL loads; a one-line error for a bad list, a missing device, a
 * missing libnccl.so.2, and (for now) always, as the CUDA backend has no
 * expert-parallel executor yet. */
CLOVER_API int clover_devices_check(const char *spec, clover_error *err);
/* The backend a session runs on: "cpu" or "cuda". */
CLOVER_API const char *clover_session_backend(const clover_session *s);
/* A few lines about the devices for `clover info --device`: whether the
 * CUDA backend is built in, each device with its memory, and (model
 * non-NULL) what the model needs on it: weights, KV per token, state per
 * session, and whether it fits. Writes at most n bytes (NUL-terminated);
 * returns the length of the whole text. */
CLOVER_API size_t clover_device_report(const clover_model *model, size_t max_context, char *buf, size_t n);

CLOVER_API void clover_session_params_init(clover_session_params *p);
/* params may be NULL (the defaults). The model must outlive the session. */
CLOVER_API int clover_session_create(clover_session **out, const clover_model *model,
                                     const clover_session_params *params, clover_error *err);
CLOVER_API void clover_session_free(clover_session *s);
/* Forgets the committed sequence (the next request commits its whole prompt). */
CLOVER_API void clover_session_reset(clover_session *s);
/* The committed ids: the prompt plus every committed block (diffusion) or
 * every emitted token but the last (autoregressive) of the last request, or
 * the scored text. The pointer is valid until the next call on the session. */
CLOVER_API size_t clover_session_length(const clover_session *s);
CLOVER_API const int32_t *clover_session_ids(const clover_session *s);
/* The prompt snapshot's ids (0 and NULL when the session keeps none). */
CLOVER_API size_t clover_session_snapshot_length(const clover_session *s);
CLOVER_API const int32_t *clover_session_snapshot_ids(const clover_session *s);
/* The prompt tokens a request on this session would reuse: the longer of
 * the committed ids and the snapshot's ids that is a whole prefix of
 * prompt[0..n) (0: none). What a server compares to pick a session. */
CLOVER_API size_t clover_session_match(const clover_session *s, const int32_t *prompt, size_t n);

/* ---- generation ---- */
typedef enum clover_mode {
    CLOVER_MODE_AUTO = 0,           /* block diffusion when the model has the record, else autoregressive */
    CLOVER_MODE_DIFFUSION = 1,      /* block diffusion (SPEC.md 3); an error on a model without the record */
    CLOVER_MODE_AUTOREGRESSIVE = 2, /* ordinary next-token decoding, on any model */
} clover_mode;

typedef enum clover_finish {
    CLOVER_FINISH_STOP = 0,      /* a stop id was generated (it is the last of the ids) */
    CLOVER_FINISH_LENGTH = 1,    /* max_tokens reached */
    CLOVER_FINISH_CANCELLED = 2, /* the cancel flag or the token callback stopped it */
} clover_finish;

CLOVER_API const char *clover_finish_name(int finish); /* "stop", "length", "cancelled" */

/* The response penalties of SPEC.md 3.1 (block diffusion only). */
typedef struct clover_penalties {
    float presence_penalty, frequency_penalty;
    float repetition_penalty; /* > 0; 1 = none */
    float length_penalty;     /* added to the stop ids, ramped over response positions */
    uint32_t length_penalty_start, length_penalty_window;
    float think_end_bias;     /* added to the record's think_end_token_id while </think> is open */
    uint32_t think_end_start, think_end_window;
} clover_penalties;

/* The record's penalties, or none at all (repetition 1, the rest 0) when
 * record is NULL. */
CLOVER_API void clover_penalties_from_record(const clover_record *record, clover_penalties *out);

/* Called for every emitted token but a stop id, in order; non-zero cancels
 * the request (the token stays in the result, finish "cancelled"). */
typedef int (*clover_token_fn)(void *user, int32_t id, float confidence);

/* Log-probabilities of the emitted tokens (clover_generate_params.logprobs):
 * each token's log-probability under the distribution it was picked from,
 * and the most probable alternatives there. That distribution is the T = 1
 * softmax of the row's logits after the forbidden ids (the mask id, the
 * suppressed ids) and, in block diffusion, the record's penalties: before
 * temperature, top-k and top-p, so a sampled token's log-probability is
 * log(confidence) of the same pick. The row is: autoregressive, the causal
 * row before the token; block diffusion, the token's row in the denoising
 * pass that fixed it; lossless, the verifying commit's causal row. The log
 * is float64 log-softmax rounded once to float32. Alternatives: the N most
 * probable ids, probability descending, ties to the lower id (fewer
 * finite ids than N: id -1, log-probability -inf). */
#define CLOVER_MAX_TOP_LOGPROBS 20

/* One emitted token as the streaming callback on_token_info sees it. The
 * arrays are the engine's, valid only during the call. */
typedef struct clover_token_info {
    size_t index;             /* 0-based position in the answer (result ids[index]) */
    int32_t id;
    float confidence;         /* as on_token's */
    float logprob;            /* params.logprobs set: the token's log-probability; else 0 */
    size_t n_top;             /* params.top_logprobs (0 when logprobs are off) */
    const int32_t *top_ids;   /* [n_top] the alternatives (NULL when n_top is 0) */
    const float *top_logprobs;/* [n_top] their log-probabilities */
} clover_token_info;

/* Called like on_token (for every emitted token but a stop id, in order,
 * after on_token when both are set); non-zero cancels the request. */
typedef int (*clover_token_info_fn)(void *user, const clover_token_info *info);

/* What one denoising pass left in the block being resolved (block diffusion
 * only), for a live display. The arrays are the engine's and valid only
 * during the call. */
typedef struct clover_pass_view {
    size_t block_index;       /* 0-based, within the request */
    size_t pass;              /* passes run on this block: 0 (all rows masked, before the first preview), 1, 2, ... */
    size_t block_size;        /* rows */
    size_t position;          /* absolute position of row 0 (the session's committed length) */
    size_t emitted;           /* tokens emitted by the request before this block */
    const int32_t *ids;       /* [block_size] the fixed ids; the mask id on rows still masked */
    const uint8_t *fixed;     /* [block_size] 1: the row is fixed */
    const int32_t *guesses;   /* [block_size] fixed rows: their id; masked rows: this pass's pick (the mask id at pass 0) */
    const float *confidences; /* [block_size] the T = 1 probability of each row's guess (0 at pass 0) */
    size_t n_fixed;           /* rows fixed so far */
    size_t n_fixed_now;       /* of those, fixed by this pass */
} clover_pass_view;

/* Called at the start of every block and after every denoising pass;
 * non-zero cancels the request (finish "cancelled"). */
typedef int (*clover_pass_fn)(void *user, const clover_pass_view *view);

typedef struct clover_generate_params {
    clover_mode mode;
    size_t max_tokens;  /* tokens to generate at most (default 256); 0 commits the prompt only */
    float temperature;  /* < 1e-6: greedy (default 0) */
    int32_t top_k;      /* sampling: keep the logits >= the k-th (ties stay); 0: off */
    float top_p;        /* sampling: nucleus mass in (0, 1); >= 1: off */
    uint64_t seed;      /* the SplitMix64 stream of the sampler (default 0) */
    int ignore_eos;     /* non-zero: stop ids do not end the answer */
    /* block diffusion overrides (validated: a clear CLOVER_E_INVALID otherwise) */
    float threshold;                   /* negative (default): the record's; else in [0, 1] */
    uint32_t block_size;               /* 0 (default): the record's; else a divisor of it */
    const clover_penalties *penalties; /* NULL (default): the record's */
    /* extra ids that end the answer (besides the record's stop ids and the EOS ids) */
    const int32_t *stop_ids;
    size_t n_stop_ids;
    /* ids never generated (forbidden like the mask id) */
    const int32_t *suppress_ids;
    size_t n_suppress_ids;
    clover_token_fn on_token; /* may be NULL */
    clover_pass_fn on_pass;   /* block diffusion: a live view of each pass; may be NULL (then it costs nothing) */
    void *user;               /* passed to on_token and on_pass */
    int skip_special;         /* the result's text leaves out control tokens (not user-defined ones like <think>) */
    /* Checked before every pass (each prompt chunk, each denoising pass, each
     * decoding step); set *cancel to non-zero from any thread (an int store)
     * to stop the request with finish "cancelled". May be NULL. */
    const volatile int *cancel;
    /* Parity probe: write the prompt ids and every row's top-10 raw logits of
     * the request's first pass as JSON to this path (NULL: none). */
    const char *dump_first_preview;
    /* Prompt snapshot (clover_session_params): where in the prompt to take
     * it: 0 (default) at its end, else after min(snapshot_at, n_prompt)
     * tokens (a chat: where the generation prompt starts, which the next
     * turn renders differently). It is taken only when the commit passes
     * that point; a request that reuses more keeps the earlier snapshot. */
    size_t snapshot_at;
    int no_snapshot; /* non-zero: take none for this request (the session's stays) */
    /* Lossless block diffusion (a Clover model, mode auto or diffusion):
     * previews draft each block (with the threshold and penalties above,
     * their own draws), one verifying commit picks every row causally and
     * keeps the drafted prefix the trunk agrees with plus its own token at
     * the first disagreement. The answer is autoregressive decoding's with
     * the same sampling options and seed, and so is what stays committed. */
    int lossless;
    /* Log-probabilities (see clover_token_info above; OpenAI's logprobs and
     * top_logprobs): non-zero logprobs fills the result's logprobs, and
     * top_logprobs = N (0..CLOVER_MAX_TOP_LOGPROBS; N > 0 turns logprobs on)
     * its N alternatives per token. The tokens are the same either way. */
    int logprobs;
    size_t top_logprobs;
    clover_token_info_fn on_token_info; /* may be NULL; user is passed to it */
    /* Structured output: NULL (default) free text; else a JSON schema (text)
     * the answer must satisfy: one JSON document, then a stop id. Every mode
     * honours it (block diffusion resolves each block left to right under
     * it; picks run on the host). {"type": "object"} asks for any JSON
     * object. A construct the compiler cannot honour is CLOVER_E_INVALID
     * naming it (clover_json_schema_check says so beforehand). */
    const char *json_schema;
    /* Block diffusion's decoding rule: CLOVER_RULE_DEFAULT (the record's),
     * CLOVER_RULE_THRESHOLD or CLOVER_RULE_CAUSAL (other values:
     * CLOVER_E_INVALID). Autoregressive decoding ignores it, like threshold.
     * CLOVER_RULE_CAUSAL is CLOVER_E_INVALID with lossless (whose drafts
     * keep the threshold rule) or a json_schema; a record's causal rule
     * gives way to the threshold rule there. */
    clover_rule rule;
} clover_generate_params;

CLOVER_API void clover_generate_params_init(clover_generate_params *p);

/* Whether clover_generate_params.json_schema can be honoured: CLOVER_OK, or
 * CLOVER_E_INVALID with a message naming the construct and where it is. */
CLOVER_API int clover_json_schema_check(const char *schema, clover_error *err);

/* Seconds by operator family, summed over passes; and --gpu-mem's expert
 * cache over those passes (0 without it): expert uses (one per MoE layer
 * step and routed expert) found on the device, copied there first, or
 * computed by the CPU instead (CLOVER_GPU_MEM_CPU). */
typedef struct clover_op_seconds {
    double gdn_s, attn_s, moe_s, head_s;
    uint64_t expert_hits, expert_misses;
    uint64_t expert_copy_bytes; /* host to device */
    double expert_copy_s;       /* the device time of those copies */
    uint64_t expert_host;       /* uses computed by the CPU, in neither count above */
    double expert_host_s;       /* the CPU's wall time in them */
} clover_op_seconds;

typedef struct clover_generate_stats {
    size_t prompt_tokens;    /* the request's prompt */
    size_t reused_tokens;    /* of those, already committed in the session or in its prompt snapshot (prefix reuse) */
    size_t snapshot_reused;  /* of reused_tokens, restored from the prompt snapshot (0: the committed ids) */
    double snapshot_s;       /* restoring and taking the prompt snapshot (inside prompt_s) */
    size_t passes;           /* denoising passes (autoregressive: decoding forward passes) */
    size_t blocks;           /* blocks resolved (autoregressive: 0) */
    double prompt_s;         /* committing the prompt's tail */
    double preview_s;        /* the denoising passes (autoregressive: 0) */
    double pick_s;           /* forbidding, penalties and token choice */
    double commit_s;         /* committing resolved blocks (autoregressive: the decoding passes) */
    double total_s;          /* the whole request */
    clover_op_seconds preview_ops; /* inside the denoising passes */
    clover_op_seconds commit_ops;  /* inside the prompt and block / token commits */
    uint64_t coreset_kept;   /* experts kept by the coreset, summed over passes and MoE layers */
    uint64_t coreset_layers; /* MoE layers counted over passes */
    double coreset_mean;     /* coreset_kept / coreset_layers (0 without the coreset) */
    double prompt_tok_s;     /* (prompt_tokens - reused_tokens) / prompt_s */
    double gen_tok_s;        /* generated tokens / (total_s - prompt_s) */
    double denoise_tok_s;    /* generated tokens / (preview_s + pick_s + commit_s) */
    /* lossless mode */
    size_t accepted_drafts;  /* drafted tokens the verifying commits accepted */
    size_t recommits;        /* blocks restored to their start and committed again (a rejected tail) */
    /* the causal-fallback rule: rows fixed by the trunk's causal pick (one autoregressive step each;
     * passes counts the previews only) */
    size_t causal_steps;
} clover_generate_stats;

typedef struct clover_generate_result {
    int32_t *ids;            /* [n_generated]: a final stop id included */
    char *text;              /* the emitted ids decoded, the final stop id left out (NUL-terminated UTF-8,
                                invalid bytes as U+FFFD); NULL when the model has no tokenizer */
    size_t text_len;         /* bytes of text, without the terminator */
    float *confidences;      /* [n_generated]: the T = 1 probability of each pick */
    size_t n_generated;
    size_t n_prompt;
    clover_finish finish;
    clover_mode mode;        /* the mode that ran (never AUTO) */
    uint32_t *passes_per_block; /* [n_blocks] (block diffusion) */
    size_t n_blocks;
    int lossless;                 /* the request ran in lossless mode */
    uint32_t *accepted_per_block; /* [n_blocks] lossless: tokens the block emitted (its known first row
                                     and the accepted drafts) */
    uint32_t *commits_per_block;  /* [n_blocks] lossless: 1 (the verify) or 2 (and the recommit) */
    /* params.logprobs (or top_logprobs) set, else NULL and 0: */
    float *logprobs;         /* [n_generated] each token's log-probability (a final stop id included) */
    size_t n_top_logprobs;   /* N = params.top_logprobs */
    int32_t *top_ids;        /* [n_generated][N] the alternatives (NULL when N is 0) */
    float *top_logprobs;     /* [n_generated][N] their log-probabilities */
    size_t committed_after;  /* the session's committed length afterwards */
    clover_generate_stats stats;
} clover_generate_result;

/* Generates from prompt[0..n_prompt) (token ids < the vocabulary size).
 * params may be NULL (the defaults). On success out owns its arrays (free
 * with clover_generate_result_free); a cancelled request is a success with
 * finish CLOVER_FINISH_CANCELLED. A cancelled or failed request leaves the
 * session empty (nothing to reuse). */
CLOVER_API int clover_generate(clover_session *s, const int32_t *prompt, size_t n_prompt,
                               const clover_generate_params *params, clover_generate_result *out,
                               clover_error *err);
CLOVER_API void clover_generate_result_free(clover_generate_result *r);

/* ---- many requests at once (continuous batching) ----
 * An engine is one backend object for a model: the weights prepared once,
 * one pool of threads and one set of pass scratch, shared by every session
 * made on it (a session made by clover_session_create has an engine of its
 * own). A request is one generation as a resumable state machine (prompt
 * chunk -> preview -> pick -> commit -> done); clover_batch_step advances
 * every given request by one pass, the backend operations of all of them in
 * one call per kind (commit, preview) and engine, then each request takes
 * its results (streaming callbacks run inside the step). A long prompt is
 * committed a chunk (max_rows) per step, between the other requests' passes.
 * Each request's results are bit-for-bit those of clover_generate alone;
 * a request that fails fails alone. An engine and its sessions are used by
 * one thread at a time. */
typedef struct clover_engine clover_engine;
typedef struct clover_request clover_request;

/* params: n_threads, max_rows and max_context are the engine's (every
 * session on it shares them), device picks its backend as sessions pick
 * theirs (CUDA asked for and not usable here: CLOVER_E_UNSUPPORTED naming
 * CUDA); may be NULL (auto). gpu_layers is refused (CLOVER_E_UNSUPPORTED); gpu_mem is
 * taken as by sessions (every session of the engine shares the budget). */
CLOVER_API int clover_engine_create(clover_engine **out, const clover_model *model,
                                    const clover_session_params *params, clover_error *err);
/* The backend the engine runs on ("cpu", "cuda"), and one line saying why
 * ("asked for", "auto: no CUDA device found (...)"); for logs and /metrics. */
CLOVER_API const char *clover_engine_backend(const clover_engine *e);
CLOVER_API const char *clover_engine_device_reason(const clover_engine *e);
/* After every session made on it is freed. */
CLOVER_API void clover_engine_free(clover_engine *e);
/* A session on the engine; params (may be NULL) give its snapshot options. */
CLOVER_API int clover_engine_session_create(clover_session **out, clover_engine *e,
                                            const clover_session_params *params, clover_error *err);

/* Validates a request as clover_generate would (the same errors) and makes
 * it ready to step; nothing runs yet. The prompt is copied; params is
 * copied, but the arrays and callbacks it points to must stay valid until
 * the request is freed. A session carries one request at a time. */
CLOVER_API int clover_request_create(clover_request **out, clover_session *s, const int32_t *prompt, size_t n_prompt,
                                     const clover_generate_params *params, clover_error *err);
/* One pass of one request (a batch of one). Returns the request's status. */
CLOVER_API int clover_request_step(clover_request *rq);
/* One pass of each request not yet done (a block-diffusion block on a
 * backend that resolves whole blocks, as the CPU backend does: all its
 * passes in one backend call, the live view replayed after it). Returns
 * how many are still running (0: all done), or CLOVER_E_INVALID for a bad
 * argument. */
CLOVER_API int clover_batch_step(clover_request *const *rqs, size_t n);
/* What one clover_batch_step_ex did: how full its backend calls were and
 * where its time went (a server's /metrics: sequences per pass). */
typedef struct clover_step_stats {
    size_t sequences;        /* requests that ran a backend operation in the step */
    size_t rows;             /* token rows of those operations (prompt chunk and decode rows, preview blocks) */
    size_t backend_calls;    /* backend calls (one per kind and engine) */
    uint64_t backend_passes; /* model passes the backend ran for them: 1 when every sequence shared one pass */
    double backend_s;        /* seconds inside the backend calls */
    double step_s;           /* seconds of the whole step: the calls plus planning, absorbing and the callbacks */
} clover_step_stats;
/* clover_batch_step, and what it did in *st (may be NULL). */
CLOVER_API int clover_batch_step_ex(clover_request *const *rqs, size_t n, clover_step_stats *st);
CLOVER_API int clover_request_done(const clover_request *rq);
/* A done request's outcome: its status (0, or the error clover_generate
 * would have returned, with its message in err) and, on success, its
 * result (out owns it: clover_generate_result_free). */
CLOVER_API int clover_request_result(clover_request *rq, clover_generate_result *out, clover_error *err);
/* Frees the request; one not done is cancelled first (the session is then
 * left empty, as after a cancelled clover_generate). */
CLOVER_API void clover_request_free(clover_request *rq);

/* ---- scoring (SPEC.md 5) ----
 * Teacher-forced negative log-likelihood of ids[0..n) on the commit path:
 * row r scores token r+1 (n >= 2). The session starts afresh and ends with
 * ids committed. */
typedef struct clover_score_result {
    double mean_nll;   /* nats per scored token */
    double perplexity; /* exp(mean_nll) */
    size_t n_scored;   /* n - 1 */
    double seconds;
} clover_score_result;

CLOVER_API int clover_score(clover_session *s, const int32_t *ids, size_t n, clover_score_result *out,
                            clover_error *err);
/* The same with every token's NLL: nll[0..n-1) (nll[r] scores ids[r+1]). */
CLOVER_API int clover_score_tokens(clover_session *s, const int32_t *ids, size_t n, double *nll,
                                   clover_score_result *out, clover_error *err);


/* ---- text (the model's tokenizer and chat template) ----
 * The tokenizer is the model's own (its GGUF tokenizer.ggml.* metadata);
 * a model without one answers CLOVER_E_UNSUPPORTED. Text is UTF-8; invalid
 * bytes never fail (they round-trip through byte tokens). Strings and arrays
 * returned here are allocated by the library: release them with clover_free. */
CLOVER_API void clover_free(void *p);

/* Encodes text: added tokens are matched whole; special (control) tokens only
 * when allow_special is non-zero (otherwise their text is ordinary text). */
CLOVER_API int clover_tokenize(const clover_model *m, const char *text, size_t len, int allow_special,
                               int32_t **ids, size_t *n_ids, clover_error *err);
/* Decodes ids to bytes (NUL-terminated; *len without the terminator);
 * skip_special drops control tokens (not user-defined ones like <think>). */
CLOVER_API int clover_detokenize(const clover_model *m, const int32_t *ids, size_t n, int skip_special,
                                 char **text, size_t *len, clover_error *err);
/* The id of a token's exact text, or -1. */
CLOVER_API int32_t clover_token_id(const clover_model *m, const char *token_text);

/* Incremental decoding for streaming: each push returns only whole UTF-8
 * characters (the pointer stays valid until the next call on the stream). */
typedef struct clover_text_stream clover_text_stream;
CLOVER_API int clover_text_stream_create(clover_text_stream **out, const clover_model *m, int skip_special,
                                         clover_error *err);
CLOVER_API int clover_text_stream_push(clover_text_stream *s, int32_t id, const char **piece, size_t *len,
                                       clover_error *err);
CLOVER_API int clover_text_stream_flush(clover_text_stream *s, const char **piece, size_t *len,
                                        clover_error *err);
CLOVER_API void clover_text_stream_free(clover_text_stream *s);

/* Qwen3.5's ChatML (TRUNK.md 6): system / user / assistant / tool turns;
 * earlier assistant turns lose their reasoning; the generation prompt opens
 * "<think>\n" (thinking on, the default) or "<think>\n\n</think>\n\n" (off). */
typedef struct clover_chat_message {
    const char *role;              /* "system", "user", "assistant", "tool" */
    const char *content;           /* UTF-8, may be NULL (empty) */
    const char *reasoning_content; /* assistant turns: the reasoning, or NULL (split from content at </think>) */
} clover_chat_message;

/* A call an earlier assistant turn made (OpenAI's tool_calls), rendered
 * after that turn's content in Qwen3.5's XML-function form:
 * <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n...</function>\n</tool_call>.
 * arguments must be a JSON object (CLOVER_E_INVALID otherwise). */
typedef struct clover_chat_tool_call {
    size_t message;        /* the index of its assistant message */
    const char *name;      /* the function's name */
    const char *arguments; /* its arguments, a JSON text written as given */
} clover_chat_tool_call;

typedef struct clover_chat_options {
    int add_generation_prompt; /* non-zero (default): end with the assistant's opening */
    int enable_thinking;       /* non-zero (default): "<think>\n"; zero: an empty think block */
    /* Tools (Qwen3.5's XML-function calling): each a JSON text as Jinja's
     * tojson writes it, listed one a line in a "# Tools" system block, with
     * the call instructions, before the first system message's content
     * (default: none). */
    const char *const *tools;
    size_t n_tools;
    /* The assistant turns' calls, in message order (default: none). */
    const clover_chat_tool_call *tool_calls;
    size_t n_tool_calls;
} clover_chat_options;

CLOVER_API void clover_chat_options_init(clover_chat_options *o);
CLOVER_API int clover_chat_render(const clover_model *m, const clover_chat_message *msgs, size_t n,
                                  const clover_chat_options *opts, char **text, clover_error *err);
/* Splits an answer (the text after the generation prompt) at the first
 * "</think>": reasoning before it (trimmed of newlines), content after it
 * (leading newlines dropped). Without "</think>": when thinking was on the
 * whole answer is reasoning still open; off, it is all content. Offsets into
 * answer; either part may be empty. */
typedef struct clover_answer_parts {
    size_t reasoning_off, reasoning_len;
    size_t content_off, content_len;
    int think_closed; /* "</think>" was found */
} clover_answer_parts;
CLOVER_API void clover_answer_split(const char *answer, size_t len, int thinking, clover_answer_parts *out);

#ifdef __cplusplus
}
#endif
#endif /* CLOVER_H */
