/*
 * expert_pool.h: the bookkeeping of a device's pool of routed experts
 * (--gpu-mem, issue 31), kept apart from any device so CI tests it on the
 * CPU; the CUDA backend (src/cuda/backend_cuda_experts.c) owns the memory
 * and the copies.
 *
 * The pool is one device buffer of n_slots fixed-size slots. A slot holds
 * one expert's gate, up and down rows, each part at a 256-byte aligned
 * offset, so "pool + part offset" is a stacked tensor of n_slots experts
 * with expert stride slot_bytes: the grouped expert kernels read slot s
 * where they read expert e (w + id * stride), and the pass hands them slot
 * ids in place of the routing's expert ids. No kernel changes; the routing
 * ids themselves stay as they are for the weighted sum (ascending expert
 * id, as the CPU sums), so the bits are those of the all-device run.
 *
 * Per layer step (expert_pool_step): the rows' routing ids in, the slot of
 * each id out (same positions), and the misses to copy (expert -> slot) in
 * ascending expert order; the slots come from expert_cache.h's policy (LRU,
 * LFU or SWEEP: the policies that never bypass, as a bypassed expert would
 * need a product outside the pool; the host's share, expert_pool_step_host,
 * is the caller's choice, not the policy's). A step never evicts its own experts, so the
 * pool holds at least one layer's experts (n_expert slots); the budget is
 * checked at creation and the pool's bytes (n_slots * slot_bytes) never
 * exceed it (asserted on every step).
 */
#ifndef CLOVER_BACKEND_EXPERT_POOL_H
#define CLOVER_BACKEND_EXPERT_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/expert_cache.h"
#include "clover.h"

enum { EXPERT_PART_GATE, EXPERT_PART_UP, EXPERT_PART_DOWN, EXPERT_PARTS };

typedef struct expert_pool_layout {
    uint64_t part_bytes[EXPERT_PARTS]; /* one expert's bytes of each part (the largest over the layers) */
    uint64_t part_off[EXPERT_PARTS];   /* its offset in a slot, 256-byte aligned */
    uint64_t slot_bytes;               /* a multiple of 256 */
} expert_pool_layout;

/* The layout of slots for experts of these part sizes (0 in a part is refused). */
int expert_pool_layout_make(const uint64_t part_bytes[EXPERT_PARTS], expert_pool_layout *out, clover_error *err);

/* The pool's budget from the device budget (--gpu-mem, bytes): what is left after the dense weights and
 * one session's KV, state and scratch (reserve), at most every expert's slot. A one-line error when the
 * dense part alone does not fit, or the rest cannot hold one layer's experts (a step needs them all). */
int expert_pool_budget(uint64_t gpu_mem, uint64_t dense, uint64_t reserve, const expert_pool_layout *lay,
                       uint32_t n_layer, uint32_t n_expert, uint64_t *pool_budget, clover_error *err);

typedef struct expert_copy {
    uint32_t expert;
    int32_t slot;
} expert_copy;

typedef struct expert_pool {
    expert_pool_layout lay;
    expert_cache cache;
    uint32_t n_layer, n_expert;
    uint64_t budget;     /* bytes the pool may hold */
    uint64_t pool_bytes; /* n_slots * slot_bytes, <= budget */
    int32_t *step_slot;  /* [n_expert] this step's slot of each expert, -1: not routed to */
    /* totals since creation */
    uint64_t steps, hits, misses, copied_bytes;
    uint64_t host_uses; /* misses the host computed instead (expert_pool_step_host), not in misses */
    uint8_t *pf;        /* [n_slots] filled by a prefetch and not used since */
    uint64_t prefetched, prefetch_hits; /* experts prefetched; of those, the ones a later step found (a hit) */
} expert_pool;

/* policy: EXPERT_LRU or EXPERT_LFU. */
int expert_pool_init(expert_pool *p, expert_policy policy, uint32_t n_layer, uint32_t n_expert,
                     const expert_pool_layout *lay, uint64_t budget, clover_error *err);
void expert_pool_free(expert_pool *p);
size_t expert_pool_slots(const expert_pool *p);
/* After a failed copy: no slot is trusted any more, every expert misses again. */
void expert_pool_forget(expert_pool *p);

/* One layer's step: ids [n] (every row's top-k, 0 <= id < n_expert) -> slots [n] (slot of ids[i]);
 * copies [n_expert at most]: the experts not resident, each with the slot to copy it into, ascending
 * expert order; *n_copies of them. */
int expert_pool_step(expert_pool *p, uint32_t layer, const int32_t *ids, size_t n, int32_t *slots,
                     expert_copy *copies, size_t *n_copies, clover_error *err);
/* Whether (layer, expert) is in a slot now (no use counted): a miss of the next step if not. */
bool expert_pool_resident(const expert_pool *p, uint32_t layer, uint32_t expert);
/* expert_pool_step where host ([n_expert] flags, NULL: none) marks the experts the host computes this step
 * (backend/expert_split.h): a marked expert not resident is not admitted (no slot taken, nothing evicted or
 * copied for it, still a miss at its next step) and its ids get host_slot; a marked resident one is a hit as
 * usual (the device computes it). */
int expert_pool_step_host(expert_pool *p, uint32_t layer, const int32_t *ids, size_t n, const uint8_t *host,
                          int32_t host_slot, int32_t *slots, expert_copy *copies, size_t *n_copies,
                          clover_error *err);

/* Prefetch inside the current step (after expert_pool_step[_host], before the next): each of experts[0..n)
 * of `layer` (the next layer's guessed routing; distinct) not resident takes a slot the current step has not
 * used (its own experts are never evicted, as within a step) and a copy is listed, in the order given; it
 * stops when no such slot is left. A later step's hit on a prefetched expert counts in prefetch_hits. */
int expert_pool_prefetch(expert_pool *p, uint32_t layer, const int32_t *experts, size_t n, expert_copy *copies,
                         size_t *n_copies, clover_error *err);

#endif
