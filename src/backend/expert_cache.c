/*
 * expert_cache.c: the expert cache's bookkeeping (expert_cache.h). LFU and
 * OPT find the victim by a scan of the slots, which lets them skip the
 * slots the current step uses without a second structure. LRU and ADMIT
 * (whose victim is LRU's) keep the filled slots in a list ordered by last
 * access instead: --gpu-mem's pool is thousands of slots (7,600 at 16 GiB
 * of 35B-A3B experts), and a scan per miss was ~10 us, ~1-2 ms of host
 * time a decode step and ~40 ms a 512-row prompt pass (issue 31's stall
 * hunt). The list's head is the scan's answer: accesses stamp increasing
 * clocks, so the list is in order of `last`, and the slots the current
 * step touched (all stamped after the step began) are its tail; when the
 * head is one of them every slot is, and there is no victim (-1), as the
 * scan found. SWEEP's victim in a sweep step is the other end of the
 * untouched part: the slot before the first one this step appended.
 */
#include "backend/expert_cache.h"

#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

static const char *const policy_names[EXPERT_N_POLICIES] = {"lru", "lfu", "admit", "opt", "sweep"};

const char *expert_policy_name(expert_policy p) { return p < EXPERT_N_POLICIES ? policy_names[p] : "?"; }

int expert_policy_from_name(const char *name) {
    for (int p = 0; name && p < EXPERT_N_POLICIES; p++)
        if (!strcmp(name, policy_names[p])) return p;
    return -1;
}

int expert_cache_init(expert_cache *c, expert_policy policy, uint32_t n_layer, uint32_t n_expert, uint64_t slot_bytes,
                      uint64_t budget, clover_error *err) {
    memset(c, 0, sizeof *c);
    if (policy >= EXPERT_N_POLICIES) return error_set(err, CLOVER_E_INVALID, "expert cache: policy %d", (int)policy);
    if (!n_layer || !n_expert || !slot_bytes || (uint64_t)n_layer * n_expert > ((uint64_t)1 << 24))
        return error_set(err, CLOVER_E_INVALID, "expert cache: %u layers x %u experts of %llu bytes", n_layer, n_expert,
                         (unsigned long long)slot_bytes);
    size_t keys = (size_t)n_layer * n_expert;
    uint64_t slots = budget / slot_bytes;
    if (slots > keys) slots = keys; /* more slots than experts hold nothing more */
    *c = (expert_cache){.policy = policy, .n_layer = n_layer, .n_expert = n_expert, .slot_bytes = slot_bytes,
                        .budget = budget, .n_slots = (size_t)slots};
    size_t s = c->n_slots ? c->n_slots : 1;
    c->slot_of = mem_alloc(keys * sizeof *c->slot_of);
    c->freq = mem_calloc(keys, sizeof *c->freq);
    c->key_of = mem_calloc(s, sizeof *c->key_of);
    c->last = mem_calloc(s, sizeof *c->last);
    c->next = mem_calloc(s, sizeof *c->next);
    c->touched = mem_calloc(s, sizeof *c->touched);
    c->lru_prev = mem_alloc(s * sizeof *c->lru_prev);
    c->lru_next = mem_alloc(s * sizeof *c->lru_next);
    c->lru_head = c->lru_tail = c->step_first = -1;
    if (!c->slot_of || !c->freq || !c->key_of || !c->last || !c->next || !c->touched || !c->lru_prev ||
        !c->lru_next) {
        expert_cache_free(c);
        return error_set(err, CLOVER_E_NOMEM, "expert cache: no memory for %zu experts", keys);
    }
    for (size_t k = 0; k < keys; k++) c->slot_of[k] = -1;
    c->step = 1; /* touched = 0: never */
    return CLOVER_OK;
}

void expert_cache_free(expert_cache *c) {
    mem_free(c->slot_of);
    mem_free(c->freq);
    mem_free(c->key_of);
    mem_free(c->last);
    mem_free(c->next);
    mem_free(c->touched);
    mem_free(c->lru_prev);
    mem_free(c->lru_next);
    memset(c, 0, sizeof *c);
}

void expert_cache_step(expert_cache *c) {
    c->step++;
    c->step_first = -1;
    c->sweep = false;
}

void expert_cache_step_of(expert_cache *c, size_t uses) {
    expert_cache_step(c);
    c->sweep = c->policy == EXPERT_SWEEP && uses * 2 > c->n_expert;
}

void expert_cache_clear(expert_cache *c) {
    for (size_t k = 0; k < (size_t)c->n_layer * c->n_expert; k++) c->slot_of[k] = -1;
    c->n_filled = 0;
    c->lru_head = c->lru_tail = c->step_first = -1;
}

static bool listed(const expert_cache *c) {
    return c->policy == EXPERT_LRU || c->policy == EXPERT_ADMIT || c->policy == EXPERT_SWEEP;
}

static void lru_unlink(expert_cache *c, int32_t s) {
    const int32_t p = c->lru_prev[s], n = c->lru_next[s];
    if (p >= 0) c->lru_next[p] = n;
    else c->lru_head = n;
    if (n >= 0) c->lru_prev[n] = p;
    else c->lru_tail = p;
}

static void lru_append(expert_cache *c, int32_t s) { /* as the most recent */
    c->lru_prev[s] = c->lru_tail;
    c->lru_next[s] = -1;
    if (c->lru_tail >= 0) c->lru_next[c->lru_tail] = s;
    else c->lru_head = s;
    c->lru_tail = s;
}

/* Whether slot a is a better victim than slot b under the policy. */
static bool worse(const expert_cache *c, size_t a, size_t b) {
    switch (c->policy) {
    case EXPERT_LFU: {
        uint64_t fa = c->freq[c->key_of[a]], fb = c->freq[c->key_of[b]];
        if (fa != fb) return fa < fb;
        return c->last[a] < c->last[b];
    }
    case EXPERT_OPT: return c->next[a] > c->next[b];
    default: return c->last[a] < c->last[b];
    }
}

/* The victim among the slots this step has not touched; -1: none. A sweep's: the most recent of those, the
 * slot just before the step's own run at the list's tail. */
static int32_t victim(const expert_cache *c) {
    if (listed(c) && c->sweep) {
        const int32_t m = c->step_first >= 0 ? c->lru_prev[c->step_first] : c->lru_tail;
        return m >= 0 && c->touched[m] != c->step ? m : -1;
    }
    if (listed(c)) {
        const int32_t h = c->lru_head;
        return h >= 0 && c->touched[h] != c->step ? h : -1;
    }
    int32_t best = -1;
    for (size_t s = 0; s < c->n_slots; s++)
        if (c->touched[s] != c->step && (best < 0 || worse(c, s, (size_t)best))) best = (int32_t)s;
    return best;
}

bool expert_cache_has_room(const expert_cache *c) { return c->n_filled < c->n_slots || victim(c) >= 0; }

int expert_cache_access(expert_cache *c, uint32_t layer, uint32_t expert, uint64_t next_use, expert_access *out,
                        clover_error *err) {
    if (layer >= c->n_layer || expert >= c->n_expert)
        return error_set(err, CLOVER_E_INVALID, "expert cache: layer %u expert %u, the cache holds %u x %u", layer,
                         expert, c->n_layer, c->n_expert);
    const uint32_t key = layer * c->n_expert + expert;
    const uint64_t now = c->clock++;
    c->freq[key]++;
    *out = (expert_access){.slot = -1, .evicted = -1};
    int32_t s = c->slot_of[key];
    bool was_listed = true; /* s is in the LRU list (a hit, or a victim), not a slot filled for the first time */
    if (s >= 0) {
        c->hits++;
        out->hit = true;
    } else {
        c->misses++;
        if (c->n_filled < c->n_slots) {
            s = (int32_t)c->n_filled++;
            was_listed = false;
        } else {
            s = victim(c);
            bool admit = s >= 0;
            if (admit && c->policy == EXPERT_ADMIT) admit = c->freq[key] > c->freq[c->key_of[s]];
            if (admit && c->policy == EXPERT_OPT) admit = next_use < c->next[s];
            if (!admit) {
                c->bypasses++;
                return CLOVER_OK;
            }
            out->evicted = c->key_of[s];
            c->slot_of[c->key_of[s]] = -1;
            c->evictions++;
        }
        c->slot_of[key] = s;
        c->key_of[s] = key;
        out->admitted = true;
    }
    out->slot = s;
    if (listed(c)) {
        if (was_listed) {
            if (s == c->step_first) c->step_first = c->lru_next[s]; /* a key used twice in one step */
            lru_unlink(c, s);
        }
        lru_append(c, s);
        if (c->step_first < 0) c->step_first = s;
    }
    c->last[s] = now;
    c->next[s] = next_use;
    c->touched[s] = c->step;
    return CLOVER_OK;
}
