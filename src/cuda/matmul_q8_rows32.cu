/*
 * matmul_q8_rows32.cu: dense Q8_0 products of 1..32 rows (a preview's, a stacked step's) with the K dimension split
 * over a thread block cluster, so that narrow matrices fill the GPU and every SM keeps enough bytes in flight.
 * AUTO by default: the output head only (see q8r_mode below); CLOVER_CUDA_Q8_ROWS32=1 every product, 0 none.
 * Bit-identical on H100s (2026-12-22-on24; with PDL, 2027-01-01-r32pdl24).
 *
 * Why: matmul_igemm.cu's igemm_q8_kernel gives a block 16 outputs and all 32 rows' 8-bit chunks, its 8 warps one
 * canonical partial each: a 512-output product is 32 blocks on 132 SMs, every block pulls all of the rows (~2x its
 * weight bytes) through one SM, 4 stages of ~14 KB. Measured (H200, bench/device-runs/2026-12-14-trace24): 8-15 us
 * a product, 27% of the bandwidth; the output head (248320 x 2048) 353 us against ~127 at the copy bandwidth.
 *
 * The canonical order (matmul_igemm.cu's top comment) already splits K: partial p_j sums the terms of Q8_0 blocks
 * j, j+8, j+16, ... in order, and the output is ((p0+p1)+(p2+p3)) + ((p4+p5)+(p6+p7)). So KS blocks of a cluster
 * (KS = 2, 4 or 8) each take P = 8/KS consecutive partials j0..j0+P-1 (j0 = P x cluster rank) of the same outputs,
 * i.e. a P x 34-byte span of every 272-byte chunk of a weight row and the rows' matching P x 36 bytes; each block
 * forms its own subtree (P 4: (p0+p1)+(p2+p3); P 2: p0+p1; P 1: p0), and the upper levels of the same tree are
 * added through distributed shared memory after a cluster barrier. Every term, every partial's order and every
 * addition of the tree is the one of igemm_q8_kernel: the same bits (test_q8_rows32). Atomics never sum anything.
 *
 * Layout: a block is MW warps, warp w the 16 outputs n0 + 16w.. (one mma m-tile: the weights as A, as in
 * igemm_q8_kernel) for all 4 row tiles of 8 and the block's P partials; the block's MW x 16 weight rows and the
 * call's rows stream through an S-stage cp.async ring of one 256-value chunk a stage (the spans' 16-byte aligned
 * covers, copy addresses set once and advanced by a constant a chunk). The rows are shared by the MW warps. The
 * layout (MW, KS) is chosen by the number of outputs: the largest MW, then the smallest KS, giving >= 256 blocks
 * (2 an SM): the head 8 x 2, 8192 and 12288 outputs 8 x 4, 4096 8 x 8, 2048 4 x 8, 1024 2 x 8, 512 1 x 8.
 */
#include <cooperative_groups.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_pdl.cuh"
#include "cuda_switch.h"
#include "matmul_internal.cuh"
#include "matmul_q8_rows32.cuh"

namespace cg = cooperative_groups;

enum { Q8R_CHUNK = 256, Q8R_CB = 8 * MM_Q8_0_BYTES, Q8R_ACS = IG_ACS, Q8R_NT = 4, Q8R_MIN_BLOCKS = 256 };

/* 16-byte pieces that cover a span of len bytes starting at byte j0 x unit of a chunk, the worst j0 of a rank. */
__host__ __device__ constexpr int q8r_pieces(int p, int unit) {
    int n = 0;
    for (int j0 = 0; j0 < 8; j0 += p) {
        const int m = ((j0 * unit) % 16 + p * unit + 15) / 16;
        n = m > n ? m : n;
    }
    return n;
}
/* A row's stride in a stage: the pieces, padded to a word count of 4 mod 8 (the 8 rows a fragment load touches
 * fall in distinct banks, as ig_pad). */
__host__ __device__ constexpr int q8r_stride(int pieces) {
    return (pieces * 4) % 8 == 4 ? 16 * pieces : 16 * pieces + 16;
}

template <int KS, int MW>
struct q8r_shape {
    static constexpr int P = 8 / KS, THREADS = 32 * MW, BO = 16 * MW;
    static constexpr int NPW = q8r_pieces(P, MM_Q8_0_BYTES), NPA = q8r_pieces(P, MM_ACT32_BYTES);
    static constexpr int SBW = q8r_stride(NPW), SBA = q8r_stride(NPA);
    static constexpr int ST = BO * SBW + Q8R_MAX_ROWS * SBA; /* bytes of a stage */
    static constexpr int S = P == 4 ? 4 : P == 2 ? 4 : MW == 8 ? 6 : 8; /* stages: ~50-90 KB in flight an SM */
    static constexpr int WIT = (BO * NPW + THREADS - 1) / THREADS, AIT = (Q8R_MAX_ROWS * NPA + THREADS - 1) / THREADS;
    static constexpr int RED = MW * Q8R_NT * 32 * 4 * (int)sizeof(float); /* the block's subtree values */
    static constexpr int SMEM = S * ST > RED ? S * ST : RED;
    static constexpr int MIN_BLOCKS = 65536 / (THREADS * 128); /* <= 128 registers a thread */
};

__device__ __forceinline__ int q8r_ld32(const uint8_t *p) { return *(const int *)p; }
__device__ __forceinline__ int q8r_ld32a2(const uint8_t *p) { /* 2-byte aligned (a Q8_0 block's codes) */
    const unsigned short *h = (const unsigned short *)p;
    return (int)(h[0] | ((unsigned)h[1] << 16));
}

__device__ __forceinline__ void q8r_mma(int *c, int a0, int a1, int a2, int a3, int b0, int b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void q8r_cp16(unsigned dst, const uint8_t *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

/* grid (KS, output groups of 16 MW), clusters of KS blocks along x: rank r takes partials P r .. P r + P - 1 */
template <int KS, int MW>
__global__ void __cluster_dims__(KS, 1, 1)
    __launch_bounds__(q8r_shape<KS, MW>::THREADS, q8r_shape<KS, MW>::MIN_BLOCKS) q8r_kernel(ig_params p) {
    using SH = q8r_shape<KS, MW>;
    constexpr int P = SH::P, NPW = SH::NPW, NPA = SH::NPA, SBW = SH::SBW, SBA = SH::SBA, ST = SH::ST, S = SH::S;
    constexpr int NT = Q8R_NT;
    extern __shared__ __align__(16) uint8_t sm[];
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank(), tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, tig = lane & 3, j0 = P * rank, n0 = blockIdx.y * SH::BO;
    const int nchunks = p.n_in / Q8R_CHUNK, n_rows = p.n_rows;
    /* the spans of a chunk this rank reads: weights [sw, sw + 34P) of a row's chunk, rows [sa, sa + 36P) of a
     * row's 304-byte chunk; copied from their 16-byte aligned starts, so they sit at ow / oa in a stage's row */
    const int sw = j0 * MM_Q8_0_BYTES, sa = j0 * MM_ACT32_BYTES, ow = sw & 15, oa = sa & 15;
    const int nw = (ow + P * MM_Q8_0_BYTES + 15) / 16, na = (oa + P * MM_ACT32_BYTES + 15) / 16;

    /* this thread's copy pieces, set once (NULL: idle); a chunk adds Q8R_CB to a weight piece, xstep to a row's */
    const size_t xstep = (size_t)p.xq_rows * Q8R_ACS;
    const uint8_t *wsrc[SH::WIT], *asrc[SH::AIT];
    unsigned wdst[SH::WIT], adst[SH::AIT];
#pragma unroll
    for (int j = 0; j < SH::WIT; j++) {
        const int idx = tid + j * SH::THREADS, r = idx / NPW, pc = idx % NPW;
        const bool live = idx < SH::BO * NPW && pc < nw && n0 + r < p.n_out;
        wsrc[j] = live ? p.w + (size_t)(n0 + r) * p.row_bytes + (sw - ow) + 16 * pc : NULL;
        wdst[j] = (unsigned)(r * SBW + 16 * pc);
    }
#pragma unroll
    for (int j = 0; j < SH::AIT; j++) {
        const int idx = tid + j * SH::THREADS, i = idx / NPA, pc = idx % NPA;
        const bool live = idx < Q8R_MAX_ROWS * NPA && pc < na && i < n_rows;
        asrc[j] = live ? p.xq + (size_t)i * Q8R_ACS + (sa - oa) + 16 * pc : NULL;
        adst[j] = (unsigned)(SH::BO * SBW + i * SBA + 16 * pc);
    }
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(sm);
    auto issue_w = [&](int c) { /* the weights' pieces of chunk c (constant: allowed before pdl_wait) */
        const unsigned st = sbase + (unsigned)((c % S) * ST);
#pragma unroll
        for (int j = 0; j < SH::WIT; j++)
            if (wsrc[j]) q8r_cp16(st + wdst[j], wsrc[j] + (size_t)c * Q8R_CB);
    };
    auto issue_a = [&](int c) { /* the rows' pieces of chunk c (an earlier kernel's output: after pdl_wait) */
        const unsigned st = sbase + (unsigned)((c % S) * ST);
#pragma unroll
        for (int j = 0; j < SH::AIT; j++)
            if (asrc[j]) q8r_cp16(st + adst[j], asrc[j] + (size_t)c * xstep);
    };
    /* PDL (cuda_pdl.cuh): the first stages' weights start while the kernel before finishes; the rows follow the
     * wait. The first commit group then holds every prologue weight piece and chunk 0's rows: waiting on it waits
     * for more than chunk 0, never for less, so the ring's order and the arithmetic are unchanged. */
#pragma unroll
    for (int s = 0; s < S - 1; s++)
        if (s < nchunks) issue_w(s);
    pdl_wait();
    pdl_trigger();
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < nchunks) issue_a(s);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }

    bool live[NT];
    float acc[NT][P][4];
#pragma unroll
    for (int i = 0; i < NT; i++) {
        live[i] = 8 * i < n_rows;
#pragma unroll
        for (int b = 0; b < P; b++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[i][b][q] = 0.0f;
    }
    const int r0 = 16 * warp + g; /* this lane's weight rows r0 and r0 + 8 of the block */
    for (int c = 0; c < nchunks; c++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory");
        __syncthreads(); /* chunk c everywhere; every warp is past chunk c-1 */
        if (c + S - 1 < nchunks) issue_w(c + S - 1), issue_a(c + S - 1);
        asm volatile("cp.async.commit_group;" ::: "memory");
        const uint8_t *stg = sm + (c % S) * ST;
        const uint8_t *wb0 = stg + r0 * SBW + ow, *wb1 = wb0 + 8 * SBW, *ab = stg + SH::BO * SBW + oa;
#pragma unroll
        for (int b = 0; b < P; b++) { /* block 8c + j0 + b of the row: a term of partial j0 + b, in block order */
            const uint8_t *b0 = wb0 + b * MM_Q8_0_BYTES, *b1 = wb1 + b * MM_Q8_0_BYTES;
            const int a0 = q8r_ld32a2(b0 + 2 + 4 * tig), a1 = q8r_ld32a2(b1 + 2 + 4 * tig);
            const int a2 = q8r_ld32a2(b0 + 18 + 4 * tig), a3 = q8r_ld32a2(b1 + 18 + 4 * tig);
            const float dw0 = __half2float(*(const __half *)b0), dw1 = __half2float(*(const __half *)b1);
            const uint8_t *xa = ab + b * MM_ACT32_BYTES;
#pragma unroll
            for (int i = 0; i < NT; i++) {
                if (!live[i]) continue;
                const uint8_t *xb = xa + (8 * i + g) * SBA, *xc = xa + (8 * i + 2 * tig) * SBA;
                int cc[4] = {0, 0, 0, 0};
                q8r_mma(cc, a0, a1, a2, a3, q8r_ld32(xb + 4 + 4 * tig), q8r_ld32(xb + 20 + 4 * tig));
                const float xd0 = *(const float *)xc, xd1 = *(const float *)(xc + SBA);
                acc[i][b][0] = __fadd_rn(acc[i][b][0], __fmul_rn(__fmul_rn(dw0, xd0), (float)cc[0]));
                acc[i][b][1] = __fadd_rn(acc[i][b][1], __fmul_rn(__fmul_rn(dw0, xd1), (float)cc[1]));
                acc[i][b][2] = __fadd_rn(acc[i][b][2], __fmul_rn(__fmul_rn(dw1, xd0), (float)cc[2]));
                acc[i][b][3] = __fadd_rn(acc[i][b][3], __fmul_rn(__fmul_rn(dw1, xd1), (float)cc[3]));
            }
        }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads(); /* the stages are free: this block's subtree values go there ([MW][NT][32 lanes][4]) */
    float *red = (float *)sm;
#pragma unroll
    for (int i = 0; i < NT; i++)
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float v;
            if (P == 4) /* (p0+p1)+(p2+p3) of this rank's four */
                v = __fadd_rn(__fadd_rn(acc[i][0][q], acc[i][1 % P][q]), __fadd_rn(acc[i][2 % P][q], acc[i][3 % P][q]));
            else if (P == 2)
                v = __fadd_rn(acc[i][0][q], acc[i][1 % P][q]);
            else
                v = acc[i][0][q];
            red[((warp * NT + i) * 32 + lane) * 4 + q] = v;
        }
    cluster.sync(); /* every rank's values written and visible to the cluster */
    /* the tree's upper levels, each (warp, row tile) by one rank: rank k's value is the subtree of partials
     * P k .. P k + P - 1, so the sum below is ((p0+p1)+(p2+p3)) + ((p4+p5)+(p6+p7)) exactly */
#pragma unroll
    for (int i = 0; i < NT; i++) {
        if (!live[i] || (warp * NT + i) % KS != rank) continue;
        const int e = ((warp * NT + i) * 32 + lane) * 4;
        float v[KS][4];
#pragma unroll
        for (int k = 0; k < KS; k++) {
            const float4 t = *(const float4 *)cluster.map_shared_rank(red + e, k);
            v[k][0] = t.x, v[k][1] = t.y, v[k][2] = t.z, v[k][3] = t.w;
        }
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float s;
            if (KS == 2)
                s = __fadd_rn(v[0][q], v[1 % KS][q]);
            else if (KS == 4)
                s = __fadd_rn(__fadd_rn(v[0][q], v[1 % KS][q]), __fadd_rn(v[2 % KS][q], v[3 % KS][q]));
            else
                s = __fadd_rn(__fadd_rn(__fadd_rn(v[0][q], v[1 % KS][q]), __fadd_rn(v[2 % KS][q], v[3 % KS][q])),
                              __fadd_rn(__fadd_rn(v[4 % KS][q], v[5 % KS][q]), __fadd_rn(v[6 % KS][q], v[7 % KS][q])));
            const int o = n0 + r0 + (q < 2 ? 0 : 8), r = 8 * i + 2 * tig + (q & 1);
            if (o < p.n_out && r < n_rows) p.y[(size_t)r * p.n_out + o] = s;
        }
    }
    cluster.sync(); /* no block leaves while another rank still reads its shared memory */
}

/* ---- the switch and the launch ---- */

/* CLOVER_CUDA_Q8_ROWS32 (read once): 1 every product it takes, 0 none, unset (or anything else) AUTO: only the
 * products of >= Q8R_AUTO_OUT outputs (the output head) at 8+ rows. Why AUTO: on an H100 (2026-12-06,
 * bench/device-runs/2027-01-01-r32pdl24) the form with PDL was slower than igemm_q8_kernel on every product of a
 * layer (0.44-0.96x at 32 rows) and in the passes (preview 5.88 -> 6.69 ms), but faster on the 248,320-output
 * head: 339 -> 292 us at 32 rows, 273 -> 238 at 16, 240 -> 220 at 8 (52 -> 61% of the copy bandwidth at 32).
 * cuda_q8_rows32_set overrides (tests, benches): 1 / 0, negative: the environment again. */
enum { Q8R_AUTO_OUT = 65536, Q8R_AUTO_MIN_ROWS = 8 };
static int g_q8r = INT_MIN;
static int q8r_mode(void) { return cuda_env_int(&g_q8r, "CLOVER_CUDA_Q8_ROWS32", 2); } /* 2: AUTO */
static unsigned long long g_q8r_launches;
extern "C" void cuda_q8_rows32_set(int on) { __atomic_store_n(&g_q8r, on < 0 ? INT_MIN : on != 0, __ATOMIC_RELAXED); }
extern "C" unsigned long long cuda_q8_rows32_launches(void) {
    return __atomic_load_n(&g_q8r_launches, __ATOMIC_RELAXED);
}

/* A forced layout (tests, device A/B): CLOVER_CUDA_Q8_ROWS32_LAYOUT=MWxKS (read once) or cuda_q8_rows32_layout_set;
 * 0: by shape. Encoded 10 * MW + KS. */
static int g_q8r_layout = -1;
static int q8r_forced(void) {
    int v = __atomic_load_n(&g_q8r_layout, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("CLOVER_CUDA_Q8_ROWS32_LAYOUT");
        int mw = 0, ks = 0;
        v = e && sscanf(e, "%dx%d", &mw, &ks) == 2 ? 10 * mw + ks : 0;
        __atomic_store_n(&g_q8r_layout, v, __ATOMIC_RELAXED);
    }
    return v;
}
extern "C" void cuda_q8_rows32_layout_set(int mw, int ks) {
    __atomic_store_n(&g_q8r_layout, mw < 0 ? -1 : 10 * mw + ks, __ATOMIC_RELAXED);
}

static int q8r_shape_ok(uint32_t type, size_t n_in, size_t n_rows) {
    return type == MM_Q8_0 && n_rows >= 1 && n_rows <= Q8R_MAX_ROWS && n_in >= Q8R_CHUNK && n_in % Q8R_CHUNK == 0;
}
/* every product of the shape (mode 1 only: AUTO's few products leave the segmented launches as they are) */
extern "C" int cuda_q8_rows32_takes(uint32_t type, size_t n_in, size_t n_rows) {
    return q8r_mode() == 1 && q8r_shape_ok(type, n_in, n_rows);
}

template <int KS, int MW>
static int q8r_launch_t(const ig_params *q, cudaStream_t st) {
    using SH = q8r_shape<KS, MW>;
    static_assert(SH::S >= 2 && SH::SMEM <= 227 * 1024, "q8r: shared memory");
    static_assert(SH::P * KS == 8 && (MW == 1 || MW == 2 || MW == 4 || MW == 8), "q8r: layout");
    const unsigned groups = (unsigned)((q->n_out + SH::BO - 1) / SH::BO);
    if (groups > 65535) return 0;
    static int attr = 0; /* 1 set, -1 refused (the caller's kernel runs instead) */
    if (!attr) {
        const cudaError_t e =
            cudaFuncSetAttribute(q8r_kernel<KS, MW>, cudaFuncAttributeMaxDynamicSharedMemorySize, SH::SMEM);
        if (e != cudaSuccess) (void)cudaGetLastError(); /* not sticky */
        attr = e == cudaSuccess ? 1 : -1;
    }
    if (attr < 0) return 0;
    /* the cluster size is the kernel's own (__cluster_dims__); PDL as the other many-row products' launches */
    pdl_launch_rows(q8r_kernel<KS, MW>, dim3(KS, groups), dim3(SH::THREADS), (size_t)SH::SMEM, st, *q);
    __atomic_fetch_add(&g_q8r_launches, 1, __ATOMIC_RELAXED);
    return 1;
}

/* The layout for n_out outputs: MW 8 with the smallest KS giving >= Q8R_MIN_BLOCKS blocks, else KS 8 with the
 * largest MW that does, else 1 x 8 (the most blocks). */
static int q8r_layout(int n_out) {
    const int f = q8r_forced();
    if (f) return f;
    const int g16 = (n_out + 15) / 16;
    static const int L[][2] = {{8, 2}, {8, 4}, {8, 8}, {4, 8}, {2, 8}};
    for (size_t i = 0; i < sizeof L / sizeof L[0]; i++)
        if ((g16 + L[i][0] - 1) / L[i][0] * L[i][1] >= Q8R_MIN_BLOCKS) return 10 * L[i][0] + L[i][1];
    return 18;
}

int q8r_launch(uint32_t type, const ig_params *q, cudaStream_t st) {
    const int mode = q8r_mode();
    const bool take = mode == 1 || (mode == 2 && q->n_out >= Q8R_AUTO_OUT && q->n_rows >= Q8R_AUTO_MIN_ROWS);
    if (!take || !q8r_shape_ok(type, (size_t)q->n_in, (size_t)q->n_rows) || !q->xq || q->perm || q->wide) return 0;
    if ((((uintptr_t)q->w | (uintptr_t)q->xq | q->row_bytes) & 15) != 0) return 0;
    switch (q8r_layout(q->n_out)) {
    case 82: return q8r_launch_t<2, 8>(q, st);
    case 84: return q8r_launch_t<4, 8>(q, st);
    case 88: return q8r_launch_t<8, 8>(q, st);
    case 48: return q8r_launch_t<8, 4>(q, st);
    case 28: return q8r_launch_t<8, 2>(q, st);
    case 18: return q8r_launch_t<8, 1>(q, st);
    default: return 0; /* a forced layout that does not exist: the old kernel */
    }
}
