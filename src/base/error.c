/* error.c: formatting of clover_error messages and status names. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int error_set(clover_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int error_prefix(clover_error *err, const char *fmt, ...) {
    if (!err) return CLOVER_E_INTERNAL;
    /* Build "prefix: old" in a scratch buffer, then copy back truncated to fit. */
    char old[sizeof err->message];
    memcpy(old, err->message, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    size_t used = (size_t)n < sizeof err->message ? (size_t)n : sizeof err->message - 1;
    size_t room = sizeof err->message - used;
    if (room > 2) {
        memcpy(err->message + used, ": ", 2);
        used += 2;
        room -= 2;
        size_t len = strnlen(old, sizeof old);
        if (len > room - 1) len = room - 1;
        memcpy(err->message + used, old, len);
        err->message[used + len] = '\0';
    }
    return err->code;
}

void error_clear(clover_error *err) {
    if (err) {
        err->code = CLOVER_OK;
        err->message[0] = '\0';
    }
}

const char *clover_status_name(int code) {
    switch (code) {
    case CLOVER_OK: return "ok";
    case CLOVER_E_INVALID: return "invalid argument";
    case CLOVER_E_IO: return "i/o error";
    case CLOVER_E_FORMAT: return "malformed file";
    case CLOVER_E_UNSUPPORTED: return "unsupported";
    case CLOVER_E_NOMEM: return "out of memory";
    case CLOVER_E_CANCELLED: return "cancelled";
    case CLOVER_E_INTERNAL: return "internal error";
    case CLOVER_E_DEVICE: return "device failure";
    default: return "unknown status";
    }
}

const char *clover_version(void) { return CLOVER_VERSION_STRING; }
