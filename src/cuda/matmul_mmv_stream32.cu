/*
 * matmul_mmv_stream32.cu: the persistent stream form of a dense Q8_0 product
 * at 9..CUDA_MATMUL_STREAM_MAX_ROWS (32) rows (a preview's rows, a stacked
 * decode step of several requests), cuda_matmul_stream_multi. Off unless
 * CLOVER_CUDA_MMV_STREAM32 is set (unverified on a device when written).
 *
 * Why: above 8 rows the backend took the tensor-core chunk form, which the
 * H200 measured at ~17 us for a 8192x2048 Q8_0 product at 32 rows (16.8 MB:
 * ~1 TB/s, latency/issue bound whatever the rows). Here, as in
 * matmul_mmv_stream.cu, a block is resident for the whole product and copies
 * the next group of output rows' weights (cp.async) into a second buffer
 * while it dots the current one, so each weight row is read from memory once
 * for all rows; the 8-bit activation rows (quantised once, into work) are
 * copied into shared memory once per block (when they fit).
 *
 * The dot: mmv_kernel's warp-per-row form (4 lanes a block, a shuffle per
 * block and row) costs ~12 instructions per 256 values and row, too many at
 * 32 rows. Here a lane owns one canonical partial j (blocks j, j+8, ...; the
 * 8 partials of matmul_igemm.cu's order) of 4 output rows x the rows
 * rg, rg+4, ... (rg = lane / 8), and computes each 32-value block's integer
 * sum alone (8 dp4a): a register tile of 4 outputs x 8 rows, no shuffle until
 * the end. Compute at 32 rows: 8192x2048x32 / 4 = 134M dp4a for a qkv
 * product, ~2 instructions a dp4a, ~8 us on 132 SMs at full issue; the
 * weights alone need ~5 us at 3.3 TB/s. So the estimate is ~5-6 us at 16 rows
 * and ~10-12 us at 32 (compute-bound), against ~17 us for the chunk form:
 * the crossover is past 32 rows (CUDA_MATMUL_STREAM_MAX_ROWS), and the
 * switch's value N in 9..32 sets the row cap for A/B runs.
 *
 * Bits: each block term is (d_w * x_d) * isum (isum the exact integer sum,
 * however it is split), partial j adds its blocks in order from 0.0f, and the
 * partials meet in the tree ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)) (xor 1, 2, 4
 * here; xor 4, 8, 16 in mmv_reduce: the same pairs), all IEEE with no
 * contraction: the bits of mmv_kernel, of the 1..8-row stream form and of the
 * chunk form for every row (test_cuda_matmul's test_stream32 checks them).
 */
#include <stdlib.h>
#include <string.h>

#include "matmul_mmv.cuh"

enum {
    MS_TO = 4,                               /* output rows a warp */
    MS_LG = 4,                               /* lane groups: rows rg, rg+4, ... */
    MS_TR = CUDA_MATMUL_STREAM_MAX_ROWS / MS_LG, /* rows a lane at most */
    MS_SMEM_MAX = 220 * 1024,                /* one block an SM (228 KB, 1 KB reserved a block) */
    MS_XPAD = 32,                            /* bytes after each row of x in shared memory: rows 8 banks apart */
};

typedef struct ms_params {
    const uint8_t *seg_w[CUDA_MATMUL_MAX_SEG];
    float *seg_y[CUDA_MATMUL_MAX_SEG];
    int seg_g0[CUDA_MATMUL_MAX_SEG + 1]; /* first group of each matrix; seg_g0[n_seg] = all groups */
    int seg_n_out[CUDA_MATMUL_MAX_SEG];
    int n_seg, n_in, n_rows, ob; /* ob: output rows a group (warps x MS_TO) */
    size_t row_bytes, x_bytes;   /* a weight row; a row of x in work */
    const uint8_t *x;            /* the 8-bit rows in work, [n_rows][x_bytes] */
    unsigned x_smem, x_stride;   /* XS: bytes of x in shared memory (16-aligned), a row's stride there */
    unsigned buf_bytes;          /* one weight buffer (ob rows) */
} ms_params;

__device__ __forceinline__ int ms_seg(const ms_params &p, int g) {
    int sg = 0;
    while (sg + 1 < p.n_seg && g >= p.seg_g0[sg + 1]) sg++;
    return sg;
}

/* Group g's weight rows into buf, one cp.async group (rows are 16-byte multiples, matrices 16-aligned). */
__device__ __forceinline__ void ms_fetch(const ms_params &p, int g, uint8_t *buf) {
    const int sg = ms_seg(p, g), o0 = (g - p.seg_g0[sg]) * p.ob;
    const int nrow = p.seg_n_out[sg] - o0 < p.ob ? p.seg_n_out[sg] - o0 : p.ob;
    mmv_copy(buf, p.seg_w[sg] + (size_t)o0 * p.row_bytes, (size_t)nrow * p.row_bytes);
    asm volatile("cp.async.commit_group;" ::: "memory");
}

/* A Q8_0 block (34 bytes at a 2-byte aligned shared address): its scale and 8 words of codes, from 9 aligned
 * words (a block ends 2 bytes before the next one at most: even blocks of a row read into the next block). */
__device__ __forceinline__ float ms_wblock(const uint8_t *blk, int *q) {
    const unsigned *base = (const unsigned *)((uintptr_t)blk & ~(uintptr_t)3);
    const bool sh = ((uintptr_t)blk & 2) != 0;
    unsigned w[9];
#pragma unroll
    for (int k = 0; k < 9; k++) w[k] = base[k];
    const unsigned sel = sh ? 0x7654u : 0x5432u; /* the codes start at base + 4 or base + 2 */
#pragma unroll
    for (int k = 0; k < 8; k++) q[k] = (int)__byte_perm(w[k], w[k + 1], sel);
    const unsigned short h = (unsigned short)(sh ? w[0] >> 16 : w[0] & 0xFFFFu);
    return __half2float(__ushort_as_half(h));
}

template <bool XS>
__global__ void __launch_bounds__(256, 1) ms_kernel(ms_params p) {
    extern __shared__ __align__(16) uint8_t sm[]; /* [x rows, XS][buffer 0][buffer 1] */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int j = lane & 7, rg = lane >> 3;
    const int nx = (p.n_rows - rg + MS_LG - 1) / MS_LG;  /* this lane's rows: rg + MS_LG * i, i < nx */
    const int nxw = (p.n_rows + MS_LG - 1) / MS_LG;       /* the most rows a lane has (warp-uniform) */
    const int nb = p.n_in / 32;
    const int G = p.seg_g0[p.n_seg];
    uint8_t *buf0 = sm + (XS ? p.x_smem : 0);
    int g = blockIdx.x;
    if (g >= G) return; /* block-uniform */
    ms_fetch(p, g, buf0); /* weights do not depend on the previous kernel (cuda_pdl.cuh) */
    pdl_wait();
    pdl_trigger();
    if (XS) { /* x into shared memory once: 4-byte words (rows are 36-byte blocks), rows x_stride apart */
        const int words = (int)(p.x_bytes / 4);
        for (int e = threadIdx.x; e < p.n_rows * words; e += blockDim.x) {
            const int r = e / words, k = e % words;
            ((unsigned *)(sm + (size_t)r * p.x_stride))[k] = ((const unsigned *)(p.x + (size_t)r * p.x_bytes))[k];
        }
    }
    const uint8_t *xr[MS_TR];
#pragma unroll
    for (int i = 0; i < MS_TR; i++) {
        const int r = i < nx ? rg + MS_LG * i : 0;
        xr[i] = XS ? sm + (size_t)r * p.x_stride : p.x + (size_t)r * p.x_bytes;
    }
#pragma unroll 1
    for (int it = 0; g < G; g += gridDim.x, it++) {
        uint8_t *cur = buf0 + (size_t)(it & 1) * p.buf_bytes, *nxt = buf0 + (size_t)((it + 1) & 1) * p.buf_bytes;
        const int gn = g + gridDim.x;
        if (gn < G) { /* nxt was last read before the previous iteration's closing barrier */
            ms_fetch(p, gn, nxt);
            asm volatile("cp.async.wait_group 1;" ::: "memory");
        } else {
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        }
        __syncthreads(); /* everyone's copies of cur (and, the first time, x) */
        const int sg = ms_seg(p, g), n_out = p.seg_n_out[sg], o0 = (g - p.seg_g0[sg]) * p.ob;
        const int ow = o0 + warp * MS_TO;
        const uint8_t *wr[MS_TO];
#pragma unroll
        for (int t = 0; t < MS_TO; t++) /* an output past the matrix dots the group's first row (not stored) */
            wr[t] = cur + (size_t)(ow + t < n_out ? ow + t - o0 : 0) * p.row_bytes;
        float acc[MS_TO][MS_TR];
#pragma unroll
        for (int t = 0; t < MS_TO; t++)
#pragma unroll
            for (int i = 0; i < MS_TR; i++) acc[t][i] = 0.0f;
#pragma unroll 1
        for (int b = j; b < nb; b += 8) { /* partial j: blocks j, j+8, ... in order */
            int q[MS_TO][8];
            float dw[MS_TO];
#pragma unroll
            for (int t = 0; t < MS_TO; t++) dw[t] = ms_wblock(wr[t] + (size_t)b * MM_Q8_0_BYTES, q[t]);
#pragma unroll
            for (int i = 0; i < MS_TR; i++) {
                if (i >= nx) break;
                const uint8_t *xb = xr[i] + (size_t)b * MM_ACT32_BYTES;
                const float xd = *(const float *)xb;
                int xq[8];
#pragma unroll
                for (int k = 0; k < 8; k++) xq[k] = ld32(xb + 4 + 4 * k);
#pragma unroll
                for (int t = 0; t < MS_TO; t++) {
                    int s = 0;
#pragma unroll
                    for (int k = 0; k < 8; k++) s = __dp4a(q[t][k], xq[k], s);
                    acc[t][i] = __fadd_rn(acc[t][i], __fmul_rn(__fmul_rn(dw[t], xd), (float)s));
                }
            }
        }
#pragma unroll
        for (int i = 0; i < MS_TR; i++) {
            if (i >= nxw) break; /* warp-uniform: every lane shuffles */
#pragma unroll
            for (int t = 0; t < MS_TO; t++) {
                float v = acc[t][i];
                v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
                v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
                v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 4));
                if (j == 0 && i < nx && ow + t < n_out) p.seg_y[sg][(size_t)(rg + MS_LG * i) * n_out + ow + t] = v;
            }
        }
        __syncthreads(); /* cur is refilled two iterations on */
    }
}

/* 0 off; 1 on up to CUDA_MATMUL_STREAM_MAX_ROWS rows; N in 9..32: on up to N rows (the crossover, for A/B runs).
 * CLOVER_CUDA_MMV_STREAM32 sets it when read first. */
static int g_s32 = -1;
static int ms_cap(void) {
    int v = __atomic_load_n(&g_s32, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("CLOVER_CUDA_MMV_STREAM32");
        v = e ? atoi(e) : 0;
        __atomic_store_n(&g_s32, v < 0 ? 0 : v, __ATOMIC_RELAXED);
        v = v < 0 ? 0 : v;
    }
    if (v == 1 || v > CUDA_MATMUL_STREAM_MAX_ROWS) return CUDA_MATMUL_STREAM_MAX_ROWS;
    return v;
}
extern "C" void cuda_mmv_stream32_set(int v) { __atomic_store_n(&g_s32, v < 0 ? 0 : v, __ATOMIC_RELAXED); }

/* The plan of a product: warps a block (8, or 4 for wide rows), whether x fits in shared memory, the bytes. */
typedef struct ms_plan {
    int warps, xs;
    size_t smem, x_stride, buf;
} ms_plan;

static int ms_plan_of(size_t n_in, size_t n_rows, int max_warps, ms_plan *pl) {
    const size_t rb = mm_row_bytes(MM_Q8_0, n_in), xb = mm_act_row_bytes(MM_Q8_0, n_in);
    pl->x_stride = xb + MS_XPAD;
    const size_t xs = (n_rows * pl->x_stride + 15) / 16 * 16;
    for (int w = max_warps; w >= 4; w -= 4) {
        pl->warps = w;
        pl->buf = (size_t)w * MS_TO * rb;
        if (xs + 2 * pl->buf <= MS_SMEM_MAX) return pl->xs = 1, pl->smem = xs + 2 * pl->buf, 1;
    }
    pl->warps = 4;
    pl->buf = (size_t)4 * MS_TO * rb;
    pl->xs = 0, pl->smem = 2 * pl->buf;
    return pl->smem <= MS_SMEM_MAX;
}

extern "C" int cuda_matmul_stream_takes(uint32_t type, size_t n_in, size_t n_rows) {
    ms_plan pl;
    /* n_in % 256: 16-byte rows for cp.async. x in shared memory only: read from work (L1), a warp's load of 32
     * lanes touches ~12 lines of 128 bytes (4 rows x 8 blocks of 36 bytes), ~12x the cycles of a shared load;
     * the form still computes those shapes (tests, bench) but the backend keeps the chunk form for them */
    return type == MM_Q8_0 && n_rows > CUDA_MATMUL_DECODE_MAX_ROWS && (int)n_rows <= ms_cap() && n_in > 0 &&
           n_in % 256 == 0 && ms_plan_of(n_in, n_rows, 8, &pl) && pl.xs;
}

extern "C" size_t cuda_matmul_stream_work_bytes(uint32_t type, size_t n_in, size_t n_rows) {
    if (type != MM_Q8_0 || n_in % 32) return 0;
    return mm_align256(mm_act_row_bytes(type, n_in) * n_rows);
}

/* Resident blocks of the kernel at this shared memory (cached: a model has few (n_in, rows) plans). */
template <bool XS>
static int ms_grid(size_t smem, int warps) {
    static int attr_ok = 0, sms = 0;
    static size_t last_smem = 0;
    static int last_warps = 0, last_blocks = 0;
    void (*k)(ms_params) = ms_kernel<XS>;
    if (!attr_ok) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, MS_SMEM_MAX) != cudaSuccess)
            return 0;
        attr_ok = 1;
    }
    if (smem == last_smem && warps == last_warps && last_blocks) return last_blocks;
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 32 * warps, smem) != cudaSuccess || per_sm < 1)
        return 0;
    last_smem = smem, last_warps = warps, last_blocks = per_sm * sms;
    return last_blocks;
}

extern "C" int cuda_matmul_stream_multi(uint32_t type, const cuda_matmul_seg *seg, size_t n_seg, size_t n_in,
                                        const float *x, size_t n_rows, void *work, void *stream, char *why,
                                        size_t why_len) {
    const char *op = "cuda_matmul_stream_multi";
    if (n_seg < 1 || n_seg > CUDA_MATMUL_MAX_SEG) MM_FAIL("%s: %zu matrices (1..%d)", op, n_seg, CUDA_MATMUL_MAX_SEG);
    if (type != MM_Q8_0) MM_FAIL("%s: weight type %u (Q8_0 only)", op, (unsigned)type);
    if (n_rows <= CUDA_MATMUL_DECODE_MAX_ROWS || n_rows > CUDA_MATMUL_STREAM_MAX_ROWS)
        MM_FAIL("%s: %zu rows (%d..%d)", op, n_rows, CUDA_MATMUL_DECODE_MAX_ROWS + 1, CUDA_MATMUL_STREAM_MAX_ROWS);
    if (n_in == 0 || n_in % 256) MM_FAIL("%s: n_in %zu is not a multiple of 256", op, n_in);
    if (!x || !work) MM_FAIL("%s: a NULL pointer", op);
    if ((uintptr_t)work & 15) MM_FAIL("%s: work not 16-byte aligned", op);
    /* few outputs (attention k/v, the shared expert: 512): groups of 16, so that more SMs take part (fewer groups
     * of 32 than the H200's 132 SMs); which warp computes an output does not change its bits */
    size_t outs = 0;
    for (size_t i = 0; i < n_seg; i++) outs += seg[i].n_out;
    ms_plan pl;
    if (!ms_plan_of(n_in, n_rows, outs < 132 * 8 * MS_TO ? 4 : 8, &pl))
        MM_FAIL("%s: rows of %zu values do not fit in shared memory", op, n_in);
    ms_params p = {};
    const int ob = pl.warps * MS_TO;
    size_t groups = 0;
    for (size_t i = 0; i < n_seg; i++) {
        if (mm_check_shape(op, type, seg[i].n_out, n_in, why, why_len)) return -1;
        if (!seg[i].w || !seg[i].y) MM_FAIL("%s: a NULL pointer", op);
        if ((uintptr_t)seg[i].w & 15) MM_FAIL("%s: weights not 16-byte aligned", op);
        if (seg[i].n_out > (1u << 30)) MM_FAIL("%s: %zu outputs", op, seg[i].n_out);
        p.seg_w[i] = (const uint8_t *)seg[i].w;
        p.seg_y[i] = seg[i].y;
        p.seg_n_out[i] = (int)seg[i].n_out;
        p.seg_g0[i] = (int)groups;
        groups += (seg[i].n_out + ob - 1) / ob;
        if (groups > (1u << 30)) MM_FAIL("%s: too many outputs", op);
    }
    p.seg_g0[n_seg] = (int)groups;
    p.n_seg = (int)n_seg;
    p.n_in = (int)n_in;
    p.n_rows = (int)n_rows;
    p.ob = ob;
    p.row_bytes = mm_row_bytes(type, n_in);
    p.x_bytes = mm_act_row_bytes(type, n_in);
    p.x = (const uint8_t *)work;
    p.x_smem = pl.xs ? (unsigned)((n_rows * pl.x_stride + 15) / 16 * 16) : 0;
    p.x_stride = (unsigned)pl.x_stride;
    p.buf_bytes = (unsigned)pl.buf;
    cudaStream_t st = (cudaStream_t)stream;
    const int resident = pl.xs ? ms_grid<true>(pl.smem, pl.warps) : ms_grid<false>(pl.smem, pl.warps);
    if (resident < 1) {
        (void)cudaGetLastError();
        MM_FAIL("%s: no resident block at %zu bytes of shared memory", op, pl.smem);
    }
    const unsigned grid = (unsigned)(groups < (size_t)resident ? groups : (size_t)resident);
    mm_act_quantize(type, x, n_rows, n_in, (uint8_t *)work, st);
    if (pl.xs)
        pdl_launch(ms_kernel<true>, dim3(grid), dim3(32 * pl.warps), pl.smem, st, p);
    else
        pdl_launch(ms_kernel<false>, dim3(grid), dim3(32 * pl.warps), pl.smem, st, p);
    return mm_launch_status(op, why, why_len);
}

extern "C" int cuda_matmul_stream(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x,
                                  size_t n_rows, float *y, void *work, void *stream, char *why, size_t why_len) {
    const cuda_matmul_seg s = {w, n_out, y};
    return cuda_matmul_stream_multi(type, &s, 1, n_in, x, n_rows, work, stream, why, why_len);
}
