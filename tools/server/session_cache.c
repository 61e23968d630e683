/*
 * session_cache.c: a linear scan over a handful of sessions (the cap is
 * small: each session holds a whole sequence's state and its prompt
 * snapshot). An empty session is one with neither, so a new conversation
 * does not take another's snapshot while a free session is left.
 */
#include "session_cache.h"

#include <stdlib.h>
#include <string.h>

int session_cache_init(session_cache *c, const clover_model *m, size_t cap, const clover_session_params *p,
                       clover_error *err) {
    memset(c, 0, sizeof *c);
    c->model = m;
    c->params = *p;
    c->cap = cap ? cap : 1;
    c->sessions = calloc(c->cap, sizeof *c->sessions);
    c->last_used = calloc(c->cap, sizeof *c->last_used);
    c->busy = calloc(c->cap, 1);
    if (!c->sessions || !c->last_used || !c->busy) {
        session_cache_free(c);
        if (err) {
            err->code = CLOVER_E_NOMEM;
            strcpy(err->message, "session cache: out of memory");
        }
        return CLOVER_E_NOMEM;
    }
    int rc = clover_engine_create(&c->engine, m, &c->params, err);
    if (!rc) rc = clover_engine_session_create(&c->sessions[0], c->engine, &c->params, err);
    if (rc) {
        session_cache_free(c);
        return rc;
    }
    c->n = 1;
    return CLOVER_OK;
}

void session_cache_free(session_cache *c) {
    for (size_t i = 0; i < c->n; i++)
        clover_session_free(c->sessions[i]);
    clover_engine_free(c->engine);
    free(c->sessions);
    free(c->last_used);
    free(c->busy);
    memset(c, 0, sizeof *c);
}

static clover_session *use(session_cache *c, size_t i) {
    c->last_used[i] = ++c->clock;
    c->busy[i] = 1;
    return c->sessions[i];
}

void session_cache_release(session_cache *c, clover_session *s) {
    for (size_t i = 0; i < c->n; i++)
        if (c->sessions[i] == s) c->busy[i] = 0;
}

clover_session *session_cache_pick(session_cache *c, const int32_t *prompt, size_t n, clover_error *err) {
    size_t best = c->n, best_len = 0, empty = c->n, lru = c->n;
    for (size_t i = 0; i < c->n; i++) {
        if (c->busy[i]) continue;
        size_t len = clover_session_match(c->sessions[i], prompt, n); /* committed ids or snapshot */
        if (len > best_len) {
            best = i;
            best_len = len;
        } else if (len == 0 && empty == c->n && clover_session_length(c->sessions[i]) == 0 &&
                   clover_session_snapshot_length(c->sessions[i]) == 0) {
            empty = i;
        }
        if (lru == c->n || c->last_used[i] < c->last_used[lru]) lru = i;
    }
    if (best < c->n) return use(c, best);
    if (empty < c->n) return use(c, empty);
    if (c->n < c->cap) {
        clover_error e2 = {0};
        if (!clover_engine_session_create(&c->sessions[c->n], c->engine, &c->params, &e2)) {
            c->n++;
            return use(c, c->n - 1);
        }
        /* admission by device memory: no room for another session (CLOVER_E_NOMEM): an idle one makes
         * room (its kept prefix is lost), else the caller answers 503 */
        if (e2.code != CLOVER_E_NOMEM || lru == c->n) {
            if (err) *err = e2;
            return NULL;
        }
    }
    if (lru == c->n) {
        if (err) {
            err->code = CLOVER_E_INTERNAL;
            strcpy(err->message, "session cache: every session is busy");
        }
        return NULL;
    }
    clover_session_reset(c->sessions[lru]);
    return use(c, lru);
}
