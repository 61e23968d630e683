/* default_model_embedded.c: the bytes placed by default_model_blob.S (.incbin),
 * and their name and file name, which CMake passes as CLOVER_DEFAULT_MODEL_NAME
 * and CLOVER_DEFAULT_MODEL_FILE. */
#include "default_model.h"

#ifndef CLOVER_DEFAULT_MODEL_NAME
#define CLOVER_DEFAULT_MODEL_NAME "unnamed"
#endif
#ifndef CLOVER_DEFAULT_MODEL_FILE
#define CLOVER_DEFAULT_MODEL_FILE "default.gguf"
#endif

extern const unsigned char clover_default_model_start[];
extern const unsigned char clover_default_model_end[];

const void *default_model_bytes(size_t *len) {
    *len = (size_t)(clover_default_model_end - clover_default_model_start);
    return clover_default_model_start;
}

const char *default_model_name(void) { return CLOVER_DEFAULT_MODEL_NAME; }

const char *default_model_file(void) { return CLOVER_DEFAULT_MODEL_FILE; }
