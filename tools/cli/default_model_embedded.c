/* default_model_embedded.c: the bytes placed by default_model_blob.S (.incbin). */
#include "default_model.h"

extern const unsigned char clover_default_model_start[];
extern const unsigned char clover_default_model_end[];

const void *default_model_bytes(size_t *len) {
    *len = (size_t)(clover_default_model_end - clover_default_model_start);
    return clover_default_model_start;
}
