/*
 * cuda_test.h: what the CUDA op and backend tests share (in the style of
 * ggml's test-backend-ops): the skip without a device, seeded random inputs,
 * device buffers poisoned with NaN before a kernel writes them, the check
 * that every output element was written and is finite, and the normalised
 * error ||out - ref|| / ||ref||.
 */
#ifndef CLOVER_TESTS_CUDA_TEST_H
#define CLOVER_TESTS_CUDA_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_mem.h"
#include "test.h"

/* No device: a skip (ctest's SKIP_RETURN_CODE 77), never a pass. */
static inline void cuda_test_require_device(void) {
    char why[256] = "";
    int n = cuda_device_count(why, sizeof why);
    if (n <= 0) TEST_SKIP("no CUDA device (%s)", n < 0 ? why : "the runtime reports 0 devices");
    char w2[CUDA_WHY];
    if (cuda_use_device(0, w2)) TEST_SKIP("no CUDA device (%s)", w2);
}

static inline void cuda_test_fill(float *x, size_t n, uint64_t seed, float scale) {
    rng_state r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = scale * rng_normal(&r);
}

/* A device copy of host data (aborts the test on failure: nothing else can run). */
static inline void *cuda_test_upload(const void *h, size_t bytes) {
    void *d = NULL;
    char why[CUDA_WHY];
    if (cuda_alloc(&d, bytes, why) || (bytes && cuda_h2d(d, h, bytes, why))) {
        fprintf(stderr, "device upload of %zu bytes: %s\n", bytes, why);
        exit(1);
    }
    return d;
}

/* A device buffer of n floats, every one NaN: an output the kernel must overwrite. */
static inline float *cuda_test_poisoned(size_t n) {
    float *d = NULL;
    char why[CUDA_WHY];
    if (cuda_alloc((void **)&d, n * sizeof(float), why) || cuda_fill_nan(d, n, why)) {
        fprintf(stderr, "poisoned buffer of %zu floats: %s\n", n, why);
        exit(1);
    }
    return d;
}

static inline void cuda_test_download(void *h, const void *d, size_t bytes) {
    char why[CUDA_WHY];
    if (cuda_d2h(h, d, bytes, why)) {
        fprintf(stderr, "device download of %zu bytes: %s\n", bytes, why);
        exit(1);
    }
}

/* ||out - ref|| / ||ref|| (0 when both are 0); +inf when out has a NaN or inf
 * (an element left unwritten, or an overflow), so a bound check fails. */
static inline double cuda_test_nerr(const float *out, const float *ref, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(out[i])) return INFINITY;
        double d = (double)out[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
    return sqrt(num / den);
}

#define CHECK_NERR(out, ref, n, bound)                                                                           \
    do {                                                                                                         \
        double e_ = cuda_test_nerr((out), (ref), (n));                                                           \
        CHECK_MSG(e_ <= (bound), "%s vs %s: normalised error %.3g > bound %.3g", #out, #ref, e_, (double)(bound)); \
    } while (0)

#endif
