/* moe_avx2.c: SwiGLU 8 lanes at a time. */
#include "cpu/act.h"
#include "cpu/moe.h"
#include "cpu/simd_avx2.h"

void cpu_swiglu_avx2(float *h, const float *gate, const float *up, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(h + i, _mm256_mul_ps(v8_silu(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
    for (; i < n; i++) h[i] = cpu_silu(gate[i]) * up[i];
}
