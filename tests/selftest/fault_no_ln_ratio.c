/*
 * fault_no_ln_ratio.c: a planted fault for the self-test of the tests
 * (tests/selftest.sh), linked only into selftest_golden_clover_no_ln_ratio,
 * never into the library: SPEC 2.1's ln(b/B) history term dropped (the
 * ratio reported as 0 = ln(B/B) whatever b is). The golden preview case
 * with b < B (preview_b4) must then fail.
 *
 * How: this file compiles model/gdn_ratio.c itself with its ln-ratio function
 * renamed, then defines the faulty one under the real name. The test
 * executable's own objects thus define every symbol of the archive's
 * gdn_ratio.o, which the linker therefore never pulls in: no duplicate,
 * and nothing in src/ knows about faults.
 */
#define gdn_block_ln_ratio gdn_block_ln_ratio_unfaulted
#include "model/gdn_ratio.c"
#undef gdn_block_ln_ratio

float gdn_block_ln_ratio(size_t b, uint32_t block_size);

float gdn_block_ln_ratio(size_t b, uint32_t block_size) {
    (void)b;
    (void)block_size;
    return 0.0f;
}
