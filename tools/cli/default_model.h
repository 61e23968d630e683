/* default_model.h: the tiny synthetic model carried inside the `clover`
 * binary (made by `clover synth --preset tiny --seed 0` at build time). */
#ifndef CLOVER_CLI_DEFAULT_MODEL_H
#define CLOVER_CLI_DEFAULT_MODEL_H

#include <stddef.h>

/* The GGUF bytes, or NULL (stage-0 build, which has none). */
const void *default_model_bytes(size_t *len);

#endif
