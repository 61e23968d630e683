/*
 * bench_cuda_decode.c: where an autoregressive decode step of the 35B-A3B
 * model goes on the GPU, op by op (issue 24). Every op of one GDN layer and
 * one full-attention layer, at 1 row (a lone decode step) and at 16 rows
 * (the stacked AR step of `clover serve`: 16 sequences of one row each),
 * called through the same internal entry points (the headers in src/cuda/) with the same
 * kernel choices backend_cuda_pass.c makes at those row counts:
 *  - 1 row: the decode kernels (mmv; the GDN in-proj and the attention q/k/v
 *    as one cuda_matmul_decode_multi, the router + shared-expert gate logit
 *    likewise in f32, the experts' and the shared expert's gate + up fused
 *    with SwiGLU), the GDN recurrence, attention over the cache;
 *  - 16 rows stacked: Q8_0 / Q4_K products in chunk form (each in-proj
 *    separately: mm_multi falls back to mm per weight), the router in f32
 *    decode groups of 8, the experts' gate + up as cuda_moe_chunk_pair +
 *    SwiGLU, 16 sequences' GDN states and KV caches.
 * Each op is captured in a CUDA graph over copies of its weights (or states /
 * caches) so they come from memory, not L2 (50 MB), and replayed: the time
 * includes what the graph's launch of one kernel costs, as in the step. Each
 * line: time, bytes it must move, GB/s and % of the device-to-device copy
 * bandwidth measured first in the same run. Then the sums per layer, x 30 GDN
 * + x 10 attention layers (the preset's 40 layers, full attention every 4th)
 * + the once-per-step ops (embedding row, the head, the logits' copy back).
 *
 * With a MODEL argument (the 35B-A3B synthetic file) it then runs the real
 * backend's decode step (backend_cuda_pass.c) after a 512-token prompt:
 *  - the step through the backend contract (seq_commit: the captured graph,
 *    the logits' copy, the host's wait), as bench_batch's "pass ms";
 *  - the pass alone captured here into a graph of our own: its node count
 *    (kernels, copies) and its replay time back to back (device time only);
 *    the same captured with PDL off (cuda_pdl_set(0));
 *  - the pass enqueued kernel by kernel (no graph): the host's enqueue time
 *    and the whole time to the sync.
 * The gap between the sum of ops and the replayed pass is what the graph
 * does between kernels (dependencies, tails); between the replay and the
 * seq_commit step, the host side (copies, sync, memcpy of the logits).
 *
 * Expected cost on the device: ~10 s for the ops (~6 GB of weight copies
 * allocated and filled), the model's load and upload extra.
 * Built only with the CUDA backend (bench/CMakeLists.txt); no device: exit 77.
 *
 * CLOVER_BENCH_DECODE_TRACE=1 (with MODEL): after the batched steps' timings, one step of 1 and one of 16
 * sequences each between cudaProfilerStart/Stop (two windows for bench/cuda_kernel_trace.c).
 * CLOVER_BENCH_DECODE_NCU=1 (with MODEL): after the prompt, only one one-row pass kernel by kernel between
 * cudaProfilerStart/Stop, for `ncu --profile-from-start off` (CLOVER_BENCH_DECODE_ROWS=0 skips the ops).
 *
 *   bench_cuda_decode [MODEL]       CLOVER_BENCH_DECODE_MAXKV=N: attention's max_kv (default 262144, the
 *                                   preset's n_ctx, which the backend passes as max_context by default)
 */
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timer.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_attention.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_gdn.h"
#include "cuda/cuda_matmul.h"
#include "cuda/cuda_mem.h"
#include "cuda/cuda_ops.h"
#include "model/model.h"
#include "quant/quant.h"

#include "../tests/unit/backend_seq.h"
#include "cuda_bench.h"

/* the 35B-A3B geometry (src/model/synth_geometry.c preset_35b) */
enum {
    H = 2048,
    E = 256,
    KX = 8,       /* experts used */
    FE = 512,     /* expert ff */
    FS = 512,     /* shared expert ff */
    GCD = 8192,   /* GDN conv dim: 2 * 16 * 128 + 32 * 128 */
    GZ = 4096,    /* 32 value heads x 128 */
    GNV = 32,
    AQ = 8192,    /* q + gate: 16 heads x 256 x 2 */
    AKV = 512,    /* 2 KV heads x 256 */
    AO = 4096,    /* 16 x 256 */
    VOCAB = 248320,
    CTX = 512,    /* tokens in the cache */
    COPIES = 8,   /* weight copies per op (>= 50 MB for all but the smallest: L2 holds none of a replay) */
    SCOPIES = 32, /* state / cache copies at 1 row (2 MB each) */
};
static const float EPS = 1e-6f;

static void fail(const char *what) {
    fprintf(stderr, "bench_cuda_decode: %s\n", what);
    exit(1);
}

static uint64_t rs = 42;
static uint32_t rnd(void) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rs >> 33);
}

/* rows x n_in weights of type, from 256 random quantised rows repeated (valid scales everywhere) */
static void *dev_weights(uint32_t type, size_t rows, size_t n_in) {
    const size_t rb = quant_row_bytes(type, n_in), pat = 256;
    uint8_t *h = malloc(rb * pat);
    float *f = malloc(n_in * sizeof(float));
    for (size_t r = 0; r < pat; r++) {
        for (size_t i = 0; i < n_in; i++) f[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-4f;
        if (type == QUANT_F32) memcpy(h + r * rb, f, rb);
        else quant_quantize_row(type, f, h + r * rb, n_in);
    }
    void *d = NULL;
    CU(cudaMalloc(&d, rows * rb));
    for (size_t r = 0; r < rows; r += pat) {
        const size_t n = rows - r < pat ? rows - r : pat;
        CU(cudaMemcpy((uint8_t *)d + r * rb, h, n * rb, cudaMemcpyHostToDevice));
    }
    free(h), free(f);
    return d;
}

static float *dev_floats(size_t n, float scale) {
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = scale * (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    float *d = NULL;
    CU(cudaMalloc((void **)&d, n * sizeof(float)));
    CU(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    free(h);
    return d;
}

/* ---- one op, its buffers, and its launch for copy i ---- */
enum kind {
    K_ADDNORM, K_MM, K_MULTI, K_GLU, K_PAIR, K_SWIGLU, K_ROUTE, K_MOE_GLU, K_MOE, K_MOE_PAIR, K_COMBINE, K_CMBNORM,
    K_GDN_CONV, K_GDN_MIX, K_ATTN_PREP, K_ATTN_FWD, K_EMBED, K_D2H,
};

typedef struct op {
    enum kind kind;
    uint32_t type;
    const uint8_t *w;  /* copies of the weights, wstride bytes apart */
    size_t wstride, n_out, n_in, rows;
    size_t n_seg, seg_out[CUDA_MATMUL_MAX_SEG];
    const float *x, *fw;
    float *y, *y2, *h;
    void *work;
    int32_t *ids;
    int per_slot;
    /* GDN / attention: copies of the per-sequence descriptors ([copies][n_seq]) */
    cuda_gdn_dims gd;
    cuda_gdn_weights gw;
    cuda_gdn_seq *gseq;
    cuda_attn_dims ad;
    cuda_attn_seq *aseq;
    float *a, *b, *z, *k, *v, *qn, *kn, *invf;
    int n_seq, max_kv;
    void *host; /* K_D2H: pinned */
} op;

/* Whether the routed experts take moe_decode.cu's form at n rows: CLOVER_CUDA_MOE_DEC32=1 at 2..32 rows, =2 at
 * 1..32, as the backend decides (backend_cuda_pass.c's moe_dec32; k = 8 here). Its predictions at 16 rows (us a
 * layer, written before any run): ~100 experts x 2 x 0.59 MB = 118 MB for gate + up; ~6400 blocks of 18 KB, 2
 * resident an SM, each staging its rows then dotting them (~24 KB in flight an SM, about Little's 4.2 TB/s x
 * 0.7 us / 132): ~60% of 4.2 TB/s = 45 us with the lists + 8-bit rows launch; down 59 MB in 9 KB blocks: 28 us. */
enum { DEC32_PRED_GU16 = 45, DEC32_PRED_DOWN16 = 28 };
static int moe_dec32(size_t n) {
    const int on = cuda_moe_dec32_enabled();
    return on && n <= CUDA_MOE_DECODE_MAX_ROWS && n >= (on == 2 ? 1u : 2u);
}

static char g_why[256];

static void body(const op *c, size_t i, cudaStream_t st) {
    const uint8_t *w = c->w + i * c->wstride;
    char *why = g_why;
    const size_t wl = sizeof g_why;
    int rc = 0;
    const size_t n = c->rows;
    switch (c->kind) {
    case K_ADDNORM: rc = cuda_add_rms_norm(c->y2, c->h, c->y, c->fw, n, H, EPS, st); break;
    case K_MM: /* mm_as: chunk form with its 8-bit rows in scratch for a quantised weight at > 8 rows, else decode */
        if (n > CUDA_MATMUL_DECODE_MAX_ROWS && c->type != QUANT_F32)
            rc = cuda_matmul_chunk_ws(c->type, w, c->n_out, c->n_in, c->x, n, c->y, c->work, st, why, wl);
        else
            for (size_t r0 = 0; r0 < n && !rc; r0 += CUDA_MATMUL_DECODE_MAX_ROWS) {
                const size_t nr = n - r0 < CUDA_MATMUL_DECODE_MAX_ROWS ? n - r0 : CUDA_MATMUL_DECODE_MAX_ROWS;
                rc = cuda_matmul_decode(c->type, w, c->n_out, c->n_in, c->x + r0 * c->n_in, nr, c->y + r0 * c->n_out,
                                        c->work, st, why, wl);
            }
        break;
    case K_MULTI: { /* mm_multi: one launch per 8 rows (decode form), or each weight through K_MM's chunk form */
        const size_t rb = quant_row_bytes(c->type, c->n_in);
        if (n > CUDA_MATMUL_DECODE_MAX_ROWS && c->type != QUANT_F32) {
            size_t off = 0, yo = 0;
            for (size_t s = 0; s < c->n_seg && !rc; s++) {
                rc = cuda_matmul_chunk_ws(c->type, w + off, c->seg_out[s], c->n_in, c->x, n, c->y + yo, c->work, st,
                                          why, wl);
                off += c->seg_out[s] * rb, yo += n * c->seg_out[s];
            }
            break;
        }
        for (size_t r0 = 0; r0 < n && !rc; r0 += CUDA_MATMUL_DECODE_MAX_ROWS) {
            const size_t nr = n - r0 < CUDA_MATMUL_DECODE_MAX_ROWS ? n - r0 : CUDA_MATMUL_DECODE_MAX_ROWS;
            cuda_matmul_seg seg[CUDA_MATMUL_MAX_SEG];
            size_t off = 0, yo = 0;
            for (size_t s = 0; s < c->n_seg; s++) {
                seg[s] = (cuda_matmul_seg){w + off, c->seg_out[s], c->y + yo + r0 * c->seg_out[s]};
                off += c->seg_out[s] * rb, yo += n * c->seg_out[s];
            }
            rc = cuda_matmul_decode_multi(c->type, seg, c->n_seg, c->n_in, c->x + r0 * c->n_in, nr, c->work, st, why,
                                          wl);
        }
        break;
    }
    case K_GLU: /* gate at w, up right after it */
        rc = cuda_matmul_decode_glu(c->type, w, w + c->n_out * quant_row_bytes(c->type, c->n_in), c->n_out, c->n_in,
                                    c->x, n, c->y, c->work, st, why, wl);
        break;
    case K_PAIR:
        rc = cuda_matmul_chunk_ws_pair(c->type, w, c->n_out, w + c->n_out * quant_row_bytes(c->type, c->n_in),
                                       c->n_out, c->n_in, c->x, n, c->y, c->y2, c->work, st, why, wl);
        break;
    case K_SWIGLU: rc = cuda_swiglu(c->y, c->y, c->y2, c->n_out, st); break;
    case K_ROUTE: rc = cuda_moe_route(c->ids, c->y, c->x, n, E, KX, st); break;
    case K_MOE_GLU:
    case K_MOE:
    case K_MOE_PAIR: {
        cuda_moe_args a = {.type = c->type, .w = w, .expert_stride = quant_row_bytes(c->type, c->n_in) * c->n_out,
                           .n_expert = E, .n_out = c->n_out, .n_in = c->n_in, .ids = c->ids, .n_rows = n, .k = KX,
                           .x = c->x, .x_per_slot = c->per_slot, .y = c->y};
        const uint8_t *up = w + c->wstride; /* the up stack: the next copy's */
        if (moe_dec32(n) && c->kind != K_MOE_PAIR) /* the backend's choice (backend_cuda_pass.c's moe_dec32) */
            rc = c->kind == K_MOE_GLU ? cuda_moe_dec32_glu(&a, up, c->work, st, why, wl)
                                      : cuda_moe_dec32(&a, c->work, st, why, wl);
        else if (c->kind == K_MOE_GLU) rc = cuda_moe_decode_glu(&a, up, c->work, st, why, wl);
        else if (c->kind == K_MOE_PAIR) rc = cuda_moe_chunk_pair(&a, up, c->y2, c->work, st, why, wl);
        else if (n > CUDA_MATMUL_DECODE_MAX_ROWS) rc = cuda_moe_chunk(&a, c->work, st, why, wl);
        else rc = cuda_moe_decode(&a, c->work, st, why, wl);
        break;
    }
    case K_COMBINE: rc = cuda_moe_combine_shexp(c->y2, c->y, c->ids, c->a, n, KX, H, c->h, c->b, st); break;
    case K_CMBNORM: /* 1 or 2 (not taken, or without rows that were not asked for) would be a wrong reading */
        rc = cuda_moe_combine_add_rms_norm(c->y2, c->z, c->y, c->ids, c->a, KX, c->h, c->b, c->fw, n, H, EPS, NULL,
                                           st);
        break;
    case K_GDN_CONV:
        rc = cuda_gdn_conv(c->y, c->x, c->gw.conv_w, c->gseq + i * c->n_seq, c->n_seq, 1, &c->gd, st);
        break;
    case K_GDN_MIX:
        rc = cuda_gdn_mix(c->y, c->x, c->z, c->b, c->a, &c->gw, c->gseq + i * c->n_seq, c->n_seq, (int)n, 1, 0, &c->gd,
                          c->work, st);
        break;
    case K_ATTN_PREP:
        rc = cuda_attn_prepare(c->y, c->k, c->v, c->qn, c->kn, c->invf, c->aseq + i * c->n_seq, c->n_seq, 1, &c->ad,
                               st);
        break;
    case K_ATTN_FWD:
        rc = cuda_attn_forward(c->y2, c->y, c->aseq + i * c->n_seq, c->n_seq, (int)n, 1, c->max_kv, 1, &c->ad, c->work,
                               st);
        break;
    case K_EMBED: rc = cuda_embed_rows(c->y, c->w, c->type, c->ids, n, H, st); break;
    case K_D2H: rc = cudaMemcpyAsync(c->host, c->y, c->n_out * sizeof(float), cudaMemcpyDeviceToHost, st); break;
    }
    if (rc) {
        fprintf(stderr, "bench_cuda_decode: op %d failed (%d): %s %s %s\n", (int)c->kind, rc, why, cuda_ops_last_error(),
                c->kind >= K_ATTN_PREP && c->kind <= K_ATTN_FWD ? cuda_attn_strerror(rc)
                : c->kind >= K_GDN_CONV && c->kind <= K_GDN_MIX ? cuda_gdn_strerror(rc) : "");
        exit(1);
    }
}

static cudaEvent_t ev0, ev1;

/* Seconds per op launch: the op over `copies` copies captured in one graph, replayed (after one warm-up) until
 * >= 20 ms or 200 replays. */
static double graph_time(const op *c, size_t copies) {
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    body(c, 0, st); /* once outside the capture: the kernels' one-time attribute calls */
    CU(cudaStreamSynchronize(st));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (size_t i = 0; i < copies; i++) body(c, i, st);
    CU(cudaStreamEndCapture(st, &g));
    CU(cudaGraphInstantiate(&ge, g, 0));
    CU(cudaGraphLaunch(ge, st));
    CU(cudaStreamSynchronize(st));
    int reps = 5;
    float ms = 0;
    for (int round = 0; round < 2; round++) {
        CU(cudaEventRecord(ev0, st));
        for (int r = 0; r < reps; r++) CU(cudaGraphLaunch(ge, st));
        CU(cudaEventRecord(ev1, st));
        CU(cudaEventSynchronize(ev1));
        CU(cudaEventElapsedTime(&ms, ev0, ev1));
        if (round == 0) {
            const double per = ms / reps;
            reps = per > 0 ? (int)(20.0 / per) : 200;
            if (reps < 5) reps = 5;
            if (reps > 200) reps = 200;
        }
    }
    CU(cudaGraphExecDestroy(ge));
    CU(cudaGraphDestroy(g));
    CU(cudaStreamDestroy(st));
    return ms * 1e-3 / (reps * (double)copies);
}

static double g_bw; /* copy bandwidth, bytes/s */

/* Times c, prints its line (with the prediction in us beside it) and returns the time. */
static double line(const char *name, const op *c, size_t copies, double bytes, double pred_us) {
    const double t = graph_time(c, copies);
    printf("  %-50s %8.2f us", name, t * 1e6);
    if (bytes > 0)
        printf("  %8.3f MB %6.0f GB/s %5.1f%% bw", bytes * 1e-6, bytes / t * 1e-9, 100.0 * bytes / t / g_bw);
    else
        printf("  %8s %8s %12s", "", "", "");
    printf("   [pred ~%.0f us]\n", pred_us);
    fflush(stdout);
    return t;
}

/* ---- the buffers every op of a row count shares (activations: all small) ---- */
typedef struct acts {
    size_t n;
    float *x, *h, *y, *y2, *big, *big2, *wts, *gate_logit;
    int32_t *ids; /* [n][KX] routed experts: distinct random ones per row (one row: fixed) */
    void *work;   /* product scratch */
    size_t distinct;
} acts;

static void acts_make(acts *A, size_t n) {
    memset(A, 0, sizeof *A);
    A->n = n;
    A->x = dev_floats(n * 8192, 1.0f);
    A->h = dev_floats(n * H, 1.0f);
    A->y = dev_floats(n * 16384, 1.0f);
    A->y2 = dev_floats(n * 16384, 1.0f);
    A->big = dev_floats(n * KX * 2048, 1.0f);
    A->big2 = dev_floats(n * KX * 2048, 1.0f);
    A->wts = dev_floats(n * KX, 0.1f);
    A->gate_logit = dev_floats(n, 1.0f);
    int32_t *ids = malloc(n * KX * sizeof(int32_t));
    for (size_t r = 0; r < n; r++)
        for (size_t j = 0; j < KX; j++) {
            int32_t e;
            int dup;
            do {
                e = n == 1 ? (int32_t)(31 * j + 5) : (int32_t)(rnd() % E);
                dup = 0;
                for (size_t q = 0; q < j; q++) dup |= ids[r * KX + q] == e;
            } while (dup);
            ids[r * KX + j] = e;
        }
    for (size_t s = 0; s < n * KX; s++) {
        int seen = 0;
        for (size_t t = 0; t < s; t++) seen |= ids[t] == ids[s];
        A->distinct += !seen;
    }
    A->ids = bench_dev_copy(ids, n * KX * sizeof(int32_t));
    free(ids);
    CU(cudaMalloc(&A->work, 256u << 20)); /* larger than any op's scratch at these row counts */
}

static void acts_free(acts *A) {
    cudaFree(A->x), cudaFree(A->h), cudaFree(A->y), cudaFree(A->y2), cudaFree(A->big), cudaFree(A->big2);
    cudaFree(A->wts), cudaFree(A->gate_logit), cudaFree(A->ids), cudaFree(A->work);
}

/* A dense product's line: `kind` K_MM / K_GLU / K_PAIR over COPIES copies of n_out (x2 for the pairs) x n_in. */
static double dense(const char *name, acts *A, enum kind kind, uint32_t type, size_t n_out, size_t n_in, double pred) {
    const size_t mats = kind == K_MM ? 1 : 2, mat = quant_row_bytes(type, n_in) * n_out * mats;
    op c = {.kind = kind, .type = type, .wstride = mat, .n_out = n_out, .n_in = n_in, .rows = A->n, .x = A->x,
            .y = A->y, .y2 = A->y2, .work = A->work};
    c.w = dev_weights(type, COPIES * n_out * mats, n_in);
    const double t = line(name, &c, COPIES, (double)mat, pred);
    CU(cudaFree((void *)c.w));
    return t;
}

static double multi(const char *name, acts *A, uint32_t type, size_t n_seg, const size_t *outs, double pred) {
    size_t tot = 0;
    op c = {.kind = K_MULTI, .type = type, .n_in = H, .rows = A->n, .n_seg = n_seg, .x = A->x, .y = A->y,
            .work = A->work};
    for (size_t s = 0; s < n_seg; s++) c.seg_out[s] = outs[s], tot += outs[s];
    c.wstride = quant_row_bytes(type, H) * tot;
    c.w = dev_weights(type, COPIES * tot, H);
    const double t = line(name, &c, COPIES, (double)c.wstride, pred);
    CU(cudaFree((void *)c.w));
    return t;
}

/* The routed experts: K_MOE_GLU (1 row: gate + up + SwiGLU), K_MOE_PAIR (gate + up, chunk form), K_MOE (down) */
static double experts(const char *name, acts *A, enum kind kind, size_t n_out, size_t n_in, double pred) {
    const size_t ex = quant_row_bytes(QUANT_Q4_K, n_in) * n_out, stack = ex * E;
    op c = {.kind = kind, .type = QUANT_Q4_K, .wstride = stack, .n_out = n_out, .n_in = n_in, .rows = A->n,
            .x = kind == K_MOE ? A->big : A->x, .per_slot = kind == K_MOE, .y = A->big2, .y2 = A->y2,
            .ids = A->ids, .work = A->work};
    if (kind == K_MOE_PAIR) c.y = A->big2, c.y2 = A->big;
    c.w = dev_weights(QUANT_Q4_K, (COPIES + 1) * E * n_out, n_in); /* + 1: the up stack of the last copy */
    const double mats = kind == K_MOE ? 1 : 2;
    char nm[96];
    snprintf(nm, sizeof nm, "%s (%zu experts)", name, A->distinct);
    const double t = line(nm, &c, COPIES, mats * (double)A->distinct * (double)ex, pred);
    CU(cudaFree((void *)c.w));
    return t;
}

/* The GDN mixer at 1 row (one sequence) or 16 (16 sequences of one row): conv, then conv + recurrence + gated
 * norm (cuda_gdn_mix, recurrent form); states and rings per copy. *conv gets the conv's time. */
static double gdn(acts *A, double *conv, double pred_conv, double pred_mix) {
    const int ns = (int)A->n;
    const size_t copies = A->n == 1 ? SCOPIES : COPIES, S = (size_t)GNV * 128 * 128;
    op c = {.kind = K_GDN_CONV, .rows = A->n, .n_seq = ns, .gd = {16, 32, 128, 128, 4, EPS, 1}};
    c.x = A->x;                 /* mixed [n][GCD] */
    c.z = A->y2;                /* [n][GZ] */
    c.a = dev_floats(A->n * GNV, 1.0f), c.b = dev_floats(A->n * GNV, 1.0f);
    c.y = A->y;
    c.gw.conv_w = dev_floats((size_t)GCD * 4, 0.5f);
    c.gw.ssm_a = dev_floats(GNV, 1.0f);
    c.gw.dt_bias = dev_floats(GNV, 0.5f);
    c.gw.norm_w = dev_floats(128, 1.0f);
    CU(cudaMalloc(&c.work, cuda_gdn_mix_workspace_bytes(&c.gd, ns)));
    float *states = NULL, *rings = NULL;
    const size_t nst = copies * (size_t)ns;
    CU(cudaMalloc((void **)&states, nst * S * sizeof(float)));
    CU(cudaMemset(states, 0, nst * S * sizeof(float)));
    rings = dev_floats(nst * 3 * GCD, 1.0f);
    cuda_gdn_seq *hs = malloc(nst * sizeof *hs);
    for (size_t i = 0; i < nst; i++)
        hs[i] = (cuda_gdn_seq){.ring = rings + i * 3 * GCD, .state = states + i * S, .row0 = (int32_t)(i % ns), .n = 1};
    c.gseq = bench_dev_copy(hs, nst * sizeof *hs);
    free(hs);
    const double ring_b = 2.0 * 3 * GCD * 4 * ns, rows_b = (double)ns * (2 * GCD + 2 * GZ + 2 * GNV) * 4;
    *conv = line("gdn conv (ring + silu)", &c, copies, ring_b + (double)ns * 2 * GCD * 4, pred_conv);
    c.kind = K_GDN_MIX;
    const double t = line("gdn mix: conv + recurrent step + gated norm", &c, copies, 2.0 * S * 4 * ns + ring_b + rows_b,
                          pred_mix);
    cudaFree(c.a), cudaFree(c.b), cudaFree((void *)c.gw.conv_w), cudaFree((void *)c.gw.ssm_a);
    cudaFree((void *)c.gw.dt_bias), cudaFree((void *)c.gw.norm_w), cudaFree(c.work), cudaFree(states), cudaFree(rings);
    cudaFree(c.gseq);
    return t;
}

/* Attention at 1 / 16 sequences of one row over a CTX-token cache: prepare (q/k norm, RoPE, the K/V row
 * written), then the forward with max_kv as the pass gives it (the session's max_context). */
static double attention(acts *A, int max_kv, double *prep, double pred_prep, double pred_fwd) {
    const int ns = (int)A->n;
    const size_t copies = A->n == 1 ? SCOPIES : COPIES, kv = (size_t)(CTX + 1) * AKV;
    op c = {.kind = K_ATTN_PREP, .rows = A->n, .n_seq = ns, .ad = {16, 2, 256, 64, EPS}, .max_kv = max_kv};
    c.y = A->y; /* qg [n][8192] */
    c.y2 = A->y2;
    c.k = dev_floats(A->n * AKV, 1.0f), c.v = dev_floats(A->n * AKV, 1.0f);
    c.qn = dev_floats(256, 1.0f), c.kn = dev_floats(256, 1.0f), c.invf = dev_floats(32, 0.01f);
    const size_t wb = cuda_attn_workspace_bytes(&c.ad, ns, 1, max_kv);
    CU(cudaMalloc(&c.work, wb ? wb : 256));
    const size_t nst = copies * (size_t)ns;
    float *caches = dev_floats(nst * 2 * kv, 1.0f);
    cuda_attn_seq *hs = malloc(nst * sizeof *hs);
    for (size_t i = 0; i < nst; i++)
        hs[i] = (cuda_attn_seq){.k_cache = caches + 2 * i * kv, .v_cache = caches + (2 * i + 1) * kv, .pos = CTX,
                                .row0 = (int32_t)(i % ns), .n = 1};
    c.aseq = bench_dev_copy(hs, nst * sizeof *hs);
    free(hs);
    *prep = line("attn prepare (q/k norm, RoPE, K/V row store)", &c, copies, (double)ns * (AQ + 3 * AKV) * 4,
                 pred_prep);
    c.kind = K_ATTN_FWD;
    const cuda_attn_plan_t pl = cuda_attn_plan(&c.ad, 1, max_kv);
    char nm[96];
    snprintf(nm, sizeof nm, "attn forward, %d-token cache, max_kv %d (%d splits)", CTX, max_kv, pl.n_splits);
    const double t = line(nm, &c, copies, (double)ns * (2.0 * kv * 4 + (AQ + AO) * 4), pred_fwd);
    cudaFree(c.k), cudaFree(c.v), cudaFree(c.qn), cudaFree(c.kn), cudaFree(c.invf), cudaFree(c.work);
    cudaFree(caches), cudaFree(c.aseq);
    return t;
}

/* Predictions (us), [0]: 1 row, [1]: 16 rows; read from the kernels before any run (see run.sh). */
typedef struct preds {
    double norm, gdn_in, gdn_conv, gdn_mix, gdn_out, router, route, moe_gu, swiglu, moe_down, sh_gu, sh_down,
        combine, attn_qkv, attn_prep, attn_fwd, attn_o, embed, head, d2h;
} preds;
static const preds PRED[2] = {
    {3, 16, 3, 10, 8, 5, 3, 9, 0, 8, 5, 4, 3, 13, 3, 6, 8, 3, 300, 25},
    {3, 43, 4, 25, 13, 14, 4, 75, 3, 45, 10, 5, 3, 27, 4, 15, 13, 3, 500, 300},
};

static void bench_ops(size_t n, int max_kv) {
    const preds *P = &PRED[n > 1];
    acts A;
    acts_make(&A, n);
    const uint32_t q8 = QUANT_Q8_0;
    printf("== decode ops at %zu row%s (%s), each in a CUDA graph over copies of its weights/states\n", n,
           n > 1 ? "s" : "", n > 1 ? "the stacked AR step of clover serve: 16 sequences of one row" : "a lone step");
    op nm = {.kind = K_ADDNORM, .rows = n, .y2 = A.x, .h = A.h, .y = A.y, .fw = A.wts};
    nm.fw = dev_floats(H, 1.0f);
    const double norm = line("residual add + rms norm (x2 a layer)", &nm, COPIES, (double)n * H * 4 * 4, P->norm);
    cudaFree((void *)nm.fw);
    /* the MoE half, the same in both layer kinds */
    const size_t rw[2] = {E, 1};
    const double router = multi(n > 1 ? "router + shexp gate logit f32 257x2048 (decode, 2 x 8 rows)"
                                      : "router + shexp gate logit f32 257x2048 (decode_multi)",
                                &A, QUANT_F32, 2, rw, P->router);
    op ro = {.kind = K_ROUTE, .rows = n, .x = A.y, .y = A.wts, .ids = A.ids};
    /* the routing writes ids: give it its own so the experts' ids stay as drawn */
    CU(cudaMalloc((void **)&ro.ids, n * KX * sizeof(int32_t)));
    const double route = line("route: softmax + top-8", &ro, COPIES, 0, P->route);
    cudaFree(ro.ids);
    double moe_gu, swiglu = 0, moe_down, sh_gu, sh_down;
    if (moe_dec32(n)) {
        moe_gu = experts(n > 1 ? "experts gate + up + swiglu q4_K 512x2048 (dec32, fused)"
                               : "experts gate + up + swiglu q4_K 512x2048 (dec32, fused, 1 row)",
                         &A, K_MOE_GLU, FE, H, n > 1 ? DEC32_PRED_GU16 : P->moe_gu);
    } else if (n > 1) {
        moe_gu = experts("experts gate + up q4_K 512x2048 (chunk pair)", &A, K_MOE_PAIR, FE, H, P->moe_gu);
        op sw = {.kind = K_SWIGLU, .rows = n, .y = A.big2, .y2 = A.big, .n_out = n * KX * FE};
        swiglu = line("experts swiglu", &sw, COPIES, (double)n * KX * FE * 12, P->swiglu);
    } else {
        moe_gu = experts(cuda_moe_fast_enabled() ? "experts gate + up + swiglu q4_K 512x2048 (fused, fast)"
                                                 : "experts gate + up + swiglu q4_K 512x2048 (fused)",
                         &A, K_MOE_GLU, FE, H, P->moe_gu);
    }
    moe_down = experts(moe_dec32(n)                           ? "experts down q4_K 2048x512 (dec32)"
                       : cuda_moe_fast_enabled() && n <= 8 ? "experts down q4_K 2048x512 (fast)"
                                                           : "experts down q4_K 2048x512",
                       &A, K_MOE,
                       H, FE, moe_dec32(n) && n > 1 ? DEC32_PRED_DOWN16 : P->moe_down);
    if (n > 1) {
        sh_gu = dense("shexp gate + up q8_0 512x2048 (chunk pair)", &A, K_PAIR, q8, FS, H, P->sh_gu);
        op sw = {.kind = K_SWIGLU, .rows = n, .y = A.y, .y2 = A.y2, .n_out = n * FS};
        swiglu += line("shexp swiglu", &sw, COPIES, (double)n * FS * 12, 3);
    } else {
        sh_gu = dense("shexp gate + up + swiglu q8_0 512x2048 (fused)", &A, K_GLU, q8, FS, H, P->sh_gu);
    }
    sh_down = dense("shexp down q8_0 2048x512", &A, K_MM, q8, H, FS, P->sh_down);
    op cb = {.kind = K_COMBINE, .rows = n, .y2 = A.y2, .y = A.big2, .ids = A.ids, .a = A.wts, .h = A.h,
             .b = A.gate_logit};
    const double combine = line("experts weighted sum + gated shexp", &cb, COPIES, (double)n * (KX + 2) * H * 4,
                                P->combine);
    const double moe = router + route + moe_gu + swiglu + moe_down + sh_gu + sh_down + combine;
    /* the sum, the residual add and the next norm in one launch (what the backend runs: one launch less a layer) */
    op cn = cb;
    cn.kind = K_CMBNORM, cn.z = A.x, cn.fw = dev_floats(H, 1.0f);
    cuda_combine_norm_set(1); /* timed whatever CLOVER_CUDA_COMBINE_NORM says for the step below */
    line("  the same + residual add + norm (one launch)", &cn, COPIES, (double)n * (KX + 3) * H * 4, n > 1 ? 3 : 2.5);
    cuda_combine_norm_set(-1);
    cudaFree((void *)cn.fw);
    /* GDN mixer */
    const size_t gin[4] = {GCD, GZ, GNV, GNV};
    const double gdn_in = multi(n > 1 ? "gdn in-proj q8_0 qkv/z/alpha/beta (4 chunk products)"
                                      : "gdn in-proj q8_0 8192+4096+32+32 x2048 (decode_multi)",
                                &A, q8, 4, gin, P->gdn_in);
    double gconv;
    const double gmix = gdn(&A, &gconv, P->gdn_conv, P->gdn_mix);
    const double gdn_out = dense("gdn out q8_0 2048x4096", &A, K_MM, q8, H, GZ, P->gdn_out);
    /* attention mixer */
    const size_t aqkv[3] = {AQ, AKV, AKV};
    const double attn_qkv = multi(n > 1 ? "attn q/k/v q8_0 (3 chunk products)" : "attn q+gate/k/v q8_0 8192+512+512 x2048",
                                  &A, q8, 3, aqkv, P->attn_qkv);
    double aprep;
    const double afwd = attention(&A, max_kv, &aprep, P->attn_prep, P->attn_fwd);
    if (max_kv != CTX + 1) {
        double p2;
        /* the same at the smallest max_kv (the decode form's grid: 66 splits a KV head at 262144, 33 here) */
        attention(&A, CTX + 1, &p2, P->attn_prep, P->attn_fwd * 0.85);
    }
    const double attn_o = dense("attn o q8_0 2048x4096", &A, K_MM, q8, H, AO, P->attn_o);
    /* once per step */
    op em = {.kind = K_EMBED, .type = q8, .rows = n, .y = A.h, .ids = A.ids};
    em.w = dev_weights(q8, 4096, H); /* the rows the ids name (< 256) */
    const double embed = line("embedding row(s) q8_0", &em, COPIES, (double)n * quant_row_bytes(q8, H), P->embed);
    cudaFree((void *)em.w);
    /* the head: 540 MB, one copy is already past L2; the decode kernel at 1 row, the chunk form at 16 (takes_decode:
     * a stacked pass of more than 8 rows takes the chunk GEMM for a quantised weight) */
    op hd = {.kind = K_MM, .type = q8, .n_out = VOCAB, .n_in = H, .rows = n, .x = A.x, .work = A.work};
    CU(cudaMalloc((void **)&hd.y, (size_t)n * VOCAB * sizeof(float)));
    hd.w = dev_weights(q8, VOCAB, H);
    const double hb = (double)VOCAB * quant_row_bytes(q8, H);
    const double head = line(n > 1 ? "output head q8_0 248320x2048 (chunk form)" : "output head q8_0 248320x2048 (decode)",
                             &hd, 1, hb, P->head);
    cudaFree((void *)hd.w);
    op dh = {.kind = K_D2H, .y = hd.y, .n_out = n * VOCAB};
    CU(cudaHostAlloc(&dh.host, n * VOCAB * sizeof(float), 0));
    /* a lone step copies its logits back; the stacked step picks on the device (not in its sum) */
    const double d2h = line(n > 1 ? "logits copy back of 16 rows (not in the stacked step's sum)"
                                  : "logits copy back (pinned, in the graph)",
                            &dh, 1, (double)n * VOCAB * 4, P->d2h);
    cudaFreeHost(dh.host), cudaFree(hd.y);

    const double gdn_layer = 2 * norm + gdn_in + gmix + gdn_out + moe;
    const double attn_layer = 2 * norm + attn_qkv + aprep + afwd + attn_o + moe;
    const double once = embed + head + (n > 1 ? 0 : d2h);
    const double step = 30 * gdn_layer + 10 * attn_layer + once;
    printf("  sums at %zu row%s: moe half %.1f us (router %.1f, route %.1f, experts %.1f, shexp %.1f, combine %.1f);"
           " gdn layer %.1f us (mixer %.1f); attention layer %.1f us (mixer %.1f); once per step %.1f us (head %.1f)\n",
           n, n > 1 ? "s" : "", moe * 1e6, router * 1e6, route * 1e6, (moe_gu + swiglu + moe_down) * 1e6,
           (sh_gu + sh_down) * 1e6, combine * 1e6, gdn_layer * 1e6, (gdn_in + gmix + gdn_out) * 1e6,
           attn_layer * 1e6, (attn_qkv + aprep + afwd + attn_o) * 1e6, once * 1e6, head * 1e6);
    printf("SUM ops %2zu row%s: 30 x %.1f + 10 x %.1f + %.1f = %.3f ms a step (%.0f tok/s)   [pred ~%.1f ms]\n", n,
           n > 1 ? "s" : " ", gdn_layer * 1e6, attn_layer * 1e6, once * 1e6, step * 1e3, (double)n / step,
           n > 1 ? 10.5 : 3.4);
    printf("  by kind x40 layers: norms %.3f ms, dense mixer products %.3f, gdn mixer %.3f, attention %.3f, "
           "router+route %.3f, routed experts %.3f, shexp %.3f, combine %.3f, once %.3f\n",
           80 * norm * 1e3, (30 * (gdn_in + gdn_out) + 10 * (attn_qkv + attn_o)) * 1e3, 30 * gmix * 1e3,
           10 * (aprep + afwd) * 1e3, 40 * (router + route) * 1e3, 40 * (moe_gu + swiglu + moe_down) * 1e3,
           40 * (sh_gu + sh_down) * 1e3, 40 * combine * 1e3, once * 1e3);
    acts_free(&A);
}

/* ---- the real backend's decode step on a model file ---- */
static double now_ms(void) { return timer_now() * 1e3; }

/* The one-row pass captured on the session's stream into a graph of our own: its nodes counted by type and its
 * replays timed back to back (ms a replay). */
static double capture_pass(backend_session *s, const char *label, double pred_ms) {
    clover_error err = {0};
    cuda_pass p = {.pos = s->n_past, .n = 1, .head_r0 = 0};
    for (size_t i = 0; i < s->n_attn; i++) s->h_aseq[i].pos = (int32_t)s->n_past, s->h_aseq[i].n = 1;
    for (size_t i = 0; i < s->n_gdn; i++) s->h_gseq[i].n = 1;
    cudaStream_t st = (cudaStream_t)s->stream;
    CU(cudaStreamSynchronize(st));
    cudaGraph_t g;
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    const int rc = cuda_pass_enqueue(s, &p, &err);
    CU(cudaStreamEndCapture(st, &g));
    if (rc) fail(err.message);
    size_t nn = 0;
    CU(cudaGraphGetNodes(g, NULL, &nn));
    cudaGraphNode_t *nodes = malloc(nn * sizeof *nodes);
    CU(cudaGraphGetNodes(g, nodes, &nn));
    size_t kern = 0, copy = 0, other = 0;
    for (size_t i = 0; i < nn; i++) {
        enum cudaGraphNodeType t;
        CU(cudaGraphNodeGetType(nodes[i], &t));
        if (t == cudaGraphNodeTypeKernel) kern++;
        else if (t == cudaGraphNodeTypeMemcpy) copy++;
        else other++;
    }
    free(nodes);
    cudaGraphExec_t ge;
    CU(cudaGraphInstantiate(&ge, g, 0));
    for (int w = 0; w < 3; w++) CU(cudaGraphLaunch(ge, st));
    CU(cudaStreamSynchronize(st));
    const int reps = 50;
    CU(cudaEventRecord(ev0, st));
    for (int r = 0; r < reps; r++) CU(cudaGraphLaunch(ge, st));
    CU(cudaEventRecord(ev1, st));
    CU(cudaEventSynchronize(ev1));
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, ev0, ev1));
    printf("STEP lone pass in our graph, %-9s %8.3f ms  (%zu nodes: %zu kernels, %zu copies, %zu other; %.2f us a kernel)"
           "   [pred ~%.1f ms]\n",
           label, ms / reps, nn, kern, copy, other, ms / reps * 1e3 / (double)(kern ? kern : 1), pred_ms);
    CU(cudaGraphExecDestroy(ge));
    CU(cudaGraphDestroy(g));
    return ms / reps;
}

/* ms a step of N sequences' one-row commits in one backend call (greedy picks on the device: the AR step of
 * clover serve and bench_batch, which takes the stacked pass, backend_cuda_stack.c), over G steps after 3. */
static void one_batched_step(backend *be, backend_session **ss, size_t N) {
    enum { NMAX = 16 };
    backend_commit_seq q[NMAX];
    int32_t tok[NMAX], id[NMAX];
    float conf[NMAX];
    const backend_pick pk = {.temperature = 0.0f};
    for (size_t i = 0; i < N; i++) {
        tok[i] = 1000 + (int32_t)i; /* fixed tokens: no dependence on the picks */
        q[i] = (backend_commit_seq){.s = ss[i], .ids = &tok[i], .n = 1, .pick = &pk, .n_pick = 1};
        q[i].pick_out.id = &id[i], q[i].pick_out.conf = &conf[i];
    }
    if (backend_cuda.commit(be, q, N, NULL)) {
        for (size_t i = 0; i < N; i++)
            if (q[i].rc) fail(q[i].err.message);
        fail("batched commit failed");
    }
}

static double batched_step(backend *be, backend_session **ss, size_t N) {
    enum { G = 32 };
    double ts = 0;
    for (int g = 0; g < G + 3; g++) {
        if (g == 3) ts = now_ms();
        one_batched_step(be, ss, N);
    }
    return (now_ms() - ts) / G;
}

static int bench_step(const char *path) {
    clover_model *m = NULL;
    clover_error err = {0};
    const double t0 = now_ms();
    if (clover_model_load(&m, path, &err)) fail(err.message);
    const size_t V = m->hp.n_vocab;
    backend_config cfg = {.max_rows = 512, .max_context = 4096};
    tseq *q = NULL;
    if (seq_create(&backend_cuda, m, &cfg, &q, &err)) fail(err.message);
    printf("== the backend's decode step on %s (%u layers, max_context %zu; load + upload %.1f s)\n", path,
           m->hp.n_layer, cfg.max_context, (now_ms() - t0) * 1e-3);
    int32_t *ids = malloc(CTX * sizeof *ids);
    for (size_t i = 0; i < CTX; i++) ids[i] = (int32_t)(rnd() % V);
    float *lg = malloc(V * sizeof *lg);
    backend_commit_seq last = {.last_logits = lg};
    if (seq_commit(q, ids, CTX, &last, NULL, &err)) fail(err.message);
    const int32_t next = 1000; /* a fixed token: no host argmax inside the timing */
    const char *nc = getenv("CLOVER_BENCH_DECODE_NCU");
    if (nc && atoi(nc) == 1) {
        /* for `ncu --profile-from-start off`: exactly one one-row pass, kernel by kernel, after the prompt */
        backend_session *s = q->s;
        cuda_pass p = {.pos = s->n_past, .n = 1, .head_r0 = 0};
        s->h_ids[0] = next;
        for (size_t i = 0; i < s->n_attn; i++) s->h_aseq[i].pos = (int32_t)s->n_past, s->h_aseq[i].n = 1;
        for (size_t i = 0; i < s->n_gdn; i++) s->h_gseq[i].n = 1;
        CU(cudaDeviceSynchronize());
        CU(cudaProfilerStart());
        if (cuda_pass_enqueue(s, &p, &err)) fail(err.message);
        CU(cudaStreamSynchronize((cudaStream_t)s->stream));
        CU(cudaProfilerStop());
        printf("NCU one eager decode pass profiled (after a %d-token prompt)\n", CTX);
        seq_free(q);
        clover_model_free(m);
        free(ids), free(lg);
        return 0;
    }
    for (int w = 0; w < 3; w++)
        if (seq_commit(q, &next, 1, &last, NULL, &err)) fail(err.message);
    enum { G = 32 };
    double ts = now_ms();
    for (int g = 0; g < G; g++)
        if (seq_commit(q, &next, 1, &last, NULL, &err)) fail(err.message);
    const double step = (now_ms() - ts) / G;
    printf("STEP seq_commit (1 row, logits back, sync)     %8.3f ms  (%.1f tok/s)   [before 5.609 ms (bench_batch AR "
           "N=1 pass); pred ~5.6]\n",
           step, 1e3 / step);
    printf("  (stacked pass graphs replayed: %s; the session's own decode graph: %s)\n",
           cuda_backend_stack_graphs(q->be) ? "yes" : "no", cuda_backend_graph_used(q->s) ? "yes" : "no");
    /* the AR step of serve / bench_batch: N sequences' one-row commits with device picks in one call */
    {
        enum { N = 16 };
        backend_session *ss[N] = {q->s};
        for (size_t i = 1; i < N; i++) {
            if (backend_cuda.session_create(q->be, &ss[i], &err)) fail(err.message);
            backend_commit_seq c = {.s = ss[i], .ids = ids, .n = CTX};
            if (backend_cuda.commit(q->be, &c, 1, NULL)) fail(c.err.message);
        }
        const double t1 = batched_step(q->be, ss, 1), t16 = batched_step(q->be, ss, N);
        printf("STEP batched commit, 1 sequence, device pick   %8.3f ms  (%.1f tok/s)   [before 5.609 ms (bench_batch "
               "AR N=1 pass); pred ~5.5]\n", t1, 1e3 / t1);
        printf("STEP batched commit, 16 sequences, device pick %8.3f ms  (%.1f tok/s)   [before 21.41 ms (bench_batch "
               "AR N=16 pass); pred ~21]\n", t16, 16e3 / t16);
        const char *tr = getenv("CLOVER_BENCH_DECODE_TRACE");
        if (tr && atoi(tr) == 1) { /* one marked step of 1 and of 16 sequences, for bench/cuda_kernel_trace.c */
            for (size_t n = 1; n <= N; n += N - 1) {
                CU(cudaProfilerStart());
                one_batched_step(q->be, ss, n);
                CU(cudaProfilerStop());
                printf("TRACE marked: one batched step of %zu sequence%s (graph replay)\n", n, n > 1 ? "s" : "");
            }
        }
        for (size_t i = 1; i < N; i++) backend_cuda.session_free(ss[i]);
    }
    backend_session *s = q->s;
    capture_pass(s, "PDL on:", 4.5);
    cuda_pdl_set(0);
    capture_pass(s, "PDL off:", 4.9);
    cuda_pdl_set(1);
    /* kernel by kernel: the host's enqueue time, and to the sync */
    cuda_pass p = {.pos = s->n_past, .n = 1, .head_r0 = 0};
    double enq = 0, tot = 0;
    for (int g = 0; g < 8 + 2; g++) {
        const double a = now_ms();
        if (cuda_pass_enqueue(s, &p, &err)) fail(err.message);
        const double b = now_ms();
        CU(cudaStreamSynchronize((cudaStream_t)s->stream));
        const double c = now_ms();
        if (g >= 2) enq += b - a, tot += c - a;
    }
    printf("STEP pass eager (no graph): enqueue %.3f ms on the host, %.3f ms to the sync   [pred ~2.5 / ~6.5]\n", enq / 8,
           tot / 8);
    seq_free(q);
    clover_model_free(m);
    free(ids), free(lg);
    return 0;
}

int main(int argc, char **argv) {
    char why[256] = "";
    cuda_device_info info;
    const int found = bench_cuda_device("bench_cuda_decode", &info);
    if (found) return found;
    CU(cudaEventCreate(&ev0));
    CU(cudaEventCreate(&ev1));
    if (cuda_attn_init() || cuda_gdn_init()) fail("attention / GDN init");
    double gbs = 0;
    if (cuda_copy_bandwidth(1ull << 30, 5, &gbs, why)) fail(why);
    g_bw = gbs * 1e9;
    const char *mk = getenv("CLOVER_BENCH_DECODE_MAXKV");
    const int max_kv = mk ? atoi(mk) : 262144;
    printf("device: %s, %d SMs; copy bandwidth %.0f GB/s ((read + written) / time); floor of a token's weights at "
           "it: ~%.2f ms\n",
           info.name, info.sm_count, gbs, 2.69e9 / g_bw * 1e3);
    { /* ~0.3 s of memsets: the SM clock ramps up from idle (bench_cuda_mixer.c saw 345 MHz before a first run) */
        void *wb = NULL;
        CU(cudaMalloc(&wb, 1u << 30));
        const double t0 = now_ms();
        while (now_ms() - t0 < 300) {
            for (int i = 0; i < 20; i++) CU(cudaMemsetAsync(wb, i, 1u << 30, 0));
            CU(cudaDeviceSynchronize());
        }
        CU(cudaFree(wb));
    }
    const char *only = getenv("CLOVER_BENCH_DECODE_ROWS"); /* "1" or "16": one row count only */
    if (!only || atoi(only) == 1) bench_ops(1, max_kv);
    if (!only || atoi(only) == 16) bench_ops(16, max_kv);
    if (argc > 1) return bench_step(argv[1]);
    return 0;
}
