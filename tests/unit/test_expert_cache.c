/*
 * test_expert_cache.c: the expert cache's policies (backend/expert_cache.h)
 * against sequences worked out by hand (the comments give each state):
 * which access hits, which slot a miss takes, which key it evicts, which
 * it bypasses; the current step's slots are never evicted; a budget below
 * one expert bypasses everything; bad arguments are one-line errors.
 */
#include "backend/expert_cache.h"
#include <string.h>

#include "test.h"

#define N EXPERT_NEVER
#define BYPASS -2 /* expected slot of a bypass */

typedef struct want {
    uint32_t expert;
    uint64_t next; /* OPT only */
    int hit;
    int32_t slot;     /* BYPASS: not admitted */
    int64_t evicted;
} want;

static void run(expert_policy p, uint64_t budget, const want *w, size_t n, bool one_step_each,
                uint64_t hits, uint64_t misses, uint64_t evictions, uint64_t bypasses) {
    expert_cache c;
    clover_error err = {0};
    CHECK(expert_cache_init(&c, p, 1, 8, 10, budget, &err) == 0);
    for (size_t i = 0; i < n; i++) {
        if (one_step_each) expert_cache_step(&c);
        expert_access a;
        CHECK(expert_cache_access(&c, 0, w[i].expert, w[i].next, &a, &err) == 0);
        bool ok = a.hit == (w[i].hit != 0) && a.evicted == w[i].evicted &&
                  (w[i].slot == BYPASS ? a.slot == -1 && !a.admitted : a.slot == w[i].slot && a.admitted == !w[i].hit);
        CHECK_MSG(ok, "%s access %zu (expert %u): hit %d slot %d admitted %d evicted %lld, expected hit %d slot %d "
                      "evicted %lld",
                  expert_policy_name(p), i, w[i].expert, a.hit, a.slot, a.admitted, (long long)a.evicted, w[i].hit,
                  w[i].slot, (long long)w[i].evicted);
    }
    CHECK_MSG(c.hits == hits && c.misses == misses && c.evictions == evictions && c.bypasses == bypasses,
              "%s: %llu hits %llu misses %llu evictions %llu bypasses", expert_policy_name(p),
              (unsigned long long)c.hits, (unsigned long long)c.misses, (unsigned long long)c.evictions,
              (unsigned long long)c.bypasses);
    expert_cache_free(&c);
}

/* 3 slots (budget 35 of 10-byte experts); accesses 0 1 2 0 3 1 4 0 */
static void lru(void) {
    const want w[] = {
        {0, 0, 0, 0, -1}, {1, 0, 0, 1, -1}, {2, 0, 0, 2, -1}, /* fill: slots 0 1 2 */
        {0, 0, 1, 0, -1},                                     /* last uses: 0@3 1@1 2@2 */
        {3, 0, 0, 1, 1},                                      /* LRU is 1 (slot 1) */
        {1, 0, 0, 2, 2},                                      /* LRU is 2 (slot 2) */
        {4, 0, 0, 0, 0},                                      /* 0@3 < 3@4 < 1@5 */
        {0, 0, 0, 1, 3},                                      /* 3@4 < 1@5 < 4@6 */
    };
    run(EXPERT_LRU, 35, w, 8, true, 1, 7, 4, 0);
}

static void lfu(void) {
    const want w[] = {
        {0, 0, 0, 0, -1}, {1, 0, 0, 1, -1}, {2, 0, 0, 2, -1},
        {0, 0, 1, 0, -1}, /* counts 0:2 1:1 2:1 */
        {3, 0, 0, 1, 1},  /* 1 and 2 used once: 1 is older */
        {1, 0, 0, 2, 2},  /* counts 0:2 3:1 2:1 (2 older than 3) */
        {4, 0, 0, 1, 3},  /* counts 0:2 3:1 1:2 */
        {0, 0, 1, 0, -1},
    };
    run(EXPERT_LFU, 35, w, 8, true, 2, 6, 3, 0);
}

static void admit(void) {
    const want w[] = {
        {0, 0, 0, 0, -1}, {1, 0, 0, 1, -1}, {2, 0, 0, 2, -1}, {0, 0, 1, 0, -1},
        {3, 0, 0, BYPASS, -1}, /* 3 used once, the LRU victim (1) once too: not admitted */
        {1, 0, 1, 1, -1},      /* so 1 is still there */
        {4, 0, 0, BYPASS, -1}, /* LRU victim 2 (used once) vs 4 once */
        {0, 0, 1, 0, -1},
        {3, 0, 0, 2, 2}, /* 3 now twice > 2 once: admitted over the LRU */
    };
    run(EXPERT_ADMIT, 35, w, 9, true, 3, 6, 1, 2);
}

static void opt(void) {
    /* next uses (access numbers): 0@0 -> 3, 1@1 -> 5, 0@3 -> 7, the rest never */
    const want w[] = {
        {0, 3, 0, 0, -1}, {1, 5, 0, 1, -1}, {2, N, 0, 2, -1}, {0, 7, 1, 0, -1},
        {3, N, 0, BYPASS, -1}, /* farthest resident is 2 (never), as far as 3 itself: bypass */
        {1, N, 1, 1, -1},
        {4, N, 0, BYPASS, -1},
        {0, N, 1, 0, -1},
    };
    run(EXPERT_OPT, 35, w, 8, true, 3, 5, 0, 2);
    /* a new expert used sooner than a resident replaces the farthest one */
    const want v[] = {{0, 10, 0, 0, -1}, {1, 4, 0, 1, -1}, {2, 20, 0, 2, -1}, {3, 5, 0, 2, 2}};
    run(EXPERT_OPT, 35, v, 4, true, 0, 4, 1, 0);
}

static void step_pins(void) {
    /* 2 slots; one step takes experts 2 3 4: the step's own slots stay */
    expert_cache c;
    clover_error err = {0};
    CHECK(expert_cache_init(&c, EXPERT_LRU, 1, 8, 10, 20, &err) == 0);
    expert_access a;
    expert_cache_step(&c);
    expert_cache_access(&c, 0, 0, 0, &a, &err);
    expert_cache_access(&c, 0, 1, 0, &a, &err);
    expert_cache_step(&c);
    expert_cache_access(&c, 0, 2, 0, &a, &err);
    CHECK(!a.hit && a.slot == 0 && a.evicted == 0);
    expert_cache_access(&c, 0, 3, 0, &a, &err);
    CHECK(!a.hit && a.slot == 1 && a.evicted == 1);
    expert_cache_access(&c, 0, 4, 0, &a, &err);
    CHECK(!a.hit && a.slot == -1 && !a.admitted && a.evicted == -1);
    expert_cache_access(&c, 0, 2, 0, &a, &err); /* still there */
    CHECK(a.hit && a.slot == 0);
    CHECK(c.bypasses == 1 && c.evictions == 2);
    expert_cache_free(&c);
}

static void small_and_bad(void) {
    expert_cache c;
    clover_error err = {0};
    CHECK(expert_cache_init(&c, EXPERT_LFU, 2, 4, 100, 99, &err) == 0 && c.n_slots == 0);
    expert_access a;
    for (int i = 0; i < 3; i++) {
        expert_cache_step(&c);
        CHECK(expert_cache_access(&c, 1, 3, 0, &a, &err) == 0 && !a.hit && a.slot == -1);
    }
    CHECK(c.bypasses == 3 && c.misses == 3);
    CHECK(expert_cache_access(&c, 2, 0, 0, &a, &err) == CLOVER_E_INVALID && strstr(err.message, "layer 2"));
    expert_cache_free(&c);
    CHECK(expert_cache_init(&c, EXPERT_LRU, 2, 4, 1, 1000, &err) == 0 && c.n_slots == 8); /* at most every expert */
    expert_cache_free(&c);
    CHECK(expert_cache_init(&c, EXPERT_LRU, 0, 4, 1, 1000, &err) == CLOVER_E_INVALID);
    CHECK(expert_policy_from_name("admit") == EXPERT_ADMIT && expert_policy_from_name("fifo") == -1);
}

int main(void) {
    RUN(lru);
    RUN(lfu);
    RUN(admit);
    RUN(opt);
    RUN(step_pins);
    RUN(small_and_bad);
    return TEST_EXIT();
}
