/*
 * cuda_gdn.h: the Gated DeltaNet mixer between its projections (TRUNK.md
 * section 4) on the GPU, the device twin of src/cpu/gdn.h (same value-head
 * order field, same ring and state layouts). The caller runs in_proj_qkv /
 * in_proj_z / in_proj_b / in_proj_a and out_proj (cuda_matmul.h). All f32.
 *
 * Batched over sequences (contract v2) like cuda_attention.h: sequence s owns
 * rows row0..row0+n-1 of the pass and has its own ring and state; the
 * descriptors (cuda_gdn_seq[n_seq]) live in DEVICE memory.
 *
 * The pieces (cuda_gdn_mix runs them all):
 *  1. cuda_gdn_conv: depthwise causal conv (cross-correlation: W[c][K-1]
 *     multiplies the current row) over [ring; rows], then SiLU, into qkv; the
 *     ring ([K-1][conv_dim], oldest first) becomes the last K-1 rows of
 *     [ring; rows]. Rows are independent, so it runs over row tiles x
 *     channels; only a sequence's first tile reads the ring, and its threads
 *     (one per channel) advance it after their reads: one launch.
 *  2. the state update, in one of two forms, each with the q/k L2 norm
 *     (eps 1e-6 on the SUM of squares, q then times dk^-0.5) and the gates
 *     (beta = sigmoid(b), g = ssm_a * softplus(a + dt_bias), torch's
 *     threshold 20) fused in, since each block needs its own heads' q, k and
 *     gates anyway:
 *     - cuda_gdn_recurrent (decode: token by token, HF's order: decay, read,
 *       delta, write, output after the write). One block per (sequence, value
 *       head) keeps S [dk][dv] in shared memory for all its rows, and also
 *       applies step 3, so its output is out_proj's input.
 *     - cuda_gdn_chunked (prompts: chunks of 64, TRUNK.md 4.7, forward
 *       substitution, the in-chunk cumsum of g accumulated in double as the
 *       CPU). One block per (sequence, value head, slice of
 *       CUDA_GDN_DV_SLICE value columns): every step of the chunked form
 *       splits along the value columns of S, so slices are independent
 *       (the C x C system is recomputed per slice; cheap next to the rest).
 *       Its output is the un-normed o; step 3 follows.
 *  3. cuda_gdn_gated_norm: y = o * rsqrt(mean(o^2) + eps) * w * silu(z) per
 *     value head (norm_w shared by the heads).
 *
 * qkv (the conv output) holds per row q at [kh*dk], k at
 * [n_k_heads*dk + kh*dk] and v at [2*n_k_heads*dk + h*dv] (conv_dim =
 * 2*n_k_heads*dk + n_v_heads*dv), exactly as the CPU's.
 *
 * Stream / graph rules as cuda_attention.h: launches on `stream` only, no
 * allocation, no sync, no host reads, capturable; cuda_gdn_init once per
 * device before capturing. Returns 0, CUDA_GDN_EINVAL (host-checked argument,
 * no launch) or the cudaError_t of the failed launch (cuda_gdn_strerror).
 */
#ifndef CLOVER_CUDA_GDN_H
#define CLOVER_CUDA_GDN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_gdn_dims {
    int n_k_heads, n_v_heads; /* n_v_heads a multiple of n_k_heads */
    int k_dim, v_dim;         /* dk <= CUDA_GDN_MAX_DK, dv <= CUDA_GDN_MAX_DV */
    int conv_k;               /* conv kernel K, 1..CUDA_GDN_MAX_CONV_K */
    float eps;                /* of the gated output norm (rms_norm_eps) */
    int tiled;                /* 1: GGUF order (value head j reads key head j % n_k_heads);
                                 0: HF grouped order (h / (n_v / n_k)); as cpu_gdn_head_order */
} cuda_gdn_dims;

/* One sequence of a pass, in DEVICE memory. */
typedef struct cuda_gdn_seq {
    float *ring;  /* [K-1][conv_dim], oldest first; advanced */
    float *state; /* [n_v_heads][dk][dv]; advanced; 16-byte aligned (cudaMalloc'd) */
    int32_t row0; /* its first row in the pass's row arrays */
    int32_t n;    /* its rows in this pass (0: sits out) */
} cuda_gdn_seq;

/* The layer's small weights, device copies in the file's layout (f32). */
typedef struct cuda_gdn_weights {
    const float *conv_w;  /* [conv_dim][K] */
    const float *ssm_a;   /* [n_v_heads], -exp(A_log) */
    const float *dt_bias; /* [n_v_heads] */
    const float *norm_w;  /* [dv], ssm_norm (plain weight) */
} cuda_gdn_weights;

enum {
    CUDA_GDN_MAX_DK = 128,
    CUDA_GDN_MAX_DV = 256,
    CUDA_GDN_MAX_CONV_K = 8,
    CUDA_GDN_CHUNK = 64,    /* rows per chunk of the chunked form */
    CUDA_GDN_DV_SLICE = 32, /* value columns per block of the chunked form */
    CUDA_GDN_EINVAL = 100000
};

static inline int cuda_gdn_conv_dim(const cuda_gdn_dims *d) {
    return 2 * d->n_k_heads * d->k_dim + d->n_v_heads * d->v_dim;
}

/* 0, or CUDA_GDN_EINVAL with a one-line reason in why (naming the field). */
int cuda_gdn_dims_check(const cuda_gdn_dims *d, char *why, size_t why_len);

/* Raises the kernels' dynamic shared memory limits: once per device, before capture. */
int cuda_gdn_init(void);

/* 1. max_rows >= every seq's n. */
int cuda_gdn_conv(float *qkv,               // [n_rows][conv_dim], silu(conv)
                  const float *mixed,       // [n_rows][conv_dim], in_proj_qkv output
                  const float *conv_w,      // [conv_dim][K]
                  const cuda_gdn_seq *seqs, // [n_seq], device: rings advanced
                  int n_seq, int max_rows, const cuda_gdn_dims *d, void *stream);

/* 2, decode form, with step 3 fused: y is out_proj's input. */
int cuda_gdn_recurrent(float *y,                // [n_rows][n_v_heads][dv]
                       const float *qkv,        // [n_rows][conv_dim], cuda_gdn_conv output (not normed)
                       const float *z,          // [n_rows][n_v_heads][dv], in_proj_z output
                       const float *b,          // [n_rows][n_v_heads], in_proj_b (ssm_beta) output
                       const float *a,          // [n_rows][n_v_heads], in_proj_a (ssm_alpha) output
                       const cuda_gdn_weights *w, const cuda_gdn_seq *seqs, int n_seq, const cuda_gdn_dims *d,
                       void *stream);

/* 2, chunked form: o is the un-normed output; follow with cuda_gdn_gated_norm. */
int cuda_gdn_chunked(float *o,                 // [n_rows][n_v_heads][dv]
                     const float *qkv,         // [n_rows][conv_dim], cuda_gdn_conv output (not normed)
                     const float *b, const float *a, const cuda_gdn_weights *w, const cuda_gdn_seq *seqs,
                     int n_seq, const cuda_gdn_dims *d, void *stream);

/* The chunked form's dot products in 4 independent partial sums (gdn_chunked.cu's NP = 4): 1 on, 0 off (the
 * default: unverified on a device when written, 2026-12-05; also CLOVER_CUDA_GDN_CHUNK_ILP=1), negative: the
 * environment again. Within the form's bound of the CPU either way, not the same bits. */
void cuda_gdn_chunk_ilp_set(int on);

/* The chunked form's register-tiled phases (gdn_chunked.cu's TILE): 1 on (the default; also
 * CLOVER_CUDA_GDN_CHUNK_TILE, on unless "0"), 0 off (the one-element-a-thread form), negative: the environment
 * again. The same bits as off (the same operations per element); cuda_gdn_chunk_ilp_set(1) overrides it. */
void cuda_gdn_chunk_tile_set(int on);

/* The decode form's two sequences a block (gdn_recurrent.cu's PAIR: the second's state copied in beside the first's
 * before the kernel waits on its inputs; dk = dv = 128 only): 2 where one sequence a block would be over one wave
 * (the default; also CLOVER_CUDA_GDN_REC_PAIR), 1 for every call of two or more sequences, 0 off, negative: the
 * environment again. The same bits either way (the same operations per sequence). */
void cuda_gdn_rec_pair_set(int on);

/* 3. y may equal o. */
int cuda_gdn_gated_norm(float *y,        // [n_vec][dv]
                        const float *o,  // [n_vec][dv]
                        const float *z,  // [n_vec][dv]
                        const float *w,  // [dv]
                        int n_vec, int dv, float eps, void *stream);

/* Device workspace bytes cuda_gdn_mix needs for up to n_rows rows. */
size_t cuda_gdn_mix_workspace_bytes(const cuda_gdn_dims *d, int n_rows);

/* 1-3 for a whole pass: y is out_proj's input. chunked = 0: the recurrence
 * (the CPU takes it for single-row commits), 1: the chunked form (the CPU's
 * choice for more rows). */
int cuda_gdn_mix(float *y,            // [n_rows][n_v_heads][dv]
                 const float *mixed,  // [n_rows][conv_dim]
                 const float *z,      // [n_rows][n_v_heads][dv]
                 const float *b,      // [n_rows][n_v_heads]
                 const float *a,      // [n_rows][n_v_heads]
                 const cuda_gdn_weights *w, const cuda_gdn_seq *seqs, int n_seq, int n_rows, int max_rows,
                 int chunked, const cuda_gdn_dims *d, void *workspace, void *stream);

const char *cuda_gdn_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif
