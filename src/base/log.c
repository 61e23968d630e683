/* log.c: routes diagnostic lines to the user's hook or to stderr. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>

static clover_log_fn log_hook;
static void *log_user;
static int log_max_level = LOG_WARN;

void clover_set_log(clover_log_fn fn, void *user, int max_level) {
    log_hook = fn;
    log_user = user;
    log_max_level = fn ? max_level : LOG_WARN;
}

void log_line(int level, const char *fmt, ...) {
    if (level > log_max_level) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (log_hook) {
        log_hook(level, line, log_user);
    } else {
        static const char *const names[] = {"error", "warning", "info", "debug"};
        fprintf(stderr, "clover: %s: %s\n", names[level < 0 ? 0 : level > 3 ? 3 : level], line);
    }
}
