/*
 * synth_values.c: the random values of synthetic tensors. Each tensor has
 * its own SplitMix64 stream seeded from the file seed and its name, so the
 * bytes of a tensor depend only on (seed, name, geometry) and any tensor can
 * be generated alone, in any number of row chunks. Normal values use the
 * Irwin-Hall sum of four 16-bit uniforms from one draw (mean 0, variance 1,
 * bounded by +-2*sqrt(3)): cheap enough for the 35 billion values of the
 * full geometry and never an outlier that would blow up a random network.
 *
 * Q4_K tensors of the big preset skip the f32 values altogether
 * (synth_values_fill_q4_k): quantising costs ~0.35 us a value (the scale
 * search), hours for 32 billion values, while drawing the block fields
 * directly costs 18 random draws per 256 values. The values are then
 * uniform codes rather than normal ones, with the intended mean (~0) and
 * standard deviation, bounded (|v| < 2.6 a), and every field valid.
 */
#include <math.h>

#include "model/synth.h"
#include "quant/quant.h"

void synth_values_seed(rng_state *r, uint64_t seed, const char *name, uint64_t chunk) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    /* one SplitMix64 step over each input mixes them (nearby seeds and chunks give unrelated streams) */
    rng_seed(r, seed);
    rng_seed(r, rng_next(r) ^ h);
    rng_seed(r, rng_next(r) ^ chunk);
}

static float approx_normal(rng_state *r) {
    uint64_t x = rng_next(r);
    float s = (float)(x & 0xffff) + (float)((x >> 16) & 0xffff) + (float)((x >> 32) & 0xffff) + (float)(x >> 48);
    /* four U(0,1): mean 2, variance 4/12 */
    return (s * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

void synth_values_fill(const synth_tensor *t, rng_state *r, float *dst, size_t n) {
    switch (t->init) {
    case SYNTH_INIT_NORMAL:
        for (size_t i = 0; i < n; i++)
            dst[i] = t->a * approx_normal(r);
        break;
    case SYNTH_INIT_ONE_PLUS:
        for (size_t i = 0; i < n; i++)
            dst[i] = 1.0f + t->a * approx_normal(r);
        break;
    case SYNTH_INIT_UNIFORM:
        for (size_t i = 0; i < n; i++)
            dst[i] = t->a + (t->b - t->a) * rng_uniform(r);
        break;
    case SYNTH_INIT_NEG_EXP_UNIFORM:
        for (size_t i = 0; i < n; i++)
            dst[i] = -expf(t->a + (t->b - t->a) * rng_uniform(r));
        break;
    }
}

/* Q4_K's layout (llama.cpp's block_q4_K), written here byte by byte. */
enum { Q4K_VALUES = 256, Q4K_BYTES = 144, Q4K_SUBS = 8 };

/* The 6-bit scale sc[j] and min m[j] of the 8 sub-blocks into the 12 packed
 * bytes: j < 4 in the low 6 bits of bytes j (sc) and j+4 (m); j >= 4 with
 * their low 4 bits in byte j+4 (sc low nibble, m high nibble) and their top
 * 2 bits in the top bits of bytes j-4 (sc) and j (m). */
static void q4_k_pack_scales(uint8_t *out, const uint8_t *sc, const uint8_t *m) {
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        out[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
        out[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
}

/* value = d*sc*q - dmin*m with q uniform in 0..15 (mean 7.5, variance 21.25),
 * sc uniform in 32..63 (E[sc^2] = 2341.5), d = d0 * f with f uniform in
 * [0.8, 1.2] (E[f^2] = 1.0133) so blocks differ in scale as real ones do:
 * variance d0^2 * 21.25 * 2341.5 * 1.0133 = a^2 when d0 = a / 224.5.
 * dmin = 8 d and m = round(7.5 sc d / dmin) cancel each sub-block's mean to
 * within 4 d (m <= 60 fits 6 bits). */
void synth_values_fill_q4_k(const synth_tensor *t, rng_state *r, void *dst, size_t n) {
    uint8_t *b = dst;
    const float d0 = t->a / 224.5f;
    for (size_t i = 0; i < n / Q4K_VALUES; i++, b += Q4K_BYTES) {
        uint64_t u = rng_next(r);
        uint8_t sc[Q4K_SUBS], m[Q4K_SUBS];
        for (int j = 0; j < Q4K_SUBS; j++) sc[j] = (uint8_t)(32 + ((u >> (5 * j)) & 31));
        float f = 0.8f + 0.4f * (float)(u >> 40) * (1.0f / 16777216.0f);
        uint16_t dh = quant_f32_to_f16(d0 * f), dmh = quant_f32_to_f16(8.0f * quant_f16_to_f32(dh));
        float d = quant_f16_to_f32(dh), dmin = quant_f16_to_f32(dmh);
        for (int j = 0; j < Q4K_SUBS; j++) {
            float mj = dmin > 0.0f ? roundf(7.5f * (float)sc[j] * d / dmin) : 0.0f;
            m[j] = (uint8_t)(mj > 63.0f ? 63.0f : mj);
        }
        b[0] = (uint8_t)(dh & 0xff), b[1] = (uint8_t)(dh >> 8);
        b[2] = (uint8_t)(dmh & 0xff), b[3] = (uint8_t)(dmh >> 8);
        q4_k_pack_scales(b + 4, sc, m);
        for (int k = 0; k < 16; k++) { /* 128 bytes of codes, 8 per draw */
            uint64_t q = rng_next(r);
            for (int byte = 0; byte < 8; byte++) b[16 + 8 * k + byte] = (uint8_t)(q >> (8 * byte));
        }
    }
}

void synth_values_skew_rows(const synth_tensor *t, uint64_t seed, uint64_t r0, size_t k, float *dst) {
    enum { MAX_EXPERTS = 4096 }; /* the synth's limit on --experts */
    const uint64_t X = t->ne[1] < MAX_EXPERTS ? t->ne[1] : MAX_EXPERTS, ne0 = t->ne[0];
    uint32_t rank_of[MAX_EXPERTS], order[MAX_EXPERTS];
    rng_state r;
    synth_values_seed(&r, seed, t->name, UINT64_MAX); /* a stream no chunk of values uses */
    for (uint64_t a = 0; a < X; a++) order[a] = (uint32_t)a;
    for (uint64_t a = X; a > 1; a--) { /* Fisher-Yates: order[rank] = expert */
        uint64_t b = rng_next(&r) % a;
        uint32_t tmp = order[a - 1];
        order[a - 1] = order[b];
        order[b] = tmp;
    }
    for (uint64_t a = 0; a < X; a++) rank_of[order[a]] = (uint32_t)a;
    for (size_t i = 0; i < k && r0 + i < X; i++) {
        float s = 1.0f + t->skew / (float)(1 + rank_of[r0 + i]);
        for (uint64_t c = 0; c < ne0; c++) dst[i * ne0 + c] *= s;
    }
}
