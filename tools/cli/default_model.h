/* default_model.h: the default model, used when a command is given no -m.
 *
 * The `clover` binary carries one GGUF inside it (default_model_blob.S,
 * .incbin): the trained demo model models/clover-demo-q8_0.gguf when the
 * source tree has it, else the tiny random model `clover synth --preset tiny
 * --seed 0` makes at build time (CMakeLists.txt decides and names it).
 * $CLOVER_DEFAULT_MODEL, when set, names a GGUF file used instead: the test
 * suite points it at the tiny model, a user at a model of their own. */
#ifndef CLOVER_CLI_DEFAULT_MODEL_H
#define CLOVER_CLI_DEFAULT_MODEL_H

#include <stddef.h>

/* The embedded GGUF bytes, or NULL (stage-0 build, which has none). */
const void *default_model_bytes(size_t *len);

/* What is embedded, in words ("clover-demo-q8_0.gguf (trained demo model)"),
 * or NULL (stage-0 build). */
const char *default_model_name(void);

/* The embedded file's name ("clover-demo-q8_0.gguf"), or NULL (stage-0 build). */
const char *default_model_file(void);

/* $CLOVER_DEFAULT_MODEL when set and not empty, else NULL. */
const char *default_model_env(void);

#endif
