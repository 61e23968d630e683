/*
 * gdn_block.cu: the GDN block operator of SPEC.md 2.1 (cuda_preview.h), the
 * device twin of gdn_block_scalar (src/cpu/gdn_block.c). Three launches and
 * the gated norm:
 *  1. conv: one thread per (row, channel), left taps over [ring; X] then the
 *     right taps over the block's next rows, then SiLU, into work (the ring
 *     is only read);
 *  2. L2 norm of q and k per key head and row, one warp each, in place;
 *  3. heads: one block per (value head, tile of 8 rows; k_block_head_s when
 *     its q and k rows fit in shared memory): the scores of its
 *     rows against every block row (sequential dot products, as the oracle),
 *     the history slot, the float32 softmax by one thread per row (the
 *     oracle's loop), then per output column the read-out u = S^T q dk^-1/2
 *     and o = sum_j p v_j + p_hist u, each a sequential sum;
 *  4. cuda_gdn_gated_norm (gdn_mix.cu), the causal path's.
 * This four-launch form is the one kept behind CLOVER_CUDA_GDN_BLOCK=0 (and
 * for shapes the fused form does not take): by default gdn_block_fused.cu's
 * two launches run, the same operations in the same order.
 * The committed state S is only read, so a preview changes nothing.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "cuda_preview.h"
#include "cuda_switch.h"
#include "gdn_block_ops.cuh"

/* one message buffer for every cuda_preview.h function (moe_coreset.cu too) */
thread_local char g_preview_err[256];
#define g_err g_preview_err

extern "C" const char *cuda_preview_last_error(void) { return g_err; }

enum { ROW_TILE = 8, HEAD_THREADS = 256 };

extern "C" size_t cuda_gdn_block_work_floats(const cuda_gdn_dims *d, int b) {
    return (size_t)b * (size_t)cuda_gdn_conv_dim(d);
}

__global__ void k_block_conv(float *y, const float *x, const float *ring, const float *w, const float *wr, int cd,
                             int K, int b) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
    if (c >= cd) return;
    y[(size_t)i * cd + c] = block_conv_at(x, ring, w, wr, cd, K, b, i, c);
}

/* one warp per (row, q-or-k head): v *= 1 / sqrt(sum v^2 + 1e-6) */
__global__ void k_block_l2(float *qkv, int cd, int nk, int dk, int b) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
    if (warp >= b * 2 * nk) return;
    const int i = warp / (2 * nk), kh = warp % (2 * nk);
    float *v = qkv + (size_t)i * cd + (size_t)kh * dk;
    float ss = 0.0f;
    for (int t = lane; t < dk; t += 32) ss += v[t] * v[t];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = 1.0f / sqrtf(ss + 1e-6f); /* CPU_GDN_L2_EPS */
    for (int t = lane; t < dk; t += 32) v[t] *= inv;
}

struct head_args {
    float *o;
    const float *qkv, *a, *state;
    cuda_gdn_block_weights w;
    int nk, nv, dk, dv, cd, b, tiled;
    float ln_ratio, scale;
};

__global__ void __launch_bounds__(HEAD_THREADS) k_block_head(head_args A) {
    extern __shared__ float p[]; /* [ROW_TILE][b + 1] */
    const int h = blockIdx.x, i0 = blockIdx.y * ROW_TILE, b = A.b, bp = b + 1;
    const int rows = b - i0 < ROW_TILE ? b - i0 : ROW_TILE;
    const int kh = A.tiled ? h % A.nk : h / (A.nv / A.nk);
    const int dk = A.dk, dv = A.dv, cd = A.cd;
    const float ls = A.w.logit_scale[h];
    for (int idx = threadIdx.x; idx < rows * b; idx += blockDim.x) {
        const int ii = idx / b, j = idx % b;
        const float *qi = A.qkv + (size_t)(i0 + ii) * cd + (size_t)kh * dk;
        const float *kj = A.qkv + (size_t)j * cd + (size_t)A.nk * dk + (size_t)kh * dk;
        float dot = 0.0f;
        for (int t = 0; t < dk; t++) dot += qi[t] * kj[t];
        p[ii * bp + j] = ls * dot;
    }
    for (int ii = threadIdx.x; ii < rows; ii += blockDim.x) {
        const int i = i0 + ii;
        const float g = A.w.ssm_a[h] * softplus_f(A.a[(size_t)i * A.nv + h] + A.w.dt_bias[h]);
        p[ii * bp + b] = (A.w.history_bias[h] + A.w.history_c[h] * g) + A.ln_ratio;
    }
    __syncthreads();
    for (int ii = threadIdx.x; ii < rows; ii += blockDim.x) { /* block_softmax, sequentially */
        float *s = p + ii * bp;
        float mx = s[0];
        for (int j = 1; j < bp; j++)
            if (s[j] > mx) mx = s[j];
        float sum = 0.0f;
        for (int j = 0; j < bp; j++) {
            s[j] = expf(s[j] - mx);
            sum += s[j];
        }
        const float inv = 1.0f / sum;
        for (int j = 0; j < bp; j++) s[j] *= inv;
    }
    __syncthreads();
    const float *S = A.state + (size_t)h * dk * dv; /* [dk][dv] */
    for (int idx = threadIdx.x; idx < rows * dv; idx += blockDim.x) {
        const int ii = idx / dv, c = idx % dv, i = i0 + ii;
        const float *qi = A.qkv + (size_t)i * cd + (size_t)kh * dk;
        float u = 0.0f;
        for (int t = 0; t < dk; t++) u += S[(size_t)t * dv + c] * (qi[t] * A.scale);
        const float *pr = p + ii * bp;
        const float *vb = A.qkv + 2 * (size_t)A.nk * dk + (size_t)h * dv + c;
        float acc = 0.0f;
        for (int j = 0; j < b; j++) acc += pr[j] * vb[(size_t)j * cd];
        A.o[((size_t)i * A.nv + h) * dv + c] = acc + pr[b] * u;
    }
}

/* The same head computation with its inputs staged: k_block_head's threads each walk a 128-long dot whose
 * every step waits on a global load (the block's k rows read 32 rows apart across a warp, so uncoalesced),
 * then 4 outputs a thread one after another (98 us a layer on the H200, ncu: a tenth of a preview's GDN
 * layer). Here the block first copies its q rows and the block's k rows for its key head into shared memory
 * (coalesced; k rows padded to dk + 1 floats so a warp's 32 rows fall in distinct banks), and in the
 * read-out a thread owns one output column for HEAD_THREADS / dv of the tile's rows at once, so each state
 * and v value is loaded once for those rows. Every sum runs in the same order with the same operands as in
 * k_block_head (sequential over t, then over j), so the outputs are the same bits. */
__global__ void __launch_bounds__(HEAD_THREADS) k_block_head_s(head_args A) {
    extern __shared__ float sh[]; /* p [ROW_TILE][b + 1], q [ROW_TILE][dk], k [b][dk + 1] */
    const int h = blockIdx.x, i0 = blockIdx.y * ROW_TILE, b = A.b, bp = b + 1;
    const int rows = b - i0 < ROW_TILE ? b - i0 : ROW_TILE;
    const int kh = A.tiled ? h % A.nk : h / (A.nv / A.nk);
    const int dk = A.dk, dv = A.dv, cd = A.cd, kp = dk + 1;
    float *p = sh, *qs = p + ROW_TILE * bp, *ks = qs + ROW_TILE * dk;
    const float ls = A.w.logit_scale[h];
    for (int idx = threadIdx.x; idx < rows * dk; idx += blockDim.x) {
        const int ii = idx / dk, t = idx % dk;
        qs[ii * dk + t] = A.qkv[(size_t)(i0 + ii) * cd + (size_t)kh * dk + t];
    }
    for (int idx = threadIdx.x; idx < b * dk; idx += blockDim.x) {
        const int j = idx / dk, t = idx % dk;
        ks[j * kp + t] = A.qkv[(size_t)j * cd + (size_t)A.nk * dk + (size_t)kh * dk + t];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < rows * b; idx += blockDim.x) {
        const int ii = idx / b, j = idx % b;
        const float *qi = qs + ii * dk, *kj = ks + j * kp;
        float dot = 0.0f;
        for (int t = 0; t < dk; t++) dot += qi[t] * kj[t];
        p[ii * bp + j] = ls * dot;
    }
    for (int ii = threadIdx.x; ii < rows; ii += blockDim.x) {
        const int i = i0 + ii;
        const float g = A.w.ssm_a[h] * softplus_f(A.a[(size_t)i * A.nv + h] + A.w.dt_bias[h]);
        p[ii * bp + b] = (A.w.history_bias[h] + A.w.history_c[h] * g) + A.ln_ratio;
    }
    __syncthreads();
    for (int ii = threadIdx.x; ii < rows; ii += blockDim.x) { /* block_softmax, sequentially */
        float *s = p + ii * bp;
        float mx = s[0];
        for (int j = 1; j < bp; j++)
            if (s[j] > mx) mx = s[j];
        float sum = 0.0f;
        for (int j = 0; j < bp; j++) {
            s[j] = expf(s[j] - mx);
            sum += s[j];
        }
        const float inv = 1.0f / sum;
        for (int j = 0; j < bp; j++) s[j] *= inv;
    }
    __syncthreads();
    /* thread: column c, rows rg, rg + NR, ... of the tile (NR = HEAD_THREADS / dv row groups) */
    const int NR = HEAD_THREADS / dv, c = threadIdx.x % dv, rg = threadIdx.x / dv;
    if (rg >= NR) return;
    const float *S = A.state + (size_t)h * dk * dv; /* [dk][dv] */
    float u[ROW_TILE], acc[ROW_TILE];
#pragma unroll
    for (int r = 0; r < ROW_TILE; r++) u[r] = 0.0f, acc[r] = 0.0f;
#pragma unroll 4
    for (int t = 0; t < dk; t++) {
        const float sv = S[(size_t)t * dv + c];
#pragma unroll
        for (int r = 0; r < ROW_TILE; r++) {
            const int ii = rg + r * NR;
            if (r * NR < ROW_TILE && ii < rows) u[r] += sv * (qs[ii * dk + t] * A.scale);
        }
    }
    const float *vb = A.qkv + 2 * (size_t)A.nk * dk + (size_t)h * dv + c;
#pragma unroll 4
    for (int j = 0; j < b; j++) {
        const float vv = vb[(size_t)j * cd];
#pragma unroll
        for (int r = 0; r < ROW_TILE; r++) {
            const int ii = rg + r * NR;
            if (r * NR < ROW_TILE && ii < rows) acc[r] += p[ii * bp + j] * vv;
        }
    }
#pragma unroll
    for (int r = 0; r < ROW_TILE; r++) {
        const int ii = rg + r * NR;
        if (r * NR < ROW_TILE && ii < rows) A.o[((size_t)(i0 + ii) * A.nv + h) * dv + c] = acc[r] + p[ii * bp + b] * u[r];
    }
}

/* gdn_block_fused.cu: the two-launch form; 1 when the shapes do not fit it */
int gdn_block_fused_launch(float *y, const float *mixed, const float *z, const float *a, const float *ring,
                           const float *state, const cuda_gdn_block_weights *w, const cuda_gdn_dims *d, int b,
                           float ln_ratio, float *work, cudaStream_t st);

/* 1 unless CLOVER_CUDA_GDN_BLOCK=0 (read once) or cuda_preview_set_forms (moe_coreset.cu) said 0 */
static int g_fused_form = -1;
void gdn_block_set_form(int fused) { g_fused_form = fused; }
static int gdn_block_fused_on(void) {
    if (g_fused_form < 0) {
        const char *v = getenv("CLOVER_CUDA_GDN_BLOCK");
        g_fused_form = !(v && strcmp(v, "0") == 0);
    }
    return g_fused_form;
}

int gdn_block_fused_multi_launch(float *y, const float *mixed, const float *z, const float *a,
                                 const cuda_gdn_block_weights *w, const cuda_gdn_dims *d, const cuda_gdn_block_seqs *m,
                                 float *work, cudaStream_t st); /* gdn_block_fused.cu */

extern "C" int cuda_gdn_block_multi(float *y, const float *mixed, const float *z, const float *a,
                                    const cuda_gdn_block_weights *w, const cuda_gdn_dims *d,
                                    const cuda_gdn_block_seqs *m, float *work, void *stream) {
    if (!gdn_block_fused_on() || m->n_seq <= 0 || m->n_seq > CUDA_GDN_SEQS_MAX) return 1;
    for (int i = 0; i < m->n_seq; i++)
        if (m->seq[i].b < 0 || m->seq[i].row0 < 0) {
            snprintf(g_err, sizeof g_err, "cuda_gdn_block_multi: sequence %d: %d rows from %d", i, (int)m->seq[i].b,
                     (int)m->seq[i].row0);
            return -1;
        }
    return gdn_block_fused_multi_launch(y, mixed, z, a, w, d, m, work, (cudaStream_t)stream);
}

static int g_stack_gdn = -1;
extern "C" int cuda_stack_gdn_on(void) { return cuda_switch_on(&g_stack_gdn, "CLOVER_CUDA_STACK_GDN", 1); }
extern "C" void cuda_stack_gdn_set(int on) { cuda_switch_set(&g_stack_gdn, on); }

extern "C" int cuda_gdn_block(float *y, const float *mixed, const float *z, const float *a, const float *ring,
                              const float *state, const cuda_gdn_block_weights *w, const cuda_gdn_dims *d, int b,
                              float ln_ratio, float *work, void *stream) {
    if (b <= 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    if (gdn_block_fused_on()) {
        const int f = gdn_block_fused_launch(y, mixed, z, a, ring, state, w, d, b, ln_ratio, work, st);
        if (f <= 0) return f;
    }
    const int cd = cuda_gdn_conv_dim(d), K = d->conv_k;
    dim3 gc((unsigned)((cd + 255) / 256), (unsigned)b);
    k_block_conv<<<gc, 256, 0, st>>>(work, mixed, ring, w->conv_w, w->conv_right, cd, K, b);
    if (CUDA_LAUNCH_STATUS(g_err, "cuda_gdn_block conv")) return -1;
    const int warps = b * 2 * d->n_k_heads;
    k_block_l2<<<(unsigned)((warps * 32 + 255) / 256), 256, 0, st>>>(work, cd, d->n_k_heads, d->k_dim, b);
    if (CUDA_LAUNCH_STATUS(g_err, "cuda_gdn_block L2 norm")) return -1;
    head_args A = {y, work, a, state, *w, d->n_k_heads, d->n_v_heads, d->k_dim, d->v_dim, cd, b, d->tiled, ln_ratio,
                   (float)pow((double)d->k_dim, -0.5)};
    size_t smem = (size_t)ROW_TILE * (b + 1) * sizeof(float);
    if (smem > 48 * 1024) {
        snprintf(g_err, sizeof g_err, "cuda_gdn_block: a block of %d rows needs %zu bytes of shared memory", b, smem);
        return -1;
    }
    dim3 gh((unsigned)d->n_v_heads, (unsigned)((b + ROW_TILE - 1) / ROW_TILE));
    /* the staged form when its q and k rows fit beside p and a value head is a whole number of row groups */
    const size_t smem_s = smem + ((size_t)ROW_TILE * d->k_dim + (size_t)b * (d->k_dim + 1)) * sizeof(float);
    if (smem_s <= 48 * 1024 && d->v_dim <= HEAD_THREADS && HEAD_THREADS % d->v_dim == 0)
        k_block_head_s<<<gh, HEAD_THREADS, smem_s, st>>>(A);
    else
        k_block_head<<<gh, HEAD_THREADS, smem, st>>>(A);
    if (CUDA_LAUNCH_STATUS(g_err, "cuda_gdn_block heads")) return -1;
    int e = cuda_gdn_gated_norm(y, y, z, w->norm_w, b * d->n_v_heads, d->v_dim, d->eps, stream);
    if (e) {
        snprintf(g_err, sizeof g_err, "cuda_gdn_block gated norm: %s", cuda_gdn_strerror(e));
        return -1;
    }
    return 0;
}
