/*
 * fault_q4_k_sub_blocks.c: a planted fault for the self-test of the tests
 * (tests/selftest.sh), linked only into selftest_golden_quant_q4_k_fault,
 * never into the library: the scalar Q4_K dequantiser reads the low and
 * high nibble halves of its first 64-value chunk in the wrong order (a
 * block-layout slip of the kind a hand-written unpacker makes). With
 * CLOVER_NO_SIMD=1 every Q4_K product goes through this function, so the
 * 256-wide golden case (tests/fixtures/tiny_clover_k) must then fail.
 *
 * How (as fault_no_ln_ratio.c): this file compiles dequant_scalar.c with
 * the function renamed and defines the faulty one under the real name, so
 * the archive's dequant_scalar.o is never pulled in.
 */
#define quant_dequant_q4_k_scalar quant_dequant_q4_k_scalar_unfaulted
#include "quant/dequant_scalar.c"
#undef quant_dequant_q4_k_scalar

void quant_dequant_q4_k_scalar(const void *src, float *dst, size_t n);

void quant_dequant_q4_k_scalar(const void *src, float *dst, size_t n) {
    quant_dequant_q4_k_scalar_unfaulted(src, dst, n);
    for (size_t i = 0; i < n / QUANT_QK_K; i++)
        for (int l = 0; l < 32; l++) { /* sub-blocks 0 and 1 swapped */
            float *v = dst + i * QUANT_QK_K;
            const float t = v[l];
            v[l] = v[32 + l];
            v[32 + l] = t;
        }
}
