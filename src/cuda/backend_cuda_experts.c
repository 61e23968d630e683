/*
 * backend_cuda_experts.c: --gpu-mem N (issue 31): the routed experts of a
 * model larger than the budget live in host memory, and a device pool of
 * fixed-size slots holds the ones routed to recently (backend/expert_pool.h
 * gives the slots, LRU by default). Everything else (dense weights, KV,
 * states, scratch) is on the device as without the option.
 *
 * Per MoE layer of a pass, after the router's top-k (on the device):
 *  1. the routing ids come back to the host (n * k int32, a sync of the
 *     pass's stream: the one cost a hit pays, ~10-30 us a layer);
 *  2. the pool's step maps them to slots and lists the misses;
 *  3. each miss's gate, up and down rows are copied into its slot on the
 *     pool's own stream, from the mapped file itself when it could be pinned
 *     in place (cudaHostRegister, read-only), else through a pinned staging
 *     buffer (CLOVER_GPU_MEM_STAGING=1 forces that path: a diagnostic);
 *  4. the pass's stream waits for those copies (an event), gets the slot ids
 *     (sc.rslot), and the grouped expert kernels read "pool + part offset"
 *     with expert stride slot_bytes: slot ids in place of expert ids, the
 *     kernels unchanged. The weighted sum still reads the routing ids.
 * Eviction is safe without more fences: step 1's sync has drained every
 * earlier kernel that read a slot, and a step never evicts its own experts.
 *
 * Not built yet (docs/OFFLOAD.md): prefetching the next layer's experts,
 * computing misses on the CPU, a device-side remap that avoids the sync
 * (and so captured graphs; decode runs eagerly under --gpu-mem), the stacked
 * executor under --gpu-mem (sequences run one by one), and several backends
 * sharing one pool concurrently (passes of one backend run one at a time).
 *
 * CLOVER_GPU_MEM_STATS=1 (a diagnostic): the budget's split when the pool is
 * made, and the hit rate and host-to-device bandwidth when it is freed, on
 * stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/expert_pool.h"
#include "base/alloc.h"
#include "base/error.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_mem.h"
#include "quant/quant.h"

#define GIB 1073741824.0
#define STAGE_BYTES (64ull << 20)

typedef struct reg_range {
    char *p;
    size_t n;
} reg_range;

struct cuda_experts {
    expert_pool pool;
    char *dev;                 /* [n_slots][slot_bytes] */
    void *stream;              /* the copies' stream */
    void *ev_done, *ev_t0, *ev_t1;
    bool timing_pending;       /* ev_t0..ev_t1 of the last layer with copies not yet read */
    reg_range *regs;           /* the registered (pinned in place) ranges of the mapping */
    size_t n_regs;
    char *stage;               /* pinned staging buffer when the mapping could not be registered */
    size_t stage_off;
    expert_copy *copies;       /* [n_expert] */
    uint64_t dense, reserve;   /* the budget's parts, for the report */
    double copy_s;             /* device time of the copies */
    uint64_t copy_bytes;       /* bytes copied over the link */
    bool stats;
};

/* One expert's bytes of a stacked expert tensor. */
static uint64_t expert_bytes(const model_weight *w) {
    return quant_row_bytes(w->type, (size_t)w->ne[0]) * (uint64_t)w->ne[1];
}

static const model_weight *part_of(const model_moe_weights *mw, int part) {
    return part == EXPERT_PART_GATE ? &mw->gate_exps : part == EXPERT_PART_UP ? &mw->up_exps : &mw->down_exps;
}

static int cmp_range(const void *a, const void *b) {
    const reg_range *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

/* Pins the experts' ranges of the mapping in place (page-aligned, merged); false (nothing left pinned) when
 * the driver refuses (a read-only file mapping some drivers do not take). */
static bool register_mapping(cuda_experts *x, const clover_model *m) {
    const uint32_t L = m->hp.n_layer;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    reg_range *r = mem_calloc((size_t)L * EXPERT_PARTS, sizeof *r);
    if (!r) return false;
    size_t n = 0;
    for (uint32_t l = 0; l < L; l++)
        for (int p = 0; p < EXPERT_PARTS; p++) {
            const model_weight *w = part_of(&m->layers[l].moe, p);
            uintptr_t a = (uintptr_t)w->data, b = a + expert_bytes(w) * (uint64_t)m->hp.n_expert;
            a &= ~(uintptr_t)(page - 1);
            b = (b + page - 1) & ~(uintptr_t)(page - 1);
            r[n++] = (reg_range){(char *)a, (size_t)(b - a)};
        }
    qsort(r, n, sizeof *r, cmp_range);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && r[i].p <= r[k - 1].p + r[k - 1].n) {
            char *end = r[i].p + r[i].n > r[k - 1].p + r[k - 1].n ? r[i].p + r[i].n : r[k - 1].p + r[k - 1].n;
            r[k - 1].n = (size_t)(end - r[k - 1].p);
        } else {
            r[k++] = r[i];
        }
    }
    char why[CUDA_WHY];
    for (size_t i = 0; i < k; i++)
        if (cuda_host_register(r[i].p, r[i].n, 1, why)) {
            if (x->stats) fprintf(stderr, "gpu-mem: the mapping cannot be pinned in place (%s): staging copies\n", why);
            while (i--) cuda_host_unregister(r[i].p);
            mem_free(r);
            return false;
        }
    x->regs = r;
    x->n_regs = k;
    return true;
}

void cuda_experts_free(cuda_experts *x) {
    if (!x) return;
    if (x->stream) cuda_stream_sync(x->stream, NULL);
    double t = 0;
    if (x->timing_pending && !cuda_event_seconds(x->ev_t0, x->ev_t1, &t, NULL)) x->copy_s += t;
    if (x->stats) {
        const expert_pool *p = &x->pool;
        const uint64_t acc = p->hits + p->misses;
        fprintf(stderr,
                "gpu-mem: %llu layer steps, %llu expert uses, hit rate %.1f%%, %llu misses, %.2f GiB copied "
                "host-to-device at %.1f GB/s (%s)\n",
                (unsigned long long)p->steps, (unsigned long long)acc,
                acc ? 100.0 * (double)p->hits / (double)acc : 0.0,
                (unsigned long long)p->misses, (double)x->copy_bytes / GIB,
                x->copy_s > 0 ? (double)x->copy_bytes / x->copy_s * 1e-9 : 0.0,
                x->n_regs ? "from the pinned mapping" : "through pinned staging");
    }
    for (size_t i = 0; i < x->n_regs; i++) cuda_host_unregister(x->regs[i].p);
    mem_free(x->regs);
    cuda_host_free(x->stage);
    cuda_free(x->dev);
    cuda_event_destroy(x->ev_done);
    cuda_event_destroy(x->ev_t0);
    cuda_event_destroy(x->ev_t1);
    cuda_stream_destroy(x->stream);
    expert_pool_free(&x->pool);
    mem_free(x->copies);
    mem_free(x);
}

int cuda_experts_layout(const clover_model *m, expert_pool_layout *lay, clover_error *err) {
    uint64_t parts[EXPERT_PARTS] = {0, 0, 0};
    for (uint32_t l = 0; l < m->hp.n_layer; l++)
        for (int p = 0; p < EXPERT_PARTS; p++) {
            const model_weight *w = part_of(&m->layers[l].moe, p);
            if (!w->data || (uint64_t)w->ne[2] != m->hp.n_expert)
                return error_set(err, CLOVER_E_UNSUPPORTED, "--gpu-mem: layer %u has no stacked %s experts", l,
                                 p == 0 ? "gate" : p == 1 ? "up" : "down");
            const uint64_t b = expert_bytes(w);
            if (b > parts[p]) parts[p] = b;
        }
    return expert_pool_layout_make(parts, lay, err);
}

int cuda_experts_create(cuda_model *cm, uint64_t reserve, clover_error *err) {
    const clover_model *m = cm->model;
    const model_hparams *hp = &m->hp;
    expert_pool_layout lay;
    int rc = cuda_experts_layout(m, &lay, err);
    if (rc) return rc;
    uint64_t budget = 0;
    if ((rc = expert_pool_budget(cm->gpu_mem, cm->bytes, reserve, &lay, hp->n_layer, hp->n_expert, &budget, err)))
        return rc;
    /* CLOVER_GPU_MEM_POLICY=lru|lfu (a diagnostic; default lru) */
    const char *pn = getenv("CLOVER_GPU_MEM_POLICY");
    int pol = pn && *pn ? expert_policy_from_name(pn) : EXPERT_LRU;
    if (pol < 0) return error_set(err, CLOVER_E_INVALID, "CLOVER_GPU_MEM_POLICY=%s: expected lru or lfu", pn);
    cuda_experts *x = mem_calloc(1, sizeof *x);
    if (!x) return error_set(err, CLOVER_E_NOMEM, "--gpu-mem: no memory");
    x->stats = getenv("CLOVER_GPU_MEM_STATS") != NULL;
    x->dense = cm->bytes;
    x->reserve = reserve;
    if ((rc = expert_pool_init(&x->pool, (expert_policy)pol, hp->n_layer, hp->n_expert, &lay, budget, err))) {
        mem_free(x);
        return error_prefix(err, "--gpu-mem");
    }
    char why[CUDA_WHY] = "";
    x->copies = mem_alloc(hp->n_expert * sizeof *x->copies);
    if (!x->copies) {
        cuda_experts_free(x);
        return error_set(err, CLOVER_E_NOMEM, "--gpu-mem: no memory");
    }
    if (cuda_alloc((void **)&x->dev, x->pool.pool_bytes, why) || cuda_stream_create(&x->stream, why) ||
        cuda_event_create(&x->ev_done, why) || cuda_event_create(&x->ev_t0, why) || cuda_event_create(&x->ev_t1, why)) {
        cuda_experts_free(x);
        return error_set(err, CLOVER_E_NOMEM, "--gpu-mem: the expert pool of %.2f GiB: %s",
                         (double)budget / GIB, why);
    }
    const char *st = getenv("CLOVER_GPU_MEM_STAGING");
    if ((st && !strcmp(st, "1")) || !register_mapping(x, m)) {
        if (cuda_host_alloc((void **)&x->stage, STAGE_BYTES, why)) {
            cuda_experts_free(x);
            return error_set(err, CLOVER_E_NOMEM, "--gpu-mem: %llu bytes of pinned staging: %s",
                             (unsigned long long)STAGE_BYTES, why);
        }
    }
    if (x->stats)
        fprintf(stderr,
                "gpu-mem: budget %.2f GiB = dense weights %.2f + one session %.2f + expert pool %.2f GiB (%zu slots "
                "of %.2f MiB, %.1f%% of the %u x %u experts), policy %s\n",
                (double)cm->gpu_mem / GIB, (double)cm->bytes / GIB, (double)reserve / GIB,
                (double)x->pool.pool_bytes / GIB, expert_pool_slots(&x->pool), (double)lay.slot_bytes / 1048576.0,
                100.0 * (double)expert_pool_slots(&x->pool) / ((double)hp->n_layer * hp->n_expert), hp->n_layer,
                hp->n_expert, expert_policy_name((expert_policy)pol));
    cm->ex = x;
    return CLOVER_OK;
}

uint64_t cuda_experts_pool_bytes(const cuda_experts *x) { return x ? x->pool.pool_bytes : 0; }

void cuda_experts_info(const cuda_experts *x, cuda_gpu_mem_info *out) {
    if (!x) return;
    out->reserve = x->reserve;
    out->pool_budget = x->pool.budget;
    out->pool_bytes = x->pool.pool_bytes;
    out->slot_bytes = x->pool.lay.slot_bytes;
    out->n_slots = expert_pool_slots(&x->pool);
    out->hits = x->pool.hits;
    out->misses = x->pool.misses;
    out->evictions = x->pool.cache.evictions;
    out->copied = x->copy_bytes;
    out->copy_s = x->copy_s;
}

/* One part of one expert into its slot, on the pool's stream. */
static int copy_part(cuda_experts *x, char *dst, const char *src, size_t n, char *why) {
    if (!x->stage) return cuda_h2d_async(dst, src, n, x->stream, why);
    if (n > STAGE_BYTES) {
        snprintf(why, CUDA_WHY, "an expert part of %zu bytes exceeds the staging buffer", n);
        return -1;
    }
    if (x->stage_off + n > STAGE_BYTES) { /* the buffer is full: its copies must land before it is rewritten */
        if (cuda_stream_sync(x->stream, why)) return -1;
        x->stage_off = 0;
    }
    memcpy(x->stage + x->stage_off, src, n);
    int rc = cuda_h2d_async(dst, x->stage + x->stage_off, n, x->stream, why);
    x->stage_off += (n + 255) & ~(size_t)255;
    return rc;
}

int cuda_experts_layer(backend_session *s, uint32_t il, size_t n, cuda_expert_view *out, clover_error *err) {
    cuda_experts *x = s->cm->ex;
    const model_hparams *hp = s->hp;
    const size_t nk = n * hp->n_expert_used;
    char why[CUDA_WHY] = "";
    /* 1. the routing ids (the sync also drains every kernel that read a slot before this step) */
    if (cuda_d2h_async(s->h_rx, s->sc.ridx, nk * sizeof(int32_t), s->stream, why) || cuda_stream_sync(s->stream, why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: routing ids: %s", why);
    if (x->timing_pending) { /* the previous copies are done (the stream waited for them) */
        double t = 0;
        if (!cuda_event_seconds(x->ev_t0, x->ev_t1, &t, why)) x->copy_s += t;
        x->timing_pending = false;
    }
    x->stage_off = 0; /* every earlier staged copy has landed (the sync above waited for them) */
    /* 2. slots and misses */
    int32_t *slots = s->h_rx + s->max_rows * hp->n_expert_used;
    size_t nc = 0;
    int rc = expert_pool_step(&x->pool, il, s->h_rx, nk, slots, x->copies, &nc, err);
    if (rc) return error_prefix(err, "CUDA pass: --gpu-mem: layer %u", il);
    /* 3. the misses' copies */
    const expert_pool_layout *lay = &x->pool.lay;
    const model_moe_weights *mw = &s->model->layers[il].moe;
    if (nc) {
        if (cuda_event_record(x->ev_t0, x->stream, why))
            return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: %s", why);
        for (size_t i = 0; i < nc; i++) {
            const expert_copy *c = &x->copies[i];
            /* the pool never holds more than its budget: every slot lies inside it */
            if (c->slot < 0 || (uint64_t)(c->slot + 1) * lay->slot_bytes > x->pool.pool_bytes ||
                x->pool.pool_bytes > x->pool.budget) {
                expert_pool_forget(&x->pool);
                return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: slot %d outside the pool", c->slot);
            }
            for (int p = 0; p < EXPERT_PARTS; p++) {
                const model_weight *w = part_of(mw, p);
                const uint64_t eb = expert_bytes(w);
                char *dst = x->dev + (uint64_t)c->slot * lay->slot_bytes + lay->part_off[p];
                const char *src = (const char *)w->data + (uint64_t)c->expert * eb;
                if (copy_part(x, dst, src, (size_t)eb, why)) {
                    expert_pool_forget(&x->pool); /* which slots hold what is no longer known */
                    return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: layer %u expert %u: %s", il,
                                     c->expert, why);
                }
                x->copy_bytes += eb;
            }
        }
        if (cuda_event_record(x->ev_t1, x->stream, why) || cuda_event_record(x->ev_done, x->stream, why) ||
            cuda_stream_wait_event(s->stream, x->ev_done, why)) {
            expert_pool_forget(&x->pool);
            return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: %s", why);
        }
        x->timing_pending = true;
    }
    /* 4. the slot ids, then the view the products read */
    if (cuda_h2d_async(s->sc.rslot, slots, nk * sizeof(int32_t), s->stream, why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: slot ids: %s", why);
    *out = (cuda_expert_view){.base = x->dev, .stride = lay->slot_bytes, .n_slots = expert_pool_slots(&x->pool)};
    for (int p = 0; p < EXPERT_PARTS; p++) out->off[p] = lay->part_off[p];
    return CLOVER_OK;
}
