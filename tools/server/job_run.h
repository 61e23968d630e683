/*
 * job_run.h: running one job on one session, as the scheduler thread:
 * generation, the token callback that turns ids into text (whole UTF-8
 * characters), applies the stop sequences and streams the deltas, and the
 * job's result. Separate from the queue so that a future batched runner
 * (several jobs in one pass) can reuse the per-job text handling.
 */
#ifndef CLOVER_SERVER_JOB_RUN_H
#define CLOVER_SERVER_JOB_RUN_H

#include "clover.h"
#include "job.h"

/* Runs j on s and marks it done (result or error); never fails otherwise. */
void job_run(job *j, const clover_model *m, clover_session *s);

/* Marks a job that will not run done with an error (status 503 / 500 ...). */
void job_fail(job *j, int status, const char *type, const char *code, const char *message);

#endif
