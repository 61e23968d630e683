/*
 * test_expert_pool.c: the device expert pool's bookkeeping (backend/expert_pool.h, --gpu-mem) on the CPU:
 *  - the slot layout and the budget arithmetic against values worked out by hand, and its one-line refusals
 *    (the dense part alone too big; too little left for one layer's experts);
 *  - a hand-made trace of four layer steps under LRU and under LFU: each step's slots, copies (expert, slot)
 *    and evictions, computed by hand in the comments (5 slots, 2 layers of 4 experts);
 *  - random traces at every budget from one layer to every expert: an independent shadow of the pool's
 *    content (slot -> expert, updated only by the copies the step asks for) must hold, after each step's
 *    copies, the expert every id is mapped to; a step's experts never share a slot; slots stay below
 *    n_slots and the pool's bytes never above the budget;
 *  - the same with experts the host computes (expert_pool_step_host): never admitted, never copied;
 *  - prefetch inside a step (expert_pool_prefetch) by hand: its copies, its counts, the step's own kept.
 */
#include "backend/expert_pool.h"

#include <string.h>

#include "base/rng.h"
#include "test.h"

static expert_pool_layout layout(void) {
    const uint64_t parts[3] = {100, 100, 60};
    expert_pool_layout l;
    clover_error err = {0};
    CHECK(expert_pool_layout_make(parts, &l, &err) == 0);
    return l;
}

static void layout_and_budget(void) {
    expert_pool_layout l = layout();
    /* parts at 0, 256, 512; the slot ends at 572, rounded up to 768 */
    CHECK(l.part_off[0] == 0 && l.part_off[1] == 256 && l.part_off[2] == 512 && l.slot_bytes == 768);
    clover_error err = {0};
    const uint64_t zero[3] = {10, 0, 10};
    expert_pool_layout z;
    CHECK(expert_pool_layout_make(zero, &z, &err) == CLOVER_E_INVALID);
    uint64_t b = 1;
    /* 10000 - 2000 dense - 1000 reserve = 7000 left, more than all 2 x 4 experts (6144): capped */
    CHECK(expert_pool_budget(10000, 2000, 1000, &l, 2, 4, &b, &err) == 0 && b == 6144);
    /* 6100: 3100 left, one layer is 3072: the pool gets 3100 */
    CHECK(expert_pool_budget(6100, 2000, 1000, &l, 2, 4, &b, &err) == 0 && b == 3100);
    /* 6000: 3000 left < 3072 */
    CHECK(expert_pool_budget(6000, 2000, 1000, &l, 2, 4, &b, &err) == CLOVER_E_NOMEM && b == 0);
    CHECK_MSG(strstr(err.message, "less than one layer's 4 experts") != NULL, "%s", err.message);
    /* the dense part alone */
    CHECK(expert_pool_budget(1500, 2000, 0, &l, 2, 4, &b, &err) == CLOVER_E_NOMEM);
    CHECK_MSG(strstr(err.message, "dense weights alone") != NULL && strstr(err.message, "--gpu-mem") != NULL, "%s",
              err.message);
    /* a pool below one layer's experts, and a policy that bypasses, are refused */
    expert_pool p;
    CHECK(expert_pool_init(&p, EXPERT_LRU, 2, 4, &l, 3071, &err) == CLOVER_E_NOMEM);
    CHECK(expert_pool_init(&p, EXPERT_ADMIT, 2, 4, &l, 6144, &err) == CLOVER_E_INVALID);
    CHECK(expert_pool_init(&p, EXPERT_OPT, 2, 4, &l, 6144, &err) == CLOVER_E_INVALID);
}

typedef struct step_want {
    uint32_t layer;
    int32_t ids[4];
    size_t n;
    int32_t slots[4];
    expert_copy copies[4];
    size_t n_copies;
} step_want;

static void trace(expert_policy pol, const step_want *w, size_t n_steps, uint64_t hits, uint64_t misses,
                  uint64_t evictions) {
    expert_pool_layout l = layout();
    expert_pool p;
    clover_error err = {0};
    /* 5 slots of 768 (3840 bytes) in 4540 */
    CHECK(expert_pool_init(&p, pol, 2, 4, &l, 5 * 768 + 700, &err) == 0);
    CHECK(expert_pool_slots(&p) == 5 && p.pool_bytes == 3840 && p.pool_bytes <= p.budget);
    for (size_t s = 0; s < n_steps; s++) {
        int32_t slots[4];
        expert_copy cp[4];
        size_t nc = 99;
        CHECK(expert_pool_step(&p, w[s].layer, w[s].ids, w[s].n, slots, cp, &nc, &err) == 0);
        bool ok = nc == w[s].n_copies && !memcmp(slots, w[s].slots, w[s].n * sizeof *slots);
        for (size_t i = 0; ok && i < nc; i++)
            ok = cp[i].expert == w[s].copies[i].expert && cp[i].slot == w[s].copies[i].slot;
        CHECK_MSG(ok, "%s step %zu: %zu copies, slots %d %d %d %d", expert_policy_name(pol), s, nc, slots[0],
                  slots[1], w[s].n > 2 ? slots[2] : -9, w[s].n > 3 ? slots[3] : -9);
    }
    CHECK_MSG(p.hits == hits && p.misses == misses && p.cache.evictions == evictions && p.steps == n_steps,
              "%s: %llu hits %llu misses %llu evictions", expert_policy_name(pol), (unsigned long long)p.hits,
              (unsigned long long)p.misses, (unsigned long long)p.cache.evictions);
    CHECK(p.copied_bytes == misses * 260);
    /* forgotten (a failed copy): the last step again misses every expert, slots refilled from 0 */
    expert_pool_forget(&p);
    int32_t slots[4];
    expert_copy cp[4];
    size_t nc = 0;
    const step_want *last = &w[n_steps - 1];
    CHECK(expert_pool_step(&p, last->layer, last->ids, last->n, slots, cp, &nc, &err) == 0);
    CHECK(nc == 4 && cp[0].slot == 0 && cp[3].slot == 3 && slots[0] == 0 && slots[3] == 3);
    expert_pool_free(&p);
}

/* keys (layer, expert); @t the access clock (one per distinct expert of a step, ascending expert order) */
static const step_want steps_lru[] = {
    /* 1: layer 0 rows {2,0} {0,1}: experts 0 1 2 miss, fill slots 0 1 2 (@0 @1 @2) */
    {0, {2, 0, 0, 1}, 4, {2, 0, 0, 1}, {{0, 0}, {1, 1}, {2, 2}}, 3},
    /* 2: layer 1 {3,1}: 1 -> slot 3 @3, 3 -> slot 4 @4 */
    {1, {3, 1}, 2, {4, 3}, {{1, 3}, {3, 4}}, 2},
    /* 3: layer 0 {1,3}: (0,1) hits slot 1 @5; (0,3) misses, the LRU of the others is slot 0 ((0,0) @0) @6 */
    {0, {1, 3}, 2, {1, 0}, {{3, 0}}, 1},
    /* 4: layer 1 {0,1,2,3}: (1,0) misses: LRU slot 2 ((0,2) @2) @7; (1,1) hits slot 3 @8; (1,2) misses: the
     * untouched slots 0 @6, 1 @5, 4 @4: slot 4, which held (1,3) @9; (1,3) misses: 0 @6, 1 @5: slot 1 @10 */
    {1, {0, 1, 2, 3}, 4, {2, 3, 4, 1}, {{0, 2}, {2, 4}, {3, 1}}, 3},
};

static const step_want steps_lfu[] = {
    {0, {2, 0, 0, 1}, 4, {2, 0, 0, 1}, {{0, 0}, {1, 1}, {2, 2}}, 3},
    {1, {3, 1}, 2, {4, 3}, {{1, 3}, {3, 4}}, 2},
    /* 3: (0,1) hits (used twice); (0,3): every other key used once, the oldest is slot 0 */
    {0, {1, 3}, 2, {1, 0}, {{3, 0}}, 1},
    /* 4: (1,0): once-used untouched slots 0 (0,3)@6, 2 (0,2)@2, 3 (1,1)@3, 4 (1,3)@4 -> slot 2; (1,1) hits;
     * (1,2): once-used 0 @6, 4 @4 (slot 1 holds (0,1), used twice) -> slot 4; (1,3): slot 0 (once) before
     * slot 1 (twice), where LRU took slot 1 */
    {1, {0, 1, 2, 3}, 4, {2, 3, 4, 0}, {{0, 2}, {2, 4}, {3, 0}}, 3},
};

static void hand_lru(void) { trace(EXPERT_LRU, steps_lru, 4, 2, 9, 4); }
static void hand_lfu(void) { trace(EXPERT_LFU, steps_lfu, 4, 2, 9, 4); }

/* Random routing (skewed: low ids more often), 2 rows x k 3 or 40 rows, 6 layers of 16 experts; every
 * budget from one layer's 16 slots to all 96. */
static void shadow(void) {
    enum { L = 6, E = 16, K = 3, ROWS = 40 };
    expert_pool_layout l = layout();
    for (expert_policy pol = EXPERT_LRU; pol <= EXPERT_LFU; pol++)
        for (uint64_t ns = E; ns <= L * E; ns += 5) {
            expert_pool p;
            clover_error err = {0};
            const uint64_t budget = ns * l.slot_bytes + 17;
            CHECK(expert_pool_init(&p, pol, L, E, &l, budget, &err) == 0);
            int64_t content[L * E]; /* slot -> layer * E + expert, -1 empty */
            for (size_t i = 0; i < L * E; i++) content[i] = -1;
            rng_state r;
            rng_seed(&r, 42 + ns);
            bool ok = expert_pool_slots(&p) == ns;
            for (int step = 0; step < 300 && ok; step++) {
                const uint32_t layer = (uint32_t)step % L;
                const size_t rows = step % 7 == 0 ? ROWS : 2;
                int32_t ids[ROWS * K], slots[ROWS * K];
                for (size_t rr = 0; rr < rows; rr++)
                    for (size_t j = 0; j < K; j++) { /* distinct within a row, skewed */
                        int32_t e;
                        bool dup;
                        do {
                            uint64_t a = rng_next(&r) % E, b = rng_next(&r) % E;
                            e = (int32_t)(a < b ? a : b);
                            dup = false;
                            for (size_t q = 0; q < j; q++) dup |= ids[rr * K + q] == e;
                        } while (dup);
                        ids[rr * K + j] = e;
                    }
                expert_copy cp[E];
                size_t nc = 0;
                ok = expert_pool_step(&p, layer, ids, rows * K, slots, cp, &nc, &err) == 0;
                for (size_t i = 0; ok && i < nc; i++) {
                    ok = cp[i].slot >= 0 && (uint64_t)cp[i].slot < ns && (i == 0 || cp[i].expert > cp[i - 1].expert);
                    if (ok) content[cp[i].slot] = (int64_t)layer * E + cp[i].expert;
                }
                for (size_t i = 0; ok && i < rows * K; i++) {
                    ok = slots[i] >= 0 && (uint64_t)slots[i] < ns && content[slots[i]] == (int64_t)layer * E + ids[i];
                    for (size_t q = 0; ok && q < rows * K; q++) ok = (ids[q] == ids[i]) == (slots[q] == slots[i]);
                }
                ok = ok && p.pool_bytes <= budget && p.pool_bytes == ns * l.slot_bytes;
            }
            CHECK_MSG(ok, "%s, %llu slots: the shadow disagrees (%s)", expert_policy_name(pol),
                      (unsigned long long)ns, err.message);
            /* with every expert resident, no eviction ever */
            if (ns == L * E) CHECK(p.cache.evictions == 0);
            expert_pool_free(&p);
        }
}

static void bad_ids(void) {
    expert_pool_layout l = layout();
    expert_pool p;
    clover_error err = {0};
    CHECK(expert_pool_init(&p, EXPERT_LRU, 2, 4, &l, 8 * 768, &err) == 0);
    int32_t ids[2] = {1, 4}, slots[2];
    expert_copy cp[4];
    size_t nc;
    CHECK(expert_pool_step(&p, 0, ids, 2, slots, cp, &nc, &err) == CLOVER_E_INTERNAL);
    CHECK_MSG(strstr(err.message, "expert 4 of 4") != NULL, "%s", err.message);
    ids[1] = 0;
    CHECK(expert_pool_step(&p, 2, ids, 2, slots, cp, &nc, &err) == CLOVER_E_INVALID);
    expert_pool_free(&p);
}

/* expert_pool_step_host: random routing and random host marks (a third of the experts a step); an independent
 * shadow of the slots as in `shadow`, and of residency: a marked expert that was not resident gets the host's
 * slot id, is neither copied nor admitted (still not resident after the step, counted in host_uses), and
 * evicts nothing; a marked resident one is read from its slot as any hit. */
static void shadow_host(void) {
    enum { L = 5, E = 12, K = 3, ROWS = 9, HOST = 1000 };
    expert_pool_layout l = layout();
    for (uint64_t ns = E; ns <= L * E; ns += 7) {
        expert_pool p;
        clover_error err = {0};
        CHECK(expert_pool_init(&p, EXPERT_LRU, L, E, &l, ns * l.slot_bytes, &err) == 0);
        int64_t content[L * E];
        for (size_t i = 0; i < L * E; i++) content[i] = -1;
        rng_state r;
        rng_seed(&r, 7 + ns);
        bool ok = true;
        uint64_t host_uses = 0, marked_misses = 0;
        for (int step = 0; step < 200 && ok; step++) {
            const uint32_t layer = (uint32_t)(rng_next(&r) % L);
            const size_t rows = 1 + rng_next(&r) % ROWS;
            int32_t ids[ROWS * K], slots[ROWS * K];
            for (size_t rr = 0; rr < rows; rr++)
                for (size_t j = 0; j < K; j++) {
                    int32_t e;
                    bool dup;
                    do {
                        e = (int32_t)(rng_next(&r) % E);
                        dup = false;
                        for (size_t q = 0; q < j; q++) dup |= ids[rr * K + q] == e;
                    } while (dup);
                    ids[rr * K + j] = e;
                }
            uint8_t host[E], was[E], used[E] = {0};
            for (size_t e = 0; e < E; e++) {
                host[e] = rng_next(&r) % 3 == 0;
                was[e] = expert_pool_resident(&p, layer, (uint32_t)e);
                /* residency as the shadow sees it */
                bool sh = false;
                for (size_t q = 0; q < ns; q++) sh |= content[q] == (int64_t)layer * E + (int64_t)e;
                ok = ok && sh == (was[e] != 0);
            }
            for (size_t i = 0; i < rows * K; i++) used[ids[i]] = 1;
            for (size_t e = 0; e < E; e++) marked_misses += used[e] && host[e] && !was[e];
            expert_copy cp[E];
            size_t nc = 0;
            ok = ok && expert_pool_step_host(&p, layer, ids, rows * K, host, HOST, slots, cp, &nc, &err) == 0;
            for (size_t i = 0; ok && i < nc; i++) {
                ok = cp[i].slot >= 0 && (uint64_t)cp[i].slot < ns && !(host[cp[i].expert] && !was[cp[i].expert]);
                if (ok) content[cp[i].slot] = (int64_t)layer * E + cp[i].expert;
            }
            for (size_t i = 0; ok && i < rows * K; i++) {
                const int32_t e = ids[i];
                if (host[e] && !was[e])
                    ok = slots[i] == HOST && !expert_pool_resident(&p, layer, (uint32_t)e);
                else
                    ok = slots[i] >= 0 && (uint64_t)slots[i] < ns && content[slots[i]] == (int64_t)layer * E + e;
            }
            host_uses = p.host_uses;
        }
        CHECK_MSG(ok && host_uses == marked_misses && marked_misses > 0, "%llu slots: host uses %llu of %llu (%s)",
                  (unsigned long long)ns, (unsigned long long)host_uses, (unsigned long long)marked_misses,
                  err.message);
        expert_pool_free(&p);
    }
}

/* expert_pool_prefetch by hand (LRU, 2 layers of 4 experts):
 *  6 slots: step L0 {0, 1} fills s0, s1; prefetch L1 {2, 3} fills s2, s3 (2 copies, 2 prefetched); step L1
 *  {0, 2}: 2 a hit on a prefetched slot (prefetch_hits 1), 0 a miss into s4; a second step L1 {2} is a plain hit.
 *  5 slots: step L0 {0, 1, 2, 3} fills s0..s3; prefetch L1 {0, 1}: 0 takes the empty s4, then every slot is the
 *  step's own: it stops (1 copy, no error, no eviction of L0's experts).
 *  4 slots: step L0 of all 4: prefetch lists nothing. A resident expert is not prefetched again; bad ids refused. */
static void prefetch(void) {
    expert_pool_layout l = layout();
    expert_pool p;
    clover_error err = {0};
    int32_t slots[8];
    expert_copy cp[8];
    size_t nc = 9;
    CHECK(expert_pool_init(&p, EXPERT_LRU, 2, 4, &l, 6 * l.slot_bytes, &err) == 0);
    const int32_t a[2] = {0, 1}, g[2] = {2, 3}, b[2] = {0, 2}, c[1] = {2};
    CHECK(expert_pool_step(&p, 0, a, 2, slots, cp, &nc, &err) == 0 && nc == 2);
    CHECK(expert_pool_prefetch(&p, 1, g, 2, cp, &nc, &err) == 0 && nc == 2);
    CHECK(cp[0].expert == 2 && cp[0].slot == 2 && cp[1].expert == 3 && cp[1].slot == 3 && p.prefetched == 2);
    CHECK(expert_pool_resident(&p, 1, 2) && expert_pool_resident(&p, 1, 3) && expert_pool_resident(&p, 0, 0));
    CHECK(expert_pool_prefetch(&p, 1, g, 1, cp, &nc, &err) == 0 && nc == 0 && p.prefetched == 2); /* resident */
    CHECK(expert_pool_step(&p, 1, b, 2, slots, cp, &nc, &err) == 0);
    CHECK(nc == 1 && cp[0].expert == 0 && cp[0].slot == 4 && slots[0] == 4 && slots[1] == 2);
    CHECK_EQ_INT(p.prefetch_hits, 1);
    CHECK(expert_pool_step(&p, 1, c, 1, slots, cp, &nc, &err) == 0 && nc == 0 && p.prefetch_hits == 1);
    expert_pool_free(&p);

    CHECK(expert_pool_init(&p, EXPERT_LRU, 2, 4, &l, 5 * l.slot_bytes, &err) == 0);
    const int32_t all[4] = {0, 1, 2, 3};
    CHECK(expert_pool_step(&p, 0, all, 4, slots, cp, &nc, &err) == 0 && nc == 4);
    CHECK(expert_pool_prefetch(&p, 1, a, 2, cp, &nc, &err) == 0);
    CHECK(nc == 1 && cp[0].expert == 0 && cp[0].slot == 4 && p.prefetched == 1);
    for (uint32_t e = 0; e < 4; e++) CHECK(expert_pool_resident(&p, 0, e)); /* the step's own stay */
    expert_pool_free(&p);

    CHECK(expert_pool_init(&p, EXPERT_LRU, 2, 4, &l, 4 * l.slot_bytes, &err) == 0);
    CHECK(expert_pool_step(&p, 0, all, 4, slots, cp, &nc, &err) == 0 && nc == 4);
    const uint64_t cm0 = p.cache.misses, cl0 = p.cache.clock;
    CHECK(expert_pool_prefetch(&p, 1, a, 2, cp, &nc, &err) == 0 && nc == 0 && p.prefetched == 0);
    CHECK(p.cache.misses == cm0 && p.cache.clock == cl0); /* no room: nothing counted in the cache either */
    const int32_t bad[1] = {4};
    CHECK(expert_pool_prefetch(&p, 1, bad, 1, cp, &nc, &err) == CLOVER_E_INTERNAL);
    CHECK(expert_pool_prefetch(&p, 2, a, 1, cp, &nc, &err) == CLOVER_E_INVALID);
    expert_pool_free(&p);
}

int main(void) {
    RUN(layout_and_budget);
    RUN(hand_lru);
    RUN(hand_lfu);
    RUN(shadow);
    RUN(shadow_host);
    RUN(prefetch);
    RUN(bad_ids);
    return TEST_EXIT();
}
