/*
 * cuda_mixer_test.h: helpers of the CUDA attention and GDN operator tests
 * (test_cuda_attention.c, test_cuda_gdn.c), in the style of ggml's
 * test-backend-ops: a skip (exit 77, never a pass) when there is no device,
 * device buffers poisoned with NaN before a kernel writes them, and the
 * normalised error ||out - ref||_2 / ||ref||_2 (infinite when out holds a
 * NaN or inf anywhere, so a hole in the output cannot pass).
 */
#ifndef CLOVER_TEST_CUDA_MIXER_H
#define CLOVER_TEST_CUDA_MIXER_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "cuda/cuda_device.h"
#include "test.h"

/* No device: a skip with the runtime's reason (TEST_SKIP: exit 77, a failure after a failed check). */
static inline void cuda_test_require_device(void) {
    char why[256] = "";
    int n = cuda_device_count(why, sizeof why);
    if (n <= 0) TEST_SKIP("no CUDA device (%s)", n == 0 ? "the runtime found 0 devices" : why);
}

/* A CUDA runtime call that must succeed; aborts the test binary with the reason otherwise. */
#define CUDA_OK(call)                                                                                \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

/* n floats of device memory filled with NaN (all bits set). */
static inline float *dev_poisoned(size_t n) {
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, n ? n * sizeof(float) : 4));
    CUDA_OK(cudaMemset(p, 0xff, n ? n * sizeof(float) : 4));
    return (float *)p;
}

static inline void *dev_upload(const void *src, size_t bytes) {
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, bytes ? bytes : 4));
    if (bytes) CUDA_OK(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice));
    return p;
}

static inline float *dev_upload_f(const float *src, size_t n) { return (float *)dev_upload(src, n * sizeof(float)); }

static inline void dev_download(void *dst, const void *src, size_t bytes) {
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

static inline float *host_nan(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    memset(p, 0xff, (n ? n : 1) * sizeof *p);
    return p;
}

static inline void fill_normal(float *x, size_t n, rng_state *r, float mean, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = mean + scale * rng_normal(r);
}

static inline size_t count_nonfinite(const float *x, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += !isfinite(x[i]);
    return c;
}

/* ||a - b|| / ||b|| (L2); +inf when a holds a non-finite value. */
static inline double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

static inline int all_nan(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i])) return 0;
    return 1;
}

#define NOTE(...)              \
    do {                       \
        printf("     ");       \
        printf(__VA_ARGS__);   \
        putchar('\n');         \
    } while (0)

#endif
