/*
 * backend_test.h: helpers of the backend and golden tests
 * (tests/unit/test_backend_*.c, test_golden_*.c): a fixture's manifest and
 * .f32 arrays (tests/fixtures/README.md), a fixture model converted from its
 * Hugging Face directory into a temporary GGUF by the converter library and
 * loaded, the fixtures' error measure, and the map from Hugging Face's
 * GROUPED value-head order to the GGUF's TILED one.
 *
 * Error measure (tests/fixtures/README.md): rel_err(x, ref) =
 * max|x - ref| / max(1, max|ref|); SPEC 1.1 asks for < 1e-4.
 */
#ifndef CLOVER_TEST_BACKEND_H
#define CLOVER_TEST_BACKEND_H

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_seq.h"
#include "convert/convert.h"
#include "model/model.h"
#include "test.h"

typedef struct fixture {
    char dir[1024]; /* tests/fixtures/<name> */
    json_t *manifest;
} fixture;

static inline int fixture_open(fixture *fx, const char *name) {
    char rel[256], path[1100];
    snprintf(rel, sizeof rel, "tests/fixtures/%s", name);
    const char *p = test_source_path(rel, fx->dir, sizeof fx->dir);
    if (!p) snprintf(fx->dir, sizeof fx->dir, "%s", rel); /* run from the source root */
    snprintf(path, sizeof path, "%s/manifest.json", fx->dir);
    json_error_t jerr;
    fx->manifest = json_load_file(path, 0, &jerr);
    CHECK_MSG(fx->manifest != NULL, "%s: %s (set CLOVER_SOURCE_DIR)", path, jerr.text);
    return fx->manifest ? 0 : -1;
}

static inline void fixture_close(fixture *fx) { json_decref(fx->manifest); }

/* The element count of a {"file", "dtype", "shape"} entry. */
static inline size_t fixture_count(const json_t *entry) {
    const json_t *shape = json_object_get(entry, "shape");
    size_t n = 1, i;
    json_t *d;
    json_array_foreach(shape, i, d) n *= (size_t)json_integer_value(d);
    return n;
}

/* Reads the .f32 array of an entry (malloc'd; NULL and a CHECK failure when absent or short). */
static inline float *fixture_f32(const fixture *fx, const json_t *entry, size_t *count) {
    const char *file = json_string_value(json_object_get(entry, "file"));
    CHECK_MSG(file != NULL, "manifest entry without a file");
    if (!file) return NULL;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", fx->dir, file);
    size_t n = fixture_count(entry);
    float *buf = malloc(n * sizeof *buf + 1);
    FILE *f = fopen(path, "rb");
    size_t got = f && buf ? fread(buf, sizeof *buf, n, f) : 0;
    if (f) fclose(f);
    CHECK_MSG(got == n, "%s: read %zu of %zu floats", path, got, n);
    if (got != n) {
        free(buf);
        return NULL;
    }
    if (count) *count = n;
    return buf;
}

/* A JSON array of integers as int32 (malloc'd). */
static inline int32_t *fixture_ids(const json_t *arr, size_t *n) {
    *n = json_array_size(arr);
    int32_t *ids = malloc(*n * sizeof *ids + 1);
    for (size_t i = 0; i < *n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return ids;
}

/* Path lookup: fixture_get(m, "causal", "ids", NULL). */
static inline json_t *fixture_get(json_t *root, ...) {
    va_list ap;
    va_start(ap, root);
    const char *key;
    json_t *cur = root;
    while (cur && (key = va_arg(ap, const char *)) != NULL) cur = json_object_get(cur, key);
    va_end(ap);
    return cur;
}

/* max|x - ref| / max(1, max|ref|) */
static inline double rel_err(const float *x, const float *ref, size_t n) {
    double scale = 1.0, diff = 0.0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)ref[i]), d = fabs((double)x[i] - (double)ref[i]);
        if (r > scale) scale = r;
        if (!(d <= diff)) diff = d; /* NaN sticks */
    }
    return diff / scale;
}

/* A model converted from a fixture's hf/ directory into a temporary GGUF. */
typedef struct test_model {
    char tmpdir[64];
    char path[128];
    clover_model *model;
} test_model;

static inline int test_model_convert(test_model *tm, const fixture *fx, convert_type type) {
    memset(tm, 0, sizeof *tm);
    snprintf(tm->tmpdir, sizeof tm->tmpdir, "/tmp/clover_golden_XXXXXX");
    CHECK(mkdtemp(tm->tmpdir) != NULL);
    snprintf(tm->path, sizeof tm->path, "%s/model.gguf", tm->tmpdir);
    char hf[1100];
    snprintf(hf, sizeof hf, "%s/hf", fx->dir);
    convert_options opt = {.input_dir = hf, .output_path = tm->path, .type = type, .n_threads = 1};
    clover_error err = {0};
    int rc = convert_run(&opt, NULL, &err);
    CHECK_MSG(rc == 0, "convert %s (%s): %s", hf, convert_type_name(type), err.message);
    if (rc) return rc;
    rc = clover_model_load(&tm->model, tm->path, &err);
    CHECK_MSG(rc == 0, "load %s: %s", tm->path, err.message);
    return rc;
}

static inline void test_model_free(test_model *tm) {
    clover_model_free(tm->model);
    if (tm->path[0]) unlink(tm->path);
    if (tm->tmpdir[0]) rmdir(tm->tmpdir);
}

static inline tseq *test_session(const clover_model *m, size_t max_rows, size_t n_threads) {
    backend_config cfg = {.n_threads = n_threads, .max_rows = max_rows, .max_context = 0};
    tseq *s = NULL;
    clover_error err = {0};
    int rc = seq_create(&backend_cpu, m, &cfg, &s, &err);
    CHECK_MSG(rc == 0, "session_create: %s", err.message);
    return s;
}

/* The GGUF (tiled) index of Hugging Face (grouped) value head h: HF head
 * h = kh * r + i (key head kh, r = nv / nk) is stored at j = i * nk + kh. */
static inline size_t tiled_of_grouped(size_t h, size_t nk, size_t nv) {
    size_t r = nv / nk;
    return (h % r) * nk + h / r;
}

/* 64-bit FNV-1a of bytes: a compact fingerprint of a state export. */
static inline uint64_t test_hash(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#endif
