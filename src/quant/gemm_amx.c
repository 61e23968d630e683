/*
 * gemm_amx.c: the AMX level's integer multi-row kernel (simd_level.h):
 * three or more 8-bit activation rows against Q8_0 weights (and Q4_K /
 * Q5_K, at the end of the file: the same tiles per sub-block of 32), with
 * AMX int8 tiles doing the integer work of one block of 32 for 16 weight
 * rows x 16 activation rows in one tdpbssd.
 *
 * The arithmetic (act_bsum_avx2.c's header): for each (weight row,
 * activation row) and block b, in order: s_b = the block's whole integer
 * sum (exact), acc = fma(d_w * d_x, (float)s_b, acc) from +0. The tile
 * gives s_b exactly (int32 sums of int8 products, no saturation: |s_b| <
 * 2^24); the float step is the same IEEE product and FMA per (row, block)
 * in the same block order, so each output equals the AMX level's one-row
 * dot bit for bit, whatever the row count (the batch-invariance rule), and
 * equals the tests' scalar oracle of that order bit for bit.
 *
 * Why this shape. tdpbssd multiplies an A tile (M rows x K bytes) by a B
 * tile (K/4 rows x N dwords, each dword 4 bytes of one column: the VNNI
 * layout) into C (M x N int32). Each C element must be one block's sum, so
 * K = 32 bytes (one Q8_0 block): half a full tile's K, against 1/16 in the
 * last session's lane-exact kernel (RESULTS.md of 2026-12-04: 0.51x the
 * VNNI kernel). A = 16 weight rows x the block's 32 codes, loaded straight
 * from the GGUF rows with the row stride (tileloadd is a strided load; a
 * block's codes follow its f16 scale), so the weights need no repacking at
 * load and no per-tile shuffle. B = the block of 16 activation rows in the
 * VNNI layout: that layout is the activations', staged once per product
 * by matmul.c (gemm_amx.h) where the other levels stage them planar, so it
 * costs nothing per tile either. C = 16 weight rows x 16 activation rows,
 * stored to a 1 KiB buffer; then per weight row i one vector of 16
 * activation rows: acc[i] = fma(dx * dw[i], cvt(C row i), acc[i]), with dx
 * the block's 16 activation scales (one vector load) and dw[i] the weight
 * row's f16 scale as float, broadcast from dwf (the scales of a 16-row x
 * KB-block chunk, gathered and converted once per chunk and pass). Three
 * vector operations per 16 (row, row) pairs a block, against the VNNI
 * kernel's four per 8 lanes of one pair.
 *
 * Loops: 16 weight rows (a partial last tile configures M = its rows) x
 * passes of X_GROUPS groups of 16 activation rows x chunks of KB blocks,
 * with the 16 accumulators of each group in registers over a chunk and
 * saved between chunks (the block order is kept). Four blocks are in
 * flight (C tiles 0..3), so that the tile work of some overlaps the float
 * steps of others; CLOVER_AMX_FLIGHT=2 takes two (simd_level.h), for the
 * device benchmark to say which pays (same bits either way). What a unit
 * (16 weight rows x 16 activation rows x one block) costs on this core,
 * measured on the dev VM's AMX Xeon (bench/device-runs/amx-kernel-notes.md):
 * tdpbssd, tilestored and the 512-bit float step take ~12-13 TSC ticks
 * each and barely overlap one another (a pipelined order, tiles of the next
 * step before the float steps of this one, gained nothing for Q8_0), so
 * the kernel keeps everything else off the unit's path: the accumulators
 * in registers (a local copy in amx_group), the outputs written as rows
 * (amx_emit), the next chunk's weight lines prefetched (amx_pf). Tiles are
 * configured at the start of each call and released at its end (a call is
 * at least 16 weight rows x all rows x all blocks, so the configuration is
 * a small part of it, and no tile state outlives the call).
 *
 * Compiled with -mavx512f/bw/vl/vnni -mamx-tile -mamx-int8 (*_amx.c, this
 * file only); called only when quant_amx_active(). test_gemm_amx_emu runs
 * this source on emulated tiles (and emulated AVX-512) on any AVX2 CPU.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "quant/gemm_amx.h"
#include "quant/gemm_amx_pack.h"
#include "quant/matmul_internal.h"
#include "quant/quant_avx2_inline.h"
#include "quant/quant_internal.h"
#include "quant/simd_level.h"

enum {
    W_TILE = 16,   /* weight rows per tile (A's and C's rows) */
    KB = 128,      /* blocks per chunk (4096 values): dwf is 16 x KB floats, 8 KiB */
    X_GROUPS = 8,  /* groups of 16 activation rows per pass: 8 x 16 saved accumulators, 8 KiB */
    QB = 34,       /* bytes of a Q8_0 block: f16 scale, then 32 codes */
    PREFETCH = 1024, /* the weight lines asked for ahead on the first group of a pass */
};

/* ldtilecfg of the configuration at c. Not _tile_loadconfig: GCC 12 does not count that intrinsic as reading the
 * 64 bytes, and at -O2 dropped the stores of rows and colsb before it (the README's RelWithDebInfo build: a
 * garbage configuration, #GP, SIGSEGV in `clover run` on an AMX host). An asm whose memory operand is the whole
 * struct keeps every store. tests/unit/amx_emu.h defines it first, as its emulated load. */
#ifndef AMX_LOADCONFIG
#define AMX_LOADCONFIG(cfg) __asm__ volatile("ldtilecfg %0" : : "m"(*(cfg)))
#endif

/* ldtilecfg's 64-byte operand (palette 1). */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;
_Static_assert(sizeof(tile_config) == 64, "tile configuration layout");

/* Tiles 0..3: C (m weight rows x 16 int32); 4, 6: A (m weight rows x 32
 * code bytes); 5, 7: B (8 rows x 64 bytes). */
static void amx_configure(int m) {
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 4; t++) c.rows[t] = (uint8_t)m, c.colsb[t] = 64;
    for (int t = 4; t < 8; t += 2) {
        c.rows[t] = (uint8_t)m, c.colsb[t] = 32;
        c.rows[t + 1] = 8, c.colsb[t + 1] = 64;
    }
    AMX_LOADCONFIG(&c);
}

/* dwf[i * KB + b] = the f16 scale of weight row o + i, block kb0 + b, as
 * float (rows i >= m: 0). Eight blocks of a row per gather: the dword at
 * each block's start holds its scale in the low 16 bits. */
static void dw_fill(const matmul_job *j, size_t o, int m, size_t kb0, size_t nkb, float *dwf) {
    const __m256i idx = _mm256_setr_epi32(0, QB, 2 * QB, 3 * QB, 4 * QB, 5 * QB, 6 * QB, 7 * QB);
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
    for (int i = 0; i < W_TILE; i++) {
        float *dst = dwf + i * KB;
        if (i >= m) {
            memset(dst, 0, nkb * sizeof(float));
            continue;
        }
        const uint8_t *row = j->w + (o + (size_t)i) * j->row_bytes + kb0 * QB;
        size_t b = 0;
        for (; b + 8 <= nkb; b += 8) {
            const __m256i h = _mm256_and_si256(_mm256_i32gather_epi32((const int *)(const void *)(row + QB * b), idx, 1), lo16);
            /* packus: 16-bit [h0..h3 h0..h3 | h4..h7 h4..h7]; qwords 0 and 2 are h0..h7 */
            const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08);
            _mm256_storeu_ps(dst + b, _mm256_cvtph_ps(_mm256_castsi256_si128(p)));
        }
        for (; b < nkb; b++) dst[b] = load_f16(row + QB * b);
    }
}

/* One block's float step: cb = C (16 rows of 16 int32), dwb = the block's
 * weight scale of row i at dwb[i * dws], dxb = its 16 activation scales. */
static inline __attribute__((always_inline)) void amx_fma(const int32_t *cb, const float *dwb, const size_t dws,
                                                          const float *dxb, __m512 acc[W_TILE]) {
    const __m512 dx = _mm512_loadu_ps(dxb);
#pragma GCC unroll 16 /* acc[] stays in registers only if every index is a constant */
    for (int i = 0; i < W_TILE; i++)
        acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(dx, _mm512_set1_ps(dwb[i * dws])),
                                 _mm512_cvtepi32_ps(_mm512_loadu_si512(cb + 16 * i)), acc[i]);
}

/* Q8_0: the weight lines of the chunk a task takes next (the same tile's
 * next chunk, or the next tile's first), asked for into L2 a few at a time
 * while the first group of the current chunk runs, so that the next
 * chunk's first touch (dw_fill's gathers) finds more of them there instead
 * of waiting on memory (that first touch was most of the ~0.8 ms an
 * 8192 x 2048 product at 32 rows spends outside the tiles and float steps,
 * one thread on the dev VM). It gained ~3-4% there; the same for the
 * K-quants' unpack (kq_prepare) lost 5-9% on one 8192 x 2048 product
 * (likely one long sequential stream the hardware prefetcher follows).
 * CLOVER_AMX_PF=0 turns it off (read per call: an A/B for a host whose
 * memory behaves otherwise, e.g. 16 threads sharing its bandwidth).
 * The K-quants' unpacking path takes it too, spread over every group's
 * super-blocks (issue 30, the MoE): a routed expert's weights are 16-row
 * tiles of 18 KiB (gate / up) or 4.6 KiB (down) read in a burst by
 * kq_prepare, then ~8,000 ticks of tile work with no weight loads, so the
 * stream stops between tiles and each tile's burst waited on memory (~20%
 * of the kernel's samples at 32 rows); asked for a tile ahead, the layer's
 * experts ran 1.13-1.14x faster on one thread (bench_moe_products --ab
 * CLOVER_AMX_KPF=0, the dev VM). CLOVER_AMX_KPF=0 turns that part off
 * (and kq_prepare's rows ahead; CLOVER_AMX_KPF=1 those only; kq_unpack
 * has none).
 * row: the current row's first byte of the chunk, [at, end) its lines still
 * to ask for; rows: rows after it. */
typedef struct amx_pf {
    const char *row, *at, *end;
    size_t stride, bytes;
    int rows, per_step;
} amx_pf;

/* pf for rows o.. o + m - 1, blocks (Q8_0's, or the K-quants' super-blocks: bsz bytes each) b0.. b0 + n - 1,
 * spread over `steps` calls of pf_step. */
static void pf_plan(amx_pf *pf, const matmul_job *j, size_t o, int m, size_t b0, size_t n, size_t bsz, size_t steps) {
    pf->row = (const char *)j->w + o * j->row_bytes + b0 * bsz;
    pf->stride = j->row_bytes, pf->bytes = n * bsz, pf->rows = m - 1;
    pf->at = (const char *)((uintptr_t)pf->row & ~(uintptr_t)63), pf->end = pf->row + pf->bytes;
    const size_t lines = (size_t)m * (pf->bytes / 64 + 2);
    pf->per_step = (int)((lines + steps - 1) / (steps ? steps : 1));
}

static inline void pf_step(amx_pf *pf) {
    for (int k = 0; k < pf->per_step; k++) {
        if (pf->at >= pf->end) {
            if (pf->rows <= 0) return;
            pf->row += pf->stride, pf->rows--;
            pf->at = (const char *)((uintptr_t)pf->row & ~(uintptr_t)63), pf->end = pf->row + pf->bytes;
        }
        _mm_prefetch(pf->at, _MM_HINT_T1);
        pf->at += 64;
    }
}

/* Where one group's blocks are (constants at each call): the A tile of
 * block b at wa + astep * b with row stride `stride`, its weight scales at
 * dwf + b (row stride dws), its activation scales at dx + dxstep * b. */
typedef struct amx_geom {
    size_t astep, dws, dxstep;
} amx_geom;

/* Blocks 0..nkb of one group against the weight tile; bt = the group's B
 * tile of block 0. flight (2 or 4, a constant at each call): blocks whose
 * tile work is issued before their float steps, each in its own C tile
 * (tile registers are few and, as far as Intel documents, not renamed: a C
 * tile is busy from its tilezero to its tilestored, so more C tiles let
 * more tdpbssd overlap; A and B alternate between 4/5 and 6/7). Not
 * pipelined as q4k_group is (step s + 1's tiles issued before step s's
 * float steps): measured on the dev VM that was ~5% slower for Q8_0, since
 * tdpbssd, tilestored and the 512-bit float steps do not overlap on this
 * core anyway (bench/device-runs/amx-kernel-notes.md). pf (Q8_0's first group of a pass, else NULL): ask for the A
 * rows' lines PREFETCH bytes ahead into L1, and for pf's lines, a step's
 * share each step. */
static inline __attribute__((always_inline)) void amx_group(const uint8_t *wa, size_t stride, int m, const uint8_t *bt,
                                                            const float *dx, const float *dwf, const amx_geom G,
                                                            size_t nkb, amx_pf *pf, const int flight,
                                                            int32_t cbuf[4][256], __m512 acc_io[W_TILE]) {
    __m512 acc[W_TILE]; /* a copy whose address never escapes: GCC 12 kept acc_io on the stack, a load and a
                         * store per row every 4 blocks (the tile builtins clobber memory), on top of tilestored */
#pragma GCC unroll 16
    for (int i = 0; i < W_TILE; i++) acc[i] = acc_io[i];

#define AMX_BLOCK(c, ta, tb, k)                                              \
    do {                                                                     \
        _tile_zero(c);                                                       \
        _tile_loadd(ta, wa + G.astep * (k), stride);                         \
        _tile_loadd(tb, bt + GEMM_AMX_TILE_BYTES * (k), 64);                 \
        _tile_dpbssd(c, ta, tb);                                             \
    } while (0)
#define AMX_PREFETCH(k)                                                                         \
    do {                                                                                        \
        if (pf) {                                                                               \
            const char *ahead = (const char *)wa + G.astep * (k) + PREFETCH;                     \
            for (int i = 0; i < m; i++) _mm_prefetch(ahead + (size_t)i * stride, _MM_HINT_T0); \
            pf_step(pf);                                                                        \
        }                                                                                       \
    } while (0)
#define AMX_ISSUE4(k)                                    \
    do {                                                 \
        AMX_PREFETCH(k);                                 \
        AMX_BLOCK(0, 4, 5, (k));                         \
        AMX_BLOCK(1, 6, 7, (k) + 1);                     \
        AMX_BLOCK(2, 4, 5, (k) + 2);                     \
        AMX_BLOCK(3, 6, 7, (k) + 3);                     \
        _tile_stored(0, cbuf[0], 64);                    \
        _tile_stored(1, cbuf[1], 64);                    \
        _tile_stored(2, cbuf[2], 64);                    \
        _tile_stored(3, cbuf[3], 64);                    \
    } while (0)
#define AMX_FMA(c, k) amx_fma(cbuf[c], dwf + (k), G.dws, dx + G.dxstep * (k), acc)
    size_t b = 0;
    if (flight == 4)
        for (; b + 4 <= nkb; b += 4) {
            AMX_ISSUE4(b);
            AMX_FMA(0, b);
            AMX_FMA(1, b + 1);
            AMX_FMA(2, b + 2);
            AMX_FMA(3, b + 3);
        }
    for (; b + 2 <= nkb; b += 2) {
        if (flight == 2) AMX_PREFETCH(b);
        AMX_BLOCK(0, 4, 5, b);
        AMX_BLOCK(1, 6, 7, b + 1);
        _tile_stored(0, cbuf[0], 64);
        _tile_stored(1, cbuf[1], 64);
        AMX_FMA(0, b);
        AMX_FMA(1, b + 1);
    }
    if (b < nkb) {
        AMX_BLOCK(0, 4, 5, b);
        _tile_stored(0, cbuf[0], 64);
        AMX_FMA(0, b);
    }
#pragma GCC unroll 16
    for (int i = 0; i < W_TILE; i++) acc_io[i] = acc[i];
#undef AMX_FMA
#undef AMX_ISSUE4
#undef AMX_PREFETCH
#undef AMX_BLOCK
}

/* acc, after a pass's last chunk: the outputs of group g's rows. acc[i]
 * holds weight row i's 16 activation rows, y wants each activation row's
 * weight rows side by side: a full tile is transposed in 8 x 8 blocks of
 * 256-bit halves and written as 32-byte runs of y's rows (16 row stores
 * of 64 bytes a tile instead of 256 scattered 4-byte ones: those were
 * ~15% of the Q8_0 kernel's samples at 32 rows, perf on the dev VM). */
static void amx_emit(const matmul_job *j, size_t o, int m, size_t g, const __m512 acc[W_TILE]) {
    _Alignas(64) float t[W_TILE][16]; /* t[i][r]: weight row i, activation row r */
    const size_t r0 = g * GEMM_AMX_ROWS;
    const size_t nr = j->n_rows - r0 < GEMM_AMX_ROWS ? j->n_rows - r0 : GEMM_AMX_ROWS;
    for (int i = 0; i < W_TILE; i++) _mm512_store_ps(t[i], acc[i]);
    if (m < W_TILE) {
        for (int i = 0; i < m; i++)
            for (size_t r = 0; r < nr; r++) j->y[(r0 + r) * j->n_out + o + (size_t)i] = t[i][r];
        return;
    }
    for (int h = 0; h < 2; h++) /* activation rows 8h.. */
        for (int q = 0; q < 2; q++) { /* weight rows 8q.. */
            __m256 v[8], u[8];
            for (int k = 0; k < 8; k++) v[k] = _mm256_load_ps(&t[8 * q + k][8 * h]);
            for (int k = 0; k < 8; k += 2) {
                u[k] = _mm256_unpacklo_ps(v[k], v[k + 1]);
                u[k + 1] = _mm256_unpackhi_ps(v[k], v[k + 1]);
            }
            for (int k = 0; k < 8; k += 4) {
                v[k] = _mm256_shuffle_ps(u[k], u[k + 2], 0x44);
                v[k + 1] = _mm256_shuffle_ps(u[k], u[k + 2], 0xEE);
                v[k + 2] = _mm256_shuffle_ps(u[k + 1], u[k + 3], 0x44);
                v[k + 3] = _mm256_shuffle_ps(u[k + 1], u[k + 3], 0xEE);
            }
            for (int k = 0; k < 4; k++) {
                u[k] = _mm256_permute2f128_ps(v[k], v[k + 4], 0x20);
                u[k + 4] = _mm256_permute2f128_ps(v[k], v[k + 4], 0x31);
            }
            for (int r = 0; r < 8 && (size_t)(8 * h + r) < nr; r++)
                _mm256_storeu_ps(j->y + (r0 + 8 * (size_t)h + (size_t)r) * j->n_out + o + 8 * (size_t)q, u[r]);
        }
}

/* ---- Q4_K / Q5_K ----
 *
 * The same tiles per sub-block of 32 (its 6-bit scale, times d, is the
 * block scale of the float step: d * scale is exact in float, 11 x 6
 * bits), then per super-block the mins: M = sum over s of min(s) * (sum of
 * the activation codes of sub-block s), exact (vpmaddwd / vpdpwssd of the
 * staged code sums against the weight row's mins in int16 pairs), and
 * acc = fma(-(dmin * d_x), M, acc): act_bsum_avx2.c's K-quant order. The
 * weights are unpacked per 16-row tile and chunk (nibbles and the Q5_K
 * fifth bit into bytes, as gemm_avx512.c decodes them) into A tiles of
 * stride 32, used by every group of the pass: by kq_unpack, in the repacked
 * panels' layout, for q4k_group (kq_prepare's row-at-a-time form and
 * amx_group with CLOVER_AMX_KUNPACK=0, read per call); Q4_K weights in
 * stable memory are read instead from their repacked panels
 * (gemm_amx_pack.h: the same bytes and scales, made once per weight), with
 * no unpack per tile. */
enum { KBK = 8, KSB = KBK * GEMM_AMX_SUB }; /* super-blocks a chunk holds at most (2048 values), their sub-blocks */
enum { KQ_ROW_PF = 2 };                      /* kq_prepare: rows ahead whose lines it asks for */
enum { KBK_DEFAULT = 2 };                    /* super-blocks a chunk (kq_chunk) */

/* Super-blocks per chunk. A chunk's unpacked A tiles (4.9 KiB a super-block) and a group's B tiles of the same
 * super-blocks (4 KiB a super-block) are read once per group of the pass: at 2, with 32 rows, both groups' and
 * the A tiles stay in L1 (~26 KiB of its 48), where with the 8 of before (~71 KiB) each group's pass read them
 * back from L2 (one thread, dev VM: 512 x 2048 at 32 rows 0.83 of 8's time; 2048 x 2048 at 8-128 rows 0.78-0.90,
 * with 1 0.81-0.92, 3 0.92-0.95, 4 0.98-1.04; bench/device-runs/amx-kernel-notes.md). CLOVER_AMX_KCHUNK=N (1..8,
 * read per call) sets it, 8 the chunk of before. */
static size_t kq_chunk(void) {
    const char *e = getenv("CLOVER_AMX_KCHUNK");
    const long v = e && *e ? strtol(e, NULL, 10) : KBK_DEFAULT;
    return v >= 1 && v <= KBK ? (size_t)v : KBK_DEFAULT;
}

typedef struct kq_prep {
    uint8_t a[KSB][W_TILE][32];   /* sub-block sb's A tile: row i's 32 codes */
    float dsc[W_TILE][KSB];       /* d * scale of row i, sub-block sb */
    float dmin[W_TILE][KBK];
    int32_t mins[W_TILE][KBK][4]; /* min(2p) | min(2p + 1) << 16 */
} kq_prep;

/* Unpacks a 16-row tile's chunk into P, a row at a time (CLOVER_AMX_KUNPACK=0's form). row_pf: ask for the
 * lines of the row KQ_ROW_PF rows ahead while one is unpacked, for a task's first tile, which no tile before it
 * prefetched (amx_pf): its rows then wait on memory side by side instead of one after another (1-2% of a layer's
 * experts at 2 threads on the dev VM, bench_moe_products --ab CLOVER_AMX_KPF=1, which keeps the tile-ahead
 * prefetch only; 4 rows ahead was no better). */
static void kq_prepare(const matmul_job *j, size_t o, int m, size_t kb0, size_t nkb, size_t qs_off, ptrdiff_t qh_off,
                       size_t bsz, kq_prep *P, int row_pf) {
    for (int i = 0; i < W_TILE; i++) {
        if (i >= m) { /* rows past a partial tile: never loaded into A, their scales 0 */
            memset(P->dsc[i], 0, sizeof P->dsc[i]);
            memset(P->dmin[i], 0, sizeof P->dmin[i]);
            memset(P->mins[i], 0, sizeof P->mins[i]);
            continue;
        }
        const uint8_t *row = j->w + (o + (size_t)i) * j->row_bytes + kb0 * bsz;
        if (row_pf && i + KQ_ROW_PF < m) { /* a row's lines KQ_ROW_PF rows ahead (kq_prepare's comment) */
            const char *ahead = (const char *)row + KQ_ROW_PF * j->row_bytes;
            for (size_t b = 0; b < nkb * bsz + 64; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
        }
        for (size_t B = 0; B < nkb; B++) {
            const uint8_t *blk = row + B * bsz;
            /* 8 scales (int16, low half) and mins (high half: as int32 lanes, the pairs kq_mins takes) */
            const __m256i sm = k4_scales_mins(blk + 4);
            _mm256_storeu_ps(&P->dsc[i][GEMM_AMX_SUB * B], _mm256_mul_ps(_mm256_set1_ps(load_f16(blk)),
                                                                          _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(sm)))));
            _mm_storeu_si128((__m128i *)(void *)P->mins[i][B], _mm256_extracti128_si256(sm, 1));
            P->dmin[i][B] = load_f16(blk + 2);
            const __m256i h = qh_off >= 0 ? load_256(blk + qh_off) : _mm256_setzero_si256();
            for (int c = 0; c < 4; c++) {
                __m256i lo, hi;
                k4_codes(blk + qs_off, h, c, qh_off >= 0, &lo, &hi);
                _mm256_storeu_si256((__m256i *)(void *)P->a[GEMM_AMX_SUB * B + 2 * (size_t)c][i], lo);
                _mm256_storeu_si256((__m256i *)(void *)P->a[GEMM_AMX_SUB * B + 2 * (size_t)c + 1][i], hi);
            }
        }
    }
}

/* One super-block's mins step: sp = the group's 4 vectors of code-sum
 * pairs, dxb its scales; row i's dmin at dmin[i * dms], its pair p at
 * mins[i * mrs + p * mps] (constants at each call: the unpacked chunk's
 * strides or a panel's). */
static inline __attribute__((always_inline)) void kq_mins(const int32_t *sp, const float *dxb, const float *dmin,
                                                          const size_t dms, const int32_t *mins, const size_t mrs,
                                                          const size_t mps, __m512 acc[W_TILE]) {
    const __m512i p0 = _mm512_loadu_si512(sp), p1 = _mm512_loadu_si512(sp + 16);
    const __m512i p2 = _mm512_loadu_si512(sp + 32), p3 = _mm512_loadu_si512(sp + 48);
    const __m512 dx = _mm512_loadu_ps(dxb);
#pragma GCC unroll 16
    for (int i = 0; i < W_TILE; i++) {
        const int32_t *mi = mins + (size_t)i * mrs;
        __m512i M = _mm512_madd_epi16(p0, _mm512_set1_epi32(mi[0]));
        M = _mm512_dpwssd_epi32(M, p1, _mm512_set1_epi32(mi[mps]));
        M = _mm512_dpwssd_epi32(M, p2, _mm512_set1_epi32(mi[2 * mps]));
        M = _mm512_dpwssd_epi32(M, p3, _mm512_set1_epi32(mi[3 * mps]));
        const __m512 dm = _mm512_mul_ps(dx, _mm512_set1_ps(dmin[(size_t)i * dms]));
        acc[i] = _mm512_fnmadd_ps(dm, _mm512_cvtepi32_ps(M), acc[i]);
    }
}

/* ---- the chunk unpacked into panels ----
 *
 * kq_unpack writes a 16-row tile's super-blocks kb0.. kb0 + nkb - 1 into
 * panels (gemm_amx_pack.h's layout) for q4k_group: the unpacking path's
 * form (issue 30), and q4k_fill's. Why not kq_prepare's row at a time: at
 * 32 rows a tile's unpack serves only two groups of 16 activation rows, and
 * it was ~30% of the kernel's samples (perf, 512 x 2048, one thread, the dev
 * VM), most of it the scales and mins: k4_scales_mins' scalar bit work, one
 * weight row and super-block at a time. Here the 16 rows of a super-block
 * go together: their 16-byte heads (d, dmin, the 12 scale bytes) are
 * transposed into 4 vectors of 16 dword lanes, one lane a row, so each of
 * k4_scales_mins' operations runs once for the 16 rows (the same 32-bit
 * operations, so the same scales and mins), and a scale or min pair is one
 * vpshufb away from the panel's row of 16; the codes go two weight rows a
 * 512-bit vector (a sub-block's rows i and i + 1 are 64 adjacent bytes of
 * its A tile), k4_codes' operations on two rows at once, the Q5_K fifth
 * bit moved to bit 4 by a 16-bit shift (the bits a shift carries across a
 * byte never reach bit 4). The values are k4_codes' and k4_scales_mins'
 * bit for bit: d * scale is the same exact product. Rows past a partial
 * tile read a zero block (codes, scales, d, dmin 0). No rows-ahead
 * prefetch as kq_prepare's: a super-block's 16 rows are loaded side by
 * side, so a cold tile's rows already wait on memory together (the MoE's
 * layer with it or without, CLOVER_AMX_KPF=1: within 1%). */
static const uint8_t kq_zero[sizeof(block_q5_k)] __attribute__((aligned(64)));

/* Row i's block at blk (row stride rs), or the zero block for rows i >= m. */
static inline const uint8_t *kq_blk(const uint8_t *blk, size_t rs, int i, int m) {
    return i < m ? blk + (size_t)i * rs : kq_zero;
}

static inline __m128i kq_head(const uint8_t *blk, size_t rs, int i, int m) {
    return _mm_loadu_si128((const __m128i *)(const void *)kq_blk(blk, rs, i, m));
}

/* Dwords 0..3 of the 16-byte heads of rows 0..15 (kq_blk) as 4 vectors, lane i = row i. */
static inline __attribute__((always_inline)) void kq_heads(const uint8_t *blk, size_t rs, int m, __m512i W[4]) {
    __m512i Z[4]; /* Z[k]: the heads of rows k, 4 + k, 8 + k, 12 + k in its 128-bit lanes 0..3 */
#pragma GCC unroll 4 /* Z[] in registers: a vector stored and read back in parts stalls the loads */
    for (int k = 0; k < 4; k++) {
        __m512i z = _mm512_castsi128_si512(kq_head(blk, rs, k, m));
        z = _mm512_inserti32x4(z, kq_head(blk, rs, 4 + k, m), 1);
        z = _mm512_inserti32x4(z, kq_head(blk, rs, 8 + k, m), 2);
        Z[k] = _mm512_inserti32x4(z, kq_head(blk, rs, 12 + k, m), 3);
    }
    /* a 4 x 4 dword transpose in each 128-bit lane L: W[d] lane L element k = Z[k] lane L dword d = row 4L + k */
    const __m512i t0 = _mm512_unpacklo_epi32(Z[0], Z[1]), t1 = _mm512_unpackhi_epi32(Z[0], Z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(Z[2], Z[3]), t3 = _mm512_unpackhi_epi32(Z[2], Z[3]);
    W[0] = _mm512_unpacklo_epi64(t0, t2), W[1] = _mm512_unpackhi_epi64(t0, t2);
    W[2] = _mm512_unpacklo_epi64(t1, t3), W[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* k4_scales_mins' upper four bytes, 16 rows at once: (hi & low4) | ((lo >> 6) & low2) << 4, with hi = u[2] (or
 * u[2] >> 4 for the mins), lo = u[0] (u[1]). */
static inline __m512i kq_upper(__m512i hi, __m512i lo) {
    const __m512i top = _mm512_and_si512(_mm512_srli_epi32(lo, 6), _mm512_set1_epi32(0x03030303));
    return _mm512_or_si512(_mm512_and_si512(hi, _mm512_set1_epi32(0x0f0f0f0f)), _mm512_slli_epi32(top, 4));
}

/* vpshufb controls, one 128-bit lane's (-128: a zero byte): 0..3 take byte b = 0..3 of each dword into its
 * byte 0 (scale b as an int32); 4, 5 bytes b and b + 1 into bytes 0 and 2 (b = 0, 2: the min pair
 * min(b) | min(b + 1) << 16). */
static const int8_t kq_pick[6][16] __attribute__((aligned(16))) = {
    {0, -128, -128, -128, 4, -128, -128, -128, 8, -128, -128, -128, 12, -128, -128, -128},
    {1, -128, -128, -128, 5, -128, -128, -128, 9, -128, -128, -128, 13, -128, -128, -128},
    {2, -128, -128, -128, 6, -128, -128, -128, 10, -128, -128, -128, 14, -128, -128, -128},
    {3, -128, -128, -128, 7, -128, -128, -128, 11, -128, -128, -128, 15, -128, -128, -128},
    {0, -128, 1, -128, 4, -128, 5, -128, 8, -128, 9, -128, 12, -128, 13, -128},
    {2, -128, 3, -128, 6, -128, 7, -128, 10, -128, 11, -128, 14, -128, 15, -128},
};

/* 32 bytes at p0 and at p1 as one vector. */
static inline __m512i kq_two(const uint8_t *p0, const uint8_t *p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(load_256(p0)), load_256(p1), 1);
}

static inline __attribute__((always_inline)) void kq_unpack(const matmul_job *j, size_t o, int m, size_t kb0,
                                                            size_t nkb, size_t qs_off, ptrdiff_t qh_off, size_t bsz,
                                                            gemm_amx_q4k_panel *pan) {
    const __m512i low6 = _mm512_set1_epi32(0x3f3f3f3f), m4 = _mm512_set1_epi8(0x0F), b16 = _mm512_set1_epi8(0x10);
    __m512i pick[6];
    for (int k = 0; k < 6; k++)
        pick[k] = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(const void *)kq_pick[k]));
    const size_t rs = j->row_bytes;
    for (size_t B = 0; B < nkb; B++) {
        gemm_amx_q4k_panel *P = pan + B;
        const uint8_t *blk = j->w + o * rs + (kb0 + B) * bsz; /* row 0's block */
        /* the scales and mins: k4_scales_mins' operations, a row a lane (W[1..3] = its u[0..2]) */
        __m512i W[4];
        kq_heads(blk, rs, m, W);
        const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(W[0]));
        _mm512_store_ps(P->dmin, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(W[0], 16))));
        const __m512i sc[2] = {_mm512_and_si512(W[1], low6), kq_upper(W[3], W[1])};
        const __m512i mn[2] = {_mm512_and_si512(W[2], low6), kq_upper(_mm512_srli_epi32(W[3], 4), W[2])};
        for (int s = 0; s < GEMM_AMX_SUB; s++) {
            const __m512 scale = _mm512_cvtepi32_ps(_mm512_shuffle_epi8(sc[s >> 2], pick[s & 3]));
            _mm512_store_ps(P->dsc[s], _mm512_mul_ps(d, scale));
        }
        for (int p = 0; p < 4; p++) _mm512_store_si512(P->mins[p], _mm512_shuffle_epi8(mn[p >> 1], pick[4 + (p & 1)]));
        /* the codes: rows i and i + 1 a vector (a partial tile's odd last row with the zero block) */
        for (int i = 0; i < m; i += 2) {
            const uint8_t *b0 = blk + (size_t)i * rs, *b1 = kq_blk(blk, rs, i + 1, m);
            const __m512i h = qh_off >= 0 ? kq_two(b0 + qh_off, b1 + qh_off) : _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m512i q = kq_two(b0 + qs_off + 32 * c, b1 + qs_off + 32 * c);
                __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
                if (qh_off >= 0) { /* bit 2c (lo), 2c + 1 (hi) of qh byte l: + 16 to code l */
                    const __m512i bl = c < 2 ? _mm512_slli_epi16(h, 4 - 2 * c) : _mm512_srli_epi16(h, 2 * c - 4);
                    const __m512i bh = c < 2 ? _mm512_slli_epi16(h, 3 - 2 * c) : _mm512_srli_epi16(h, 2 * c - 3);
                    lo = _mm512_or_si512(lo, _mm512_and_si512(bl, b16));
                    hi = _mm512_or_si512(hi, _mm512_and_si512(bh, b16));
                }
                _mm512_store_si512(P->a[2 * c][i], lo);
                _mm512_store_si512(P->a[2 * c + 1][i], hi);
            }
        }
    }
}

/* ---- Q4_K from repacked panels (gemm_amx_pack.h) ----
 *
 * q4k_fill writes tile t's panels from the weight rows with kq_unpack
 * (the unpacking path's own unpack, so the same codes and scales, bit for
 * bit); q4k_panels hands a task the panels of the tile at o, filling them
 * first if no task has (the first to claim the tile fills it; a task that
 * finds it being filled takes the unpacking path for that tile: the same
 * bits, no waiting). */
static void q4k_fill(const matmul_job *j, const gemm_amx_q4k_pack *pk, size_t t) {
    gemm_amx_q4k_panel *pan = pk->panels + t * pk->nbk;
    const size_t o = t * W_TILE;
    const int m = j->n_out - o < W_TILE ? (int)(j->n_out - o) : W_TILE;
    if (m < W_TILE) memset(pan, 0, pk->nbk * sizeof *pan); /* rows past the weight's last: codes and scales 0 */
    kq_unpack(j, o, m, 0, pk->nbk, offsetof(block_q4_k, qs), -1, sizeof(block_q4_k), pan);
}

static const gemm_amx_q4k_panel *q4k_panels(const matmul_job *j, size_t o) {
    const gemm_amx_q4k_pack *pk = j->q4k;
    if (!pk || o % W_TILE) return NULL; /* a range that starts off a tile boundary: not a panel's rows */
    const size_t t = o / W_TILE;
    unsigned char st = atomic_load_explicit(&pk->state[t], memory_order_acquire);
    if (st == GEMM_AMX_PACK_EMPTY &&
        atomic_compare_exchange_strong_explicit(&pk->state[t], &st, GEMM_AMX_PACK_FILLING, memory_order_acquire,
                                                memory_order_acquire)) {
        q4k_fill(j, pk, t);
        atomic_store_explicit(&pk->state[t], GEMM_AMX_PACK_READY, memory_order_release);
        st = GEMM_AMX_PACK_READY;
    }
    return st == GEMM_AMX_PACK_READY ? pk->panels + t * pk->nbk : NULL;
}

/* One group's super-blocks 0..nkb of panels pan: bt = the group's B tile of
 * the first one's sub-block 0 (the next at + 512 each), dx its scales (16
 * a super-block), sp its code-sum pairs (64 a super-block). Steps of four
 * sub-blocks (half a super-block), each in C tiles 0..3, A and B tiles
 * alternating between 4/5 and 6/7, the mins step after each super-block's
 * second. pipe (a constant at each call): the tile work of step st + 1 is
 * issued, and stored into the other half of cbuf, before the float steps
 * of step st, which read what was stored a step earlier: the C tiles' stores
 * have left the core's store buffer before their rows are loaded back,
 * and the tile unit works on one step while the vector units finish the
 * last (without pipe: amx_group's order of issue, tiles then float steps
 * of the same sub-blocks). The float steps are the same, in
 * the same sub-block order, either way. pf: a share of its lines asked for
 * after each step (the unpacking path's, amx_pf), or NULL: per step rather
 * than per super-block, the stream of prefetches is smoother (a layer's
 * cold experts, bench_moe_products, one thread: 0.95-0.96 of the time in 6
 * of 7 rounds, two threads 0.96-1.02; a warm product no change). */
static inline __attribute__((always_inline)) void q4k_group(const gemm_amx_q4k_panel *pan, const uint8_t *bt,
                                                            const float *dx, const int32_t *sp, size_t nkb,
                                                            const int pipe, int32_t cbuf[2][4][256],
                                                            __m512 acc[W_TILE], amx_pf *pf) {
#define Q4K_TILE(c, ta, tb, st)                                                                         \
    do {                                                                                               \
        _tile_zero(c);                                                                                 \
        _tile_loadd(ta, pan[(st) >> 1].a[4 * ((st) & 1) + (c)], 32);                                   \
        _tile_loadd(tb, bt + GEMM_AMX_TILE_BYTES * (GEMM_AMX_SUB * ((st) >> 1) + 4 * ((st) & 1) + (c)), 64); \
        _tile_dpbssd(c, ta, tb);                                                                       \
    } while (0)
#define Q4K_ISSUE(st, h)                                 \
    do {                                                 \
        Q4K_TILE(0, 4, 5, st);                           \
        Q4K_TILE(1, 6, 7, st);                           \
        Q4K_TILE(2, 4, 5, st);                           \
        Q4K_TILE(3, 6, 7, st);                           \
        _tile_stored(0, cbuf[h][0], 64);                 \
        _tile_stored(1, cbuf[h][1], 64);                 \
        _tile_stored(2, cbuf[h][2], 64);                 \
        _tile_stored(3, cbuf[h][3], 64);                 \
    } while (0)
    const size_t n = 2 * nkb;
    if (pipe) Q4K_ISSUE(0, 0);
    for (size_t st = 0; st < n; st++) {
        const size_t h = pipe ? st & 1 : 0, B = st >> 1, s0 = 4 * (st & 1);
        if (pipe && st + 1 < n) Q4K_ISSUE(st + 1, (st + 1) & 1);
        if (!pipe) Q4K_ISSUE(st, 0);
        const float *dxb = dx + W_TILE * B;
        for (int c = 0; c < 4; c++) amx_fma(cbuf[h][c], pan[B].dsc[s0 + (size_t)c], 1, dxb, acc);
        if (st & 1) kq_mins(sp + 4 * W_TILE * B, dxb, pan[B].dmin, 1, &pan[B].mins[0][0], 1, W_TILE, acc);
        if (pf) pf_step(pf);
    }
#undef Q4K_ISSUE
#undef Q4K_TILE
}

/* ---- the loops both formats share ----
 *
 * 16-row weight tiles x passes of X_GROUPS groups of 16 activation rows x
 * chunks (KB Q8_0 blocks, or KBK super-blocks), each group's accumulators
 * saved between chunks and written out after the last. kq (a constant at
 * each call): 0 for Q8_0 (dwf takes each chunk's weight scales), 1 for
 * Q4_K / Q5_K (U takes each chunk's unpacked panels, or P with
 * CLOVER_AMX_KUNPACK=0; qs_off, qh_off, bsz as kq_unpack). Always inlined, so each format gets its own copy of the
 * loops with no test of kq left in them. */
static inline __attribute__((always_inline)) void amx_tiles(const matmul_job *j, size_t o0, size_t o1, const int kq,
                                                            float *dwf, kq_prep *P, gemm_amx_q4k_panel *U,
                                                            size_t qs_off, ptrdiff_t qh_off, size_t bsz) {
    const size_t nb = j->n_in / QUANT_QK8_0, ng = gemm_amx_groups(j->n_rows);
    const size_t nc = kq ? j->n_in / QUANT_QK_K : nb, kc = kq ? kq_chunk() : (size_t)KB; /* chunked units, a chunk's */
    const float *scales = gemm_amx_scales(j->xq, j->n_rows, nb);
    const int32_t *sums = kq ? gemm_amx_sums(j->xq, j->n_rows, nb) : NULL;
    _Alignas(64) int32_t cbuf[2][4][256]; /* the unpacking path and Q8_0 use cbuf[0] */
    _Alignas(64) float saved[X_GROUPS][W_TILE][16];
    const int flight4 = quant_amx_flight() == 4;
    const char *pfe = getenv("CLOVER_AMX_PF");
    const int pf_on = !(pfe && pfe[0] == '0' && pfe[1] == '\0');
    const char *kpfe = kq ? getenv("CLOVER_AMX_KPF") : NULL;
    const int kpf_on = !(kpfe && kpfe[0] == '0' && kpfe[1] == '\0');
    const int krow_pf = kpf_on && !(kpfe && kpfe[0] == '1' && kpfe[1] == '\0');
    const char *kue = kq ? getenv("CLOVER_AMX_KUNPACK") : NULL;
    const int kunpack = !(kue && kue[0] == '0' && kue[1] == '\0'); /* kq_unpack's panels; "0": kq_prepare */
    const amx_geom G = kq ? (amx_geom){sizeof P->a[0], KSB, 0} : (amx_geom){QB, KB, W_TILE};
    memset(cbuf, 0, sizeof cbuf); /* rows >= m of a partial tile are read, never used */
    int configured = 0;
    for (size_t o = o0; o < o1; o += W_TILE) {
        const int m = o1 - o < W_TILE ? (int)(o1 - o) : W_TILE;
        if (m != configured) amx_configure(m), configured = m;
        const gemm_amx_q4k_panel *pan = kq ? q4k_panels(j, o) : NULL; /* NULL: unpack per chunk */
        for (size_t g0 = 0; g0 < ng; g0 += X_GROUPS) {
            const size_t g1 = ng - g0 < X_GROUPS ? ng : g0 + X_GROUPS;
            for (size_t kb0 = 0; kb0 < nc; kb0 += kc) {
                const size_t nkb = nc - kb0 < kc ? nc - kb0 : kc;
                const int last = kb0 + nkb == nc;
                if (!kq)
                    dw_fill(j, o, m, kb0, nkb, dwf);
                else if (!pan && kunpack) /* no panels for this tile (yet): unpack the chunk */
                    kq_unpack(j, o, m, kb0, nkb, qs_off, qh_off, bsz, U);
                else if (!pan)
                    kq_prepare(j, o, m, kb0, nkb, qs_off, qh_off, bsz, P, krow_pf);
                const uint8_t *wq = j->w + o * j->row_bytes + kb0 * QB + 2; /* Q8_0: the chunk's A tiles */
                amx_pf pf, *pfp = NULL; /* the next chunk's lines: the same tile's, or the next tile's */
                /* the steps that prefetch: Q8_0's amx_group steps of the pass's first group; the unpacking path's
                 * q4k_group steps (kq_prepare's super-blocks) of every group of the pass */
                const size_t steps = kq ? (g1 - g0) * nkb * (kunpack ? 2 : 1) : flight4 ? nkb / 4 : nkb / 2;
                if ((kq ? kpf_on && !pan : pf_on) && steps) {
                    const size_t bb = kq ? bsz : QB;
                    if (!last)
                        pf_plan(&pf, j, o, m, kb0 + kc, nc - kb0 - kc < kc ? nc - kb0 - kc : kc, bb, steps), pfp = &pf;
                    else if (g1 == ng && o + W_TILE < o1)
                        pf_plan(&pf, j, o + W_TILE, o1 - o - W_TILE < W_TILE ? (int)(o1 - o - W_TILE) : W_TILE, 0,
                                nc < kc ? nc : kc, bb, steps), pfp = &pf;
                }
                for (size_t g = g0; g < g1; g++) {
                    __m512 acc[W_TILE];
#pragma GCC unroll 16
                    for (int i = 0; i < W_TILE; i++) acc[i] = kb0 ? _mm512_loadu_ps(saved[g - g0][i]) : _mm512_setzero_ps();
                    if (!kq) {
                        const uint8_t *bt = j->xq + (g * nb + kb0) * GEMM_AMX_TILE_BYTES;
                        const float *dx = scales + (g * nb + kb0) * W_TILE;
                        amx_pf *gpf = g == g0 ? pfp : NULL;
                        if (flight4)
                            amx_group(wq, j->row_bytes, m, bt, dx, dwf, G, nkb, gpf, 4, cbuf[0], acc);
                        else
                            amx_group(wq, j->row_bytes, m, bt, dx, dwf, G, nkb, gpf, 2, cbuf[0], acc);
                    } else if (pan || kunpack) {
                        const gemm_amx_q4k_panel *pc = pan ? pan + kb0 : U; /* the chunk's panels */
                        const uint8_t *bt = j->xq + (g * nb + GEMM_AMX_SUB * kb0) * GEMM_AMX_TILE_BYTES;
                        const float *dx = scales + (g * nc + kb0) * W_TILE;
                        const int32_t *sp = sums + (g * nc + kb0) * 4 * W_TILE;
                        if (j->q4k_pipe)
                            q4k_group(pc, bt, dx, sp, nkb, 1, cbuf, acc, pfp);
                        else
                            q4k_group(pc, bt, dx, sp, nkb, 0, cbuf, acc, pfp);
                    } else
                        for (size_t B = 0; B < nkb; B++) {
                            const size_t gb = g * nc + kb0 + B;
                            const uint8_t *wa = &P->a[GEMM_AMX_SUB * B][0][0];
                            const uint8_t *bt = j->xq + (g * nb + GEMM_AMX_SUB * (kb0 + B)) * GEMM_AMX_TILE_BYTES;
                            const float *dx = scales + gb * W_TILE;
                            const float *dsc = &P->dsc[0][GEMM_AMX_SUB * B];
                            if (flight4)
                                amx_group(wa, 32, m, bt, dx, dsc, G, GEMM_AMX_SUB, NULL, 4, cbuf[0], acc);
                            else
                                amx_group(wa, 32, m, bt, dx, dsc, G, GEMM_AMX_SUB, NULL, 2, cbuf[0], acc);
                            kq_mins(sums + gb * 4 * W_TILE, dx, &P->dmin[0][B], KBK, &P->mins[0][B][0], KBK * 4, 1,
                                    acc);
                            if (pfp) pf_step(pfp);
                        }
                    if (!last) {
#pragma GCC unroll 16
                        for (int i = 0; i < W_TILE; i++) _mm512_storeu_ps(saved[g - g0][i], acc[i]);
                        continue;
                    }
                    amx_emit(j, o, m, g, acc);
                }
            }
        }
    }
}

static void amx_q8_0(const matmul_job *j, size_t o0, size_t o1) {
    _Alignas(64) float dwf[W_TILE * KB];
    amx_tiles(j, o0, o1, 0, dwf, NULL, NULL, 0, -1, 0);
}

static inline __attribute__((always_inline)) void amx_k(const matmul_job *j, size_t o0, size_t o1, size_t qs_off,
                                                        ptrdiff_t qh_off, size_t bsz) { /* a copy per type */
    _Alignas(64) union { /* one chunk unpacked: kq_unpack's panels, or kq_prepare's form (CLOVER_AMX_KUNPACK=0) */
        gemm_amx_q4k_panel pan[KBK];
        kq_prep p;
    } u;
    amx_tiles(j, o0, o1, 1, NULL, &u.p, u.pan, qs_off, qh_off, bsz);
}

/* ---- the driver ---- */

void matmul_rows_gemm_amx(const matmul_job *j, size_t o0, size_t o1) {
    switch (j->type) {
    case QUANT_Q8_0: amx_q8_0(j, o0, o1); break;
    case QUANT_Q4_K: amx_k(j, o0, o1, offsetof(block_q4_k, qs), -1, sizeof(block_q4_k)); break;
    case QUANT_Q5_K:
        amx_k(j, o0, o1, offsetof(block_q5_k, qs), (ptrdiff_t)offsetof(block_q5_k, qh), sizeof(block_q5_k));
        break;
    default: break;
    }
    _tile_release();
}
