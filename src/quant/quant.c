/*
 * quant.c: the type table (every ggml type code's name and block geometry,
 * so the GGUF reader can size any tensor) and the run-time dispatch between
 * the scalar oracles and the AVX2 fast paths.
 *
 * The choice is made once (pthread_once) from the CPU's features and the
 * diagnostic switch CLOVER_NO_SIMD; afterwards every call is a table lookup.
 * Functions here trust their preconditions (supported type, n a multiple of
 * the block): the model binder checks types when a file is loaded. A call
 * that breaks them asserts in debug builds and yields NaN in release builds
 * rather than touching memory it was not given.
 */
#include <assert.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <strings.h>

#include "quant/quant_internal.h"

typedef struct type_info {
    const char *name; /* ggml's spelling; NULL: unknown code */
    uint16_t block_elems;
    uint16_t block_bytes;
} type_info;

/* ggml type codes and geometry (ggml.c type_traits / gguf-py GGML_QUANT_SIZES).
 * Codes 31-33 and 36-38 were once-used repacked layouts, now retired. */
static const type_info type_table[QUANT_TYPE_LIMIT] = {
    [QUANT_F32] = {"f32", 1, 4},
    [QUANT_F16] = {"f16", 1, 2},
    [QUANT_Q4_0] = {"q4_0", 32, 18},
    [QUANT_Q4_1] = {"q4_1", 32, 20},
    [QUANT_Q5_0] = {"q5_0", 32, 22},
    [QUANT_Q5_1] = {"q5_1", 32, 24},
    [QUANT_Q8_0] = {"q8_0", 32, 34},
    [QUANT_Q8_1] = {"q8_1", 32, 36},
    [QUANT_Q2_K] = {"q2_K", 256, 84},
    [QUANT_Q3_K] = {"q3_K", 256, 110},
    [QUANT_Q4_K] = {"q4_K", 256, 144},
    [QUANT_Q5_K] = {"q5_K", 256, 176},
    [QUANT_Q6_K] = {"q6_K", 256, 210},
    [QUANT_Q8_K] = {"q8_K", 256, 292},
    [16] = {"iq2_xxs", 256, 66},
    [17] = {"iq2_xs", 256, 74},
    [18] = {"iq3_xxs", 256, 98},
    [19] = {"iq1_s", 256, 50},
    [20] = {"iq4_nl", 32, 18},
    [21] = {"iq3_s", 256, 110},
    [22] = {"iq2_s", 256, 82},
    [23] = {"iq4_xs", 256, 136},
    [24] = {"i8", 1, 1},
    [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},
    [27] = {"i64", 1, 8},
    [28] = {"f64", 1, 8},
    [29] = {"iq1_m", 256, 56},
    [QUANT_BF16] = {"bf16", 1, 2},
    [34] = {"tq1_0", 256, 54},
    [35] = {"tq2_0", 256, 66},
    [39] = {"mxfp4", 32, 17},
    [40] = {"nvfp4", 64, 36},
    [41] = {"q1_0", 128, 18},
};

static const type_info *type_lookup(uint32_t type) {
    if (type >= QUANT_TYPE_LIMIT || !type_table[type].name) return NULL;
    return &type_table[type];
}

const char *quant_type_name(uint32_t type) {
    const type_info *t = type_lookup(type);
    return t ? t->name : "?";
}

int quant_type_from_name(const char *name) {
    if (!name) return -1;
    for (uint32_t i = 0; i < QUANT_TYPE_LIMIT; i++)
        if (type_table[i].name && strcasecmp(type_table[i].name, name) == 0) return (int)i;
    return -1;
}

bool quant_type_known(uint32_t type) { return type_lookup(type) != NULL; }

bool quant_type_supported(uint32_t type) {
    switch (type) {
    case QUANT_F32:
    case QUANT_F16:
    case QUANT_BF16:
    case QUANT_Q8_0:
    case QUANT_Q4_K:
    case QUANT_Q5_K:
    case QUANT_Q6_K: return true;
    default: return false;
    }
}

size_t quant_block_elems(uint32_t type) {
    const type_info *t = type_lookup(type);
    return t ? t->block_elems : 0;
}

size_t quant_block_bytes(uint32_t type) {
    const type_info *t = type_lookup(type);
    return t ? t->block_bytes : 0;
}

size_t quant_row_bytes(uint32_t type, size_t n) {
    const type_info *t = type_lookup(type);
    if (!t || n % t->block_elems) return 0;
    size_t bytes;
    if (__builtin_mul_overflow(n / t->block_elems, (size_t)t->block_bytes, &bytes)) return 0;
    return bytes;
}

/* ---- dispatch ---- */

typedef void (*dequant_fn)(const void *src, float *dst, size_t n);
typedef float (*dot_fn)(const void *row, const float *x, size_t n);
typedef void (*quantize_fn)(const float *src, void *dst, size_t n);

typedef struct kernels {
    dequant_fn dequant;
    dot_fn dot;
} kernels;

/* Index of a supported type in the kernel tables; -1 otherwise. */
static int kernel_index(uint32_t type) {
    switch (type) {
    case QUANT_F32: return 0;
    case QUANT_F16: return 1;
    case QUANT_BF16: return 2;
    case QUANT_Q8_0: return 3;
    case QUANT_Q4_K: return 4;
    case QUANT_Q5_K: return 5;
    case QUANT_Q6_K: return 6;
    default: return -1;
    }
}

enum { N_KERNELS = 7 };

static float dot_scalar_f32(const void *row, const float *x, size_t n);
static float dot_scalar_blocked(uint32_t type, const void *row, const float *x, size_t n);

static const dequant_fn dequant_scalar[N_KERNELS] = {
    quant_dequant_f32_scalar,  quant_dequant_f16_scalar,  quant_dequant_bf16_scalar, quant_dequant_q8_0_scalar,
    quant_dequant_q4_k_scalar, quant_dequant_q5_k_scalar, quant_dequant_q6_k_scalar,
};

static const quantize_fn quantizers[N_KERNELS] = {
    quant_quantize_f32,  quant_quantize_f16,  quant_quantize_bf16, quant_quantize_q8_0,
    quant_quantize_q4_k, quant_quantize_q5_k, quant_quantize_q6_k,
};

static const quantize_fn quantizers_scalar[N_KERNELS] = {
    quant_quantize_f32,         quant_quantize_f16,         quant_quantize_bf16, quant_quantize_q8_0,
    quant_quantize_q4_k_scalar, quant_quantize_q5_k_scalar, quant_quantize_q6_k,
};

static const kernels kernels_avx2[N_KERNELS] = {
    {quant_dequant_f32_scalar, quant_dot_f32_avx2}, {quant_dequant_f16_avx2, quant_dot_f16_avx2},
    {quant_dequant_bf16_avx2, quant_dot_bf16_avx2}, {quant_dequant_q8_0_avx2, quant_dot_q8_0_avx2},
    {quant_dequant_q4_k_avx2, quant_dot_q4_k_avx2}, {quant_dequant_q5_k_avx2, quant_dot_q5_k_avx2},
    {quant_dequant_q6_k_avx2, quant_dot_q6_k_avx2},
};

static pthread_once_t simd_once = PTHREAD_ONCE_INIT;
static bool simd_on;

static void simd_detect(void) {
    const char *off = getenv("CLOVER_NO_SIMD");
    bool disabled = off && off[0] && !(off[0] == '0' && off[1] == '\0');
    bool cpu_ok = false;
#if defined(__x86_64__) || defined(__i386__)
    /* avx2 and fma include the OS's YMM support; f16c is read from CPUID leaf 1
     * (clang's __builtin_cpu_supports does not know it). */
    unsigned a, b, c, d;
    __builtin_cpu_init();
    cpu_ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __get_cpuid(1, &a, &b, &c, &d) &&
             (c & bit_F16C);
#endif
    simd_on = cpu_ok && !disabled;
}

bool quant_simd_active(void) {
    pthread_once(&simd_once, simd_detect);
    return simd_on;
}

/* True when the call's preconditions hold (asserting in debug builds). */
static bool call_ok(uint32_t type, size_t n, int *index) {
    *index = kernel_index(type);
    bool ok = *index >= 0 && n % quant_block_elems(type) == 0;
    assert(ok && "unsupported type or n not a multiple of the block");
    return ok;
}

static void fill_nan(float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = NAN;
}

void quant_dequantize_row_scalar(uint32_t type, const void *src, float *dst, size_t n) {
    int k;
    if (!call_ok(type, n, &k)) {
        fill_nan(dst, n);
        return;
    }
    dequant_scalar[k](src, dst, n);
}

void quant_dequantize_row(uint32_t type, const void *src, float *dst, size_t n) {
    int k;
    if (!call_ok(type, n, &k)) {
        fill_nan(dst, n);
        return;
    }
    if (quant_simd_active())
        kernels_avx2[k].dequant(src, dst, n);
    else
        dequant_scalar[k](src, dst, n);
}

void quant_quantize_row(uint32_t type, const float *src, void *dst, size_t n) {
    int k;
    if (!call_ok(type, n, &k)) return;
    quantizers[k](src, dst, n);
}

void quant_quantize_row_scalar(uint32_t type, const float *src, void *dst, size_t n) {
    int k;
    if (!call_ok(type, n, &k)) return;
    quantizers_scalar[k](src, dst, n);
}

float quant_dot(uint32_t type, const void *row, const float *x, size_t n) {
    int k;
    if (!call_ok(type, n, &k)) return NAN;
    if (quant_simd_active()) return kernels_avx2[k].dot(row, x, n);
    return quant_dot_scalar(type, row, x, n);
}

/* The scalar dot is the oracle: the dequantised values (exactly as
 * quant_dequantize_row_scalar gives them) times x, summed in double. */
float quant_dot_scalar(uint32_t type, const void *row, const float *x, size_t n) {
    int k;
    if (!call_ok(type, n, &k)) return NAN;
    if (type == QUANT_F32) return dot_scalar_f32(row, x, n);
    return dot_scalar_blocked(type, row, x, n);
}

/* Rows are read bytewise-safe: a row inside a mapped file need not be 4-byte aligned. */
static float dot_scalar_f32(const void *row, const float *x, size_t n) {
    const uint8_t *p = row;
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        float w;
        memcpy(&w, p + 4 * i, sizeof w);
        s += (double)w * x[i];
    }
    return (float)s;
}

/* Dequantises a chunk of whole blocks at a time into a stack buffer. */
static float dot_scalar_blocked(uint32_t type, const void *row, const float *x, size_t n) {
    enum { CHUNK = QUANT_QK_K };
    float buf[CHUNK];
    const size_t be = quant_block_elems(type), bb = quant_block_bytes(type);
    const size_t per = CHUNK / be * be; /* elements per chunk, whole blocks */
    const uint8_t *p = row;
    double s = 0;
    for (size_t i = 0; i < n; i += per) {
        size_t len = n - i < per ? n - i : per;
        quant_dequantize_row_scalar(type, p + i / be * bb, buf, len);
        for (size_t j = 0; j < len; j++) s += (double)buf[j] * x[i + j];
    }
    return (float)s;
}
