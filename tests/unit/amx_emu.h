/*
 * amx_emu.h: the AMX tile operations gemm_amx.c uses (ldtilecfg,
 * tilerelease, tilezero, tileloadd, tilestored, tdpbssd), written in C after
 * Intel's definitions of each instruction (the Intrinsics Guide's and the
 * SDM's operation pseudo-code: rows and bytes per row from the
 * configuration, the unused part of each tile row and the rows past the
 * configured ones zeroed, tdpbssd's dword sums of four signed byte products,
 * wrapping). Only for test_gemm_amx_emu.c, which compiles the kernel's
 * source against this header (and avx512_emu.h) so that its tile
 * bookkeeping (which tile holds what, strides, the partial weight tile, the
 * two blocks in flight) is checked on every AVX2 machine, which have no
 * AMX; the instructions themselves are checked by test_quant_amx where the
 * CPU has them.
 *
 * What real hardware would fault on (#UD: a tile used unconfigured or after
 * tilerelease, a configuration out of range, tdpbssd shapes that do not
 * match) is counted in emu_amx_faults instead, which the test checks is 0.
 *
 * Include after <immintrin.h>: the macros below rename the intrinsics.
 */
#ifndef CLOVER_TEST_AMX_EMU_H
#define CLOVER_TEST_AMX_EMU_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

typedef struct emu_amx_state {
    int palette; /* 0: not configured (after tilerelease too) */
    uint8_t rows[8];
    uint16_t colsb[8];
    _Alignas(64) uint8_t t[8][16][64];
} emu_amx_state;

static _Thread_local emu_amx_state emu_amx;
static int emu_amx_faults;

static inline int emu_amx_ok(int tile) {
    const int ok = emu_amx.palette == 1 && tile >= 0 && tile < 8 && emu_amx.rows[tile] > 0 && emu_amx.colsb[tile] > 0;
    if (!ok) emu_amx_faults++;
    return ok;
}

static inline void emu_tile_loadconfig(const void *cfg) {
    const uint8_t *c = cfg;
    memset(&emu_amx, 0, sizeof emu_amx);
    if (c[0] == 0) return; /* palette 0: the init state */
    if (c[0] != 1) {
        emu_amx_faults++;
        return;
    }
    for (int i = 2; i < 16; i++) emu_amx_faults += c[i] != 0; /* reserved bytes (start_row is byte 1) */
    for (int i = 0; i < 8; i++) {
        uint16_t colsb;
        memcpy(&colsb, c + 16 + 2 * i, 2);
        const uint8_t rows = c[48 + i];
        if (rows > 16 || colsb > 64 || (rows == 0) != (colsb == 0)) emu_amx_faults++;
        emu_amx.rows[i] = rows;
        emu_amx.colsb[i] = colsb;
    }
    emu_amx.palette = 1;
}

static inline void emu_tile_release(void) { memset(&emu_amx, 0, sizeof emu_amx); }

static inline void emu_tile_zero(int tile) {
    if (emu_amx_ok(tile)) memset(emu_amx.t[tile], 0, sizeof emu_amx.t[tile]);
}

static inline void emu_tile_loadd(int tile, const void *base, long stride) {
    if (!emu_amx_ok(tile)) return;
    memset(emu_amx.t[tile], 0, sizeof emu_amx.t[tile]);
    for (int r = 0; r < emu_amx.rows[tile]; r++)
        memcpy(emu_amx.t[tile][r], (const uint8_t *)base + (long)r * stride, emu_amx.colsb[tile]);
}

static inline void emu_tile_stored(int tile, void *base, long stride) {
    if (!emu_amx_ok(tile)) return;
    for (int r = 0; r < emu_amx.rows[tile]; r++)
        memcpy((uint8_t *)base + (long)r * stride, emu_amx.t[tile][r], emu_amx.colsb[tile]);
}

/* The emulated tile registers' products are compiled optimised in every
 * build (GCC): they touch no memory but emu_amx's registers, so the
 * sanitizers lose nothing, and at -O0 they were most of the emulated
 * kernel's time under ASan. The tile loads and stores stay as built. */
#if defined(__GNUC__) && !defined(__clang__)
#define EMU_AMX_HOT __attribute__((optimize("O2")))
#else
#define EMU_AMX_HOT
#endif

/* tdpbssd dst, a, b: dst.dword[m][n] += sum over k < a.colsb / 4 of the
 * four products a.byte[m][4k + j] * b.byte[k][4n + j], signed, wrapping. */
static inline EMU_AMX_HOT void emu_tile_dpbssd(int dst, int a, int b) {
    if (!emu_amx_ok(dst) || !emu_amx_ok(a) || !emu_amx_ok(b)) return;
    const int M = emu_amx.rows[dst], N = emu_amx.colsb[dst] / 4, K = emu_amx.colsb[a] / 4;
    if (emu_amx.rows[a] != M || emu_amx.colsb[b] != emu_amx.colsb[dst] || emu_amx.rows[b] != K ||
        emu_amx.colsb[a] % 4 || emu_amx.colsb[dst] % 4) {
        emu_amx_faults++;
        return;
    }
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int32_t c;
            memcpy(&c, &emu_amx.t[dst][m][4 * n], 4);
            uint32_t acc = (uint32_t)c;
            for (int k = 0; k < K; k++)
                for (int j = 0; j < 4; j++)
                    acc += (uint32_t)((int32_t)(int8_t)emu_amx.t[a][m][4 * k + j] *
                                      (int32_t)(int8_t)emu_amx.t[b][k][4 * n + j]);
            c = (int32_t)acc;
            memcpy(&emu_amx.t[dst][m][4 * n], &c, 4);
        }
}

#undef _tile_loadconfig
#define _tile_loadconfig emu_tile_loadconfig
#define AMX_LOADCONFIG(cfg) emu_tile_loadconfig(cfg) /* gemm_amx.c's own ldtilecfg, emulated */
#undef _tile_release
#define _tile_release emu_tile_release
#undef _tile_zero
#define _tile_zero emu_tile_zero
#undef _tile_loadd
#define _tile_loadd emu_tile_loadd
#undef _tile_stored
#define _tile_stored emu_tile_stored
#undef _tile_dpbssd
#define _tile_dpbssd emu_tile_dpbssd

#endif
