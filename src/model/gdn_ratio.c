/* gdn_ratio.c: ln(b / B) of the GDN block's history slot (gdn_ratio.h). */
#include "model/gdn_ratio.h"

#include <assert.h>
#include <math.h>

float gdn_block_ln_ratio(size_t b, uint32_t block_size) {
    assert(b >= 1 && block_size >= 1);
    return (float)log((double)b / (double)block_size);
}
