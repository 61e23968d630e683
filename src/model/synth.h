/*
 * synth.h: the parts of `clover synth` (clover_synth in clover.h): a
 * geometry (preset plus overrides), the byte-level vocabulary, the plan of
 * tensors with their types and value distributions, and the value
 * generator. Kept apart so each piece is small and testable; synth.c ties
 * them to the GGUF writer.
 */
#ifndef CLOVER_MODEL_SYNTH_H
#define CLOVER_MODEL_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"
#include "clover.h"
#include "gguf/gguf.h"

/* How tensor types are chosen (--type). */
typedef enum synth_mix {
    SYNTH_MIX_F32,
    SYNTH_MIX_F16,
    SYNTH_MIX_BF16,
    SYNTH_MIX_Q8_0,
    SYNTH_MIX_Q4_K_M, /* routed experts Q4_K, other matrices Q8_0 */
} synth_mix;

typedef struct synth_geometry {
    const char *name; /* general.name */
    uint32_t n_layer;
    uint32_t full_attention_interval;
    uint32_t n_embd;
    uint32_t n_ctx;
    uint32_t n_head, n_head_kv, head_dim, n_rot;
    float rope_freq_base, rms_eps;
    uint32_t gdn_nk, gdn_nv, gdn_dk, gdn_dv, conv_kernel;
    uint32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    uint32_t n_vocab;      /* embedding rows */
    uint32_t special_base; /* id of the first special token (<|endoftext|>) */
    synth_mix mix;
    /* Q4_K tensors are drawn as blocks straight from the random stream
     * (synth_values_fill_q4_k) instead of quantising f32 values: the 35B
     * preset's 32 billion expert values would take hours to quantise. */
    bool direct_q4_k;
    float route_skew; /* clover_synth_options.route_skew */
} synth_geometry;

/* synth_geometry.c: preset + options (overrides, type) -> geometry. */
int synth_geometry_make(const clover_synth_options *opts, synth_geometry *g, clover_error *err);
/* The type of a tensor of the given role with rows of n elements: the mix's
 * choice, falling back (Q4_K -> Q8_0 -> F32) where n does not fill blocks. */
typedef enum synth_role {
    SYNTH_ROLE_VECTOR, /* norms, per-head scalars, conv taps: always F32 */
    SYNTH_ROLE_ROUTER, /* ffn_gate_inp: F32 unless the mix is a float type */
    SYNTH_ROLE_EXPERT, /* routed experts */
    SYNTH_ROLE_MATRIX, /* every other matrix (embedding and head included) */
} synth_role;
uint32_t synth_pick_type(synth_mix mix, synth_role role, uint64_t row_len);
const char *synth_mix_name(synth_mix mix);

/* synth_vocab.c: 256 byte tokens (GPT-2 byte-to-unicode form, in GPT-2's
 * order, so single bytes have Qwen's ids), [PADn] up to special_base, the
 * 33 added tokens of Qwen3.5 (TRUNK.md 6) in order, <|mask|>, then [PADn]
 * up to n_vocab. */
enum {
    SYNTH_N_SPECIAL = 34, /* the 33 added tokens and <|mask|> */
    SYNTH_ENDOFTEXT = 0,  /* offsets from special_base */
    SYNTH_IM_START = 1,
    SYNTH_IM_END = 2,
    SYNTH_THINK_END = 25,
    SYNTH_MASK = 33,
};
typedef struct synth_vocab {
    uint32_t n;          /* = n_vocab */
    const char **tokens; /* [n], NUL-terminated UTF-8 */
    int32_t *types;      /* [n] llama.cpp token types */
    char *chars;         /* the bytes tokens point into */
} synth_vocab;
int synth_vocab_build(const synth_geometry *g, synth_vocab *v, clover_error *err);
void synth_vocab_free(synth_vocab *v);

/* synth_plan.c: every tensor of the file, in file order. */
typedef enum synth_init {
    SYNTH_INIT_NORMAL,          /* a * N(0,1) */
    SYNTH_INIT_ONE_PLUS,        /* 1 + a * N(0,1) */
    SYNTH_INIT_UNIFORM,         /* U(a, b) */
    SYNTH_INIT_NEG_EXP_UNIFORM, /* -exp(U(a, b)): ssm_a = -exp(A_log) */
} synth_init;
typedef struct synth_tensor {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint32_t type;
    synth_init init;
    float a, b;
    bool direct; /* type Q4_K, init NORMAL: blocks drawn directly (synth_values_fill_q4_k) */
    float skew;  /* > 0: a router whose rows are scaled by synth_values_skew_rows */
} synth_tensor;
/* *out is allocated (mem_free). */
int synth_plan_make(const synth_geometry *g, bool diffusion, synth_tensor **out, size_t *n, clover_error *err);
uint64_t synth_tensor_rows(const synth_tensor *t);

/* synth_values.c: random values for a chunk of a tensor's rows. The stream
 * of chunk c is seeded from (file seed, tensor name, c), so a chunk's values
 * depend on nothing else: not the tensors before it, not the thread count. */
void synth_values_seed(rng_state *r, uint64_t seed, const char *name, uint64_t chunk);
void synth_values_fill(const synth_tensor *t, rng_state *r, float *dst, size_t n);
/* Q4_K blocks for n values (a multiple of 256) of a NORMAL tensor of scale a,
 * drawn directly: uniform random codes, random 6-bit sub-block scales, each
 * sub-block's min set so that its mean is ~0, and d chosen so the values'
 * standard deviation is a (see synth_values.c). Writes n / 256 * 144 bytes. */
void synth_values_fill_q4_k(const synth_tensor *t, rng_state *r, void *dst, size_t n);

/* Skewed routing: scales rows [r0, r0 + k) of the router t (values [k][ne0])
 * by 1 + t->skew / (1 + rank), the row's rank in an order drawn from (seed,
 * name) alone, so every chunk agrees on it. */
void synth_values_skew_rows(const synth_tensor *t, uint64_t seed, uint64_t r0, size_t k, float *dst);

/* synth_stream.c: writes every planned tensor's bytes after gguf_writer_begin,
 * generated and quantised on n_threads threads (0: one per CPU). */
int synth_stream_tensors(gguf_writer *w, const synth_tensor *plan, size_t n, uint64_t seed, size_t n_threads,
                         clover_error *err);

#endif
