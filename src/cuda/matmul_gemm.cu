/*
 * matmul_gemm.cu: the chunk products (any row count; meant for prompts and
 * commits of 9..512+ rows): dense cuda_matmul_chunk(_ws) and the grouped
 * expert form cuda_moe_chunk. Q8_0/K-quant weights go to the integer GEMM
 * of matmul_igemm.cu (unless a row is too long for its shared memory); the
 * float types (and that fallback) take the TF32 kernel below, one
 * tensor-core kernel for dense and MoE.
 *
 * A thread block computes a 64x64 tile of y (64 activation rows x 64
 * outputs) with 4 warps of 32x32, through mma.sync m16n8k8 in TF32 with f32
 * accumulators. Per step of 32 along n_in, the block loads its 64 x rows into
 * shared memory and dequantises its 64 weight rows' 32 values exactly as
 * dequant_scalar.c does (mm_load16 + mm_decode16), both rounded to TF32
 * (cvt.rna); the loads of the next step are in flight during this step's mma.
 * Rows of 36 words keep the fragment reads free of bank conflicts. Every
 * output sums its k-steps in the same order whatever the other rows, so a
 * row's bits do not depend on the chunk. Precision: cuda_matmul.h.
 *
 * MoE: a one-block pass on the device counts the slots of each expert,
 * lays them out grouped by expert (perm) and writes a table of tiles of up
 * to 64 slots of one expert; the GEMM's grid.y walks that table (blocks past
 * its end return; the integer path's WIDE tiles: a grid of ~2 waves whose
 * blocks loop over it, matmul_igemm.cu's tile loop), so each routed expert's
 * weights are read once per tile of 64 rows that use it, with no host
 * synchronisation. Slots of an expert land
 * in perm in any order (atomics); rows are independent, so the result is
 * deterministic anyway. With CLOVER_CUDA_MOE_PERSIST=1 (off by default) the
 * integer path's few-slot (WIDE) plans for Q4_K / Q5_K take matmul_igemm.cu's
 * PERSIST form instead: tiles of 8, 16 or 32 slots (igp_tile, by shape) and a
 * fixed grid of ~1-2 blocks an SM that walks them (same bits).
 */
#include <math.h>

#include "matmul_internal.cuh"
#include "matmul_igemm.cuh"
#include "matmul_igemm_few.cuh"
#include "matmul_mma_rows.cuh"
#include "matmul_igemm_wide.cuh"
#include "matmul_q8_rows32.cuh"
#include "cuda_pdl.cuh"
#include "cuda_switch.h"

enum { BM = 64, BN = 64, BK = 32, LDS = BK + 4, GEMM_THREADS = 128 };

typedef struct gemm_params {
    const uint8_t *w;
    size_t row_bytes, expert_stride;
    int n_out, n_in;
    const float *x;
    float *y;
    int n_rows;            /* dense: rows of x and y */
    const int32_t *perm;   /* MoE: slots grouped by expert; NULL for dense */
    const int32_t *tiles;  /* MoE: [n][3] expert, first index into perm, count */
    const int32_t *ntiles; /* MoE: number of tiles */
    int k, x_per_slot;
} gemm_params;

__device__ __forceinline__ uint32_t to_tf32(float f) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
    return r;
}

__device__ __forceinline__ void mma_tf32(float *c, const uint32_t *a, const uint32_t *b) {
    asm(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int T>
__global__ void __launch_bounds__(GEMM_THREADS) gemm_kernel(gemm_params p) {
    __shared__ uint32_t xs[2][BM][LDS];
    __shared__ uint32_t ws[2][BN][LDS];
    __shared__ int xrow[BM], yrow[BM];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n0 = blockIdx.x * BN;
    int e = 0, m_count;
    pdl_wait(); /* the rows (and the tiles) are earlier kernels' outputs (cuda_pdl.cuh) */
    pdl_trigger();
    if (p.perm == NULL) {
        const int m0 = blockIdx.y * BM;
        m_count = min(BM, p.n_rows - m0);
        if (tid < BM) xrow[tid] = yrow[tid] = m0 + tid;
    } else {
        if ((int)blockIdx.y >= *p.ntiles) return;
        const int32_t *t = p.tiles + 3 * blockIdx.y;
        e = t[0];
        m_count = t[2];
        if (tid < BM) {
            const int s = tid < m_count ? p.perm[t[1] + tid] : 0;
            yrow[tid] = s;
            xrow[tid] = p.x_per_slot ? s : s / p.k;
        }
    }
    __syncthreads();
    const uint8_t *wbase = p.w + (size_t)e * p.expert_stride;
    const int g = lane >> 2, tig = lane & 3, wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[i][j][c] = 0.0f;

    /* This thread loads row lr, values 16*lh..+15 of each k-step, one step
     * ahead: the raw loads of step k+1 are issued before the mma of step k,
     * into registers; shared memory is double-buffered, so one barrier per
     * step orders both the writes and the reuse. */
    const int lr = tid >> 1, lh = tid & 1;
    const bool x_live = lr < m_count, w_live = n0 + lr < p.n_out;
    const float *xsrc = p.x + (size_t)xrow[lr] * p.n_in;
    const uint8_t *wsrc = wbase + (size_t)(w_live ? n0 + lr : 0) * p.row_bytes;
    float xv[16];
    mm_raw16 raw;
    auto load = [&](int k0) {
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int kk = k0 + 16 * lh + i;
            xv[i] = x_live && kk < p.n_in ? xsrc[kk] : 0.0f;
        }
        if (w_live) mm_load16<T>(wsrc, k0 / 16 + lh, p.n_in, &raw);
    };
    load(0);
    int buf = 0;
    for (int k0 = 0; k0 < p.n_in; k0 += BK, buf ^= 1) {
        {
            float v[16];
            if (w_live)
                mm_decode16<T>(&raw, k0 / 16 + lh, v);
            else
#pragma unroll
                for (int i = 0; i < 16; i++) v[i] = 0.0f;
#pragma unroll
            for (int i = 0; i < 16; i++) {
                xs[buf][lr][16 * lh + i] = to_tf32(xv[i]);
                ws[buf][lr][16 * lh + i] = to_tf32(v[i]);
            }
        }
        __syncthreads();
        if (k0 + BK < p.n_in) load(k0 + BK);
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            uint32_t a[2][4], b[4][2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int r = wm + 16 * i + g;
                a[i][0] = xs[buf][r][kk + tig];
                a[i][1] = xs[buf][r + 8][kk + tig];
                a[i][2] = xs[buf][r][kk + tig + 4];
                a[i][3] = xs[buf][r + 8][kk + tig + 4];
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int c = wn + 8 * j + g;
                b[j][0] = ws[buf][c][kk + tig];
                b[j][1] = ws[buf][c][kk + tig + 4];
            }
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) mma_tf32(acc[i][j], a[i], b[j]);
        }
    }
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int r = wm + 16 * i + g + (c >= 2 ? 8 : 0);
                const int o = n0 + wn + 8 * j + 2 * tig + (c & 1);
                if (r < m_count && o < p.n_out) p.y[(size_t)yrow[r] * p.n_out + o] = acc[i][j][c];
            }
}

static void gemm_launch(uint32_t type, const gemm_params *p, unsigned grid_y, cudaStream_t st) {
    const dim3 grid((unsigned)((p->n_out + BN - 1) / BN), grid_y), block(GEMM_THREADS);
    switch (type) {
    case MM_F32: pdl_launch_rows(gemm_kernel<MM_F32>, grid, block, 0, st, *p); break;
    case MM_F16: pdl_launch_rows(gemm_kernel<MM_F16>, grid, block, 0, st, *p); break;
    case MM_BF16: pdl_launch_rows(gemm_kernel<MM_BF16>, grid, block, 0, st, *p); break;
    case MM_Q8_0: pdl_launch_rows(gemm_kernel<MM_Q8_0>, grid, block, 0, st, *p); break;
    case MM_Q4_K: pdl_launch_rows(gemm_kernel<MM_Q4_K>, grid, block, 0, st, *p); break;
    case MM_Q5_K: pdl_launch_rows(gemm_kernel<MM_Q5_K>, grid, block, 0, st, *p); break;
    case MM_Q6_K: pdl_launch_rows(gemm_kernel<MM_Q6_K>, grid, block, 0, st, *p); break;
    default: break;
    }
}

extern "C" int cuda_matmul_supported(uint32_t type, size_t n_in) {
    return mm_type_ok(type) && n_in > 0 && n_in % mm_block_elems(type) == 0 && n_in <= (1u << 30);
}

int mm_check_shape(const char *op, uint32_t type, size_t n_out, size_t n_in, char *why, size_t why_len) {
    if (!mm_type_ok(type)) MM_FAIL("%s: weight type %u is not supported on CUDA", op, (unsigned)type);
    if (n_in == 0 || n_in % mm_block_elems(type) != 0)
        MM_FAIL("%s: n_in %zu is not a positive multiple of the type's block of %zu", op, n_in,
                mm_block_elems(type));
    if (n_in > (1u << 30) || n_out == 0 || n_out > (1u << 30))
        MM_FAIL("%s: shape %zu x %zu out of range", op, n_out, n_in);
    return 0;
}

int mm_launch_status(const char *op, char *why, size_t why_len) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) MM_FAIL("%s: launch failed: %s (%s)", op, cudaGetErrorString(e), cudaGetErrorName(e));
    return 0;
}

/* The dense chunk product; work (NULL or cuda_matmul_chunk_work_bytes) holds the 8-bit rows of the integer path. */
static int matmul_chunk(const char *op, uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x,
                        size_t n_rows, float *y, void *work, void *stream, char *why, size_t why_len,
                        const void *w2 = NULL, size_t n_out2 = 0, float *y2 = NULL, const float *xu = NULL);
/* After the first product of a dense pair on a path without the pair launch: the second as its own call. */
static int matmul_second(const char *op, uint32_t type, size_t n_in, const float *x, size_t n_rows, void *work,
                         void *stream, char *why, size_t why_len, const void *w2, size_t n_out2, float *y2) {
    if (mm_launch_status(op, why, why_len)) return -1;
    if (!w2) return 0;
    return matmul_chunk(op, type, w2, n_out2, n_in, x, n_rows, y2, work, stream, why, why_len);
}

/* A dense integer product's kernel for q (its rows, outputs and 8-bit rows set): the few-row mma form where its
 * switch takes the rows (it reads the rows from scratch), the K-split cluster form of 1..32 Q8_0 rows where on,
 * the wide 64+ row tile where on, else the 16 x BR tiles of rt x ot blocks. One choice for matmul_chunk and
 * chunk_ws_shared. */
static void ig_dense_launch(uint32_t type, const ig_params *q, bool scratch, unsigned rt, unsigned ot,
                            cudaStream_t st) {
    if (scratch && mr_take(type, (size_t)q->n_rows))
        mr_launch(q, st); /* few rows, weights as A: matmul_mma_rows.cu (CLOVER_CUDA_MMA_ROWS) */
    else if (scratch && q8r_launch(type, q, st)) /* 1..32 rows: matmul_q8_rows32.cu (CLOVER_CUDA_Q8_ROWS32) */
        return;
    else if (!igw_launch(type, q, st))
        ig_launch(type, q, rt, ot, st);
}

static int matmul_chunk(const char *op, uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x,
                        size_t n_rows, float *y, void *work, void *stream, char *why, size_t why_len, const void *w2,
                        size_t n_out2, float *y2, const float *xu) {
    if (mm_check_shape(op, type, n_out, n_in, why, why_len)) return -1;
    if (n_rows < 1 || n_rows > (size_t)BM * 65535) MM_FAIL("%s: %zu rows", op, n_rows);
    if (!w || !x || !y) MM_FAIL("%s: a NULL pointer", op);
    if ((uintptr_t)w & (mm_align(type) - 1)) MM_FAIL("%s: weights not %zu-byte aligned", op, mm_align(type));
    cudaStream_t st = (cudaStream_t)stream;
    {
        ig_params q = {};
        const int integer = ig_plan(type, n_in, n_rows > 32 ? 32 : (int)n_rows, work != NULL, &q);
        /* xu: the rows are silu(x) * xu, which only the quantiser into work forms */
        if (xu && (!integer || !work)) MM_FAIL("%s: SwiGLU rows need integer weights and scratch", op);
        if (integer) { /* integer (matmul_igemm.cu) */
            q.w = q.w_lo = (const uint8_t *)w;
            q.row_bytes = mm_row_bytes(type, n_in);
            q.w_end = q.w + n_out * q.row_bytes;
            q.n_out = (int)n_out;
            q.n_in = (int)n_in;
            q.x = x;
            q.y = y;
            q.n_rows = (int)n_rows;
            const unsigned rt = (unsigned)((n_rows + q.br - 1) / q.br), ot = ig_out_tiles(&q, n_out);
            if (ot > 65535) MM_FAIL("%s: %zu outputs", op, n_out);
            if (work) {
                q.xq = (const uint8_t *)work;
                q.xq_rows = (int)n_rows;
                ig_quantize(type, x, n_rows, n_in, (uint8_t *)work, st, xu);
            }
            if (work && fw_take(type, n_rows) && !mr_take(type, n_rows)) {
                /* few rows: matmul_igemm_few.cu (CLOVER_CUDA_IGEMM_FEW=1), same bits, the pair in one launch */
                fw_launch(type, &q, (unsigned)((n_rows + FW_MAX_ROWS - 1) / FW_MAX_ROWS), w2, y2, (int)n_out2, st);
                return mm_launch_status(op, why, why_len);
            }
            ig_dense_launch(type, &q, work != NULL, rt, ot, st);
            return matmul_second(op, type, n_in, x, n_rows, work, stream, why, why_len, w2, n_out2, y2);
        }
    }
    if (n_out <= CUDA_MATMUL_THIN_MAX_OUT && mmv_thin_ok(type, w, n_in, x)) {
        /* a float matrix of <= 64 outputs (a shared expert's 1-output gate): one column of TF32 tiles walks
         * all of n_in in one block per 64 rows (~100 us a layer measured); a warp per (row, output) in f32
         * instead. Chosen by the shape alone, so a row's bits still do not depend on the row count. */
        mmv_thin_launch(type, w, n_out, n_in, x, n_rows, y, st);
        return matmul_second(op, type, n_in, x, n_rows, work, stream, why, why_len, w2, n_out2, y2);
    }
    gemm_params p = {};
    p.w = (const uint8_t *)w;
    p.row_bytes = mm_row_bytes(type, n_in);
    p.n_out = (int)n_out;
    p.n_in = (int)n_in;
    p.x = x;
    p.y = y;
    p.n_rows = (int)n_rows;
    gemm_launch(type, &p, (unsigned)((n_rows + BM - 1) / BM), st);
    return matmul_second(op, type, n_in, x, n_rows, work, stream, why, why_len, w2, n_out2, y2);
}

extern "C" int cuda_matmul_chunk(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x,
                                 size_t n_rows, float *y, void *stream, char *why, size_t why_len) {
    return matmul_chunk("cuda_matmul_chunk", type, w, n_out, n_in, x, n_rows, y, NULL, stream, why, why_len);
}

/* The down product's rows made by its quantiser (cuda_matmul_chunk_ws_glu, cuda_moe_args.x_up): on unless
 * CLOVER_CUDA_GLU_QUANT=0 (the caller's choice: cuda_glu_quant_on); cuda_glu_quant_set: 1/0, negative: the
 * environment again. */
static int g_glu_quant = -1;
extern "C" int cuda_glu_quant_on(void) { return cuda_switch_on(&g_glu_quant, "CLOVER_CUDA_GLU_QUANT", 1); }
extern "C" void cuda_glu_quant_set(int on) { cuda_switch_set(&g_glu_quant, on); }

extern "C" int cuda_matmul_chunk_ws_glu(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *g,
                                        const float *u, size_t n_rows, float *y, void *work, void *stream, char *why,
                                        size_t why_len) {
    const char *op = "cuda_matmul_chunk_ws_glu";
    if (!u || !work) MM_FAIL("%s: a NULL pointer", op);
    return matmul_chunk(op, type, w, n_out, n_in, g, n_rows, y, work, stream, why, why_len, NULL, 0, NULL, u);
}

extern "C" size_t cuda_matmul_chunk_work_bytes(uint32_t type, size_t n_in, size_t n_rows) {
    ig_params q = {};
    if (n_in == 0 || n_rows == 0 || !ig_plan(type, n_in, n_rows > 32 ? 32 : (int)n_rows, 1, &q)) return 0;
    return ig_xq_bytes(n_in, n_rows);
}

extern "C" int cuda_matmul_chunk_ws(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x,
                                    size_t n_rows, float *y, void *work, void *stream, char *why, size_t why_len) {
    const size_t wb = cuda_matmul_chunk_work_bytes(type, n_in, n_rows);
    if (wb && !work) MM_FAIL("cuda_matmul_chunk_ws: a NULL pointer");
    return matmul_chunk("cuda_matmul_chunk_ws", type, w, n_out, n_in, x, n_rows, y, wb ? work : NULL, stream, why,
                        why_len);
}

/* Several integer chunk products of the same rows with their 8-bit rows made ONCE (ig_quantize into work) and
 * read by every product: the same launches as one cuda_matmul_chunk_ws call each, less the repeated quantiser
 * (a GDN layer's qkv / z / alpha / beta quantised x four times, H200 2026-12-14-exact24: ~0.8 ms of quantiser
 * launches in a 16-sequence step). The bits are the separate calls' (the same bytes of xq, the same kernels).
 * 0 with nothing launched when this form does not apply (float weights, no scratch, the few-row kernel's own
 * pair form): the caller then makes the calls one by one. */
/* The switch: on unless CLOVER_CUDA_SHARE_XQ=0 (read once), or cuda_matmul_share_set. On since its run on the
 * H200 (bench/device-runs/2026-12-14-share24, 2026-12-05): the CUDA tests with it, the same ids, a 32-row preview
 * 9.50 -> 9.11 ms, a block commit 15.34 -> 14.86. */
static int g_share = -1;
static int share_on(void) { return cuda_switch_on(&g_share, "CLOVER_CUDA_SHARE_XQ", 1); }
extern "C" void cuda_matmul_share_set(int on) { cuda_switch_set(&g_share, on); }

/* xq_ready: work already holds x's 8-bit rows (Q8_0: cuda_add_rms_norm_q8 wrote them), so no quantiser launch. */
static int chunk_ws_shared(const char *op, uint32_t type, const cuda_matmul_seg *seg, size_t n_seg, size_t n_in,
                           const float *x, size_t n_rows, void *work, cudaStream_t st, char *why, size_t why_len,
                           int *done, bool xq_ready = false) {
    *done = 0;
    if (!share_on() || !work || n_seg < 2 || !mm_is_int(type) || fw_take(type, n_rows)) return 0;
    ig_params q = {};
    if (!ig_plan(type, n_in, n_rows > 32 ? 32 : (int)n_rows, 1, &q)) return 0;
    for (size_t i = 0; i < n_seg; i++) {
        if (mm_check_shape(op, type, seg[i].n_out, n_in, why, why_len)) return -1;
        if (!seg[i].w || !seg[i].y) MM_FAIL("%s: a NULL pointer", op);
        if ((uintptr_t)seg[i].w & (mm_align(type) - 1)) MM_FAIL("%s: weights not %zu-byte aligned", op, mm_align(type));
        if (ig_out_tiles(&q, seg[i].n_out) > 65535) MM_FAIL("%s: %zu outputs", op, seg[i].n_out);
    }
    if (n_rows < 1 || n_rows > (size_t)BM * 65535) MM_FAIL("%s: %zu rows", op, n_rows);
    if (!x) MM_FAIL("%s: a NULL pointer", op);
    q.row_bytes = mm_row_bytes(type, n_in);
    q.n_in = (int)n_in;
    q.x = x;
    q.n_rows = (int)n_rows;
    q.xq = (const uint8_t *)work;
    q.xq_rows = (int)n_rows;
    if (!(xq_ready && type == MM_Q8_0)) ig_quantize(type, x, n_rows, n_in, (uint8_t *)work, st);
    const unsigned rt = (unsigned)((n_rows + q.br - 1) / q.br);
    /* the products that would each take igemm_q8_kernel (not the few-row, K-split or wide forms): one launch for all
     * of them unless CLOVER_CUDA_IG_SEG=0 (the same blocks; a GDN layer's 4 launches, the attention's 3, the shared
     * expert's pair become one, their tiles in one grid instead of a tail each) */
    if (n_rows < IGW_MIN_ROWS && !mr_take(type, n_rows) && !cuda_q8_rows32_takes(type, n_in, n_rows)) {
        static_assert((int)IG_SEG_MAX == (int)CUDA_MATMUL_MAX_SEG, "a segmented launch takes every _multi call");
        if (ig_launch_seg(type, &q, seg, n_seg, rt, st)) {
            if (mm_launch_status(op, why, why_len)) return -1;
            *done = 1;
            return 0;
        }
    }
    for (size_t i = 0; i < n_seg; i++) { /* each product's kernel as matmul_chunk picks it, on the shared rows */
        q.w = q.w_lo = (const uint8_t *)seg[i].w;
        q.w_end = q.w + seg[i].n_out * q.row_bytes;
        q.n_out = (int)seg[i].n_out;
        q.y = seg[i].y;
        ig_dense_launch(type, &q, true, rt, ig_out_tiles(&q, seg[i].n_out), st);
        if (mm_launch_status(op, why, why_len)) return -1;
    }
    *done = 1;
    return 0;
}

extern "C" int cuda_matmul_chunk_ws_multi_xq(uint32_t type, const cuda_matmul_seg *seg, size_t n_seg, size_t n_in,
                                             const float *x, size_t n_rows, void *work, int xq_ready, void *stream,
                                             char *why, size_t why_len) {
    const char *op = "cuda_matmul_chunk_ws_multi";
    if (n_seg < 1 || n_seg > CUDA_MATMUL_MAX_SEG || !seg) MM_FAIL("%s: %zu matrices", op, n_seg);
    const size_t wb = cuda_matmul_chunk_work_bytes(type, n_in, n_rows);
    if (wb && !work) MM_FAIL("%s: a NULL pointer", op);
    int done = 0;
    if (chunk_ws_shared(op, type, seg, n_seg, n_in, x, n_rows, wb ? work : NULL, (cudaStream_t)stream, why, why_len,
                        &done, xq_ready != 0))
        return -1;
    for (size_t i = 0; !done && i < n_seg; i++)
        if (matmul_chunk(op, type, seg[i].w, seg[i].n_out, n_in, x, n_rows, seg[i].y, wb ? work : NULL, stream, why,
                         why_len))
            return -1;
    return 0;
}

extern "C" int cuda_matmul_chunk_ws_multi(uint32_t type, const cuda_matmul_seg *seg, size_t n_seg, size_t n_in,
                                          const float *x, size_t n_rows, void *work, void *stream, char *why,
                                          size_t why_len) {
    return cuda_matmul_chunk_ws_multi_xq(type, seg, n_seg, n_in, x, n_rows, work, 0, stream, why, why_len);
}

extern "C" int cuda_matmul_chunk_ws_pair(uint32_t type, const void *w, size_t n_out, const void *w2, size_t n_out2,
                                         size_t n_in, const float *x, size_t n_rows, float *y, float *y2, void *work,
                                         void *stream, char *why, size_t why_len) {
    const char *op = "cuda_matmul_chunk_ws_pair";
    if (!w2 || !y2) MM_FAIL("%s: a NULL pointer", op);
    if (mm_check_shape(op, type, n_out2, n_in, why, why_len)) return -1;
    if ((uintptr_t)w2 & (mm_align(type) - 1)) MM_FAIL("%s: weights not %zu-byte aligned", op, mm_align(type));
    const size_t wb = cuda_matmul_chunk_work_bytes(type, n_in, n_rows);
    if (wb && !work) MM_FAIL("%s: a NULL pointer", op);
    const cuda_matmul_seg seg[2] = {{w, n_out, y}, {w2, n_out2, y2}};
    int done = 0;
    if (chunk_ws_shared(op, type, seg, 2, n_in, x, n_rows, wb ? work : NULL, (cudaStream_t)stream, why, why_len, &done))
        return -1;
    if (done) return 0;
    return matmul_chunk(op, type, w, n_out, n_in, x, n_rows, y, wb ? work : NULL, stream, why, why_len, w2, n_out2, y2);
}

/* ---- grouping the slots by expert ---- */

/* The work buffer of cuda_moe_chunk, in int32 words: counts, cursors
 * [n_expert], ntiles [1], perm [n_slots], tiles [max_tiles][3]. */
static size_t moe_max_tiles(const cuda_moe_args *a, size_t tile) {
    const size_t n_slots = a->n_rows * a->k;
    return (n_slots + tile - 1) / tile + (a->n_expert < n_slots ? a->n_expert : n_slots);
}
/* Slots per tile: the integer GEMM's rows per tile, else the TF32 GEMM's BM. */
static size_t moe_tile(const cuda_moe_args *a, ig_params *q, int few_ok) {
    const size_t n_slots = a->n_rows * a->k;
    /* few slots per expert (a 32-row preview: ~1): tiles of <= 8 slots, 128 outputs a block */
    q->wide = n_slots <= 4 * (a->n_expert_plan ? a->n_expert_plan : a->n_expert);
    /* ... unless the rows are routed inside a coreset (each kept expert takes ~all of them): tiles of <= 32 slots,
     * 64 outputs a block, a weight fragment decoded once a tile (matmul_igemm.cu's igemm_tall_kernel) */
    q->tall = q->wide && ig_tall_takes(a->type, a->narrow, a->n_in);
    if (q->tall) q->wide = 0;
    q->preview = a->preview != 0;
    if (ig_plan(a->type, a->n_in, n_slots > 32 ? 32 : (int)n_slots, 1, q))
        return few_ok && fw_take(a->type, a->n_rows) ? (size_t)FW_MAX_ROWS : (size_t)q->br; /* few rows: 32 a tile */
    return BM;
}

/* The grouping kernels' first step, every thread of the block: each expert's slot count; a bad id's outputs NaN. */
__device__ __forceinline__ void moe_group_count(const int32_t *ids, int n_slots, int n_expert, int n_out,
                                                int32_t *counts, float *y) {
    const int tid = threadIdx.x, nt = blockDim.x;
    pdl_wait(); /* the ids are the router's; the tables may still be read by the products before (cuda_pdl.cuh) */
    pdl_trigger();
    for (int e = tid; e < n_expert; e += nt) counts[e] = 0;
    __syncthreads();
    for (int s = tid; s < n_slots; s += nt) {
        const int e = ids[s];
        if (e >= 0 && e < n_expert)
            atomicAdd(&counts[e], 1);
        else /* a bad id: that slot's outputs are NaN */
            for (int o = 0; o < n_out; o++) y[(size_t)s * n_out + o] = __int_as_float(0x7fc00000);
    }
    __syncthreads();
}

__global__ void moe_group_kernel(const int32_t *ids, int n_slots, int n_expert, int n_out, int tile, int32_t *counts,
                                 int32_t *cursor, int32_t *ntiles, int32_t *perm, int32_t *tiles, float *y) {
    const int tid = threadIdx.x, nt = blockDim.x;
    moe_group_count(ids, n_slots, n_expert, n_out, counts, y);
    if (tid == 0) { /* a few hundred experts: one thread's prefix sum is a few microseconds */
        int off = 0, n = 0;
        for (int e = 0; e < n_expert; e++) {
            const int c = counts[e];
            cursor[e] = off;
            for (int s = 0; s < c; s += tile) {
                tiles[3 * n] = e;
                tiles[3 * n + 1] = off + s;
                tiles[3 * n + 2] = min(tile, c - s);
                n++;
            }
            off += c;
        }
        *ntiles = n;
    }
    __syncthreads();
    for (int s = tid; s < n_slots; s += nt) {
        const int e = ids[s];
        if (e >= 0 && e < n_expert) perm[atomicAdd(&cursor[e], 1)] = s;
    }
}

/* The same grouping for up to 1024 experts (every model here: 256), in shared memory and in parallel: the
 * kernel above walks the experts' counts in one thread, a global-memory round trip each (28 us a call on the
 * H200, ncu, 3 calls a MoE layer). Here thread e owns expert e: shared-memory counts, two block-wide
 * exclusive scans (slots and tiles before e), and thread e writes its own tiles. The table is the same
 * (experts ascending, each expert's tiles in order); slots land in perm in any order, as above. */
__device__ __forceinline__ void moe_group_fast(const int32_t *ids, int n_slots, int n_expert, int n_out, int tile,
                                               int32_t *ntiles, int32_t *perm, int32_t *tiles, float *y) {
    __shared__ int cnt[1024], cur[1024], wsum[2][32];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    cnt[tid] = 0;
    __syncthreads();
    for (int s = tid; s < n_slots; s += blockDim.x) {
        const int e = ids[s];
        if (e >= 0 && e < n_expert)
            atomicAdd(&cnt[e], 1);
        else /* a bad id: that slot's outputs are NaN */
            for (int o = 0; o < n_out; o++) y[(size_t)s * n_out + o] = __int_as_float(0x7fc00000);
    }
    __syncthreads();
    const int c = tid < n_expert ? cnt[tid] : 0, nt = (c + tile - 1) / tile;
    int a = c, b = nt; /* inclusive scans within the warp */
    for (int d = 1; d < 32; d <<= 1) {
        const int ua = __shfl_up_sync(0xffffffffu, a, d), ub = __shfl_up_sync(0xffffffffu, b, d);
        if (lane >= d) a += ua, b += ub;
    }
    if (lane == 31) wsum[0][warp] = a, wsum[1][warp] = b;
    __syncthreads();
    if (warp == 0) { /* the warps' totals, scanned (exclusive; a block of fewer than 32 warps: 0 past them) */
        const bool in = lane < (int)(blockDim.x / 32);
        const int x0 = in ? wsum[0][lane] : 0, z0 = in ? wsum[1][lane] : 0;
        int x = x0, z = z0;
        for (int d = 1; d < 32; d <<= 1) {
            const int ux = __shfl_up_sync(0xffffffffu, x, d), uz = __shfl_up_sync(0xffffffffu, z, d);
            if (lane >= d) x += ux, z += uz;
        }
        wsum[0][lane] = x - x0;
        wsum[1][lane] = z - z0;
    }
    __syncthreads();
    const int off = wsum[0][warp] + a - c, t0 = wsum[1][warp] + b - nt; /* slots and tiles before expert tid */
    if (tid < n_expert) {
        cur[tid] = off;
        for (int q = 0; q < nt; q++) {
            tiles[3 * (t0 + q)] = tid;
            tiles[3 * (t0 + q) + 1] = off + q * tile;
            tiles[3 * (t0 + q) + 2] = min(tile, c - q * tile);
        }
    }
    if (tid == (int)blockDim.x - 1) *ntiles = t0 + nt;
    __syncthreads();
    for (int s = tid; s < n_slots; s += blockDim.x) {
        const int e = ids[s];
        if (e >= 0 && e < n_expert) perm[atomicAdd(&cur[e], 1)] = s;
    }
}

__global__ void __launch_bounds__(1024) moe_group_fast_kernel(const int32_t *ids, int n_slots, int n_expert, int n_out,
                                                              int tile, int32_t *ntiles, int32_t *perm,
                                                              int32_t *tiles, float *y) {
    pdl_wait(); /* as moe_group_count */
    pdl_trigger();
    moe_group_fast(ids, n_slots, n_expert, n_out, tile, ntiles, perm, tiles, y);
}

/* The grouping above and the 8-bit rows of the product (ig_quantize's) in ONE launch of GQ_THREADS-thread blocks:
 * block 0 groups (up to GQ_THREADS experts: a thread an expert), blocks 1.. round the rows, a warp a block of values
 * as ig_quantize_kernel (ig_quant_warp). The two read different inputs (ids, x) and write different words, so each
 * writes what its own launch wrote: the same table and the same bytes, one launch a grouped product fewer (80 a
 * 32-row preview, ~2.5 us each). 512 threads, not 1024: the quantiser's registers fit without a spill. */
enum { GQ_THREADS = 512 };
__global__ void __launch_bounds__(GQ_THREADS) moe_group_quant_kernel(const int32_t *ids, int n_slots, int n_expert,
                                                               int n_out, int tile, int32_t *ntiles, int32_t *perm,
                                                               int32_t *tiles, float *y, uint32_t type, const float *x,
                                                               const float *u, int n_rows, int n_in, uint8_t *xq) {
    pdl_wait(); /* the ids and the rows are earlier kernels' (cuda_pdl.cuh) */
    pdl_trigger();
    if (blockIdx.x == 0)
        moe_group_fast(ids, n_slots, n_expert, n_out, tile, ntiles, perm, tiles, y);
    else
        ig_quant_warp(type, x, u, n_rows, n_in, xq, ((size_t)blockIdx.x - 1) * (GQ_THREADS / 32) + threadIdx.x / 32,
                      threadIdx.x & 31);
}

/* The grouping of the kernel above for the ids of a large pool (--gpu-mem: slot ids up to the pool's slot count,
 * thousands; chosen only when n_expert_plan is set), with the one-thread scan made block-wide: thread t owns the
 * contiguous ids [t*per, (t+1)*per), sums its counts and tiles, a block-wide exclusive scan (as the kernel below
 * does for <= 1024) gives its offsets, then it writes its ids' cursors and tiles. The table is the same as the
 * one-thread kernel's (ids ascending, each id's tiles in order). UNVERIFIED on a device when written
 * (2026-12-03; test_cuda_gpumem's many-slot case runs it). */
__global__ void __launch_bounds__(1024) moe_group_pool_kernel(const int32_t *ids, int n_slots, int n_expert, int n_out,
                                                              int tile, int32_t *counts, int32_t *cursor,
                                                              int32_t *ntiles, int32_t *perm, int32_t *tiles,
                                                              float *y) {
    __shared__ int wsum[2][32];
    const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5;
    moe_group_count(ids, n_slots, n_expert, n_out, counts, y);
    const int per = (n_expert + nt - 1) / nt, e0 = min(tid * per, n_expert), e1 = min(e0 + per, n_expert);
    int c = 0, ct = 0; /* this thread's slots and tiles */
    for (int e = e0; e < e1; e++) {
        const int ce = counts[e];
        c += ce;
        ct += (ce + tile - 1) / tile;
    }
    int a = c, b = ct; /* inclusive scans within the warp */
    for (int d = 1; d < 32; d <<= 1) {
        const int ua = __shfl_up_sync(0xffffffffu, a, d), ub = __shfl_up_sync(0xffffffffu, b, d);
        if (lane >= d) a += ua, b += ub;
    }
    if (lane == 31) wsum[0][warp] = a, wsum[1][warp] = b;
    __syncthreads();
    if (warp == 0) { /* the warps' totals, scanned (exclusive) */
        int x = lane < nt / 32 ? wsum[0][lane] : 0, z = lane < nt / 32 ? wsum[1][lane] : 0;
        const int x0 = x, z0 = z;
        for (int d = 1; d < 32; d <<= 1) {
            const int ux = __shfl_up_sync(0xffffffffu, x, d), uz = __shfl_up_sync(0xffffffffu, z, d);
            if (lane >= d) x += ux, z += uz;
        }
        if (lane < nt / 32) wsum[0][lane] = x - x0, wsum[1][lane] = z - z0;
    }
    __syncthreads();
    int off = wsum[0][warp] + a - c, t = wsum[1][warp] + b - ct; /* slots and tiles before id e0 */
    for (int e = e0; e < e1; e++) {
        const int ce = counts[e];
        cursor[e] = off;
        for (int q = 0; q < ce; q += tile) {
            tiles[3 * t] = e;
            tiles[3 * t + 1] = off + q;
            tiles[3 * t + 2] = min(tile, ce - q);
            t++;
        }
        off += ce;
    }
    if (tid == nt - 1) *ntiles = t;
    __syncthreads();
    for (int s = tid; s < n_slots; s += nt) {
        const int e = ids[s];
        if (e >= 0 && e < n_expert) perm[atomicAdd(&cursor[e], 1)] = s;
    }
}

extern "C" size_t cuda_moe_chunk_work_bytes(const cuda_moe_args *a) {
    ig_params q = {};
    /* without the few-row kernel's tiles of 32: its table is never longer (its tiles hold more), so the bytes
     * serve either setting of CLOVER_CUDA_IGEMM_FEW */
    const size_t tile = moe_tile(a, &q, 0), n_x = a->x_per_slot ? a->n_rows * a->k : a->n_rows;
    return mm_align256(sizeof(int32_t) * (2 * a->n_expert + 1 + a->n_rows * a->k + 3 * moe_max_tiles(a, tile))) +
           (tile != BM ? ig_xq_bytes(a->n_in, n_x) : 0);
}

/* moe_group_quant_kernel (the grouping and the 8-bit rows in one launch): on unless CLOVER_CUDA_GROUP_QUANT=0;
 * cuda_group_quant_set: 1/0, negative: the environment again. */
static int g_group_quant = -1;
static int group_quant_on(void) { return cuda_switch_on(&g_group_quant, "CLOVER_CUDA_GROUP_QUANT", 1); }
extern "C" void cuda_group_quant_set(int on) { cuda_switch_set(&g_group_quant, on); }

/* One grouped product on the grouping pass's tiles: matmul_igemm_wide.cu's kernel where it takes them (igw; false
 * if it refused), matmul_igemm.cu's PERSIST form on tiles of igp slots (igp != 0; false if it refused), else
 * matmul_igemm.cu's (ot output tiles). */
static bool moe_tiles_launch(uint32_t type, const ig_params *q, bool igw, int igp, unsigned ot, unsigned n_tiles,
                             int tile, cudaStream_t st) {
    if (igw) return igw_moe_launch(type, q, tile, n_tiles, st) != 0;
    if (igp) return igp_launch(type, q, igp, n_tiles, st) != 0;
    ig_launch(type, q, ot, n_tiles, st);
    return true;
}

/* After the first product of a pair on a path without the pair launch: the second (the up) as its own call. */
static int moe_chunk(const cuda_moe_args *a, const void *w_up, float *y_up, void *work, void *stream, char *why,
                     size_t why_len);
static int moe_second(const cuda_moe_args *a, const void *w_up, float *y_up, void *work, void *stream, char *why,
                      size_t why_len) {
    if (mm_launch_status("cuda_moe_chunk", why, why_len)) return -1;
    if (!w_up) return 0;
    cuda_moe_args b = *a;
    b.w = w_up;
    b.y = y_up;
    return moe_chunk(&b, NULL, NULL, work, stream, why, why_len);
}

/* cuda_moe_chunk, and with w_up (not NULL) cuda_moe_chunk_pair: the few-row kernel does both products in one
 * launch after one grouping and one quantisation; any other path runs the second product as its own call. */
static int moe_chunk(const cuda_moe_args *a, const void *w_up, float *y_up, void *work, void *stream, char *why,
                     size_t why_len) {
    if (mm_check_shape("cuda_moe_chunk", a->type, a->n_out, a->n_in, why, why_len)) return -1;
    if (a->k < 1 || a->k > CUDA_MOE_MAX_K) MM_FAIL("cuda_moe_chunk: k = %zu (1..%d)", a->k, CUDA_MOE_MAX_K);
    if (a->n_rows < 1 || a->n_rows * a->k > (1u << 24)) MM_FAIL("cuda_moe_chunk: %zu rows", a->n_rows);
    if (a->n_expert < 1 || a->n_expert > (1u << 20)) MM_FAIL("cuda_moe_chunk: %zu experts", a->n_expert);
    if (a->expert_stride < mm_row_bytes(a->type, a->n_in) * a->n_out)
        MM_FAIL("cuda_moe_chunk: expert stride %zu < an expert's %zu bytes", a->expert_stride,
                mm_row_bytes(a->type, a->n_in) * a->n_out);
    if (!a->w || !a->x || !a->y || !a->ids || !work) MM_FAIL("cuda_moe_chunk: a NULL pointer");
    if (((uintptr_t)a->w | a->expert_stride) & (mm_align(a->type) - 1))
        MM_FAIL("cuda_moe_chunk: weights or expert stride not %zu-byte aligned", mm_align(a->type));
    ig_params q = {};
    size_t tile = moe_tile(a, &q, 1);
    const bool integer = tile != BM; /* else the TF32 GEMM's tiles of BM */
    if (a->x_up && (!integer || w_up)) MM_FAIL("cuda_moe_chunk: SwiGLU rows need integer weights and one product");
    q.row_bytes = mm_row_bytes(a->type, a->n_in);
    q.expert_stride = a->expert_stride;
    /* many slots an expert: the wide kernel's tiles of 64 slots x 128 outputs (matmul_igemm_wide.cu) */
    const bool igw = integer && !fw_take(a->type, a->n_rows) && igw_moe_takes(a->type, &q);
    if (igw) tile = (size_t)igw_moe_tile(); /* 64, or 32: never more tiles than the work bytes' (<= 32) */
    /* few slots an expert (WIDE plans) with CLOVER_CUDA_MOE_PERSIST=1: a fixed grid that walks tiles of 8-32 slots
     * (matmul_igemm.cu's PERSIST form; no larger a table than the WIDE form's 8-slot one, so the work bytes hold) */
    const int igp = integer && !igw && !fw_take(a->type, a->n_rows)
                        ? igp_tile(a->type, &q, a->n_rows * a->k, a->n_expert, a->n_out)
                        : 0;
    if (igp) tile = (size_t)igp;
    const size_t max_tiles = moe_max_tiles(a, tile), n_slots = a->n_rows * a->k;
    if (max_tiles > 65535) MM_FAIL("cuda_moe_chunk: %zu tiles exceed one launch", max_tiles);
    cudaStream_t st = (cudaStream_t)stream;
    int32_t *counts = (int32_t *)work, *cursor = counts + a->n_expert, *ntiles = cursor + a->n_expert;
    int32_t *perm = ntiles + 1, *tiles = perm + n_slots;
    /* the integer path's 8-bit rows after the grouping words (cuda_moe_chunk_work_bytes) */
    const size_t n_x = a->x_per_slot ? n_slots : a->n_rows;
    uint8_t *xq = (uint8_t *)work + mm_align256(sizeof(int32_t) * (2 * a->n_expert + 1 + n_slots + 3 * max_tiles));
    const size_t q_warps = n_x * (a->n_in / (a->type == MM_Q8_0 ? 32 : 256));
    const size_t gq_warps = GQ_THREADS / 32;
    const bool merged = integer && a->n_expert <= GQ_THREADS && group_quant_on() && q_warps <= gq_warps * 65535;
    if (merged)
        pdl_launch_rows(moe_group_quant_kernel, dim3(1 + (unsigned)((q_warps + gq_warps - 1) / gq_warps)),
                        dim3(GQ_THREADS), 0, st, a->ids,
                        (int)n_slots, (int)a->n_expert, (int)a->n_out, (int)tile, ntiles, perm, tiles, a->y, a->type,
                        a->x, a->x_up, (int)n_x, (int)a->n_in, xq);
    else if (a->n_expert <= 1024)
        pdl_launch_rows(moe_group_fast_kernel, dim3(1), dim3(1024), 0, st, a->ids, (int)n_slots, (int)a->n_expert,
                        (int)a->n_out, (int)tile, ntiles, perm, tiles, a->y);
    else if (a->n_expert_plan) /* --gpu-mem's pool slots */
        pdl_launch_rows(moe_group_pool_kernel, dim3(1), dim3(1024), 0, st, a->ids, (int)n_slots, (int)a->n_expert,
                        (int)a->n_out, (int)tile, counts, cursor, ntiles, perm, tiles, a->y);
    else
        pdl_launch_rows(moe_group_kernel, dim3(1), dim3(1024), 0, st, a->ids, (int)n_slots, (int)a->n_expert,
                        (int)a->n_out, (int)tile, counts, cursor, ntiles, perm, tiles, a->y);
    if (integer) { /* the integer path (matmul_igemm.cu; matmul_igemm_wide.cu for igw) */
        const unsigned ot = ig_out_tiles(&q, a->n_out);
        if (ot > 65535) MM_FAIL("cuda_moe_chunk: %zu outputs", a->n_out);
        q.w = q.w_lo = (const uint8_t *)a->w;
        q.row_bytes = mm_row_bytes(a->type, a->n_in);
        q.w_end = q.w + (a->n_expert - 1) * a->expert_stride + a->n_out * q.row_bytes;
        q.expert_stride = a->expert_stride;
        q.n_out = (int)a->n_out;
        q.n_in = (int)a->n_in;
        q.x = a->x;
        q.y = a->y;
        q.perm = perm;
        q.tiles = tiles;
        q.ntiles = ntiles;
        q.k = (int)a->k;
        q.x_per_slot = a->x_per_slot != 0;
        q.xq = xq;
        q.xq_rows = (int)n_x;
        if (!merged) ig_quantize(a->type, a->x, n_x, a->n_in, xq, st, a->x_up);
        if (tile == FW_MAX_ROWS && fw_take(a->type, a->n_rows)) { /* matmul_igemm_few.cu, same bits */
            fw_launch(a->type, &q, (unsigned)max_tiles, w_up, y_up, (int)a->n_out, st);
            return mm_launch_status("cuda_moe_chunk", why, why_len);
        }
        if (w_up && !igw && !igp && share_on() && ig_pair_takes(a->type, &q)) { /* gate and up in one launch */
            q.w_up = (const uint8_t *)w_up;
            q.y_up = y_up;
            ig_launch(a->type, &q, ot, (unsigned)max_tiles, st);
            return mm_launch_status("cuda_moe_chunk", why, why_len);
        }
        if (!moe_tiles_launch(a->type, &q, igw, igp, ot, (unsigned)max_tiles, (int)tile, st))
            MM_FAIL("cuda_moe_chunk: the %s kernel refused a product it takes", igp ? "persistent" : "wide");
        if (w_up && (igw || share_on())) { /* the pair's up product on the same tiles and 8-bit rows (no second
                                            * grouping or quantiser; cuda_moe_chunk_pair checked its alignment) */
            if (mm_launch_status("cuda_moe_chunk", why, why_len)) return -1;
            q.w = q.w_lo = (const uint8_t *)w_up;
            q.w_end = q.w + (a->n_expert - 1) * a->expert_stride + a->n_out * q.row_bytes;
            q.y = y_up;
            if (!moe_tiles_launch(a->type, &q, igw, igp, ot, (unsigned)max_tiles, (int)tile, st))
                MM_FAIL("cuda_moe_chunk_pair: the %s kernel refused the up product", igp ? "persistent" : "wide");
            return mm_launch_status("cuda_moe_chunk", why, why_len);
        }
        return moe_second(a, w_up, y_up, work, stream, why, why_len);
    }
    gemm_params p = {};
    p.w = (const uint8_t *)a->w;
    p.row_bytes = mm_row_bytes(a->type, a->n_in);
    p.expert_stride = a->expert_stride;
    p.n_out = (int)a->n_out;
    p.n_in = (int)a->n_in;
    p.x = a->x;
    p.y = a->y;
    p.perm = perm;
    p.tiles = tiles;
    p.ntiles = ntiles;
    p.k = (int)a->k;
    p.x_per_slot = a->x_per_slot != 0;
    gemm_launch(a->type, &p, (unsigned)max_tiles, st);
    return moe_second(a, w_up, y_up, work, stream, why, why_len);
}

extern "C" int cuda_moe_chunk(const cuda_moe_args *a, void *work, void *stream, char *why, size_t why_len) {
    return moe_chunk(a, NULL, NULL, work, stream, why, why_len);
}

extern "C" int cuda_moe_chunk_pair(const cuda_moe_args *a, const void *w_up, float *y_up, void *work, void *stream,
                                   char *why, size_t why_len) {
    if (!w_up || !y_up) MM_FAIL("cuda_moe_chunk_pair: a NULL pointer");
    if ((uintptr_t)w_up & (mm_align(a->type) - 1))
        MM_FAIL("cuda_moe_chunk_pair: up weights not %zu-byte aligned", mm_align(a->type));
    return moe_chunk(a, w_up, y_up, work, stream, why, why_len);
}
