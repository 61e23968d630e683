/*
 * fuzz_gate_header.c: libFuzzer over the gate's header check: any bytes
 * give 0, 1 or one of the listed statuses with a reason, never a read past
 * the bytes given (ASan), and the answer for a prefix that already fails
 * does not turn into acceptance when more bytes follow.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const gate_options o = {.max_header = 512, .max_url = 128, .max_fields = 8, .deadline_s = 1};
    char *buf = malloc(size ? size : 1); /* exact size: ASan sees any overread */
    if (!buf) return 0;
    memcpy(buf, data, size);
    char why[160];
    int rc = gate_check_header(buf, size, &o, why, sizeof why);
    if (!(rc == 0 || rc == 1 || rc == 400 || rc == 411 || rc == 413 || rc == 414 || rc == 431 || rc == 505))
        abort();
    if (rc > 1 && !why[0]) abort();
    for (size_t k = size / 2; k < size && rc > 1; k++) { /* a refused prefix stays refused */
        int p = gate_check_header(buf, k, &o, why, sizeof why);
        if (p == 0) abort();
    }
    free(buf);
    return 0;
}
