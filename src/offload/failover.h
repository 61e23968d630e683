/*
 * failover.h: a backend that runs its sessions on a device backend and
 * moves them to a fallback (the CPU) when the device fails, so a request
 * in flight completes instead of failing (ARCHITECTURE.md: state export
 * "moving a session to the CPU when a device fails mid-request").
 *
 * A call the device fails (CLOVER_E_DEVICE, or CLOVER_E_INTERNAL, which
 * is how the CUDA backend reports a failed runtime call) is run again on
 * the fallback for the sequences it failed, after each of their sessions
 * has moved there: its state exported from the device when the device can
 * still export it (backend.h: a failing call leaves the session as before
 * it, so this is the state of the last good pass), else recommitted from
 * the committed ids, which the failover keeps with the boundaries of every
 * commit call, so the recommit chunks exactly as the original commits did
 * and gives the same state bit for bit on the same backend. A resolve is
 * run again from the block and random state it started with. Request
 * errors (a bad id, a full context, KV out of memory, a cancel) are not
 * device failures: they come back as they are.
 *
 * A device that fails twice, or whose state is lost, is dropped for the
 * rest of the process with one log line (warning): its sessions move at
 * their next call and new sessions start on the fallback; a failure that
 * does not drop it logs one warning too (the sessions it moved). A failure at load (creating the
 * device backend) starts every session on the fallback, dropped too.
 * Fault injection (fault_inject.h) is consulted before every device call,
 * here and nowhere else.
 */
#ifndef CLOVER_OFFLOAD_FAILOVER_H
#define CLOVER_OFFLOAD_FAILOVER_H

#include <stdbool.h>

#include "backend/backend.h"

extern const backend_ops backend_failover;

/* A failover backend over primary (the device) and fallback (created on
 * the first failure, with the same cfg). Reads CLOVER_FAULT_INJECT. */
int failover_create(const clover_model *model, const backend_config *cfg, const backend_ops *primary,
                    const backend_ops *fallback, backend **out, clover_error *err);

/* The name of the backend a failover session runs on now. */
const char *failover_session_backend(const backend_session *s);
/* Whether the session has moved to the fallback. */
bool failover_session_moved(const backend_session *s);

/* Whether a device failure, not a request's own error. */
bool failover_is_device_error(int rc);

/* Whether the primary backend was dropped in this process; forget_drops
 * clears that (tests). */
bool failover_dropped(const backend_ops *primary);
void failover_forget_drops(void);

#endif
