/* timer.h: a monotonic clock in seconds, for statistics and benchmarks. */
#ifndef CLOVER_BASE_TIMER_H
#define CLOVER_BASE_TIMER_H

double timer_now(void);

#endif
