/*
 * quant_weights.h: seeded random quantised weight rows for the kernel tests
 * (test_gemm.c, gemm_levels.h and through it amx_levels.h): normal values
 * quantised by the library, or raw random bytes, which reach every code and
 * scale bit pattern a kernel can meet, with the f16 scales replaced by
 * small finite ones (a random f16 may be Inf or NaN, which no real weight
 * file holds and which would make every comparison meaningless).
 */
#ifndef CLOVER_TEST_QUANT_WEIGHTS_H
#define CLOVER_TEST_QUANT_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "quant/quant.h"

/* n_out rows of n_in columns of `type` into w: quantised normal values
 * (sigma 0.1), or (raw) random bytes with every f16 scale small and finite. */
static inline void fill_quant_weights(rng_state *r, uint32_t type, uint8_t *w, size_t n_out, size_t n_in, int raw) {
    const size_t rb = quant_row_bytes(type, n_in), bb = quant_block_bytes(type);
    float *src = mem_alloc(n_in * sizeof(float));
    for (size_t o = 0; o < n_out; o++) {
        uint8_t *row = w + o * rb;
        if (!raw) {
            for (size_t k = 0; k < n_in; k++) src[k] = rng_normal(r) * 0.1f;
            quant_quantize_row(type, src, row, n_in);
            continue;
        }
        for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)(rng_next(r) >> 24);
        for (uint8_t *b = row; b < row + rb; b += bb) {
            /* the f16 fields: Q8_0 d at 0; Q4_K/Q5_K d, dmin at 0, 2; Q6_K d at the end */
            const size_t at[2] = {type == QUANT_Q6_K ? bb - 2 : 0, 2};
            const size_t n_f16 = type == QUANT_Q4_K || type == QUANT_Q5_K ? 2 : 1;
            for (size_t f = 0; f < n_f16; f++) {
                const uint16_t h = quant_f32_to_f16((rng_uniform(r) - 0.5f) * 0.02f);
                b[at[f]] = (uint8_t)(h & 0xff), b[at[f] + 1] = (uint8_t)(h >> 8);
            }
        }
    }
    mem_free(src);
}

#endif
