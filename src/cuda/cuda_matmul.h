/*
 * cuda_matmul.h: every product with a weight matrix on the GPU, y = x W^T,
 * with W in its file type (F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K; llama.cpp's
 * block layouts, the file's bytes uploaded as they are, row stride
 * quant_row_bytes(type, n_in)). Callable from C; built with CLOVER_HAVE_CUDA.
 *
 * Two precisions, chosen by the operation, never by the batch size, so a
 * row's result does not depend on what else is in the batch:
 *  - decode (cuda_matmul_decode, cuda_moe_decode; 1..8 rows): Q8_0 and
 *    K-quant weights take the CPU's integer path exactly: each activation row
 *    is rounded to 8 bits in blocks (32 values for Q8_0, 256 for the K-quants;
 *    d = max|x|/127, q = nearbyint(x * (127/max|x|)), NaN/inf -> d = NaN),
 *    byte for byte what quant_act_quantize_scalar writes, and the integer sums
 *    are exact, so GPU and CPU (matmul_oracle's integer path) differ only in
 *    the order of the float scale products. F32/F16/BF16 weights use f32
 *    activations and f32 sums (CPU differs by summation order only).
 *  - chunks (cuda_matmul_chunk, cuda_moe_chunk; any row count, meant for
 *    9..512+), Q8_0 and K-quant weights: the same integer path on the
 *    tensor cores (mma.sync s8, matmul_igemm.cu). Every integer product,
 *    decode or chunk, adds its per-block terms in one float order, that of
 *    act_scalar.c (sum = 0; sum += term_b for b in order; terms
 *    (d_w * x_d) * isum or x_d * (d * sum_q - dmin * sum_m), IEEE, no
 *    contraction), so a row's bits are the same for any row count, any
 *    neighbours, either kernel, and equal quant_act_dot_scalar's.
 *  - chunks of float weights (F32/F16/BF16): tensor-core GEMM in TF32
 *    (mma.sync m16n8k8): the weights are
 *    dequantised exactly as dequant_scalar.c does, then both operands are
 *    rounded to TF32 (10-bit mantissa, round to nearest, unit roundoff
 *    u = 2^-11) and multiplied with f32 accumulation. Per output:
 *    |y - y_f32| <= (2u + u^2) * sum_i |w_i x_i| + f32 summation error,
 *    i.e. about 1e-3 of sum|w x|. Against the CPU's chunk path (f32
 *    activations, matmul_scalar) that is the whole difference. Matrices of
 *    <= 64 outputs (on the 16-byte path below) take the decode kernel's f32
 *    arithmetic instead, a warp per (row, output): chosen by the shape, so
 *    still independent of the row count, and within the TF32 bound.
 * Each row's k-order is fixed (no split-K depending on the row count), so a
 * row's bits do not depend on the other rows in the call.
 *
 * Shapes: x [n_rows][n_in] f32, y [n_rows][n_out] f32, W [n_out] rows of n_in.
 * Experts: W_e = w + e * expert_stride bytes (stacked [n_expert][n_out][n_in]);
 * routing ids [n_rows][k] int32 in DEVICE memory (top-k ids of each row,
 * distinct within a row, 0 <= id < n_expert); slot s = r*k + j. MoE input x is
 * either per row ([n_rows][n_in], shared by the row's k slots: gate/up) or per
 * slot ([n_rows*k][n_in]: down); output y is per slot [n_rows*k][n_out]
 * (the weighted sum over j is the caller's).
 *
 * Stream and graph rules: every function only enqueues kernels on `stream`
 * (a cudaStream_t passed as void *; NULL = the legacy default stream); it
 * allocates nothing, never synchronises, reads nothing back to the host, and
 * so can be captured into a CUDA graph. Scratch comes from the caller: `work`
 * of at least the *_work_bytes() size, in device memory, 256-byte aligned.
 * All pointers (w, x, y, ids, work) are device pointers; w and expert_stride
 * 16-byte aligned for Q4_K/Q5_K (4 for F32, 2 for the others; cudaMalloc
 * gives 256), w, x and the stride 16-byte aligned with n_in % 8 == 0 for the
 * fast float-weight path; y must not overlap
 * x, w or work. Each routed expert's weights are read once for all rows that
 * use it (decode: one block per (expert, out-tile) does every row routed to
 * it; chunk: rows are grouped by expert on the device).
 *
 * Return: 0 when enqueued, -1 with a one-line reason in why (unsupported type,
 * n_in not a multiple of the block, a size out of range, a launch error).
 */
#ifndef CLOVER_CUDA_MATMUL_H
#define CLOVER_CUDA_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    CUDA_MATMUL_DECODE_MAX_ROWS = 8, /* rows of cuda_matmul_decode / cuda_moe_decode */
    CUDA_MOE_MAX_K = 16,             /* experts per row */
    CUDA_MATMUL_MAX_SEG = 4,         /* matrices of one cuda_matmul_decode_multi */
    CUDA_MOE_DECODE_MAX_ROWS = 32,   /* rows of cuda_moe_dec32 (the MoE's own decode form, moe_decode.cu) */
    CUDA_MATMUL_STREAM_MAX_ROWS = 32, /* rows of cuda_matmul_stream (9..32) */
    CUDA_MATMUL_THIN_MAX_OUT = 64,   /* a float chunk product of <= this many outputs has the decode bits */
};

/* Decode products copy each thread block's weight rows to shared memory
 * with cp.async before using them (when aligned and small enough); 0 turns
 * that off (also CLOVER_CUDA_MMV_STAGE=0): for A/B timing, same results
 * bit for bit (the arithmetic is the same, only where the bytes come from). */
void cuda_mmv_stage_set(int on);
/* Dense decode products with more groups of 8 output rows than resident blocks (the output head, a GDN
 * in-projection) in a persistent, double-buffered kernel (matmul_mmv_stream.cu): 0 off (also CLOVER_CUDA_MMV_STREAM=0),
 * 1 on (the default, verified on the H200 2026-12-07), N > 1 on with at most N blocks (tests). Same bits. */
void cuda_mmv_stream_set(int v);
/* Q8_0 decode products with staged weights dot a block a lane (mmv_row_q8l in matmul_mmv.cuh) instead of 4 lanes a
 * block: 1 on (the default), 0 off (also CLOVER_CUDA_MMV_LANE=0). Same bits; fewer instructions a weight byte. */
void cuda_mmv_lane_set(int on);
/* The few-row integer chunk kernel (matmul_igemm_few.cu: 1..32 rows, dense with scratch and grouped experts):
 * off unless CLOVER_CUDA_IGEMM_FEW=1 (unverified on a device when written, 2026-12-03); 1/0 turns it on/off
 * (tests, benches). The bits are the same either way (one canonical order). */
void cuda_igemm_few_set(int on);
/* The wide-row integer chunk product (matmul_igemm_wide.cu: Q8_0, dense, 64+ rows, with scratch): 1 turns it on,
 * 0 off; the default is on unless CLOVER_CUDA_IGEMM_WIDE=0 (verified on the H200, 2026-12-07). Same bits either way. */
void cuda_igemm_wide_set(int on);
/* The grouped experts (cuda_moe_chunk / _pair, Q4_K and Q5_K, many slots an expert: a stacked preview, a prompt)
 * on the wide kernel's tiles of 64 slots x 128 outputs: on unless CLOVER_CUDA_IGW_MOE=0 (verified on the H200,
 * 2026-12-05); 1/0 on/off, negative: the environment again. Same bits either way. */
void cuda_igw_moe_set(int on);
unsigned long long cuda_igw_moe_launches(void); /* launches so far (tests: it was taken) */
/* The wide K-quant kernel (the dense Q4_K / Q5_K products at 64+ rows and the grouped experts' 64-slot tiles) in
 * its 16-warp form (8 x 2 warps of one m-tile: twice the warps a scheduler for the same tile): on unless
 * CLOVER_CUDA_IGW_W16=0 (verified on an H100, 2026-12-07: prompt 512 +7.6%); 1/0 on/off, negative: the
 * environment again. Same bits either way. */
void cuda_igw_w16_set(int on);
/* The grouped experts' wide tiles of 32 slots instead of 64 (8 warps over the outputs, two blocks an SM: a 512-row
 * pass's ~16 slots an expert): on unless CLOVER_CUDA_IGW_T32=0 (verified on an H100, 2026-12-07: prompt 512 +9.5%);
 * 1/0 on/off, negative: the environment again. Same bits either way. */
void cuda_igw_t32_set(int on);
/* The grouped experts with few slots an expert (cuda_moe_chunk / _pair, Q4_K and Q5_K, the WIDE plans: a 32-row
 * preview, a decode batch) on matmul_igemm.cu's PERSIST form: a fixed grid of ~1-2 blocks an SM walking tiles of
 * 8, 16 or 32 slots of one expert, every item's chunks through one cp.async ring. On when CLOVER_CUDA_MOE_PERSIST=1
 * (off by default: unverified on a device when written, 2026-12-21); cuda_moe_persist_set: 1/0 on/off, negative:
 * the environment again. cuda_moe_persist_tile_set(TS): force 8/16/32 slots a tile (also
 * CLOVER_CUDA_MOE_PERSIST_TS), 0 by shape, negative: the environment again. Same bits either way. */
void cuda_moe_persist_set(int on);
void cuda_moe_persist_tile_set(int ts);
unsigned long long cuda_moe_persist_launches(void); /* launches so far (tests: it was taken) */
/* The grouped experts of a narrowed pass (cuda_moe_args.narrow: a preview routed inside its coreset, each kept
 * expert taking ~all the rows; Q4_K and Q5_K where the WIDE tiles of 8 slots would take them) on tiles of up to 32
 * slots of one expert and 64 outputs a block (matmul_igemm.cu's igemm_tall_kernel): each weight fragment decoded
 * once for the tile's 8-slot groups instead of once a WIDE tile. On when CLOVER_CUDA_MOE_TALL=1 (off by default:
 * slower on an H200, bench/device-runs/2027-01-07-tall29); =2 takes every product the WIDE tiles would (a device
 * A/B); =3 the narrowed products of n_in <= 512 only (the down; the pair on WIDE); cuda_moe_tall_set: 0..3,
 * negative: the environment again. Same bits either way. */
void cuda_moe_tall_set(int mode);
unsigned long long cuda_moe_tall_launches(void); /* launches so far (tests: it was taken) */

/* The few-row dense Q8_0 product on the tensor cores with the weights as the mma A operand (matmul_mma_rows.cu:
 * each warp streams its weight rows through its own cp.async ring, K split over up to 8 warps for narrow
 * matrices): cuda_matmul_chunk_ws / _pair take it for 1..N rows when CLOVER_CUDA_MMA_ROWS=N (N <= 32; unset or 0:
 * off, the default: unverified on a device when written, 2026-12-04). cuda_mma_rows_set(N) overrides (0 off,
 * negative: the environment again). The bits are the chunk form's (one canonical order). The backend's passes
 * of <= CLOVER_CUDA_DECODE_ROWS rows still take the decode form: set that to 1 to send 2+ rows here. */
void cuda_mma_rows_set(int v);
/* 1 when the switch is on and the form takes a dense product of this type and row count. */
int cuda_mma_rows_takes(uint32_t type, size_t n_rows);

/* Dense Q8_0 products of 1..32 rows (a preview's) with K split over a thread block cluster by the canonical order's
 * partials (matmul_q8_rows32.cu): cuda_matmul_chunk_ws / _pair / _multi take it for n_in % 256 == 0 when
 * CLOVER_CUDA_Q8_ROWS32=1; unset, only the output head's products of 8+ rows (AUTO: the only shape it made faster on
 * an H100), 0 none. cuda_q8_rows32_set: 1/0 every product / none, negative: the environment again. cuda_q8_rows32_layout_set(MW, KS): force a layout of MW warps x KS
 * blocks (8x2, 8x4, 8x8, 4x8, 2x8, 1x8; also CLOVER_CUDA_Q8_ROWS32_LAYOUT=MWxKS), (0, 0) by shape, negative: the
 * environment again. The bits are the chunk form's (one canonical order). */
void cuda_q8_rows32_set(int on);
void cuda_q8_rows32_layout_set(int mw, int ks);
/* 1 when the switch is on and the form takes a dense product of this type, n_in and row count. */
int cuda_q8_rows32_takes(uint32_t type, size_t n_in, size_t n_rows);
unsigned long long cuda_q8_rows32_launches(void); /* launches so far (tests: it was taken) */

/* Dense Q8_0 products of the same rows in one launch (cuda_matmul_chunk_ws_multi / _pair with the shared 8-bit
 * rows, 2..63 rows, where each product would take matmul_igemm.cu's igemm_q8_kernel): every product's output tiles
 * in one grid instead of a launch each (a GDN layer's qkv / z / alpha / beta, the attention's q / k / v, the shared
 * expert's gate / up). On unless CLOVER_CUDA_IG_SEG=0 (H200, 2026-12-23-seg24: a 32-row block commit -0.75 ms, a
 * 32-row preview -0.17 ms); cuda_ig_seg_set: 1/0 on/off, negative: the environment again. The bits are the separate
 * launches' (the same blocks). */
void cuda_ig_seg_set(int on);
unsigned long long cuda_ig_seg_launches(void); /* launches so far (tests: it was taken) */

/* 1 when the GPU computes with this type and n_in (a multiple of its block), else 0. */
int cuda_matmul_supported(uint32_t type, size_t n_in);

/* ---- dense ---- */

/* Scratch for cuda_matmul_decode: the 8-bit copies of the n_rows rows, 0 when
 * the product makes them in its own shared memory (few rows of short n_in;
 * float types: always 0). */
size_t cuda_matmul_decode_work_bytes(uint32_t type, size_t n_in, size_t n_rows);
/* 1 <= n_rows <= CUDA_MATMUL_DECODE_MAX_ROWS. */
int cuda_matmul_decode(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows,
                       float *y, void *work, void *stream, char *why, size_t why_len);
/* Float weights (F32/F16/BF16) at any row count with the decode product's f32 arithmetic: each row's bits
 * are those cuda_matmul_decode gives it (in 8-row calls or alone), in one launch on the 16-byte path (a
 * warp an output for 4 rows, matmul_exact.cu), else in 8-row decode launches. For the exact products of a pass of many rows
 * (the router's logits, which choose experts), which otherwise take one decode call per 8 rows. No work
 * buffer. -1 with why for an integer type or a bad shape. */
int cuda_matmul_exact(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows, float *y,
                      void *stream, char *why, size_t why_len);
/* Gate and up fused with SwiGLU, for 1..8 rows: y = silu(x Wg^T) * (x Wu^T),
 * both weights of one type and shape; each product computed exactly as
 * cuda_matmul_decode computes it and the same SwiGLU expression as
 * cuda_swiglu, so the bits equal those three calls. Scratch as
 * cuda_matmul_decode's. */
int cuda_matmul_decode_glu(uint32_t type, const void *w_gate, const void *w_up, size_t n_out, size_t n_in,
                           const float *x, size_t n_rows, float *y, void *work, void *stream, char *why,
                           size_t why_len);
/* Several matrices of one type and n_in on the same rows in one launch (the
 * q/k/v or qkv/z/alpha/beta of a layer): y_i = x W_i^T, each exactly as
 * cuda_matmul_decode computes it alone (same blocks, same arithmetic), so
 * the bits equal n_seg separate calls. 1 <= n_seg <= CUDA_MATMUL_MAX_SEG;
 * scratch as cuda_matmul_decode's for (type, n_in, n_rows). */
typedef struct cuda_matmul_seg {
    const void *w;
    size_t n_out;
    float *y; /* [n_rows][n_out] */
} cuda_matmul_seg;
int cuda_matmul_decode_multi(uint32_t type, const cuda_matmul_seg *seg, size_t n_seg, size_t n_in, const float *x,
                             size_t n_rows, void *work, void *stream, char *why, size_t why_len);
/* Up to CUDA_MATMUL_MAX_SEG float matrices of one type and n_in on the same rows (the router and the shared
 * expert's gate logit), each output with the bits cuda_matmul_decode gives its row, any n_rows >= 1, in one
 * launch where the 16-byte path applies (matmul_exact.cu: a warp an output, its weights loaded once for 4
 * rows), else matrix by matrix as cuda_matmul_exact. No work buffer. */
int cuda_matmul_exact_multi(uint32_t type, const cuda_matmul_seg *seg, size_t n_seg, size_t n_in, const float *x,
                            size_t n_rows, void *stream, char *why, size_t why_len);
/* Its row-block form (matmul_exact.cu: a block of 16 outputs keeps each weight slice in registers across a block
 * of rows, for many rows): the same bits; off unless CLOVER_CUDA_EXACT_RB=1 (unverified on a device when written,
 * 2026-12-05). 1 / 0: on / off; negative: the environment again. */
void cuda_exact_rb_set(int on);
/* Its register-tile form (matmul_exact.cu: a warp 4 rows x 8 outputs, each loaded value feeding 32 multiply-adds):
 * the same bits; CLOVER_CUDA_EXACT_TILE=1 always, 0 never, unset from 128 rows (AUTO). cuda_exact_tile_set: 1 / 0
 * always / never, 2 AUTO, negative: the environment again. Taken before the row-block form. */
void cuda_exact_tile_set(int on);
/* Any n_rows >= 1 (needs no scratch; the integer path then rounds each tile's rows in its own shared memory, which
 * costs each of its blocks an L2 read of the f32 rows: use cuda_matmul_chunk_ws where scratch exists). */
int cuda_matmul_chunk(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows, float *y,
                      void *stream, char *why, size_t why_len);
/* The same product, bit for bit, with scratch: the rows are rounded to 8 bits once, into work (at least
 * cuda_matmul_chunk_work_bytes(type, n_in, n_rows) bytes, 256-byte aligned; 0 for float types, then work may be
 * NULL), and every block copies the chunks it needs from there. The faster form. */
size_t cuda_matmul_chunk_work_bytes(uint32_t type, size_t n_in, size_t n_rows);
int cuda_matmul_chunk_ws(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows,
                         float *y, void *work, void *stream, char *why, size_t why_len);
/* y = (silu(g) * u) W^T with integer weights and scratch (cuda_matmul_chunk_work_bytes > 0): the quantiser into work
 * forms silu(g) * u itself with cuda_swiglu's expression, so the bits equal cuda_swiglu(h, g, u) then
 * cuda_matmul_chunk_ws(h), without that launch and its float copy (a shared expert's down product). -1 with why
 * for float weights. cuda_glu_quant_on: the backend takes it unless CLOVER_CUDA_GLU_QUANT=0 (read once;
 * cuda_glu_quant_set 1/0 overrides, negative: the environment again); cuda_moe_args.x_up is the grouped form. */
int cuda_matmul_chunk_ws_glu(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *g, const float *u,
                             size_t n_rows, float *y, void *work, void *stream, char *why, size_t why_len);
int cuda_glu_quant_on(void);
void cuda_glu_quant_set(int on);
/* Up to CUDA_MATMUL_MAX_SEG chunk products of the same rows x (same type and n_in; the q/k/v or qkv/z/alpha/beta
 * of a layer): bit for bit one cuda_matmul_chunk_ws call each, with the 8-bit rows made once for all of them on
 * the integer path when the sharing switch is on. work: cuda_matmul_chunk_work_bytes(type, n_in, n_rows). */
int cuda_matmul_chunk_ws_multi(uint32_t type, const cuda_matmul_seg *seg, size_t n_seg, size_t n_in, const float *x,
                               size_t n_rows, void *work, void *stream, char *why, size_t why_len);
/* The same where work may already hold x's 8-bit rows (xq_ready: cuda_add_rms_norm_q8 wrote them for n_rows rows
 * and n_in = its n): the Q8_0 shared path then launches no quantiser; any other path makes them again (the same
 * bytes). */
int cuda_matmul_chunk_ws_multi_xq(uint32_t type, const cuda_matmul_seg *seg, size_t n_seg, size_t n_in,
                                  const float *x, size_t n_rows, void *work, int xq_ready, void *stream, char *why,
                                  size_t why_len);
/* The sharing of one 8-bit copy of the rows (_multi, _pair, cuda_moe_chunk_pair): on unless CLOVER_CUDA_SHARE_XQ=0;
 * 1/0 on/off, negative: the environment again (tests, benches). */
void cuda_matmul_share_set(int on);
/* cuda_moe_chunk_pair's gate and up in ONE launch of the grouped integer kernel (its tiles of 8 slots, grid.z the
 * product) where the sharing is on: on unless CLOVER_CUDA_MOE_PAIR1=0; 1/0 on/off, negative: the environment. */
void cuda_moe_pair1_set(int on);
/* The grouped and dense integer kernel's Q4_K / Q5_K super-block sums in their short form (matmul_igemm.cu's
 * ig_k_superblock2, the same bits): on unless CLOVER_CUDA_IG_K2=0; 1/0 on/off, negative: the environment. */
void cuda_ig_k2_set(int on);
/* Two chunk products of the same rows x (same type and n_in; n_out and n_out2 outputs into y and y2): bit for bit
 * cuda_matmul_chunk_ws(w, n_out, y) then cuda_matmul_chunk_ws(w2, n_out2, y2); one quantisation of x on the
 * integer path with the sharing switch on (where the few-row kernel takes it, CLOVER_CUDA_IGEMM_FEW=1 at <= 32
 * rows, ONE launch for both).
 * work: cuda_matmul_chunk_work_bytes(type, n_in, n_rows). */
int cuda_matmul_chunk_ws_pair(uint32_t type, const void *w, size_t n_out, const void *w2, size_t n_out2, size_t n_in,
                              const float *x, size_t n_rows, float *y, float *y2, void *work, void *stream, char *why,
                              size_t why_len);

/* The persistent stream form of a dense Q8_0 product at 9..CUDA_MATMUL_STREAM_MAX_ROWS rows
 * (matmul_mmv_stream32.cu): each weight row read once for all rows, the next group's rows copied while this one is
 * dotted; the bits of cuda_matmul_decode (per 8 rows) and of cuda_matmul_chunk for every row. Off unless
 * CLOVER_CUDA_MMV_STREAM32 is set (unverified on a device when written, 2026-12-04): 1 on up to 32 rows, N in 9..32
 * on up to N rows (where it beats the chunk form, for A/B runs), 0 off; cuda_mmv_stream32_set overrides. */
void cuda_mmv_stream32_set(int v);
/* 1 when the switch is on and the stream form takes a product of this type, n_in and rows: Q8_0, n_in a multiple
 * of 256, 9 <= n_rows <= the switch's cap, the 8-bit rows fit in shared memory beside the weights (n_in 2048: all
 * 32 rows; 4096: up to 18). */
int cuda_matmul_stream_takes(uint32_t type, size_t n_in, size_t n_rows);
/* Scratch: the 8-bit rows (16-byte aligned; 256 is what callers give). */
size_t cuda_matmul_stream_work_bytes(uint32_t type, size_t n_in, size_t n_rows);
/* y = x W^T at 9..32 rows (whatever the switch; -1 with why for another type, n_in % 256 != 0, weights not
 * 16-byte aligned). _multi: up to CUDA_MATMUL_MAX_SEG matrices of one type and n_in on the same rows, one
 * quantisation of x and one launch, each output exactly as a call of its own. */
int cuda_matmul_stream(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows,
                       float *y, void *work, void *stream, char *why, size_t why_len);
int cuda_matmul_stream_multi(uint32_t type, const cuda_matmul_seg *seg, size_t n_seg, size_t n_in, const float *x,
                             size_t n_rows, void *work, void *stream, char *why, size_t why_len);

/* ---- grouped expert products (MoE) ---- */

typedef struct cuda_moe_args {
    uint32_t type;
    const void *w;        /* [n_expert][n_out] rows of n_in */
    size_t expert_stride; /* bytes between experts (n_out * row bytes when packed) */
    size_t n_expert, n_out, n_in;
    const int32_t *ids; /* device [n_rows][k] */
    size_t n_rows, k;
    const float *x; /* device: [n_rows][n_in], or [n_rows*k][n_in] when x_per_slot */
    int x_per_slot;
    float *y; /* device [n_rows*k][n_out] */
    /* 0: n_expert. The expert count that plans the chunk form's tiles where ids are slots of a larger pool
     * (--gpu-mem: n_expert is the pool's slot count, this the model's experts), so the tiles, and the kernel,
     * are those of the all-device run. */
    size_t n_expert_plan;
    /* NULL, or (cuda_moe_chunk with integer weights only) the product's rows are silu(x) * x_up, x_up laid out as
     * x, formed by the chunk form's quantiser with cuda_swiglu's expression: the bits of cuda_swiglu then the
     * product, without that launch (cuda_glu_quant_on) */
    const float *x_up;
    /* nonzero: the rows are routed inside a narrow set of experts (a preview's coreset: ~all the rows on each kept
     * expert), so the chunk form may take its tall tiles (cuda_moe_tall_set); the bits do not depend on it */
    int narrow;
    /* nonzero: the product belongs to a preview (a block's few rows: its tiles fill under a wave), so the chunk form
     * keeps the grouped Q4_K tiles on the 4-stage ring (cuda_ig_w3_set's AUTO); the bits do not depend on it */
    int preview;
} cuda_moe_args;

/* Decode form: 1 <= n_rows <= CUDA_MATMUL_DECODE_MAX_ROWS, 1 <= k <= CUDA_MOE_MAX_K;
 * same precision as cuda_matmul_decode. */
size_t cuda_moe_decode_work_bytes(const cuda_moe_args *a);
int cuda_moe_decode(const cuda_moe_args *a, void *work, void *stream, char *why, size_t why_len);
/* The experts' gate and up fused with SwiGLU (decode form): `gate` describes
 * the gate product, w_up the up weights (same type, shape and expert stride);
 * y[s] = silu(gate_s) * up_s, bit for bit cuda_moe_decode twice then
 * cuda_swiglu. Scratch: cuda_moe_decode_work_bytes(gate). */
int cuda_moe_decode_glu(const cuda_moe_args *gate, const void *w_up, void *work, void *stream, char *why,
                        size_t why_len);

/* The cheaper form of cuda_moe_decode / _glu for Q4_K and Q5_K weights (moe_fast.cu: 4 lanes a super-block, the
 * 8-bit rows' sub-block sums made once), with the same bits; the two functions take it when
 * cuda_moe_fast_enabled(): on unless CLOVER_CUDA_MOE_FAST=0 (read once). cuda_moe_fast_set(1/0) overrides,
 * -1 goes back to the environment. */
int cuda_moe_fast_enabled(void);
void cuda_moe_fast_set(int on);
unsigned long long cuda_moe_fast_launches(void); /* launches of the fast form so far (tests: it was taken) */

/* The decode form for 1..CUDA_MOE_DECODE_MAX_ROWS rows (moe_decode.cu): the routing's per-expert slot lists
 * built on the device, each routed expert's weights read once for all its rows, a warp a weight row with the
 * decode arithmetic, so every slot's bits equal cuda_moe_decode's (and the chunk form's) for the same slot.
 * 1 <= k <= CUDA_MOE_MAX_K; work (always needed: the lists live there) of cuda_moe_dec32_work_bytes(a), 256-byte
 * aligned. A bad id: its slot's outputs NaN. cuda_moe_dec32_glu: gate and up fused with SwiGLU, as
 * cuda_moe_decode_glu. The backend takes it for its expert products of <= 32 rows when
 * cuda_moe_dec32_enabled(): CLOVER_CUDA_MOE_DEC32=1 (2..32 rows) or 2 (1..32) (read once; off by default),
 * cuda_moe_dec32_set overrides. H200, 2026-12-04: bit-identical, but slower than both older forms (16 rows: 168 +
 * 114 us a layer against the chunk form's 87 + 43; 1 row 15.6 + 13.5 against 11.7 + 8.3): the decode dot is
 * instruction-bound (bench/device-runs/2026-12-09-moe24/run.sh). Keep it off. */
int cuda_moe_dec32_enabled(void);
void cuda_moe_dec32_set(int on);
size_t cuda_moe_dec32_work_bytes(const cuda_moe_args *a);
int cuda_moe_dec32(const cuda_moe_args *a, void *work, void *stream, char *why, size_t why_len);
int cuda_moe_dec32_glu(const cuda_moe_args *gate, const void *w_up, void *work, void *stream, char *why,
                       size_t why_len);

/* Chunk form: any n_rows >= 1; rows are grouped by expert on the device (a
 * counting pass and tiles of up to 32 slots of one expert for the integer
 * path, 64 for the TF32 one), the rows rounded to 8 bits once into work, then
 * the GEMM of cuda_matmul_chunk, each routed expert read once per tile. */
size_t cuda_moe_chunk_work_bytes(const cuda_moe_args *a);
int cuda_moe_chunk(const cuda_moe_args *a, void *work, void *stream, char *why, size_t why_len);
/* The experts' gate and up of the same rows: a is the gate's call; w_up / y_up the up's weights (same type, shape
 * and expert stride as a->w) and output. Bit for bit cuda_moe_chunk(a) then cuda_moe_chunk(a with w_up, y_up);
 * one grouping and one quantisation of x for both on the integer path with the sharing switch on (the few-row
 * kernel, CLOVER_CUDA_IGEMM_FEW=1 at <= 32 rows, also ONE product launch), else the two calls.
 * work: cuda_moe_chunk_work_bytes(a). (An out-of-range id: its slots NaN in y; in y_up too only on the two-call
 * path.) */
int cuda_moe_chunk_pair(const cuda_moe_args *a, const void *w_up, float *y_up, void *work, void *stream, char *why,
                        size_t why_len);
/* The integer chunk form's grouping of the slots and its 8-bit rows in one launch (the same table and bytes as the
 * two launches): on unless CLOVER_CUDA_GROUP_QUANT=0 (read once); 1/0 overrides, negative: the environment again. */
void cuda_group_quant_set(int on);
/* The integer chunk kernel's weight copies without range checks where every row's chunks are 16-byte aligned and
 * whole (the same bytes): on unless CLOVER_CUDA_IG_ALIGNED=0; 1/0 overrides, negative: the environment again. */
void cuda_ig_aligned_set(int on);
/* The integer chunk kernels' X2 forms (matmul_igemm.cu: two 256-value chunks a ring stage, half the waits and
 * barriers; dense Q8_0 and the grouped Q4_K / Q5_K WIDE tiles; the same bits): OFF unless CLOVER_CUDA_IG_X2=1 until
 * measured on a device; 1/0 overrides (2 or 3: on, with that many stages of two chunks where shared memory holds
 * them, else the form's own choice), negative: the environment again. */
void cuda_ig_x2_set(int on);
unsigned long long cuda_ig_x2_launches(int stages); /* X2 launches so far with 2 / 3 stages (tests: taken) */
/* The grouped Q4_K WIDE tiles at three blocks an SM on a 3-stage ring (matmul_igemm.cu's W3; the same bits):
 * CLOVER_CUDA_IG_W3 unset (2, AUTO) in every product outside a preview (cuda_moe_args.preview: a lone preview lost
 * 0.14-0.2 ms with it, a commit and the stacked AR step gained), 1 every grouped Q4_K WIDE launch, 0 none;
 * cuda_ig_w3_set: 0..2, negative: the environment again. */
void cuda_ig_w3_set(int mode);
unsigned long long cuda_ig_w3_launches(void); /* W3 launches so far (tests: taken) */
/* WR: the grouped Q4_K WIDE tiles with a ring per warp (matmul_igemm.cu's igemm_warp_kernel; the same bits), taken
 * in place of W3's launch where its rows are 16-byte aligned and fit: on unless CLOVER_CUDA_IG_WR=0 (the AR step
 * +3.2%, a commit -0.25 ms on an H100); cuda_ig_wr_set: 1/0, negative: the environment again. */
void cuda_ig_wr_set(int on);
unsigned long long cuda_ig_wr_launches(void); /* WR launches so far (tests: taken) */
/* The tile loop of the grouped integer kernel's WIDE tiles (cuda_moe_chunk / _pair with few slots an expert: a
 * preview, a commit, a decode batch's experts): grid.y cut from the worst-case tile count to about two waves of
 * blocks, each block walking the tiles y, y + gridDim.y, ... that the grouping pass made; the same bits. On unless
 * CLOVER_CUDA_MOE_TILE_LOOP=0 (0: the full grid of one tile a block); cuda_moe_tile_loop_set: 1/0 on/off, negative:
 * the environment again. cuda_moe_tile_cap_set(N): force the cap on grid.y (also CLOVER_CUDA_MOE_TILE_CAP=N), 0 by
 * shape, negative: the environment again. */
void cuda_moe_tile_loop_set(int on);
void cuda_moe_tile_cap_set(int cap);
unsigned long long cuda_moe_tile_loop_launches(void); /* launches with grid.y below the worst case (tests: taken) */

#ifdef __cplusplus
}
#endif

#endif
