/*
 * gemm_amx_pack.h: Q4_K weights repacked for the AMX level's tile kernel
 * (issue 30), kept beside the original rows, never in their place.
 *
 * Why. gemm_amx.c's Q4_K kernel unpacked, per 16-row weight tile and chunk,
 * the nibbles into bytes and the packed 6-bit scales and mins into floats
 * and int16 pairs, and used them for the pass's one or two groups of 16
 * activation rows: at 32 rows that work was a third of the kernel's
 * instructions. A panel (below) holds a 16-row tile's super-block already
 * in the form the tiles and the float step read, so the kernel loads it
 * straight: A tiles of stride 32, scales as broadcast operands. The bits do
 * not change: the panel holds the same codes and the same exact d * scale
 * (11 x 6 bits), dmin and min pairs the unpack produced.
 *
 * Memory. A panel is 4,928 bytes for 16 x 256 weights (1.20 bytes a
 * weight) against Q4_K's 2,304 (0.5625): a repacked weight costs 2.14x its
 * Q4_K bytes on top of them. The packs are made lazily (a weight's pack is
 * allocated the first time an AMX product of 3+ rows meets it, each tile
 * filled by the first task that reaches it) and only up to a budget,
 * CLOVER_AMX_Q4K_REPACK_MB (default 4096 MiB of packs a process; weights
 * past it keep the unpacking path), never evicted: an evicting cache would
 * repack on every use once the working set (a MoE's experts) passes it,
 * which costs more than the unpack it saves.
 * Off by default: CLOVER_AMX_Q4K_REPACK=1 (read per product) turns the packs
 * on (the same bits either way). Measured on the H200 host (16-vCPU Xeon,
 * bench/device-runs/2026-12-19-amx30): the product alone 9-16% faster
 * (2048 x 2048 at 32 rows, 16 threads: 1,217 against 1,091 GMAC/s), but a
 * 32-row preview of the 35B-A3B file no faster (0.125-0.142 s against
 * 0.126-0.128) and a 512-row prompt slower (2.32-2.47 s against 2.09-2.18:
 * 2.14x the bytes to stream), so the unpacking path stays the default.
 *
 * Safety. A pack is keyed by the weight's address, so it is made only for
 * memory registered as stable (gemm_amx_stable_add: bytes that do not
 * change while registered, e.g. a model file's read-only mapping, added
 * at load and removed before it is unmapped, which frees the packs made
 * from it). Heap buffers whose contents change under the same address (an
 * expert cache's slots) are never registered, so they keep the unpacking
 * path.
 */
#ifndef CLOVER_QUANT_GEMM_AMX_PACK_H
#define CLOVER_QUANT_GEMM_AMX_PACK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* One 16-row weight tile's super-block: row i (of the tile) at index i;
 * rows past the weight's last are zero (codes and scales). */
typedef struct gemm_amx_q4k_panel {
    int8_t a[8][16][32];  /* sub-block s's A tile: row i's 32 codes, 0..15 */
    float dsc[8][16];     /* d * scale(s) of row i, exact in float */
    float dmin[16];       /* dmin of row i */
    int32_t mins[4][16];  /* row i's min(2p) | min(2p + 1) << 16: the operand of vpmaddwd */
} gemm_amx_q4k_panel;
_Static_assert(sizeof(gemm_amx_q4k_panel) % 64 == 0, "panels stay 64-byte aligned");

enum { GEMM_AMX_PACK_EMPTY = 0, GEMM_AMX_PACK_FILLING = 1, GEMM_AMX_PACK_READY = 2 };

/* A weight's pack: panels[t * nbk + B] = tile t's super-block B. */
typedef struct gemm_amx_q4k_pack {
    const uint8_t *w;
    size_t n_out, n_in, nbk, tiles, bytes;
    gemm_amx_q4k_panel *panels;
    _Atomic unsigned char *state; /* [tiles]: GEMM_AMX_PACK_* */
} gemm_amx_q4k_pack;

/* Whether CLOVER_AMX_Q4K_REPACK turns the packs on (default off; "1" on). */
int gemm_amx_q4k_repack_on(void);
/* Whether CLOVER_AMX_Q4K_PIPE leaves the panel kernel's software pipeline
 * on (default on; "0": each step's tiles, then its float steps, for A/B). */
int gemm_amx_q4k_pipe_on(void);
/* The pack of the Q4_K weight w ([n_out] rows of n_in), made (unfilled) on
 * first use; NULL when the switch is off, w is not in stable memory, or the
 * budget is spent. Thread-safe. */
const gemm_amx_q4k_pack *gemm_amx_q4k_find(const void *w, size_t n_out, size_t n_in);

/* Registers [p, p + bytes) as stable; remove drops every registered range
 * inside [p, p + bytes) and frees the packs of weights in it (no product
 * may be running on them). */
void gemm_amx_stable_add(const void *p, size_t bytes);
void gemm_amx_stable_remove(const void *p, size_t bytes);
/* Bytes of packs allocated now (tests, logs). */
size_t gemm_amx_q4k_pack_bytes(void);

#endif
