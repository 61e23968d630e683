/*
 * test_quant.c: the tensor types against values worked out by hand from the
 * format definitions (llama.cpp's ggml-common.h layouts): the type table,
 * f16/bf16 conversion edge cases, hand-written blocks of every quantised
 * type with their dequantised values computed by hand, and the quantisers'
 * round-trip error on Gaussian data against bounds derived from the step size
 * of each format (see roundtrip_bounds below).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/rng.h"
#include "quant/quant.h"
#include "test.h"

static float f32_of(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ---- the type table ---- */

static void test_type_table(void) {
    /* code, name, elems, bytes: ggml's type_traits. */
    static const struct {
        uint32_t code;
        const char *name;
        size_t elems, bytes;
        bool supported;
    } t[] = {
        {0, "f32", 1, 4, true},       {1, "f16", 1, 2, true},       {2, "q4_0", 32, 18, false},
        {3, "q4_1", 32, 20, false},   {6, "q5_0", 32, 22, false},   {7, "q5_1", 32, 24, false},
        {8, "q8_0", 32, 34, true},    {9, "q8_1", 32, 36, false},   {10, "q2_K", 256, 84, false},
        {11, "q3_K", 256, 110, false}, {12, "q4_K", 256, 144, true}, {13, "q5_K", 256, 176, true},
        {14, "q6_K", 256, 210, true}, {15, "q8_K", 256, 292, false}, {24, "i8", 1, 1, false},
        {25, "i16", 1, 2, false},     {26, "i32", 1, 4, false},     {27, "i64", 1, 8, false},
        {28, "f64", 1, 8, false},     {30, "bf16", 1, 2, true},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        CHECK_MSG(strcmp(quant_type_name(t[i].code), t[i].name) == 0, "code %u: %s", t[i].code,
                  quant_type_name(t[i].code));
        CHECK(quant_type_known(t[i].code));
        CHECK_EQ_INT(quant_type_supported(t[i].code), t[i].supported);
        CHECK_EQ_INT(quant_block_elems(t[i].code), t[i].elems);
        CHECK_EQ_INT(quant_block_bytes(t[i].code), t[i].bytes);
        CHECK_EQ_INT(quant_type_from_name(t[i].name), t[i].code);
    }
    /* Retired and out-of-range codes. */
    static const uint32_t unknown[] = {4, 5, 31, 32, 33, 36, 37, 38, 63, 64, 1000, 0xffffffffu};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECK(!quant_type_known(unknown[i]));
        CHECK(!quant_type_supported(unknown[i]));
        CHECK_EQ_INT(quant_block_elems(unknown[i]), 0);
        CHECK_EQ_INT(quant_row_bytes(unknown[i], 256), 0);
        CHECK(strcmp(quant_type_name(unknown[i]), "?") == 0);
    }
    /* The CLI's spellings, any case. */
    CHECK_EQ_INT(quant_type_from_name("Q4_K"), QUANT_Q4_K);
    CHECK_EQ_INT(quant_type_from_name("q4_k"), QUANT_Q4_K);
    CHECK_EQ_INT(quant_type_from_name("BF16"), QUANT_BF16);
    CHECK_EQ_INT(quant_type_from_name("q7_k"), -1);
    CHECK_EQ_INT(quant_type_from_name(""), -1);
    CHECK_EQ_INT(quant_type_from_name(NULL), -1);
    /* Row sizes: whole blocks only. */
    CHECK_EQ_INT(quant_row_bytes(QUANT_Q4_K, 4096), 16 * 144);
    CHECK_EQ_INT(quant_row_bytes(QUANT_Q6_K, 512), 2 * 210);
    CHECK_EQ_INT(quant_row_bytes(QUANT_Q8_0, 96), 3 * 34);
    CHECK_EQ_INT(quant_row_bytes(QUANT_Q8_0, 100), 0);
    CHECK_EQ_INT(quant_row_bytes(QUANT_Q4_K, 128), 0);
    CHECK_EQ_INT(quant_row_bytes(QUANT_F16, 7), 14);
    CHECK_EQ_INT(quant_row_bytes(QUANT_F32, 0), 0);
    CHECK_EQ_INT(quant_row_bytes(QUANT_F32, SIZE_MAX / 2), 0); /* overflow */
}

/* ---- half precision ---- */

static void test_f16_to_f32(void) {
    static const struct {
        uint16_t h;
        double v;
    } t[] = {
        {0x0000, 0.0},
        {0x0001, 5.9604644775390625e-08},    /* 2^-24, smallest subnormal */
        {0x0002, 1.1920928955078125e-07},    /* 2^-23 */
        {0x03ff, 6.097555160522461e-05},     /* 1023 * 2^-24, largest subnormal */
        {0x0400, 6.103515625e-05},           /* 2^-14, smallest normal */
        {0x3555, 0.333251953125},            /* 1365/4096 */
        {0x3c00, 1.0},
        {0x3c01, 1.0009765625},              /* 1 + 2^-10 */
        {0xc000, -2.0},
        {0x7bff, 65504.0},
        {0x8001, -5.9604644775390625e-08},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        CHECK_MSG(quant_f16_to_f32(t[i].h) == (float)t[i].v, "h=0x%04x -> %.9g, want %.9g", t[i].h,
                  quant_f16_to_f32(t[i].h), t[i].v);
    CHECK(bits_of(quant_f16_to_f32(0x8000)) == 0x80000000u); /* -0 */
    CHECK(isinf(quant_f16_to_f32(0x7c00)) && quant_f16_to_f32(0x7c00) > 0);
    CHECK(isinf(quant_f16_to_f32(0xfc00)) && quant_f16_to_f32(0xfc00) < 0);
    CHECK(isnan(quant_f16_to_f32(0x7e00)));
    CHECK(isnan(quant_f16_to_f32(0x7c01)));
    CHECK(isnan(quant_f16_to_f32(0xfe00)));
}

static void test_f32_to_f16(void) {
    static const struct {
        float f;
        uint16_t h;
    } t[] = {
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {65504.0f, 0x7bff},
        {65519.99609375f, 0x7bff},               /* just below the halfway point to 2^16 */
        {65520.0f, 0x7c00},                      /* halfway: ties to even = infinity */
        {1e6f, 0x7c00},
        {-1e6f, 0xfc00},
        {1.00048828125f, 0x3c00},                /* 1 + 2^-11: tie, even is 1 */
        {1.00146484375f, 0x3c02},                /* 1 + 3*2^-11: tie, even is 1 + 2^-9 */
        {1.0004892349243164f, 0x3c01},           /* 1 + 2^-11 + 2^-20: above the tie */
        {0.333333343f, 0x3555},
        {6.103515625e-05f, 0x0400},              /* 2^-14 */
        {5.9604644775390625e-08f, 0x0001},       /* 2^-24 */
        {2.98023223876953125e-08f, 0x0000},      /* 2^-25: tie between 0 and 2^-24, even is 0 */
        {2.9831426e-08f, 0x0001},                /* a little above 2^-25 */
        {8.940696716308594e-08f, 0x0002},        /* 3 * 2^-25: tie 1.5, even is 2 */
        {1.4901161193847656e-07f, 0x0002},       /* 5 * 2^-25: tie 2.5, even is 2 */
        {6.1005353927612305e-05f, 0x0400},       /* 1023.5 * 2^-24: tie, even is 1024 = 2^-14 */
        {6.0945749282836914e-05f, 0x03fe},       /* 1022.5 * 2^-24: tie, even is 1022 */
        {-5.9604644775390625e-08f, 0x8001},
        {1e-10f, 0x0000},
        {-1e-10f, 0x8000},
        {0.0f, 0x0000},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        CHECK_MSG(quant_f32_to_f16(t[i].f) == t[i].h, "%.9g -> 0x%04x, want 0x%04x", t[i].f, quant_f32_to_f16(t[i].f),
                  t[i].h);
    CHECK(quant_f32_to_f16(-0.0f) == 0x8000);
    CHECK(quant_f32_to_f16(INFINITY) == 0x7c00);
    CHECK(quant_f32_to_f16(-INFINITY) == 0xfc00);
    uint16_t nan_h = quant_f32_to_f16(NAN);
    CHECK((nan_h & 0x7c00) == 0x7c00 && (nan_h & 0x03ff) != 0);
    /* A signalling NaN comes out quiet (and still a NaN). */
    uint16_t snan_h = quant_f32_to_f16(f32_of(0x7f800001u));
    CHECK((snan_h & 0x7e00) == 0x7e00);
    CHECK((quant_f32_to_f16(f32_of(0xff800001u)) & 0xfe00) == 0xfe00);
    /* Every half value survives a round trip through f32. */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaNs are quietened */
        if (quant_f32_to_f16(quant_f16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_bf16(void) {
    CHECK(quant_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(quant_bf16_to_f32(0xc040) == -3.0f);
    CHECK(quant_bf16_to_f32(0x0001) == f32_of(0x00010000u)); /* subnormal 2^-133 */
    CHECK(quant_bf16_to_f32(0x0001) == 9.18354961579912e-41f);
    CHECK(isinf(quant_bf16_to_f32(0x7f80)));
    CHECK(isnan(quant_bf16_to_f32(0x7fc0)));
    static const struct {
        uint32_t f;
        uint16_t h;
    } t[] = {
        {0x3f800000u, 0x3f80}, /* 1 */
        {0x3f808000u, 0x3f80}, /* 1 + 2^-8: tie, even is 1 */
        {0x3f818000u, 0x3f82}, /* tie above the odd 0x3f81: up to even */
        {0x3f808001u, 0x3f81}, /* just above the tie */
        {0x3f807fffu, 0x3f80}, /* just below */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX rounds to infinity */
        {0xff7fffffu, 0xff80},
        {0x7f800000u, 0x7f80}, /* inf */
        {0xff800000u, 0xff80},
        {0x00008000u, 0x0000}, /* subnormal tie, even is 0 */
        {0x00018000u, 0x0002}, /* subnormal tie above odd */
        {0x80000000u, 0x8000}, /* -0 */
        {0x7f800001u, 0x7fc0}, /* signalling NaN: quietened */
        {0xffc00000u, 0xffc0}, /* quiet negative NaN */
        {0x7fa00000u, 0x7fe0}, /* NaN payload's top bits kept, quiet bit set */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        CHECK_MSG(quant_f32_to_bf16(f32_of(t[i].f)) == t[i].h, "0x%08x -> 0x%04x, want 0x%04x", t[i].f,
                  quant_f32_to_bf16(f32_of(t[i].f)), t[i].h);
}

/* ---- hand-written blocks ---- */

typedef struct {
    int index;
    float value;
} expect;

static void check_dequant(uint32_t type, const void *blocks, size_t n, const expect *e, size_t ne) {
    float out[512], out_fast[512];
    quant_dequantize_row_scalar(type, blocks, out, n);
    quant_dequantize_row(type, blocks, out_fast, n);
    for (size_t i = 0; i < ne; i++) {
        CHECK_MSG(out[e[i].index] == e[i].value, "%s scalar element %d: %.9g, want %.9g", quant_type_name(type),
                  e[i].index, out[e[i].index], e[i].value);
        CHECK_MSG(out_fast[e[i].index] == e[i].value, "%s fast element %d: %.9g, want %.9g", quant_type_name(type),
                  e[i].index, out_fast[e[i].index], e[i].value);
    }
}

static void test_q8_0_hand_block(void) {
    uint8_t b[2 * 34] = {0};
    b[0] = 0x00, b[1] = 0x38; /* d = 0.5 */
    b[2 + 0] = 1;
    b[2 + 1] = 0xff; /* -1 */
    b[2 + 2] = 127;
    b[2 + 3] = 0x80; /* -128 */
    b[2 + 5] = 2;
    b[34 + 0] = 0x00, b[34 + 1] = 0x30; /* second block: d = 0.125 */
    b[34 + 2 + 0] = 0xfd;              /* -3 */
    b[34 + 2 + 31] = 100;
    const expect e[] = {{0, 0.5f}, {1, -0.5f},  {2, 63.5f},   {3, -64.0f},
                        {4, 0.0f}, {5, 1.0f},   {32, -0.375f}, {63, 12.5f}};
    check_dequant(QUANT_Q8_0, b, 64, e, sizeof e / sizeof e[0]);
}

/* The Q4_K/Q5_K header used below: d = 1, dmin = 0.25 and sub-block
 *   scales sc = {1, 2, 3, 4, 17, 33, 50, 63}, mins m = {0, 5, 10, 63, 21, 32, 58, 7},
 * packed by hand: bytes 0-3 = sc[0..3] | (sc[4..7] >> 4) << 6,
 * bytes 4-7 = m[0..3] | (m[4..7] >> 4) << 6, bytes 8-11 = sc[4..7] & 15 | (m[4..7] & 15) << 4. */
static const uint8_t k4_header[16] = {0x00, 0x3c, 0x00, 0x34, /* d, dmin */
                                      0x41, 0x82, 0xc3, 0xc4, 0x40, 0x85, 0xca, 0x3f, 0x51, 0x01, 0xa2, 0x7f};

/* qs pattern: byte 32c+l holds low nibble l%16 (value 64c+l) and high nibble
 * 15-l%16 (value 64c+32+l). */
static void k4_fill_qs(uint8_t *qs) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) qs[32 * c + l] = (uint8_t)((l % 16) | ((15 - l % 16) << 4));
}

static void test_q4_k_hand_block(void) {
    uint8_t b[144];
    memcpy(b, k4_header, 16);
    k4_fill_qs(b + 16);
    /* value = d*sc[s]*q - dmin*m[s], s = sub-block of 32 */
    const expect e[] = {
        {0, 0.0f},       /* s0 q0: 0 - 0 */
        {5, 5.0f},       /* s0 q5 */
        {17, 1.0f},      /* s0 q1 */
        {32, 28.75f},    /* s1 q15: 2*15 - 0.25*5 */
        {63, -1.25f},    /* s1 q0 */
        {64, -2.5f},     /* s2 q0: -0.25*10 */
        {70, 15.5f},     /* s2 q6: 18 - 2.5 */
        {100, 28.25f},   /* s3 q11: 44 - 15.75 */
        {128, -5.25f},   /* s4 q0: -0.25*21 */
        {140, 198.75f},  /* s4 q12: 17*12 - 5.25 */
        {170, 157.0f},   /* s5 q5: 33*5 - 8 */
        {200, 385.5f},   /* s6 q8: 50*8 - 14.5 */
        {230, 565.25f},  /* s7 q9: 63*9 - 1.75 */
        {255, -1.75f},   /* s7 q0 */
    };
    check_dequant(QUANT_Q4_K, b, 256, e, sizeof e / sizeof e[0]);
}

static void test_q5_k_hand_block(void) {
    uint8_t b[176] = {0};
    memcpy(b, k4_header, 16);
    uint8_t *qh = b + 16, *qs = b + 48;
    k4_fill_qs(qs);
    qh[0] = 0x01;  /* bit 0: value 0 gets +16 */
    qh[5] = 0x02;  /* bit 1: value 32+5 */
    qh[6] = 0x10;  /* bit 4: value 128+6 */
    qh[8] = 0x80;  /* bit 7: value 192+32+8 */
    qh[31] = 0xff; /* every value with l = 31 */
    const expect e[] = {
        {0, 16.0f},      /* s0 q 0+16 */
        {5, 5.0f},       /* s0 q5, no high bit */
        {31, 31.0f},     /* s0 q 15+16 */
        {37, 50.75f},    /* s1 q 10+16: 2*26 - 1.25 */
        {70, 15.5f},     /* s2 q6 (qh[6] bit 2 clear) */
        {134, 368.75f},  /* s4 q 6+16: 17*22 - 5.25 */
        {159, 521.75f},  /* s4 q 15+16: 17*31 - 5.25 */
        {191, 520.0f},   /* s5 q 0+16: 33*16 - 8 */
        {232, 1447.25f}, /* s7 q 7+16: 63*23 - 1.75 */
        {255, 1006.25f}, /* s7 q 0+16: 63*16 - 1.75 */
    };
    check_dequant(QUANT_Q5_K, b, 256, e, sizeof e / sizeof e[0]);
}

static void test_q6_k_hand_block(void) {
    uint8_t b[210] = {0};
    uint8_t *ql = b, *qh = b + 128;
    int8_t *sc = (int8_t *)(b + 192);
    static const int8_t scales[16] = {1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6, 7, -7, 127, -128};
    memcpy(sc, scales, 16);
    b[208] = 0x00, b[209] = 0x38; /* d = 0.5 */
    ql[0] = 0x21;   /* value 0: low nibble 1; value 64: high nibble 2 */
    qh[0] = 0xe4;   /* 11 10 01 00: +0 value 0, +16 value 32, +32 value 64, +48 value 96 */
    ql[17] = 0xf0;  /* value 17: 0; value 81: 15 */
    qh[17] = 0x30;  /* +48 for value 81 */
    ql[104] = 0x5a; /* half 1, ql[32+8]: value 168 low nibble 10, value 232 high nibble 5 */
    qh[40] = 0x8c;  /* half 1, qh[8]: 10 00 11 00: +0 value 136, +48 value 168, +0 value 200, +32 value 232 */
    ql[127] = 0xf0; /* half 1, ql[32+31]: value 191 low 0, value 255 high 15 */
    qh[63] = 0xc0;  /* +48 for value 255 */
    /* value = d * sc[s] * (q - 32), s = value / 16 */
    const expect e[] = {
        {0, -15.5f},   /* s0 = 1: 0.5*1*(1-32) */
        {17, 16.0f},   /* s1 = -1: 0.5*-1*(0-32) */
        {32, -16.0f},  /* s2 = 2: 0.5*2*(16-32) */
        {50, 32.0f},   /* s3 = -2, untouched: 0.5*-2*-32 */
        {64, 3.0f},    /* s4 = 3: 0.5*3*(34-32) */
        {81, -46.5f},  /* s5 = -3: 0.5*-3*(63-32) */
        {96, 32.0f},   /* s6 = 4: 0.5*4*(48-32) */
        {136, -80.0f}, /* s8 = 5: 0.5*5*-32 */
        {168, 78.0f},  /* s10 = 6: 0.5*6*(58-32) */
        {191, 96.0f},  /* s11 = -6: 0.5*-6*-32 */
        {200, -112.0f}, /* s12 = 7: 0.5*7*-32 */
        {232, 317.5f},  /* s14 = 127: 0.5*127*(37-32) */
        {255, -1984.0f}, /* s15 = -128: 0.5*-128*(63-32) */
    };
    check_dequant(QUANT_Q6_K, b, 256, e, sizeof e / sizeof e[0]);
}

static void test_float_rows_hand(void) {
    const uint8_t f16[6] = {0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00}; /* 1, -2, 2^-24 */
    const expect e16[] = {{0, 1.0f}, {1, -2.0f}, {2, 5.9604644775390625e-08f}};
    check_dequant(QUANT_F16, f16, 3, e16, 3);
    const uint8_t bf16[4] = {0x80, 0x3f, 0x40, 0xc0}; /* 1, -3 */
    const expect eb[] = {{0, 1.0f}, {1, -3.0f}};
    check_dequant(QUANT_BF16, bf16, 2, eb, 2);
}

/* The dot product of the hand Q4_K block with x = (1, 0, 0, ...) + e_255 picks two values. */
static void test_dot_hand(void) {
    uint8_t b[144];
    memcpy(b, k4_header, 16);
    k4_fill_qs(b + 16);
    float x[256] = {0};
    x[32] = 2.0f;   /* 2 * 28.75 */
    x[255] = -4.0f; /* -4 * -1.75 */
    CHECK(quant_dot_scalar(QUANT_Q4_K, b, x, 256) == 64.5f);
    CHECK_NEAR(quant_dot(QUANT_Q4_K, b, x, 256), 64.5f, 1e-4);
}

/* ---- quantisation round trips ---- */

typedef struct {
    uint32_t type;
    double bound; /* RMS error / RMS value on N(0,1) data */
} roundtrip_bound;

/* Bounds from the formats' step sizes, with margin:
 * f16: relative step 2^-10, rounding error RMS ~ 2^-11/sqrt(3) ~ 2.8e-4 relative
 *      at the top of a binade, less below; bound 4e-4.
 * bf16: step 2^-7: ~2.3e-3; bound 3.5e-3.
 * q8_0: step amax/127 with amax of 32 normals ~2.1: 0.0165/sqrt(12) = 4.8e-3; bound 7e-3.
 * q6_k: step ~amax/32 over 16 values (amax ~1.8): 0.056/sqrt(12) = 1.6e-2; bound 2.2e-2.
 * q5_k: 31 steps over the range of 32 values (~4.1): 0.13/sqrt(12) = 3.8e-2; bound 5e-2.
 * q4_k: 15 steps over ~4.1: 0.27/sqrt(12) = 7.9e-2; bound 9.5e-2. */
static const roundtrip_bound roundtrip_bounds[] = {
    {QUANT_F32, 0.0},     {QUANT_F16, 4e-4},   {QUANT_BF16, 3.5e-3}, {QUANT_Q8_0, 7e-3},
    {QUANT_Q6_K, 2.2e-2}, {QUANT_Q5_K, 5e-2},  {QUANT_Q4_K, 9.5e-2},
};

static void test_roundtrip_gaussian(void) {
    enum { N = 64 * 256 };
    static float x[N], y[N];
    static uint8_t q[N * 4];
    rng_state r;
    rng_seed(&r, 1234);
    double sum_x2 = 0;
    for (size_t i = 0; i < N; i++) {
        x[i] = rng_normal(&r);
        sum_x2 += (double)x[i] * x[i];
    }
    double prev = -1;
    for (size_t t = 0; t < sizeof roundtrip_bounds / sizeof roundtrip_bounds[0]; t++) {
        const uint32_t type = roundtrip_bounds[t].type;
        memset(q, 0xcd, sizeof q);
        quant_quantize_row(type, x, q, N);
        quant_dequantize_row(type, q, y, N);
        double sum_e2 = 0;
        for (size_t i = 0; i < N; i++) sum_e2 += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        const double rel = sqrt(sum_e2 / sum_x2);
        printf("     %-5s round trip: RMS error / RMS = %.3g (bound %.3g)\n", quant_type_name(type), rel,
               roundtrip_bounds[t].bound);
        CHECK_MSG(rel <= roundtrip_bounds[t].bound, "%s: %.4g > %.4g", quant_type_name(type), rel,
                  roundtrip_bounds[t].bound);
        CHECK_MSG(rel >= prev, "%s should lose more than the type before it", quant_type_name(type));
        prev = rel;
    }
}

/* Rows that defeat naive quantisers: zeros, a constant, all negative, one outlier. */
static void test_roundtrip_special_rows(void) {
    static const uint32_t types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_F16, QUANT_BF16};
    enum { N = 512 };
    float x[N], y[N];
    uint8_t q[N * 4];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const uint32_t type = types[t];
        for (int kind = 0; kind < 4; kind++) {
            for (int i = 0; i < N; i++) {
                switch (kind) {
                case 0: x[i] = 0.0f; break;
                case 1: x[i] = 0.7f; break;
                case 2: x[i] = -1.0f - (float)(i % 37) / 37.0f; break;
                default: x[i] = i == 300 ? 1000.0f : (float)((i * 7) % 11) / 11.0f - 0.5f; break;
                }
            }
            float amax = 0;
            for (int i = 0; i < N; i++) amax = fmaxf(amax, fabsf(x[i]));
            quant_quantize_row(type, x, q, N);
            quant_dequantize_row(type, q, y, N);
            /* Tolerance: a coarse fraction of the largest value in a block (per-type steps are
             * finer than amax/8 even for q4_k's 15 levels with a 6-bit scale). */
            int bad = 0;
            for (int i = 0; i < N; i++) {
                float block_max = 0;
                size_t be = quant_block_elems(type) > 1 ? quant_block_elems(type) : 1;
                size_t b0 = (size_t)i / be * be;
                for (size_t k = b0; k < b0 + be; k++) block_max = fmaxf(block_max, fabsf(x[k]));
                if (!(fabsf(y[i] - x[i]) <= block_max / 8 + 1e-6f)) bad++;
            }
            CHECK_MSG(bad == 0, "%s kind %d: %d values off", quant_type_name(type), kind, bad);
            if (kind == 0)
                for (int i = 0; i < N; i++) CHECK(y[i] == 0.0f);
            (void)amax;
        }
    }
}

/* Q8_0 with a hand-checkable row: amax 127 gives d = 1 and exact integers. */
static void test_quantize_q8_0_exact(void) {
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i * 8 - 127); /* -127 .. 121 */
    uint8_t q[34];
    quant_quantize_row(QUANT_Q8_0, x, q, 32);
    CHECK(q[0] == 0x00 && q[1] == 0x3c); /* d = 1.0 */
    for (int i = 0; i < 32; i++) CHECK_EQ_INT((int8_t)q[2 + i], i * 8 - 127);
    /* Halves round away from zero (roundf): amax 254 gives d = 2, x = 3 -> 1.5 -> 2, x = -5 -> -2.5 -> -3. */
    memset(x, 0, sizeof x);
    x[0] = 254.0f;
    x[1] = 3.0f;
    x[2] = -5.0f;
    quant_quantize_row(QUANT_Q8_0, x, q, 32);
    CHECK(q[0] == 0x00 && q[1] == 0x40); /* d = 2.0 */
    CHECK_EQ_INT((int8_t)q[2], 127);
    CHECK_EQ_INT((int8_t)q[3], 2);
    CHECK_EQ_INT((int8_t)q[4], -3);
}

int main(void) {
    RUN(test_type_table);
    RUN(test_f16_to_f32);
    RUN(test_f32_to_f16);
    RUN(test_bf16);
    RUN(test_q8_0_hand_block);
    RUN(test_q4_k_hand_block);
    RUN(test_q5_k_hand_block);
    RUN(test_q6_k_hand_block);
    RUN(test_float_rows_hand);
    RUN(test_dot_hand);
    RUN(test_roundtrip_gaussian);
    RUN(test_roundtrip_special_rows);
    RUN(test_quantize_q8_0_exact);
    return TEST_EXIT();
}
