/*
 * gguf_write_sample.c: writes a GGUF file with clover's writer for the
 * Python cross-check (tests/python/test_gguf_crosscheck.py), which reads it
 * with llama.cpp's gguf package. The metadata is a fixed set covering every
 * value type (the test spells out the same values independently); the
 * tensors hold seeded random values quantised by clover to every supported
 * type, streamed row by row. Two side files let the test compare values:
 * the f32 source of every tensor and clover's dequantisation of what it
 * wrote (both concatenated in tensor order).
 *
 *   gguf_write_sample OUT.gguf SRC.f32 DEQ.f32 [--align N] [--seed S]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

typedef struct sample_tensor {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    int kind; /* 0: normal values, scale growing per row; 1: zeros; 2: special floats */
} sample_tensor;

static const sample_tensor tensors[] = {
    {"t.f32", 2, {512, 3}, QUANT_F32, 0},
    {"t.f16", 2, {512, 3}, QUANT_F16, 0},
    {"t.bf16", 2, {512, 3}, QUANT_BF16, 0},
    {"t.q8_0", 2, {512, 3}, QUANT_Q8_0, 0},
    {"t.q4_k", 2, {512, 3}, QUANT_Q4_K, 0},
    {"t.q5_k", 2, {512, 3}, QUANT_Q5_K, 0},
    {"t.q6_k", 2, {512, 3}, QUANT_Q6_K, 0},
    {"odd.f32", 3, {7, 3, 2}, QUANT_F32, 0},
    {"odd.f16", 1, {5}, QUANT_F16, 0},
    {"odd.bf16", 4, {2, 2, 2, 2}, QUANT_BF16, 0},
    {"zero.q8_0", 2, {64, 2}, QUANT_Q8_0, 1},
    {"zero.q4_k", 1, {256}, QUANT_Q4_K, 1},
    {"special.f16", 1, {24}, QUANT_F16, 2},
    {"special.bf16", 1, {24}, QUANT_BF16, 2},
    {"big.q6_k", 3, {256, 2, 2}, QUANT_Q6_K, 0},
};
enum { N_TENSORS = sizeof tensors / sizeof tensors[0] };

/* Values at the edges of the half formats: signed zeros, the f16 maximum and
 * just past it, subnormals, ties, NaN and infinities. */
static const float special[24] = {
    0.0f,  -0.0f,  1.0f,        -1.0f,         65504.0f,      65520.0f,   1e-8f,  6e-8f,
    NAN,   INFINITY, -INFINITY, 3.14159265f,   1e-40f,        3.4e38f,    1.0009765625f, 1.00048828125f,
    -2.5f, 1e-5f,  -65519.0f,   0.33333334f,   2049.0f,       1.00390625f, -1e-30f, 100000.0f,
};

static void fill(const sample_tensor *t, size_t row, rng_state *rng, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (t->kind == 1)
            x[i] = 0.0f;
        else if (t->kind == 2)
            x[i] = special[i % 24];
        else
            x[i] = rng_normal(rng) * (0.05f + 0.5f * (float)row) + (i % 97 == 0 ? 3.0f : 0.0f); /* a few outliers */
    }
}

static int fail(const char *what, const clover_error *err) {
    fprintf(stderr, "gguf_write_sample: %s: %s\n", what, err ? err->message : "");
    return 1;
}

static int set_metadata(gguf_writer *w, clover_error *err) {
    static const uint8_t a_u8[] = {1, 2, 255};
    static const int8_t a_i8[] = {-128, 127};
    static const uint16_t a_u16[] = {65535, 0, 7};
    static const int16_t a_i16[] = {-32768, 32767};
    static const uint32_t a_u32[] = {151643, 151645, 4294967295u};
    static const int32_t a_i32[] = {-1, 0, 2147483647, -2147483647 - 1};
    static const float a_f32[] = {0.5f, -1.25f, 1e-7f, 3.0e38f};
    static const bool a_bool[] = {true, false, false, true};
    static const uint64_t a_u64[] = {18446744073709551615ull, 0, 1099511627776ull};
    static const int64_t a_i64[] = {-9223372036854775807ll - 1, 9223372036854775807ll, -5};
    static const double a_f64[] = {2.718281828459045, -1e300, 5e-324};
    static const char *const a_str[] = {"<|im_start|>", "", "\xc4\xa0the", "\xe4\xbd\xa0\xe5\xa5\xbd", "tab\there", "\xf0\x9f\x98\x80"};
    int rc = 0;
    rc |= gguf_writer_set_string(w, "general.architecture", "qwen35moe", err);
    rc |= gguf_writer_set_string(w, "general.name", "clover sample", err);
    rc |= gguf_writer_set_u8(w, "s.u8", 250, err);
    rc |= gguf_writer_set_i8(w, "s.i8", -7, err);
    rc |= gguf_writer_set_u16(w, "s.u16", 65000, err);
    rc |= gguf_writer_set_i16(w, "s.i16", -32000, err);
    rc |= gguf_writer_set_u32(w, "s.u32", 3000000000u, err);
    rc |= gguf_writer_set_i32(w, "s.i32", -123456789, err);
    rc |= gguf_writer_set_u64(w, "s.u64", 18000000000000000000ull, err);
    rc |= gguf_writer_set_i64(w, "s.i64", -9000000000000000000ll, err);
    rc |= gguf_writer_set_f32(w, "s.f32", 0.1f, err);
    rc |= gguf_writer_set_f64(w, "s.f64", 1e-310, err);
    rc |= gguf_writer_set_bool(w, "s.bool_true", true, err);
    rc |= gguf_writer_set_bool(w, "s.bool_false", false, err);
    rc |= gguf_writer_set_string(w, "s.string", "Hello, \xe4\xb8\x96\xe7\x95\x8c!", err);
    gguf_value nul = {.type = GGUF_VT_STRING};
    nul.v.str = (gguf_string){"a\0b", 3};
    rc |= gguf_writer_set_value(w, "s.string_nul", &nul, err);
    rc |= gguf_writer_set_array(w, "a.u8", GGUF_VT_U8, a_u8, 3, err);
    rc |= gguf_writer_set_array(w, "a.i8", GGUF_VT_I8, a_i8, 2, err);
    rc |= gguf_writer_set_array(w, "a.u16", GGUF_VT_U16, a_u16, 3, err);
    rc |= gguf_writer_set_array(w, "a.i16", GGUF_VT_I16, a_i16, 2, err);
    rc |= gguf_writer_set_array(w, "a.u32", GGUF_VT_U32, a_u32, 3, err);
    rc |= gguf_writer_set_array(w, "a.i32", GGUF_VT_I32, a_i32, 4, err);
    rc |= gguf_writer_set_array(w, "a.f32", GGUF_VT_F32, a_f32, 4, err);
    rc |= gguf_writer_set_array(w, "a.bool", GGUF_VT_BOOL, a_bool, 4, err);
    rc |= gguf_writer_set_array(w, "a.u64", GGUF_VT_U64, a_u64, 3, err);
    rc |= gguf_writer_set_array(w, "a.i64", GGUF_VT_I64, a_i64, 3, err);
    rc |= gguf_writer_set_array(w, "a.f64", GGUF_VT_F64, a_f64, 3, err);
    rc |= gguf_writer_set_string_array(w, "a.string", a_str, 6, err);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: gguf_write_sample OUT.gguf SRC.f32 DEQ.f32 [--align N] [--seed S]\n");
        return 2;
    }
    uint32_t align = 0;
    uint64_t seed = 1234;
    for (int i = 4; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--align") == 0) align = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        if (strcmp(argv[i], "--seed") == 0) seed = strtoull(argv[i + 1], NULL, 10);
    }
    clover_error err = {0};
    gguf_writer *w = gguf_writer_create();
    if (!w) return fail("create", NULL);
    if (set_metadata(w, &err) != 0) return fail("metadata", &err);
    if (align && gguf_writer_set_u32(w, "general.alignment", align, &err) < 0) return fail("alignment", &err);
    for (size_t t = 0; t < N_TENSORS; t++)
        if (gguf_writer_add_tensor(w, tensors[t].name, tensors[t].n_dims, tensors[t].ne, tensors[t].type, &err) < 0)
            return fail(tensors[t].name, &err);
    if (gguf_writer_begin(w, argv[1], &err) < 0) return fail("begin", &err);
    FILE *src_fp = fopen(argv[2], "wb"), *deq_fp = fopen(argv[3], "wb");
    if (!src_fp || !deq_fp) return fail("side files", NULL);
    rng_state rng;
    rng_seed(&rng, seed);
    float x[512], y[512]; /* [ne0] */
    uint8_t q[2048];      /* one quantised row */
    for (size_t t = 0; t < N_TENSORS; t++) {
        const sample_tensor *st = &tensors[t];
        size_t n = (size_t)st->ne[0], rows = 1;
        for (uint32_t d = 1; d < st->n_dims; d++) rows *= (size_t)st->ne[d];
        size_t row_bytes = quant_row_bytes(st->type, n);
        for (size_t r = 0; r < rows; r++) {
            fill(st, r, &rng, x, n);
            quant_quantize_row(st->type, x, q, n);
            quant_dequantize_row(st->type, q, y, n);
            if (gguf_writer_write(w, q, row_bytes, &err) < 0) return fail("write", &err);
            if (fwrite(x, sizeof(float), n, src_fp) != n || fwrite(y, sizeof(float), n, deq_fp) != n) return fail("side files", NULL);
        }
    }
    if (fclose(src_fp) != 0 || fclose(deq_fp) != 0) return fail("side files", NULL);
    if (gguf_writer_finish(w, &err) < 0) return fail("finish", &err);
    gguf_writer_free(w);
    return 0;
}
