/* rope_table.c: inverse frequencies and angles as torch computes them (rope_table.h). */
#include "model/rope_table.h"

#include <math.h>

void rope_inv_freq(float *inv_freq, size_t rot, float base) {
    for (size_t i = 0; i < rot / 2; i++) {
        float e = (float)(2 * i) / (float)rot;       /* arange(0, rot, 2).float() / rot */
        float p = (float)pow((double)base, (double)e); /* base ** e, rounded once */
        inv_freq[i] = 1.0f / p;                      /* 1.0 / (...) in float32 */
    }
}

void rope_cos_sin(float *cos_out, float *sin_out, const float *inv_freq, size_t half, int64_t pos) {
    float p = (float)pos; /* position_ids.float() */
    for (size_t i = 0; i < half; i++) {
        float a = p * inv_freq[i]; /* the float32 product of torch's K = 1 matmul */
        cos_out[i] = (float)cos((double)a);
        sin_out[i] = (float)sin((double)a);
    }
}
