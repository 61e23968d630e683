/* default_model_none.c: the stage-0 command, built before the model exists. */
#include "default_model.h"

const void *default_model_bytes(size_t *len) {
    *len = 0;
    return NULL;
}

const char *default_model_name(void) { return NULL; }

const char *default_model_file(void) { return NULL; }
