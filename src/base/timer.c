/* timer.c: CLOCK_MONOTONIC, immune to wall-clock jumps. */
#include "base/timer.h"

#include <time.h>

double timer_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
