/*
 * session_cache.h: the few sessions the scheduler keeps, for prefix reuse.
 *
 * A conversation that continues an earlier one renders to a prompt whose
 * ids start with what an earlier request committed in its session; running
 * it on that session commits only the tail. The engine can only extend a
 * sequence (a GDN state cannot be rewound), so a session is reusable when
 * its committed ids, or its prompt snapshot's ids (the conversation before
 * the last generation prompt: the part a re-rendered chat keeps), are a
 * whole prefix of the new prompt (clover_session_match); the longest wins.
 * Otherwise an empty session, a new one (up to the cap) or the least
 * recently used one is taken. Sessions running a request are busy and
 * never picked; the sessions live on one clover_engine (one backend object
 * for the model: the weights, threads and scratch shared), so the scheduler
 * can step every running request in one batched pass. The cap counts the
 * reuse cache plus one session per running request. Owned by the
 * scheduler thread: no locking.
 */
#ifndef CLOVER_SERVER_SESSION_CACHE_H
#define CLOVER_SERVER_SESSION_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "clover.h"

typedef struct session_cache {
    const clover_model *model;
    clover_session_params params;
    clover_engine *engine;     /* every session's */
    clover_session **sessions; /* [cap], the first n created */
    uint64_t *last_used;       /* [cap] */
    unsigned char *busy;       /* [cap] running a request */
    size_t n, cap;
    uint64_t clock;
} session_cache;

/* Creates the first session now, so that a bad setting fails at start-up. */
int session_cache_init(session_cache *c, const clover_model *m, size_t cap, const clover_session_params *p,
                       clover_error *err);
void session_cache_free(session_cache *c);

/* The session to run prompt[0..n) on (see above), marked busy. NULL with
 * err set when a new session cannot be created or every one is busy. */
clover_session *session_cache_pick(session_cache *c, const int32_t *prompt, size_t n, clover_error *err);
/* The request on s ended: s may be picked again. */
void session_cache_release(session_cache *c, clover_session *s);

#endif
