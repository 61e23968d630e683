/* default_model_env.c: $CLOVER_DEFAULT_MODEL, the file a command loads when
 * given no -m instead of the embedded model (the Python package reads the
 * same variable). Shared by the stage-0 and the final command. */
#include "default_model.h"

#include <stdlib.h>

const char *default_model_env(void) {
    const char *p = getenv("CLOVER_DEFAULT_MODEL");
    return p && *p ? p : NULL;
}
