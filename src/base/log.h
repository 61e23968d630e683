/*
 * log.h: the library's diagnostic lines. They go to the hook installed with
 * clover_set_log (stderr by default); never used to report a failure, which
 * travels through clover_error instead.
 */
#ifndef CLOVER_BASE_LOG_H
#define CLOVER_BASE_LOG_H

#include "base/error.h"

enum { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

void log_line(int level, const char *fmt, ...) CLOVER_PRINTF(2, 3);

#endif
