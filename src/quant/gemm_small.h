/*
 * gemm_small.h: the multi-row product for a handful of activation rows
 * (3 to GEMM_SMALL_MAX_ROWS: a decode batch of one-row sequences) against
 * Q8_0 weights, each output bit for bit what the one-row decode dot
 * (quant_act_dot_q8_0) gives its row.
 *
 * Why a kernel of its own: at 8 rows the tile kernel of gemm_avx2.c spends
 * most of its time loading the decoded tile back from L1 (three vectors per
 * weight block and activation row), and runs at ~1.45x the one-row dot per
 * multiply-add; for 8 rows a weight block in registers against 4
 * activation rows at a time needs one activation load per block pair and no
 * decoded tile at all (bench/RESULTS.md, bench_batch section).
 */
#ifndef CLOVER_QUANT_GEMM_SMALL_H
#define CLOVER_QUANT_GEMM_SMALL_H

#include <stddef.h>
#include <stdint.h>

enum { GEMM_SMALL_MIN_ROWS = 3, GEMM_SMALL_MAX_ROWS = 8 };

/* y[r * n_out + o] = quant_act_dot_q8_0(w + o * row_bytes, xq + r * xq_bytes, n_in)
 * for o in [o0, o1), r < n_rows (any count; meant for 3..GEMM_SMALL_MAX_ROWS).
 * w: Q8_0 rows; xq: the rows in 8 bits (quant_act_quantize for Q8_0).
 * AVX2 CPUs only (quant_simd_active). */
void gemm_small_q8_0_avx2(const uint8_t *w, size_t row_bytes, size_t o0, size_t o1, size_t n_in, const uint8_t *xq,
                          size_t xq_bytes, size_t n_rows, float *y, size_t n_out);

#endif
