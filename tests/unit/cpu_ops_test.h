/*
 * cpu_ops_test.h: helpers of the CPU operator tests (tests/unit/test_cpu_*.c):
 * the reader of the PyTorch vectors in tests/data/ops/ (written by
 * tools/reference/ops_vectors.py, format described there), error measures
 * and seeded random fills.
 *
 * Error measure: nerr(a, b) = max_i |a_i - b_i| / max_i |b_i|, the largest
 * difference relative to the scale of the expected tensor. A float32
 * computation whose longest reduction has length n differs from a
 * reordering of itself by at most about n * 2^-24 of that scale, and by
 * about sqrt(n) * 2^-24 in practice; each bound in the tests says which n.
 */
#ifndef CLOVER_TEST_CPU_OPS_H
#define CLOVER_TEST_CPU_OPS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "test.h"

typedef struct ops_vectors {
    unsigned char *buf;
    size_t len;
} ops_vectors;

/* Loads tests/data/ops/<file>; 0 on success (a CHECK failure otherwise). */
static inline int ops_vectors_load(ops_vectors *v, const char *file) {
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "tests/data/ops/%s", file);
    const char *p = test_source_path(rel, path, sizeof path);
    if (!p) p = rel; /* run from the source root */
    v->buf = NULL;
    v->len = 0;
    FILE *f = fopen(p, "rb");
    CHECK_MSG(f != NULL, "cannot open %s (set CLOVER_SOURCE_DIR)", p);
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    v->buf = malloc(n > 0 ? (size_t)n : 1);
    v->len = v->buf && n > 0 && fread(v->buf, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
    fclose(f);
    CHECK_MSG(v->len >= 8 && memcmp(v->buf, "CLVOPS01", 8) == 0, "%s: not a CLVOPS01 file", p);
    return v->len >= 8 ? 0 : -1;
}

static inline void ops_vectors_free(ops_vectors *v) { free(v->buf); }

static inline uint32_t ops_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The data of tensor `name` (dtype 0 = f32, 1 = i32) and its element count; NULL when absent. */
static inline const void *ops_vectors_find(const ops_vectors *v, const char *name, uint32_t dtype, size_t *count) {
    size_t o = 8;
    while (v->buf && o + 4 <= v->len) {
        uint32_t nl = ops_u32(v->buf + o);
        o += 4;
        const char *nm = (const char *)v->buf + o;
        o += (nl + 3) / 4 * 4;
        uint32_t dt = ops_u32(v->buf + o), nd = ops_u32(v->buf + o + 4);
        o += 8;
        size_t cnt = 1;
        for (uint32_t i = 0; i < nd; i++) cnt *= ops_u32(v->buf + o + 4 * i);
        o += 4 * nd;
        if (strlen(name) == nl && memcmp(nm, name, nl) == 0) {
            CHECK_MSG(dt == dtype, "tensor %s has dtype %u, expected %u", name, dt, dtype);
            if (count) *count = cnt;
            return v->buf + o;
        }
        o += 4 * cnt;
    }
    CHECK_MSG(0, "tensor %s missing from the vectors", name);
    if (count) *count = 0;
    return NULL;
}

static inline const float *ops_f32(const ops_vectors *v, const char *name, size_t *count) {
    return (const float *)ops_vectors_find(v, name, 0, count);
}

static inline const int32_t *ops_i32(const ops_vectors *v, const char *name, size_t *count) {
    return (const int32_t *)ops_vectors_find(v, name, 1, count);
}

/* max |a - b| / max |b| (NaN anywhere gives +inf) */
static inline double ops_nerr(const float *a, const float *b, size_t n) {
    double md = 0.0, mb = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d)) return INFINITY;
        if (d > md) md = d;
        if (fabs((double)b[i]) > mb) mb = fabs((double)b[i]);
    }
    return mb > 0.0 ? md / mb : md;
}

/* An informational line under the test's "ok" (measured errors for the log). */
#define OPS_NOTE(...)              \
    do {                           \
        printf("     ");           \
        printf(__VA_ARGS__);       \
        putchar('\n');             \
    } while (0)

static inline void ops_fill(float *x, size_t n, rng_state *r, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * rng_normal(r);
}

static inline int ops_bits_equal(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* Distance in units in the last place between two finite floats of the same sign. */
static inline long ops_ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    long d = (long)ia - (long)ib;
    return d < 0 ? -d : d;
}

#endif
