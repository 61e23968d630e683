/*
 * job_run.h: running one job on one session, as the scheduler thread:
 * generation, the token callback that turns ids into text (whole UTF-8
 * characters), applies the stop sequences and streams the deltas, and the
 * job's result. A job runs as a clover_request: job_start makes it,
 * the scheduler steps it together with the other running jobs
 * (clover_batch_step), job_end settles it; job_run is the three for one
 * job alone.
 */
#ifndef CLOVER_SERVER_JOB_RUN_H
#define CLOVER_SERVER_JOB_RUN_H

#include "clover.h"
#include "job.h"

typedef struct job_runner job_runner;

/* Starts j on s: the engine request and its text path. NULL when j could
 * not start (it is then done, with its error). */
job_runner *job_start(job *j, const clover_model *m, clover_session *s);
clover_request *job_runner_request(job_runner *jr);
clover_session *job_runner_session(job_runner *jr);
/* After its request is done: the answer (or error), the stream's end, the
 * job marked done; frees jr. */
void job_end(job_runner *jr);

/* Runs j on s alone and marks it done (result or error); never fails otherwise. */
void job_run(job *j, const clover_model *m, clover_session *s);

/* Marks a job that will not run done with an error (status 503 / 500 ...). */
void job_fail(job *j, int status, const char *type, const char *code, const char *message);

#endif
