/*
 * waiter.h: notices clients that leave while their connection is
 * suspended. A connection waiting for the model is suspended (it holds no
 * MHD pool thread), and MHD does not watch a suspended connection's
 * socket; one thread here looks at every such socket every 50 ms and, when
 * its client has gone, cancels the job and resumes the connection so that
 * MHD closes it. Registered jobs are only looked at while suspended.
 */
#ifndef CLOVER_SERVER_WAITER_H
#define CLOVER_SERVER_WAITER_H

#include "job.h"

typedef struct waiter waiter;

/* Returns 0, or -1 (out of memory, or no thread). */
int waiter_start(waiter **out);
/* Watches j's client on socket fd (takes a reference to j). 0 or -1 (out of memory). */
int waiter_add(waiter *w, job *j, int fd);
/* Stops watching j (drops the reference). */
void waiter_remove(waiter *w, job *j);
/* Joins the thread and frees (every job must have been removed). */
void waiter_free(waiter *w);

#endif
