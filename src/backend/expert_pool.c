/*
 * expert_pool.c: the device expert pool's bookkeeping (expert_pool.h). A
 * step first marks the experts its rows use, then asks the cache for them
 * in ascending expert order (so a step's accesses, and the LRU order they
 * leave, do not depend on the rows' order), then maps every id to its slot.
 */
#include "backend/expert_pool.h"

#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

#define GIB 1073741824.0

static uint64_t up256(uint64_t x) { return (x + 255) & ~(uint64_t)255; }

int expert_pool_layout_make(const uint64_t part_bytes[EXPERT_PARTS], expert_pool_layout *out, clover_error *err) {
    memset(out, 0, sizeof *out);
    uint64_t off = 0;
    for (int i = 0; i < EXPERT_PARTS; i++) {
        if (!part_bytes[i] || part_bytes[i] > ((uint64_t)1 << 40))
            return error_set(err, CLOVER_E_INVALID, "expert pool: an expert's part %d of %llu bytes", i,
                             (unsigned long long)part_bytes[i]);
        out->part_bytes[i] = part_bytes[i];
        out->part_off[i] = off;
        off = up256(off + part_bytes[i]);
    }
    out->slot_bytes = off;
    return CLOVER_OK;
}

int expert_pool_budget(uint64_t gpu_mem, uint64_t dense, uint64_t reserve, const expert_pool_layout *lay,
                       uint32_t n_layer, uint32_t n_expert, uint64_t *pool_budget, clover_error *err) {
    *pool_budget = 0;
    if (dense > gpu_mem)
        return error_set(err, CLOVER_E_NOMEM,
                         "--gpu-mem %.2f GiB: the dense weights alone (embeddings, attention, GDN, router, shared "
                         "experts, head) need %.2f GiB",
                         gpu_mem / GIB, dense / GIB);
    const uint64_t layer = (uint64_t)n_expert * lay->slot_bytes;
    const uint64_t left = gpu_mem - dense > reserve ? gpu_mem - dense - reserve : 0;
    if (left < layer)
        return error_set(err, CLOVER_E_NOMEM,
                         "--gpu-mem %.2f GiB: the dense weights (%.2f GiB) and one session's KV, state and scratch "
                         "(%.2f GiB) leave %.2f GiB for routed experts, less than one layer's %u experts (%.2f GiB)",
                         gpu_mem / GIB, dense / GIB, reserve / GIB, left / GIB, n_expert, layer / GIB);
    const uint64_t all = (uint64_t)n_layer * layer;
    *pool_budget = left < all ? left : all;
    return CLOVER_OK;
}

int expert_pool_init(expert_pool *p, expert_policy policy, uint32_t n_layer, uint32_t n_expert,
                     const expert_pool_layout *lay, uint64_t budget, clover_error *err) {
    memset(p, 0, sizeof *p);
    if (policy != EXPERT_LRU && policy != EXPERT_LFU && policy != EXPERT_SWEEP)
        return error_set(err, CLOVER_E_INVALID,
                         "expert pool: policy %s bypasses experts; the pool takes lru, lfu or sweep",
                         expert_policy_name(policy));
    if (!lay->slot_bytes) return error_set(err, CLOVER_E_INVALID, "expert pool: no slot layout");
    int rc = expert_cache_init(&p->cache, policy, n_layer, n_expert, lay->slot_bytes, budget, err);
    if (rc) return rc;
    if (p->cache.n_slots < n_expert) {
        expert_cache_free(&p->cache);
        return error_set(err, CLOVER_E_NOMEM,
                         "expert pool: %llu bytes hold %llu slots of %llu bytes, fewer than one layer's %u experts",
                         (unsigned long long)budget, (unsigned long long)(budget / lay->slot_bytes),
                         (unsigned long long)lay->slot_bytes, n_expert);
    }
    p->lay = *lay;
    p->n_layer = n_layer;
    p->n_expert = n_expert;
    p->budget = budget;
    p->pool_bytes = (uint64_t)p->cache.n_slots * lay->slot_bytes;
    p->step_slot = mem_alloc(n_expert * sizeof *p->step_slot);
    p->pf = mem_calloc(p->cache.n_slots, 1);
    if (!p->step_slot || !p->pf) {
        expert_pool_free(p);
        return error_set(err, CLOVER_E_NOMEM, "expert pool: no memory");
    }
    return CLOVER_OK;
}

void expert_pool_free(expert_pool *p) {
    expert_cache_free(&p->cache);
    mem_free(p->step_slot);
    mem_free(p->pf);
    memset(p, 0, sizeof *p);
}

size_t expert_pool_slots(const expert_pool *p) { return p->cache.n_slots; }

void expert_pool_forget(expert_pool *p) {
    expert_cache_clear(&p->cache);
    if (p->pf) memset(p->pf, 0, p->cache.n_slots);
}

#define STEP_HOST (-2) /* step_slot: an expert the host computes this step */

bool expert_pool_resident(const expert_pool *p, uint32_t layer, uint32_t expert) {
    return layer < p->n_layer && expert < p->n_expert && p->cache.slot_of[(size_t)layer * p->n_expert + expert] >= 0;
}

int expert_pool_step(expert_pool *p, uint32_t layer, const int32_t *ids, size_t n, int32_t *slots,
                     expert_copy *copies, size_t *n_copies, clover_error *err) {
    return expert_pool_step_host(p, layer, ids, n, NULL, -1, slots, copies, n_copies, err);
}

int expert_pool_step_host(expert_pool *p, uint32_t layer, const int32_t *ids, size_t n, const uint8_t *host,
                          int32_t host_slot, int32_t *slots, expert_copy *copies, size_t *n_copies,
                          clover_error *err) {
    *n_copies = 0;
    if (layer >= p->n_layer)
        return error_set(err, CLOVER_E_INVALID, "expert pool: layer %u of %u", layer, p->n_layer);
    for (uint32_t e = 0; e < p->n_expert; e++) p->step_slot[e] = -1;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= p->n_expert)
            return error_set(err, CLOVER_E_INTERNAL, "expert pool: layer %u routes to expert %d of %u", layer, ids[i],
                             p->n_expert);
        p->step_slot[ids[i]] = 0; /* used; its slot below */
    }
    /* the host's experts decided before any access: an admission below may evict a resident marked expert
     * not yet accessed, which must still be read from the device as the caller planned (it is copied again) */
    size_t uses = 0; /* the step's distinct experts the device reads (SWEEP tells a sweep by them) */
    for (uint32_t e = 0; e < p->n_expert; e++) {
        if (p->step_slot[e] != 0) continue;
        if (host && host[e] && !expert_pool_resident(p, layer, e)) p->step_slot[e] = STEP_HOST;
        else uses++;
    }
    expert_cache_step_of(&p->cache, uses);
    p->steps++;
    for (uint32_t e = 0; e < p->n_expert; e++) {
        if (p->step_slot[e] == STEP_HOST) { /* the host computes it: not admitted */
            p->step_slot[e] = host_slot;
            p->host_uses++;
            continue;
        }
        if (p->step_slot[e] < 0) continue;
        expert_access a;
        int rc = expert_cache_access(&p->cache, layer, e, EXPERT_NEVER, &a, err);
        if (rc) return rc;
        /* n_slots >= n_expert and a step evicts none of its own: LRU and LFU always find a victim */
        if (a.slot < 0 || (size_t)a.slot >= p->cache.n_slots)
            return error_set(err, CLOVER_E_INTERNAL, "expert pool: layer %u expert %u got no slot", layer, e);
        p->step_slot[e] = a.slot;
        if (a.hit) {
            p->hits++;
            p->prefetch_hits += p->pf[a.slot];
            p->pf[a.slot] = 0;
        } else {
            p->pf[a.slot] = 0;
            p->misses++;
            p->copied_bytes += p->lay.part_bytes[0] + p->lay.part_bytes[1] + p->lay.part_bytes[2];
            copies[(*n_copies)++] = (expert_copy){.expert = e, .slot = a.slot};
        }
    }
    for (size_t i = 0; i < n; i++) slots[i] = p->step_slot[ids[i]];
    /* the pool's bytes never exceed the budget (--gpu-mem's promise); checked in release builds too */
    if (p->pool_bytes > p->budget || (uint64_t)p->cache.n_slots * p->lay.slot_bytes != p->pool_bytes)
        return error_set(err, CLOVER_E_INTERNAL, "expert pool: %llu bytes in slots, budget %llu",
                         (unsigned long long)p->pool_bytes, (unsigned long long)p->budget);
    return CLOVER_OK;
}

int expert_pool_prefetch(expert_pool *p, uint32_t layer, const int32_t *experts, size_t n, expert_copy *copies,
                         size_t *n_copies, clover_error *err) {
    *n_copies = 0;
    if (layer >= p->n_layer)
        return error_set(err, CLOVER_E_INVALID, "expert pool: prefetch for layer %u of %u", layer, p->n_layer);
    for (size_t i = 0; i < n; i++) {
        const int32_t e = experts[i];
        if (e < 0 || (uint32_t)e >= p->n_expert)
            return error_set(err, CLOVER_E_INTERNAL, "expert pool: prefetch of expert %d of %u", e, p->n_expert);
        if (expert_pool_resident(p, layer, (uint32_t)e)) continue; /* nothing to do, and no use counted */
        if (!expert_cache_has_room(&p->cache)) break; /* every slot is the current step's: nothing counted */
        expert_access a;
        int rc = expert_cache_access(&p->cache, layer, (uint32_t)e, EXPERT_NEVER, &a, err);
        if (rc) return rc;
        if (a.slot < 0) break; /* every slot is the current step's: no room to guess into */
        if ((size_t)a.slot >= p->cache.n_slots)
            return error_set(err, CLOVER_E_INTERNAL, "expert pool: prefetch got slot %d of %zu", a.slot,
                             p->cache.n_slots);
        p->pf[a.slot] = 1;
        p->prefetched++;
        p->copied_bytes += p->lay.part_bytes[0] + p->lay.part_bytes[1] + p->lay.part_bytes[2];
        copies[(*n_copies)++] = (expert_copy){.expert = (uint32_t)e, .slot = a.slot};
    }
    return CLOVER_OK;
}
