/*
 * cuda_matmul_test.h: the seeded inputs and the CUDA call check that test_cuda_matmul.c, test_cuda_ig_x2.c and
 * test_cuda_moe_tiles.c share: a splitmix64 stream in [0, 1) (each file its own, seeded with CUDA_MATMUL_TEST_SEED,
 * defined before the include), values of a varied scale per 32-block (so the 8-bit scales differ), and CU(call), a
 * failed runtime call as a failed check with the runtime's words, rows of quantised random weights, the CPU's 8-bit
 * rows for its integer oracle, and the NaN count and normalised error of an output.
 */
#ifndef CLOVER_TESTS_CUDA_MATMUL_TEST_H
#define CLOVER_TESTS_CUDA_MATMUL_TEST_H

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "quant/quant.h"
#include "test.h"

#ifndef CUDA_MATMUL_TEST_SEED
#error "define CUDA_MATMUL_TEST_SEED (the file's splitmix64 seed) before including cuda_matmul_test.h"
#endif

static uint64_t rng_state = CUDA_MATMUL_TEST_SEED;
static double urand(void) { /* splitmix64 -> [0, 1) */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}
/* Nonzero values of varied scale per 32-block, so the 8-bit scales differ. */
static void fill(float *v, size_t n, double scale) {
    double s = scale;
    for (size_t i = 0; i < n; i++) {
        if (i % 32 == 0) s = scale * (0.25 + 1.75 * urand());
        double r = (urand() - 0.5) * 2.0 * s;
        if (r == 0) r = s * 1e-3;
        v[i] = (float)r;
    }
}

static int cuda_ok(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        return 0;
    }
    return 1;
}
#define CU(call) CHECK(cuda_ok((call), #call))

/* rows quantised random weight rows of type, n_in each (*row_bytes: a row's bytes). */
static uint8_t *make_weights(uint32_t type, size_t rows, size_t n_in, size_t *row_bytes) {
    *row_bytes = quant_row_bytes(type, n_in);
    uint8_t *w = malloc(rows * *row_bytes);
    float *f = malloc(n_in * sizeof(float));
    for (size_t o = 0; o < rows; o++) {
        fill(f, n_in, 0.05);
        quant_quantize_row(type, f, w + o * *row_bytes, n_in);
    }
    free(f);
    return w;
}

/* The CPU integer oracle's 8-bit rows (quant_act_quantize_scalar, quant_act_row_bytes each) of n_rows rows of x:
 * quant_act_dot_scalar(type, weight row, row r, n_in) is that oracle's dot. */
static inline void *act_rows(uint32_t type, const float *x, size_t n_rows, size_t n_in) {
    const size_t xb = quant_act_row_bytes(type, n_in);
    uint8_t *q = malloc(n_rows * xb);
    for (size_t r = 0; r < n_rows; r++) quant_act_quantize_scalar(type, x + r * n_in, q + r * xb, n_in);
    return q;
}
/* NaNs among n values (an output poisoned with 0xFF bytes and not written). */
static inline size_t n_nan(const float *v, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += isnan(v[i]) != 0;
    return k;
}
/* ||got - ref|| / ||ref|| in double (INFINITY for a zero ref). */
static inline double rel_err(const float *got, const float *ref, size_t n) {
    double e2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
        e2 += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        r2 += (double)ref[i] * ref[i];
    }
    return r2 > 0 ? sqrt(e2 / r2) : INFINITY;
}

#endif
