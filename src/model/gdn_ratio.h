/*
 * gdn_ratio.h: the history slot's ln(b / B) of the GDN block operator
 * (SPEC.md 2.1), one definition for every backend (model/, so the CUDA
 * backend does not include the CPU's operator header). Alone in its file so
 * the self-test (tests/selftest/fault_no_ln_ratio.c) can replace it.
 */
#ifndef CLOVER_MODEL_GDN_RATIO_H
#define CLOVER_MODEL_GDN_RATIO_H

#include <stddef.h>
#include <stdint.h>

/* ln(b / B) as the reference rounds it: in double, then to float32. b, B >= 1. */
float gdn_block_ln_ratio(size_t b, uint32_t block_size);

#endif
