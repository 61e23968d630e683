/*
 * test_expert_cache.c: the expert cache's policies (backend/expert_cache.h)
 * against sequences worked out by hand (the comments give each state):
 * which access hits, which slot a miss takes, which key it evicts, which
 * it bypasses; the current step's slots are never evicted; a budget below
 * one expert bypasses everything; bad arguments are one-line errors.
 * LRU and ADMIT keep a list in place of a scan of the slots: long random
 * streams (steps of random size, a clear in the middle) against a model
 * written here that does the scan (the least recent access among the
 * slots the step has not touched, the definition), decision by decision.
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
    run(EXPERT_SWEEP, 35, w, 8, true, 1, 7, 4, 0); /* steps not marked as sweeps: SWEEP is LRU */
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

/* The reference: a slot table searched by brute force, the policies' definitions (expert_cache.h). */
typedef struct ref {
    int32_t slot_of[4 * 64];
    int32_t key_of[256];
    uint64_t last[256], touched[256], freq[4 * 64];
    size_t n_slots, n_filled;
    uint64_t clock, step;
} ref;

static void ref_access(ref *r, expert_policy p, uint32_t key, expert_access *out) {
    const uint64_t now = r->clock++;
    r->freq[key]++;
    *out = (expert_access){.slot = -1, .evicted = -1};
    int32_t s = r->slot_of[key];
    if (s >= 0) {
        out->hit = true;
    } else {
        if (r->n_filled < r->n_slots) {
            s = (int32_t)r->n_filled++;
        } else {
            s = -1;
            for (size_t i = 0; i < r->n_slots; i++)
                if (r->touched[i] != r->step && (s < 0 || r->last[i] < r->last[s])) s = (int32_t)i;
            if (s < 0 || (p == EXPERT_ADMIT && !(r->freq[key] > r->freq[r->key_of[s]]))) return;
            out->evicted = r->key_of[s];
            r->slot_of[r->key_of[s]] = -1;
        }
        r->slot_of[key] = s;
        r->key_of[s] = (int32_t)key;
        out->admitted = true;
    }
    out->slot = s;
    r->last[s] = now;
    r->touched[s] = r->step;
}

static void list_vs_scan(void) {
    const expert_policy pols[2] = {EXPERT_LRU, EXPERT_ADMIT};
    const size_t slots[4] = {64, 65, 100, 256}; /* one layer's experts up to every expert (4 layers x 64) */
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    for (int pi = 0; pi < 2; pi++)
        for (int si = 0; si < 4; si++) {
            expert_cache c;
            clover_error err = {0};
            CHECK(expert_cache_init(&c, pols[pi], 4, 64, 10, slots[si] * 10, &err) == 0 && c.n_slots == slots[si]);
            ref r;
            memset(&r, 0, sizeof r);
            for (size_t k = 0; k < 4 * 64; k++) r.slot_of[k] = -1;
            r.n_slots = slots[si];
            r.step = 1;
            size_t bad = 0;
            for (int st = 0; st < 3000 && !bad; st++) {
                if (st == 1500) { /* a failed copy: every slot forgotten, the counts kept */
                    expert_cache_clear(&c);
                    for (size_t k = 0; k < 4 * 64; k++) r.slot_of[k] = -1;
                    r.n_filled = 0;
                }
                expert_cache_step(&c);
                r.step++;
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                const uint32_t layer = (uint32_t)(rng >> 60) & 3, n = 1 + (uint32_t)((rng >> 33) % 64);
                for (uint32_t i = 0; i < n && !bad; i++) {
                    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                    /* skewed: low ids far more often, so hits, evictions and ADMIT's bypasses all happen */
                    const uint32_t e = (uint32_t)(((rng >> 33) % 64) * ((rng >> 20) % 64) / 64);
                    expert_access a, b;
                    CHECK(expert_cache_access(&c, layer, e, EXPERT_NEVER, &a, &err) == 0);
                    ref_access(&r, pols[pi], layer * 64 + e, &b);
                    if (a.hit != b.hit || a.admitted != b.admitted || a.slot != b.slot || a.evicted != b.evicted) {
                        bad++;
                        CHECK_MSG(false, "%s, %zu slots, step %d access %u (layer %u expert %u): hit %d slot %d evicted "
                                         "%lld, the scan: hit %d slot %d evicted %lld",
                                  expert_policy_name(pols[pi]), slots[si], st, i, layer, e, a.hit, a.slot,
                                  (long long)a.evicted, b.hit, b.slot, (long long)b.evicted);
                    }
                }
            }
            /* (ADMIT bypasses most misses of this skewed stream: ~260 evictions against LRU's thousands) */
            CHECK_MSG(c.evictions > (pols[pi] == EXPERT_LRU ? 1000u : 100u) || slots[si] == 256,
                      "%s, %zu slots: only %llu evictions",
                      expert_policy_name(pols[pi]), slots[si], (unsigned long long)c.evictions);
            if (pols[pi] == EXPERT_ADMIT && slots[si] < 256) CHECK(c.bypasses > 0);
            expert_cache_free(&c);
        }
}

/* SWEEP against LRU on a cyclic sweep by hand: 3 layers of 4 experts, 8 slots, each step one layer's 4 experts
 * (4 * 2 > 4: every step a sweep), layers 0 1 2 0 1 2 0 1 2 (keys l * 4 + e).
 *  steps 1-2 fill s0..s7 with keys 0..7 (list s0..s7, oldest first). Step 3 (keys 8..11): the victim is the
 *  most recent untouched slot: s7 (key 7), then the slot before the step's first, s6 (6), s5 (5), s4 (4): keys
 *  8 9 10 11 in s7 s6 s5 s4; list s0 s1 s2 s3 s7 s6 s5 s4. Step 4 (keys 0..3): 4 hits; list s7 s6 s5 s4 s0 s1
 *  s2 s3. Step 5 (keys 4..7): victims s3 (key 3), s2 (2), s1 (1), s0 (0). Step 6 (keys 8..11): 4 hits. From
 *  then on every cycle of 3 steps hits one layer (4 of 12: Belady's rate for this cycle): 12 hits in 9 steps.
 *  LRU evicts what the cycle needs next: after the first 12 misses, nothing ever hits (0 of 36). */
static void sweep(void) {
    for (int pol = 0; pol < 2; pol++) {
        expert_cache c;
        clover_error err = {0};
        CHECK(expert_cache_init(&c, pol ? EXPERT_SWEEP : EXPERT_LRU, 3, 4, 10, 80, &err) == 0);
        static const int64_t step3_evicted[4] = {7, 6, 5, 4}, step5_evicted[4] = {3, 2, 1, 0};
        static const int32_t step3_slot[4] = {7, 6, 5, 4};
        bool ok = true;
        for (int st = 0; st < 9; st++) {
            const uint32_t layer = (uint32_t)(st % 3);
            expert_cache_step_of(&c, 4);
            for (uint32_t e = 0; e < 4; e++) {
                expert_access a;
                ok = ok && expert_cache_access(&c, layer, e, EXPERT_NEVER, &a, &err) == 0;
                if (pol && st == 2) ok = ok && !a.hit && a.evicted == step3_evicted[e] && a.slot == step3_slot[e];
                if (pol && st == 3) ok = ok && a.hit && a.slot == (int32_t)e;
                if (pol && st == 4) ok = ok && !a.hit && a.evicted == step5_evicted[e] && a.slot == 3 - (int32_t)e;
                if (pol && st == 5) ok = ok && a.hit;
                if (!pol && st >= 3) ok = ok && !a.hit;
            }
        }
        CHECK_MSG(ok && c.hits == (pol ? 12u : 0u) && c.misses == (pol ? 24u : 36u), "%s: %llu hits, %llu misses",
                  expert_policy_name(c.policy), (unsigned long long)c.hits, (unsigned long long)c.misses);
        CHECK(expert_policy_from_name("sweep") == EXPERT_SWEEP && !strcmp(expert_policy_name(EXPERT_SWEEP), "sweep"));
        expert_cache_free(&c);
    }
}

int main(void) {
    RUN(lru);
    RUN(lfu);
    RUN(admit);
    RUN(opt);
    RUN(step_pins);
    RUN(small_and_bad);
    RUN(list_vs_scan);
    RUN(sweep);
    return TEST_EXIT();
}
