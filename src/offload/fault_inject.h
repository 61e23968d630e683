/*
 * fault_inject.h: a device failure on request, for testing the failover
 * (failover.h) without a failing device. CLOVER_FAULT_INJECT=KIND:N[:MODE]
 * makes the N-th call of that kind to the device backend fail (before it
 * runs, so the device's state is as after the last good call):
 *   KIND  load     the backend's creation (N must be 1)
 *         commit   commit calls (prompt chunks, block commits, scoring)
 *         preview  preview and resolve calls
 *         call     any of commit, preview, resolve, counted together
 *         full     session creations: from the N-th on, the device refuses
 *                  them as out of memory (CLOVER_E_NOMEM, not a device
 *                  failure): a device whose memory holds N-1 sessions, for
 *                  the server's admission (no MODE)
 *   MODE  once     only that call fails; the state can still be exported
 *         dead     that call and every later one fail, and the state is
 *                  lost (export fails too): the device is gone
 * A diagnostic, like every environment variable of clover: the one place
 * the injection lives is the failover's dispatch to its device backend.
 */
#ifndef CLOVER_OFFLOAD_FAULT_INJECT_H
#define CLOVER_OFFLOAD_FAULT_INJECT_H

#include <stdbool.h>
#include <stddef.h>

#include "clover.h"

enum { FAULT_LOAD = 0, FAULT_COMMIT = 1, FAULT_PREVIEW = 2, FAULT_CALL = 3, FAULT_FULL = 4 };

typedef struct fault_plan {
    bool armed;   /* a plan was given */
    int kind;     /* FAULT_* */
    size_t n;     /* the failing call, 1-based */
    bool dead;    /* MODE dead */
    size_t count; /* calls of the kind seen so far */
    bool fired;
} fault_plan;

/* Parses text (NULL or empty: no plan). A bad value is CLOVER_E_INVALID
 * naming the variable and the expected form. */
int fault_plan_parse(fault_plan *p, const char *text, clover_error *err);

/* The plan of CLOVER_FAULT_INJECT (read at each call: tests change it). */
int fault_plan_from_env(fault_plan *p, clover_error *err);

/* Whether the call about to be made (op: FAULT_LOAD, FAULT_COMMIT or
 * FAULT_PREVIEW) fails; a failing call fills err with the reason. */
bool fault_hit(fault_plan *p, int op, clover_error *err);

/* Whether the session creation about to be made is refused (kind full);
 * err gets CLOVER_E_NOMEM and the reason. */
bool fault_full(fault_plan *p, clover_error *err);

/* Whether the device's state is gone (a dead plan that fired). */
bool fault_state_lost(const fault_plan *p);

#endif
