/*
 * expert_cache.h: which routed experts a device keeps resident when they
 * do not all fit (issue 15's --gpu-mem): a map from (layer, expert) to a
 * slot of a byte-bounded pool, with the eviction policy chosen at
 * creation. Only the bookkeeping: the CUDA side owns the pool's memory,
 * copies an expert into the slot a miss returns, and reads a hit's slot.
 *
 * Policies (victim among the slots not touched in the current step, so a
 * layer's experts never evict each other; ties to the lowest slot):
 *   LRU    least recently used.
 *   LFU    least frequently used (counts of every access since creation,
 *          resident or not), then least recently used.
 *   ADMIT  LRU with frequency admission (TinyLFU's rule): a missing
 *          expert takes a slot only if it has been used more often than
 *          the LRU victim; otherwise it is a bypass (used from the host
 *          copy once, nothing evicted).
 *   OPT    Belady's optimum, the ceiling: the caller gives each access's
 *          next use (the simulator knows the future); the victim is the
 *          one used farthest ahead, and the new expert itself is bypassed
 *          when its next use is the farthest. No runtime can do better.
 *   SWEEP  LRU, except in a step that uses more than half of its layer's
 *          experts (a prompt chunk: every layer in turn, then again at the
 *          next chunk): there the victim is the MOST recently used slot the
 *          step has not touched. Under a cyclic sweep larger than the pool
 *          LRU evicts exactly what the sweep needs next and hits nothing;
 *          evicting the most recent keeps the older part of the sweep
 *          resident (for a pure cycle, Belady's choice). Decode steps, a
 *          few experts each, stay LRU.
 * A step is what the device computes at once (one layer of one pass):
 * expert_cache_step starts the next one (expert_cache_step_of with the
 * number of distinct experts it will use, for SWEEP).
 */
#ifndef CLOVER_BACKEND_EXPERT_CACHE_H
#define CLOVER_BACKEND_EXPERT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"

typedef enum expert_policy {
    EXPERT_LRU,
    EXPERT_LFU,
    EXPERT_ADMIT,
    EXPERT_OPT,
    EXPERT_SWEEP,
    EXPERT_N_POLICIES
} expert_policy;

#define EXPERT_NEVER UINT64_MAX /* next use of an expert not used again */

typedef struct expert_cache {
    expert_policy policy;
    uint32_t n_layer, n_expert;
    uint64_t slot_bytes, budget;
    size_t n_slots, n_filled;
    int32_t *slot_of;  /* [n_layer * n_expert] -1: not resident */
    uint32_t *key_of;  /* [n_slots] layer * n_expert + expert */
    uint64_t *last;    /* [n_slots] the clock of the last access */
    uint64_t *next;    /* [n_slots] OPT: the next use */
    uint64_t *touched; /* [n_slots] the step of the last access */
    uint64_t *freq;    /* [n_layer * n_expert] accesses so far */
    /* LRU, ADMIT and SWEEP: the filled slots in order of last access, least recent first (a doubly linked list
     * over the slots, -1 ends it), so the victim is the head and not a scan of every slot (expert_cache.c) */
    int32_t *lru_prev, *lru_next; /* [n_slots] */
    int32_t lru_head, lru_tail;
    int32_t step_first; /* the first slot the current step put at the list's tail (-1: none yet) */
    bool sweep;         /* SWEEP: the current step is a sweep (victims from the most recent end) */
    uint64_t clock, step;
    uint64_t hits, misses, evictions, bypasses;
} expert_cache;

typedef struct expert_access {
    bool hit;         /* resident: read slot */
    bool admitted;    /* a miss that took slot (copy the expert there) */
    int32_t slot;     /* -1 on a bypass */
    int64_t evicted;  /* the key that left slot (layer * n_expert + expert), -1: none */
} expert_access;

const char *expert_policy_name(expert_policy p);
/* By name (lru, lfu, admit, opt, sweep); -1 when unknown. */
int expert_policy_from_name(const char *name);

/* floor(budget / slot_bytes) slots (0 allowed: every access bypasses). */
int expert_cache_init(expert_cache *c, expert_policy policy, uint32_t n_layer, uint32_t n_expert, uint64_t slot_bytes,
                      uint64_t budget, clover_error *err);
void expert_cache_free(expert_cache *c);

void expert_cache_step(expert_cache *c);
/* expert_cache_step for a step that will use `uses` distinct experts of its layer (SWEEP reads it). */
void expert_cache_step_of(expert_cache *c, size_t uses);
/* Forgets every resident expert (the slots' contents are no longer known: a copy into one failed); the
 * counts and the access frequencies stay. */
void expert_cache_clear(expert_cache *c);

/* Whether a miss now would find a slot (an empty one, or a victim the current step has not touched; ADMIT and
 * OPT may still bypass it), without counting anything. */
bool expert_cache_has_room(const expert_cache *c);

/* One use of (layer, expert); next_use: the clock value of its next use
 * (accesses are numbered 0, 1, ... in order), only read by OPT. */
int expert_cache_access(expert_cache *c, uint32_t layer, uint32_t expert, uint64_t next_use, expert_access *out,
                        clover_error *err);

#endif
