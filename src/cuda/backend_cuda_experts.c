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
 *  3. each miss is copied into its slot on the pool's own stream, from host
 *     memory in one of four ways (CLOVER_GPU_MEM_HOST, below);
 *  4. the pass's stream waits for those copies (an event), gets the slot ids
 *     (sc.rslot), and the grouped expert kernels read "pool + part offset"
 *     with expert stride slot_bytes: slot ids in place of expert ids, the
 *     kernels unchanged. The weighted sum still reads the routing ids.
 * Eviction is safe without more fences: step 1's sync has drained every
 * earlier kernel that read a slot, and a step never evicts its own experts.
 *
 * Where the copies come from (CLOVER_GPU_MEM_HOST=auto|copy|ring|stage1|pin;
 * auto, the default, takes copy when MemAvailable holds the experts with a
 * margin, else ring). Why: on the H200 (2026-12-08-gmdiag) copies from
 * pinned memory ran at 54.7 GB/s, from the file's pages at ~5-6 GB/s, and
 * pinning the mapped file itself (cudaHostRegister) never returned.
 *  - copy: one anonymous region holding every routed expert, laid out as
 *    slot images (each part at its slot offset), filled from the mapping by
 *    a pool of host threads at start-up, then pinned (cudaHostRegister of
 *    anonymous memory: 0.06 s a GiB there). A miss is one copy of its image
 *    at pinned speed, runs of consecutive experts into consecutive slots one
 *    copy; nothing is staged and nothing waits. Costs the experts' bytes of
 *    host memory (the file's page cache stays reclaimable) and the fill.
 *  - ring: RING_N pinned staging buffers, each with an event: a buffer is
 *    filled with slot images (memcpy from the mapping, split over host
 *    threads when large), its copies issued, its event recorded, and only
 *    that buffer's event is waited for before it is refilled; the memcpy
 *    into one buffer overlaps the transfers out of the previous one.
 *  - stage1: one 64 MiB staging buffer, memcpy per part and a full stream
 *    sync whenever it fills (the path measured on 2026-12-08, kept as is).
 *  - pin: the mapping pinned in place (CLOVER_GPU_MEM_PIN=1 still selects
 *    it; the layers pinned within CLOVER_GPU_MEM_PIN_S seconds, default 30,
 *    the rest through stage1's buffer): an experiment, it hung on the H200.
 * A mode that cannot be set up falls to the next one (copy -> ring ->
 * stage1), with a line under CLOVER_GPU_MEM_STATS=1. Every mode writes the
 * same bytes into a slot's parts, so the outputs do not depend on the mode
 * (test_cuda_gpumem runs each against the all-device run, bit for bit).
 * Measured (H200, 35B-A3B synthetic, bench/device-runs/2026-12-10-stage31):
 * decode at 16 / 8 GiB copy 73 / 60, ring 38 / 29, stage1 24 / 15 tok/s;
 * the host copy's fill 0.7-1.0 s and pin 0.4-0.7 s for 16.9 GiB.
 *
 * The pool kept by the device (CLOVER_GPU_MEM_REMAP=device; host, the
 * default until it has run on a device): steps 1-4 become two kernels on the
 * pass's stream (expert_remap.cu: the map with its own tables here, exact
 * LRU over slots, and the copies read from the host copy over the bus), so
 * no layer syncs and the passes are captured as graphs again. It needs copy
 * mode (the pinned host copy, mapped into the device's address space).
 *
 * Not built yet (docs/OFFLOAD.md): prefetching the next layer's experts,
 * computing misses on the CPU, the stacked executor under --gpu-mem
 * (sequences run one by one), and several backends sharing one pool
 * concurrently (passes of one backend run one at a time).
 *
 * CLOVER_GPU_MEM_STATS=1 (a diagnostic, on stderr as it happens, so a run
 * killed by a timeout still shows how far it got): the budget's split and
 * the host mode chosen and why, the host copy's fill and pin times (or the
 * time to pin the mapping, or the fallback taken) when the pool is made;
 * per pass (cuda_experts_pass_begin/end around cuda_pass_enqueue) its MoE
 * layer steps, the host time in the pool's bookkeeping, the time blocked in
 * the routing-id syncs (which also wait for the pass's earlier kernels and
 * the previous layer's copies), the time spent issuing the copies (with the
 * staging memcpy and its syncs), the copies and their bytes, and the pass's
 * wall time; a line at once for any routing-id sync over a second (a stall
 * shows its layer); the totals, the hit rate and the bandwidth when freed.
 * Off, it costs one flag test a layer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend/expert_pool.h"
#include "base/alloc.h"
#include "base/error.h"
#include "base/threadpool.h"
#include "cuda/backend_cuda_experts_host.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_expert_remap.h"
#include "cuda/cuda_mem.h"
#include "quant/quant.h"

#define GIB 1073741824.0
#define STAGE_BYTES (64ull << 20)
/* Ring staging: RING_N buffers of RING_BYTES (CLOVER_GPU_MEM_RING_BYTES; at least one slot). Small buffers so
 * that a decode layer's few misses (35B-A3B: ~2-5 images of 1.7 MiB) already span two and the memcpy of the
 * second overlaps the transfer of the first; 32 MiB pinned in all, half of stage1's buffer. */
#define RING_N 8
#define RING_BYTES (4ull << 20)
#define CHUNK_BYTES (256ull << 10)  /* a threaded memcpy's task */
#define PAR_MIN (1ull << 20)        /* below this (CLOVER_GPU_MEM_PAR_MIN) a buffer is filled by the caller alone */
/* Prefetch guesses for passes of at most this many rows (decode steps, small batches): a longer pass routes to
 * most of a layer's experts, so its guess would be "everything" and its copies would contend with its own. */
#define PF_ROWS 4

typedef enum host_mode { HOST_AUTO, HOST_COPY, HOST_RING, HOST_STAGE1, HOST_PIN } host_mode;
static const char *const host_mode_names[] = {"auto", "copy", "ring", "stage1", "pin"};
/* Without CLOVER_GPU_MEM_HOST (HOST_STAGE1 would make the former path the default again) */
#define DEFAULT_HOST_MODE HOST_AUTO

/* Where layer l's slot images lie in the host copy (copy mode), and how long one is. A slot image puts part p
 * at lay.part_off[p], so one copy fills a slot; end is the last part's end in this layer, stride the image
 * pitch (end rounded up to 256: the slot size in a layer of the largest parts, which lets runs merge). */
typedef struct layer_img {
    uint64_t off, stride, end;
} layer_img;

/* One memcpy of a threaded fill (ring staging). */
typedef struct host_seg {
    char *dst;
    const char *src;
    size_t n;
} host_seg;

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
    char *stage;               /* stage1 (and pin's rest): the pinned staging buffer */
    size_t stage_off;
    host_mode mode;            /* the one in use (never HOST_AUTO) */
    layer_img *img;            /* [n_layer] */
    /* copy: the pinned host copy of every expert */
    char *hcopy;
    size_t hcopy_bytes;        /* its mapping's length */
    bool hcopy_pinned;
    double fill_s, hpin_s;     /* its fill (threads, from the mapping) and its cudaHostRegister */
    /* ring: the staging buffers, their events, the current one and the images queued in it */
    char *ring[RING_N];
    void *ring_ev[RING_N];
    size_t ring_bytes, ring_cur, ring_off;
    host_seg *segs;            /* [3 * n_expert]: the memcpys into the current buffer */
    size_t n_segs;
    host_seg *pend;            /* [n_expert]: its copies to the device (dst, src in the buffer, bytes) */
    size_t n_pend;
    host_seg *chunks;          /* the memcpys cut into tasks of CHUNK_BYTES at most */
    size_t chunk_cap;
    size_t par_min;
    threadpool *tp;            /* the ring's memcpy threads */
    /* copy and ring: the run of copies being merged (consecutive images into consecutive slots) */
    char *run_dst;
    const char *run_src;
    size_t run_n;
    uint64_t n_h2d;            /* cudaMemcpyAsync calls for experts */
    expert_copy *copies;       /* [n_expert] */
    uint64_t dense, reserve;   /* the budget's parts, for the report */
    double copy_s;             /* device time of the copies */
    uint64_t copy_bytes;       /* bytes copied over the link */
    bool stats;
    /* CLOVER_GPU_MEM_STATS=1: the current pass's split (pass_*), and the totals over every pass (sum_*) */
    double pass_t0, pass_step_s, pass_sync_s, pass_issue_s, pass_worst_sync_s;
    uint64_t pass_steps, pass_copies, pass_bytes, pass_misses, pass_uses, pass_stage_syncs, pass_staged;
    uint32_t pass_worst_layer;
    size_t pass_rows;
    bool pass_on, pass_preview;
    uint64_t n_pass, sum_copies, sum_stage_syncs, sum_staged;
    double sum_step_s, sum_sync_s, sum_issue_s, sum_wall_s, pin_s;
    /* CLOVER_GPU_MEM_REMAP=device: the device's tables (one allocation) and the kernels' arguments */
    bool on_device;
    void *remap_mem;
    uint64_t remap_tables, remap_stamp, remap_stamp_bytes; /* slot_of + owner's bytes; stamp + state's offset, bytes */
    cuda_remap_args ra;
    /* CLOVER_GPU_MEM_CPU=auto|all: the host's share of the misses (backend_cuda_experts_host.c) and the pool's
     * all-zero slot its pairs read on the device (-1: none) */
    cuda_host_share *host;
    int32_t zero_slot;
    uint64_t pending_copy_bytes; /* the bytes of the copies between ev_t0 and ev_t1 (the link's measured rate) */
    /* CLOVER_GPU_MEM_PREFETCH=1: the next layer's experts guessed from this layer's input and copied while this
     * layer computes (cuda_experts_prefetch_buffers below) */
    bool pf_on, pf_guessed, pf_pending;
    size_t pf_n;               /* rows of the pending guess */
    float *pf_log, *pf_w;      /* device: [PF_ROWS][n_expert] the guess's router logits, [PF_ROWS][k] its weights */
    int32_t *pf_idx, *h_pf;    /* device and pinned host: [PF_ROWS][k] the guessed ids */
    int32_t *pf_list;          /* [n_expert] the guess's distinct experts */
    uint8_t *pf_seen;          /* [n_expert] */
    void *ev_pf;               /* after the prefetch copies: the next layer's step makes the pass wait on it */
    uint64_t pf_bytes;         /* bytes prefetched (not in copy_bytes: their copies are not timed) */
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

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

/* The pin's time limit: CLOVER_GPU_MEM_PIN_S seconds (default 30; 0: none). */
static double pin_limit_s(void) {
    const char *v = getenv("CLOVER_GPU_MEM_PIN_S");
    if (!v || !*v) return 30.0;
    char *end = NULL;
    const double s = strtod(v, &end);
    return end && !*end && s >= 0 ? s : 30.0;
}

/* Pins the experts' ranges of the mapping in place (page-aligned, merged: one range a layer in clover's files,
 * ~450 MB each for 35B-A3B), in file order, until the time limit: whatever is pinned by then stays pinned and
 * is copied from directly, the rest goes through the staging buffer (copy_part). Why a limit: pinning ~17 GiB
 * of a file mapping costs seconds at best, and issue 31's first 35B-A3B run at --gpu-mem 16 did not finish in
 * 200 s with the pool already allocated (this comes right after): a pin that crawls must not take the whole
 * request. True when every range is pinned; false (nothing pinned) when the driver refuses one (a read-only
 * file mapping some drivers do not take), or false with x->regs the pinned prefix when the limit stopped it. */
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
    size_t total = 0, done = 0;
    for (size_t i = 0; i < k; i++) total += r[i].n;
    const double limit = pin_limit_s();
    /* announced before the calls: a registration that takes minutes (or never returns) shows as this line last */
    if (x->stats)
        fprintf(stderr,
                "gpu-mem: pinning the experts' %.2f GiB of the mapping in place (%zu ranges, cudaHostRegister "
                "read-only, limit %.0f s)...\n",
                (double)total / GIB, k, limit);
    const double t0 = now_s();
    double said = t0;
    size_t i = 0;
    for (; i < k; i++) {
        if (cuda_host_register(r[i].p, r[i].n, 1, why)) {
            const double t1 = now_s();
            while (i--) cuda_host_unregister(r[i].p);
            if (x->stats)
                fprintf(stderr,
                        "gpu-mem: the mapping cannot be pinned in place (%s) after %.2f s (undone in %.2f s): "
                        "staging copies\n",
                        why, t1 - t0, now_s() - t1);
            mem_free(r);
            return false;
        }
        done += r[i].n;
        const double t = now_s();
        if (x->stats && t - said >= 2.0) { /* the rate, while it lasts */
            fprintf(stderr, "gpu-mem: pinned %.2f of %.2f GiB in %.1f s\n", (double)done / GIB, (double)total / GIB,
                    t - t0);
            said = t;
        }
        if (limit > 0 && t - t0 > limit && i + 1 < k) {
            i++;
            break;
        }
    }
    x->pin_s = now_s() - t0;
    if (x->stats)
        fprintf(stderr, "gpu-mem: pinned %.2f GiB in %.2f s (%.2f GB/s)%s\n", (double)done / GIB, x->pin_s,
                x->pin_s > 0 ? (double)done / x->pin_s * 1e-9 : 0.0,
                i < k ? ": the time limit (CLOVER_GPU_MEM_PIN_S) stopped it, the rest is copied through staging"
                      : "");
    x->regs = r;
    x->n_regs = i;
    return i == k;
}

/* Whether [p, p + n) lies in one pinned range (x->regs: sorted, disjoint). */
static bool pinned_at(const cuda_experts *x, const char *p, size_t n) {
    size_t a = 0, b = x->n_regs;
    while (a < b) { /* the first range ending after p */
        const size_t mid = (a + b) / 2;
        if (x->regs[mid].p + x->regs[mid].n <= p) a = mid + 1;
        else b = mid;
    }
    return a < x->n_regs && x->regs[a].p <= p && p + n <= x->regs[a].p + x->regs[a].n;
}

/* ---- host modes: copy and ring ---- */

static uint64_t up256(uint64_t v) { return (v + 255) & ~(uint64_t)255; }

/* A byte count from the environment (0 when unset or not a number). */
static uint64_t env_bytes(const char *name, uint64_t dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end = NULL;
    const unsigned long long b = strtoull(v, &end, 10);
    return end && !*end ? (uint64_t)b : dflt;
}

/* Host threads for the fill and the ring's memcpy: CLOVER_GPU_MEM_THREADS, else the CPUs up to `cap`. */
static size_t host_threads(size_t cap) {
    const uint64_t t = env_bytes("CLOVER_GPU_MEM_THREADS", 0);
    if (t) return t > 64 ? 64 : (size_t)t;
    const size_t n = threadpool_cpu_count();
    return n < cap ? n : cap;
}

/* MemAvailable and MemTotal of /proc/meminfo in bytes; false when unreadable (not Linux). */
static bool host_mem(uint64_t *avail, uint64_t *total) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return false;
    char line[256];
    unsigned long long kb;
    int got = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) *avail = (uint64_t)kb << 10, got |= 1;
        else if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) *total = (uint64_t)kb << 10, got |= 2;
    }
    fclose(f);
    return got == 3;
}

/* The slot images' geometry per layer (x->img) and the host copy's size. */
static uint64_t layer_images(cuda_experts *x, const clover_model *m) {
    const expert_pool_layout *lay = &x->pool.lay;
    uint64_t off = 0;
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        uint64_t end = 0;
        for (int p = 0; p < EXPERT_PARTS; p++) {
            const uint64_t e = lay->part_off[p] + expert_bytes(part_of(&m->layers[l].moe, p));
            if (e > end) end = e;
        }
        x->img[l] = (layer_img){.off = off, .stride = up256(end), .end = end};
        off += x->img[l].stride * m->hp.n_expert;
    }
    return off;
}

typedef struct fill_ctx {
    const cuda_experts *x;
    const clover_model *m;
} fill_ctx;

/* Task t of the fill: expert t % n_expert of layer t / n_expert, its parts into its slot image. */
static void fill_task(void *ctx, size_t t, size_t thread) {
    (void)thread;
    const fill_ctx *c = ctx;
    const uint32_t E = c->m->hp.n_expert, l = (uint32_t)(t / E), e = (uint32_t)(t % E);
    char *img = c->x->hcopy + c->x->img[l].off + (uint64_t)e * c->x->img[l].stride;
    for (int p = 0; p < EXPERT_PARTS; p++) {
        const model_weight *w = part_of(&c->m->layers[l].moe, p);
        const uint64_t eb = expert_bytes(w);
        memcpy(img + c->x->pool.lay.part_off[p], (const char *)w->data + (uint64_t)e * eb, (size_t)eb);
    }
}

/* copy mode: the host copy made, filled and pinned; false (nothing kept, `why` set) when it cannot be. forced:
 * CLOVER_GPU_MEM_HOST=copy (no margin asked, only that MemAvailable holds it). */
static bool host_copy_make(cuda_experts *x, const clover_model *m, uint64_t bytes, bool forced, char *why) {
    uint64_t avail = 0, total = 0;
    const bool known = host_mem(&avail, &total);
    /* the margin: what the rest of the process and the host keep (the session's pinned buffers, the page cache
     * of the dense weights, other work): an eighth of the memory, at least 4 GiB */
    const uint64_t margin = forced ? 0 : (total / 8 > (4ull << 30) ? total / 8 : (4ull << 30));
    if (!known && !forced) {
        snprintf(why, CUDA_WHY, "MemAvailable unknown (no /proc/meminfo)");
        return false;
    }
    if (known && bytes + margin > avail) {
        snprintf(why, CUDA_WHY, "%.2f GiB + a margin of %.2f GiB > MemAvailable %.2f GiB", (double)bytes / GIB,
                 (double)margin / GIB, (double)avail / GIB);
        return false;
    }
    if (x->stats)
        fprintf(stderr,
                "gpu-mem: host copy: %.2f GiB of experts (MemAvailable %.2f GiB, margin %.2f GiB%s): filling...\n",
                (double)bytes / GIB, (double)avail / GIB, (double)margin / GIB, forced ? ", forced" : "");
    const size_t huge = 2u << 20;
    const size_t len = (size_t)((bytes + huge - 1) / huge * huge);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        snprintf(why, CUDA_WHY, "mmap of %.2f GiB failed", (double)len / GIB);
        return false;
    }
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE); /* fewer faults in the fill and fewer pages to pin; a hint, failure is fine */
#endif
    x->hcopy = p;
    x->hcopy_bytes = len;
    /* the fill: the file's pages are usually in the page cache; its page faults (source and destination) are
     * what one thread is slow at */
    const double t0 = now_s();
    threadpool *tp = NULL;
    clover_error e = {0};
    const size_t nt = host_threads(16);
    if (nt > 1 && threadpool_create(&tp, nt, &e)) tp = NULL; /* inline then */
    fill_ctx c = {x, m};
    threadpool_run(tp, (size_t)m->hp.n_layer * m->hp.n_expert, fill_task, &c);
    const size_t used = threadpool_size(tp);
    threadpool_free(tp);
    x->fill_s = now_s() - t0;
    const double t1 = now_s();
    if (cuda_host_register(x->hcopy, x->hcopy_bytes, 0, why)) {
        munmap(x->hcopy, x->hcopy_bytes);
        x->hcopy = NULL;
        x->hcopy_bytes = 0;
        return false;
    }
    x->hcopy_pinned = true;
    x->hpin_s = now_s() - t1;
    if (x->stats)
        fprintf(stderr, "gpu-mem: host copy filled in %.2f s (%.1f GB/s, %zu threads), pinned in %.2f s\n", x->fill_s,
                x->fill_s > 0 ? (double)bytes / x->fill_s * 1e-9 : 0.0, used, x->hpin_s);
    return true;
}

/* ring mode: its buffers, events, queues and threads; false (`why` set; x->ring_* freed by cuda_experts_free) */
static bool ring_make(cuda_experts *x, uint32_t n_expert, char *why) {
    uint64_t b = env_bytes("CLOVER_GPU_MEM_RING_BYTES", RING_BYTES);
    if (b < x->pool.lay.slot_bytes) b = x->pool.lay.slot_bytes; /* one image at least */
    x->ring_bytes = (size_t)b;
    x->par_min = (size_t)env_bytes("CLOVER_GPU_MEM_PAR_MIN", PAR_MIN);
    for (int i = 0; i < RING_N; i++)
        if (cuda_host_alloc((void **)&x->ring[i], x->ring_bytes, why) || cuda_event_create(&x->ring_ev[i], why))
            return false;
    x->segs = mem_alloc((size_t)EXPERT_PARTS * n_expert * sizeof *x->segs);
    x->pend = mem_alloc((size_t)n_expert * sizeof *x->pend);
    x->chunk_cap = (size_t)EXPERT_PARTS * n_expert + x->ring_bytes / CHUNK_BYTES + 1;
    x->chunks = mem_alloc(x->chunk_cap * sizeof *x->chunks);
    if (!x->segs || !x->pend || !x->chunks) {
        snprintf(why, CUDA_WHY, "no host memory for the ring's queues");
        return false;
    }
    clover_error e = {0};
    const size_t nt = host_threads(8);
    if (nt > 1 && threadpool_create(&x->tp, nt, &e)) x->tp = NULL; /* the memcpy runs inline then */
    x->ring_cur = 0;
    x->ring_off = 0;
    return true;
}

static void ring_release(cuda_experts *x) {
    for (int i = 0; i < RING_N; i++) {
        cuda_host_free(x->ring[i]);
        cuda_event_destroy(x->ring_ev[i]);
        x->ring[i] = NULL;
        x->ring_ev[i] = NULL;
    }
    mem_free(x->segs);
    mem_free(x->pend);
    mem_free(x->chunks);
    x->segs = x->pend = x->chunks = NULL;
    threadpool_free(x->tp);
    x->tp = NULL;
}

/* Copies to the device through a run: one whose destination and source both continue the run within a 256-byte
 * gap (the padding between images, in buffers this file owns on both sides) extends it; anything else sends the
 * run and starts anew. run_flush sends what is left. */
static int run_flush(cuda_experts *x, char *why) {
    if (!x->run_n) return 0;
    const int rc = cuda_h2d_async(x->run_dst, x->run_src, x->run_n, x->stream, why);
    x->n_h2d++;
    x->run_n = 0;
    return rc;
}

static int run_add(cuda_experts *x, char *dst, const char *src, size_t n, char *why) {
    if (x->run_n) {
        const uintptr_t de = (uintptr_t)x->run_dst + x->run_n, se = (uintptr_t)x->run_src + x->run_n;
        if ((uintptr_t)dst >= de && (uintptr_t)dst - de < 256 && (uintptr_t)src >= se &&
            (uintptr_t)src - se == (uintptr_t)dst - de) {
            x->run_n = (size_t)((uintptr_t)dst + n - (uintptr_t)x->run_dst);
            return 0;
        }
        if (run_flush(x, why)) return -1;
    }
    x->run_dst = dst;
    x->run_src = src;
    x->run_n = n;
    return 0;
}

/* Copy mode: expert e of layer l from its image in the pinned host copy into pool slot `slot` (a run_add). */
static int image_add(cuda_experts *x, int32_t slot, uint32_t l, uint32_t e, char *why) {
    return run_add(x, x->dev + (uint64_t)slot * x->pool.lay.slot_bytes,
                   x->hcopy + x->img[l].off + (uint64_t)e * x->img[l].stride, (size_t)x->img[l].end, why);
}

static void chunk_task(void *ctx, size_t t, size_t thread) {
    (void)thread;
    const host_seg *c = (const host_seg *)ctx + t;
    memcpy(c->dst, c->src, c->n);
}

/* The current ring buffer: its memcpys (threaded when large), then its copies and its event. */
static int ring_flush(cuda_experts *x, char *why) {
    if (!x->n_pend) return 0;
    size_t total = 0;
    for (size_t i = 0; i < x->n_segs; i++) total += x->segs[i].n;
    size_t nc = 0;
    if (x->tp && total >= x->par_min) /* cut into tasks (chunk_cap holds a full buffer's: see ring_make) */
        for (size_t i = 0; i < x->n_segs; i++)
            for (size_t o = 0; o < x->segs[i].n && nc < x->chunk_cap; o += CHUNK_BYTES) {
                const host_seg *g = &x->segs[i];
                x->chunks[nc++] = (host_seg){g->dst + o, g->src + o, g->n - o < CHUNK_BYTES ? g->n - o : CHUNK_BYTES};
            }
    if (nc && nc < x->chunk_cap) threadpool_run(x->tp, nc, chunk_task, x->chunks);
    else
        for (size_t i = 0; i < x->n_segs; i++) memcpy(x->segs[i].dst, x->segs[i].src, x->segs[i].n);
    for (size_t i = 0; i < x->n_pend; i++)
        if (run_add(x, x->pend[i].dst, x->pend[i].src, x->pend[i].n, why)) return -1;
    if (run_flush(x, why) || cuda_event_record(x->ring_ev[x->ring_cur], x->stream, why)) return -1;
    x->n_segs = x->n_pend = 0;
    x->ring_cur = (x->ring_cur + 1) % RING_N;
    x->ring_off = 0;
    return 0;
}

/* Queues expert e of layer l (its image: end bytes) for the slot at dst, through the ring. */
static int ring_add(cuda_experts *x, const model_moe_weights *mw, uint32_t l, uint32_t e, char *dst, char *why) {
    const layer_img *g = &x->img[l];
    if (x->ring_off + g->end > x->ring_bytes && ring_flush(x, why)) return -1;
    if (!x->ring_off) { /* a buffer about to be refilled: its last copies must have left it */
        const int done = cuda_event_done(x->ring_ev[x->ring_cur], why);
        if (done < 0 || (!done && cuda_event_sync(x->ring_ev[x->ring_cur], why))) return -1;
        if (!done) x->pass_stage_syncs++;
    }
    char *img = x->ring[x->ring_cur] + x->ring_off;
    for (int p = 0; p < EXPERT_PARTS; p++) {
        const model_weight *w = part_of(mw, p);
        const uint64_t eb = expert_bytes(w);
        x->segs[x->n_segs++] = (host_seg){img + x->pool.lay.part_off[p], (const char *)w->data + (uint64_t)e * eb,
                                          (size_t)eb};
    }
    x->pend[x->n_pend++] = (host_seg){dst, img, (size_t)g->end};
    x->ring_off += (size_t)g->stride;
    x->pass_staged++;
    return 0;
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
                "host-to-device at %.1f GB/s (host mode %s: %s)\n",
                (unsigned long long)p->steps, (unsigned long long)acc,
                acc ? 100.0 * (double)p->hits / (double)acc : 0.0,
                (unsigned long long)p->misses, (double)x->copy_bytes / GIB,
                x->copy_s > 0 ? (double)x->copy_bytes / x->copy_s * 1e-9 : 0.0, host_mode_names[x->mode],
                x->mode == HOST_COPY   ? "from the pinned host copy"
                : x->mode == HOST_RING ? "through the staging ring"
                : !x->n_regs           ? "through pinned staging"
                : x->stage             ? "partly from the pinned mapping, partly staged"
                                       : "from the pinned mapping");
        fprintf(stderr,
                "gpu-mem: %llu passes, %.3f s wall in them: routing-id syncs %.3f s, pool steps %.3f s (host), "
                "issuing %llu copies %.3f s (%llu staged, %llu staging syncs or ring waits, %llu cudaMemcpyAsync); "
                "pin %.2f s; host copy fill %.2f s + pin %.2f s\n",
                (unsigned long long)x->n_pass, x->sum_wall_s, x->sum_sync_s, x->sum_step_s,
                (unsigned long long)x->sum_copies, x->sum_issue_s, (unsigned long long)x->sum_staged,
                (unsigned long long)x->sum_stage_syncs, (unsigned long long)x->n_h2d, x->pin_s, x->fill_s, x->hpin_s);
    }
    if (x->stats && x->pf_on)
        fprintf(stderr, "gpu-mem: prefetch: %llu experts guessed and copied (%.2f GiB), %llu of them used by the "
                        "next step (%.1f%%)\n",
                (unsigned long long)x->pool.prefetched, (double)x->pf_bytes / GIB,
                (unsigned long long)x->pool.prefetch_hits,
                x->pool.prefetched ? 100.0 * (double)x->pool.prefetch_hits / (double)x->pool.prefetched : 0.0);
    if (x->stats && x->host) {
        cuda_host_share_stats hs;
        cuda_host_share_info(x->host, &hs);
        fprintf(stderr,
                "gpu-mem: the host computed %llu misses (%llu row pairs) in %llu layers, %.3f s "
                "(CLOVER_GPU_MEM_CPU=%s; rates now: link %.1f GB/s, host %.1f GB/s + %.1f us a row)\n",
                (unsigned long long)hs.experts, (unsigned long long)hs.pairs, (unsigned long long)hs.layers, hs.seconds,
                hs.mode, hs.link_gbps, hs.host_gbps, hs.host_row_us);
    }
    const double tu = now_s();
    for (size_t i = 0; i < x->n_regs; i++) cuda_host_unregister(x->regs[i].p);
    if (x->stats && x->n_regs) fprintf(stderr, "gpu-mem: unpinned in %.2f s\n", now_s() - tu);
    mem_free(x->regs);
    if (x->hcopy) {
        const double th = now_s();
        if (x->hcopy_pinned) cuda_host_unregister(x->hcopy);
        munmap(x->hcopy, x->hcopy_bytes);
        if (x->stats) fprintf(stderr, "gpu-mem: host copy released in %.2f s\n", now_s() - th);
    }
    ring_release(x);
    cuda_host_share_free(x->host);
    cuda_free(x->pf_log);
    cuda_free(x->pf_w);
    cuda_free(x->pf_idx);
    cuda_host_free(x->h_pf);
    mem_free(x->pf_list);
    mem_free(x->pf_seen);
    cuda_event_destroy(x->ev_pf);
    cuda_free(x->remap_mem);
    mem_free(x->img);
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

/* The host mode (CLOVER_GPU_MEM_HOST; else CLOVER_GPU_MEM_PIN=1: pin; else auto) set up, falling from copy to
 * ring to stage1 when one cannot be; an error only for a bad value or when stage1's buffer cannot be had. */
static int host_setup(cuda_experts *x, const clover_model *m, clover_error *err) {
    const char *v = getenv("CLOVER_GPU_MEM_HOST"), *pin = getenv("CLOVER_GPU_MEM_PIN");
    host_mode mode = pin && !strcmp(pin, "1") ? HOST_PIN : DEFAULT_HOST_MODE;
    if (v && *v) {
        int k = -1;
        for (int i = 0; i < (int)(sizeof host_mode_names / sizeof *host_mode_names); i++)
            if (!strcmp(v, host_mode_names[i])) k = i;
        if (k < 0)
            return error_set(err, CLOVER_E_INVALID, "CLOVER_GPU_MEM_HOST=%s: expected auto, copy, ring, stage1 or pin",
                             v);
        mode = (host_mode)k;
    }
    x->img = mem_calloc(m->hp.n_layer, sizeof *x->img);
    if (!x->img) return error_set(err, CLOVER_E_NOMEM, "--gpu-mem: no memory");
    const uint64_t bytes = layer_images(x, m);
    char why[CUDA_WHY] = "";
    if (x->stats)
        fprintf(stderr, "gpu-mem: host mode asked: %s%s\n", host_mode_names[mode],
                v && *v ? " (CLOVER_GPU_MEM_HOST)" : mode == HOST_PIN ? " (CLOVER_GPU_MEM_PIN=1)" : " (the default)");
    if (mode == HOST_AUTO || mode == HOST_COPY) {
        if (host_copy_make(x, m, bytes, mode == HOST_COPY, why)) {
            x->mode = HOST_COPY;
            if (x->stats) fprintf(stderr, "gpu-mem: host mode copy: misses copied from the pinned host copy\n");
            return CLOVER_OK;
        }
        if (x->stats) fprintf(stderr, "gpu-mem: no host copy (%s): the staging ring instead\n", why);
        mode = HOST_RING;
    }
    if (mode == HOST_RING) {
        if (ring_make(x, m->hp.n_expert, why)) {
            x->mode = HOST_RING;
            if (x->stats)
                fprintf(stderr, "gpu-mem: host mode ring: %d pinned staging buffers of %.1f MiB, %zu memcpy threads\n",
                        RING_N, (double)x->ring_bytes / 1048576.0, threadpool_size(x->tp));
            return CLOVER_OK;
        }
        if (x->stats) fprintf(stderr, "gpu-mem: no staging ring (%s): one staging buffer (stage1) instead\n", why);
        ring_release(x);
        mode = HOST_STAGE1;
    }
    x->mode = mode;
    if (mode == HOST_STAGE1 && x->stats)
        fprintf(stderr, "gpu-mem: host mode stage1: one pinned staging buffer, nothing pinned in place\n");
    if (mode == HOST_STAGE1 || !register_mapping(x, m)) {
        if (cuda_host_alloc((void **)&x->stage, STAGE_BYTES, why))
            return error_set(err, CLOVER_E_NOMEM, "--gpu-mem: %llu bytes of pinned staging: %s",
                             (unsigned long long)STAGE_BYTES, why);
    }
    return CLOVER_OK;
}

static uint64_t up8(uint64_t v) { return (v + 7) & ~(uint64_t)7; }

/* CLOVER_GPU_MEM_REMAP=device: the device's tables made and filled (every slot free, nothing resident); host or
 * unset: nothing. An error for another value, or when the pinned host copy it reads from is not in use. */
/* Prefetch, on by default since its H100 run (bench/device-runs/2026-12-22-on24: decode at 16 GiB 112.8-113.8 ->
 * 138.4 tok/s, at 8 GiB 63.7-67.2 -> 75.9, 92% of the guesses used, ids equal); CLOVER_GPU_MEM_PREFETCH=0 turns it
 * off. It needs the pool kept by the host (the device's map has no host step to add copies to) and the pinned host
 * copy (a staged copy still in flight when the next layer's step empties the staging buffers would be
 * overwritten): without them it stays off (said under CLOVER_GPU_MEM_STATS), and =1 with the device's map is
 * refused. */
static int prefetch_setup(cuda_experts *x, const clover_model *m, clover_error *err) {
    const char *v = getenv("CLOVER_GPU_MEM_PREFETCH");
    const bool asked = v && !strcmp(v, "1");
    if (v && *v && !asked && strcmp(v, "0"))
        return error_set(err, CLOVER_E_INVALID, "CLOVER_GPU_MEM_PREFETCH=%s: expected 0 or 1", v);
    if (v && !strcmp(v, "0")) return CLOVER_OK;
    if (x->on_device && !asked) return CLOVER_OK;
    if (x->on_device)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "CLOVER_GPU_MEM_PREFETCH=1 needs the pool kept by the host (not CLOVER_GPU_MEM_REMAP=device)");
    if (x->mode != HOST_COPY) {
        if (x->stats)
            fprintf(stderr, "gpu-mem: prefetch off: it copies from the pinned host copy, not in use (host mode %s)\n",
                    host_mode_names[x->mode]);
        return CLOVER_OK;
    }
    const size_t E = m->hp.n_expert, k = m->hp.n_expert_used;
    char why[CUDA_WHY] = "";
    if (cuda_alloc((void **)&x->pf_log, PF_ROWS * E * sizeof(float), why) ||
        cuda_alloc((void **)&x->pf_w, PF_ROWS * k * sizeof(float), why) ||
        cuda_alloc((void **)&x->pf_idx, PF_ROWS * k * sizeof(int32_t), why) ||
        cuda_host_alloc((void **)&x->h_pf, PF_ROWS * k * sizeof(int32_t), why) || cuda_event_create(&x->ev_pf, why))
        return error_set(err, CLOVER_E_NOMEM, "CLOVER_GPU_MEM_PREFETCH: its buffers: %s", why);
    x->pf_list = mem_alloc(E * sizeof *x->pf_list);
    x->pf_seen = mem_calloc(E, 1);
    if (!x->pf_list || !x->pf_seen) return error_set(err, CLOVER_E_NOMEM, "CLOVER_GPU_MEM_PREFETCH: no memory");
    x->pf_on = true;
    if (x->stats) fprintf(stderr, "gpu-mem: prefetch on: passes of up to %d rows guess the next layer's experts\n",
                          PF_ROWS);
    return CLOVER_OK;
}

bool cuda_experts_prefetch_buffers(cuda_experts *x, uint32_t il, uint32_t n_layer, size_t n, cuda_prefetch_buf *b) {
    if (!x || !x->pf_on || n == 0 || n > PF_ROWS || il + 1 >= n_layer) return false;
    *b = (cuda_prefetch_buf){.log = x->pf_log, .w = x->pf_w, .idx = x->pf_idx};
    return true;
}

void cuda_experts_prefetch_mark(cuda_experts *x, size_t n) {
    x->pf_guessed = true;
    x->pf_n = n;
}

/* After layer il's own copies: the guessed experts of layer il + 1 (h_pf, read back with il's routing ids) into
 * slots il's step has not used, copied on the pool's stream behind il's copies; ev_pf after them. */
static int prefetch_issue(cuda_experts *x, const backend_session *s, uint32_t il, char *why) {
    const size_t E = s->hp->n_expert, nk = x->pf_n * s->hp->n_expert_used;
    size_t m = 0;
    for (size_t i = 0; i < nk; i++) {
        const int32_t e = x->h_pf[i];
        if (e >= 0 && (size_t)e < E && !x->pf_seen[e]) x->pf_seen[e] = 1, x->pf_list[m++] = e;
    }
    for (size_t i = 0; i < m; i++) x->pf_seen[x->pf_list[i]] = 0;
    size_t nc = 0;
    clover_error perr = {0};
    if (expert_pool_prefetch(&x->pool, il + 1, x->pf_list, m, x->copies, &nc, &perr)) {
        memcpy(why, perr.message, CUDA_WHY - 1); /* the pool's message, cut to the runtime's reason buffer */
        why[CUDA_WHY - 1] = 0;
        return -1;
    }
    const uint32_t l1 = il + 1;
    for (size_t i = 0; i < nc; i++) {
        const expert_copy *c = &x->copies[i];
        if (image_add(x, c->slot, l1, c->expert, why)) return -1;
        x->pf_bytes += x->pool.lay.part_bytes[0] + x->pool.lay.part_bytes[1] + x->pool.lay.part_bytes[2];
    }
    if (run_flush(x, why) || (nc && cuda_event_record(x->ev_pf, x->stream, why))) return -1;
    x->pf_pending = nc > 0;
    return 0;
}

static int remap_setup(cuda_experts *x, const clover_model *m, clover_error *err) {
    const char *v = getenv("CLOVER_GPU_MEM_REMAP");
    if (!v || !*v || !strcmp(v, "host")) return CLOVER_OK;
    if (strcmp(v, "device"))
        return error_set(err, CLOVER_E_INVALID, "CLOVER_GPU_MEM_REMAP=%s: expected host or device", v);
    const uint32_t L = m->hp.n_layer, E = m->hp.n_expert;
    const size_t S = expert_pool_slots(&x->pool);
    if (x->pool.cache.policy != EXPERT_LRU)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "CLOVER_GPU_MEM_REMAP=device keeps LRU only (CLOVER_GPU_MEM_POLICY=%s)",
                         expert_policy_name(x->pool.cache.policy));
    if (x->mode != HOST_COPY)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "CLOVER_GPU_MEM_REMAP=device reads the experts from the pinned host copy, which is not in use "
                         "(host mode %s: the host lacks the memory, or CLOVER_GPU_MEM_HOST chose another)",
                         host_mode_names[x->mode]);
    if (cuda_remap_map_smem(E, E) > CUDA_REMAP_SMEM_MAX || S > (size_t)INT32_MAX / 2 || (uint64_t)L * E > INT32_MAX)
        return error_set(err, CLOVER_E_UNSUPPORTED, "CLOVER_GPU_MEM_REMAP=device: %u experts a layer is too many", E);
    char why[CUDA_WHY] = "";
    void *hdev = NULL;
    if (cuda_host_device_ptr(&hdev, x->hcopy, why))
        return error_set(err, CLOVER_E_UNSUPPORTED, "CLOVER_GPU_MEM_REMAP=device: the host copy's device address: %s",
                         why);
    /* one allocation, laid out in this order: slot_of, owner, jobs, n_jobs (int32); stamp, state, stats, the
     * images' offsets, strides and ends (uint64) */
    const uint64_t o_owner = up8((uint64_t)L * E * 4), o_jobs = up8(o_owner + S * 4), o_nj = up8(o_jobs + 8ull * E);
    const uint64_t o_stamp = up8(o_nj + 4), o_state = o_stamp + S * 8, o_stats = o_state + 16, o_img = o_stats + 32;
    const uint64_t bytes = o_img + 24ull * L;
    uint8_t *h = mem_calloc(1, (size_t)bytes);
    if (!h) return error_set(err, CLOVER_E_NOMEM, "--gpu-mem: no memory");
    memset(h, 0xFF, (size_t)(o_jobs)); /* slot_of and owner: -1 */
    uint64_t *img = (uint64_t *)(h + o_img), img_max = 0;
    for (uint32_t l = 0; l < L; l++) {
        img[l] = x->img[l].off, img[L + l] = x->img[l].stride, img[2 * L + l] = x->img[l].end;
        if (x->img[l].end > img_max) img_max = x->img[l].end;
    }
    int rc = cuda_alloc(&x->remap_mem, (size_t)bytes, why) || cuda_h2d(x->remap_mem, h, (size_t)bytes, why);
    mem_free(h);
    if (rc) return error_set(err, CLOVER_E_NOMEM, "CLOVER_GPU_MEM_REMAP=device: its tables: %s", why);
    char *d = x->remap_mem;
    x->remap_tables = o_jobs, x->remap_stamp = o_stamp, x->remap_stamp_bytes = o_stats - o_stamp;
    x->ra = (cuda_remap_args){.slot_of = (int32_t *)d,
                              .owner = (int32_t *)(d + o_owner),
                              .stamp = (unsigned long long *)(d + o_stamp),
                              .state = (unsigned long long *)(d + o_state),
                              .stats = (unsigned long long *)(d + o_stats),
                              .jobs = (int32_t *)(d + o_jobs),
                              .n_jobs = (int32_t *)(d + o_nj),
                              .img_off = (const uint64_t *)(d + o_img),
                              .img_stride = (const uint64_t *)(d + o_img) + L,
                              .img_end = (const uint64_t *)(d + o_img) + 2 * L,
                              .host = hdev,
                              .pool = x->dev,
                              .slot_bytes = x->pool.lay.slot_bytes,
                              .img_max = img_max,
                              .n_expert = E,
                              .n_slots = (int)S};
    x->on_device = true;
    if (x->stats) fprintf(stderr, "gpu-mem: the pool kept on the device (CLOVER_GPU_MEM_REMAP=device)\n");
    return CLOVER_OK;
}

/* The link's rate the host's plan starts from (measured from the first copies on): the host modes' decode
 * figures on the H200 (2026-12-08-gmdiag, 2026-12-10-stage31). */
static double link_guess(host_mode mode) {
    return mode == HOST_COPY ? 50e9 : mode == HOST_RING ? 25e9 : 10e9;
}

int cuda_experts_create(cuda_model *cm, uint64_t reserve, const backend_config *cfg, clover_error *err) {
    const clover_model *m = cm->model;
    const model_hparams *hp = &m->hp;
    expert_pool_layout lay;
    int rc = cuda_experts_layout(m, &lay, err);
    if (rc) return rc;
    uint64_t budget = 0;
    if ((rc = expert_pool_budget(cm->gpu_mem, cm->bytes, reserve, &lay, hp->n_layer, hp->n_expert, &budget, err)))
        return rc;
    /* CLOVER_GPU_MEM_POLICY=lru|lfu|sweep. The default is sweep: LRU for decode steps and previews, the most
     * recent victim in a step that uses most of its layer's experts, so a prompt's chunks keep the older part of
     * their sweep over the layers instead of none (bench/RESULTS.md: on a 4,096-token prompt's routing trace, hits
     * 18.7 -> 37.4% at 8 GiB and 32.0 -> 86.5% at 16; a chat trace's unchanged). Which slot holds an expert never
     * changes a product's bits. The pool kept by the device keeps plain LRU (expert_remap.cu). */
    const char *pn = getenv("CLOVER_GPU_MEM_POLICY"), *rm = getenv("CLOVER_GPU_MEM_REMAP");
    int pol = pn && *pn ? expert_policy_from_name(pn) : rm && !strcmp(rm, "device") ? EXPERT_LRU : EXPERT_SWEEP;
    if (pol < 0) return error_set(err, CLOVER_E_INVALID, "CLOVER_GPU_MEM_POLICY=%s: expected lru, lfu or sweep", pn);
    /* CLOVER_GPU_MEM_CPU=auto|all: the host computes some misses; their pairs read one all-zero slot, taken from
     * the pool's budget (the pool must still hold a layer's experts) */
    const char *cpu_name = NULL;
    const int cpu_mode = cuda_host_share_mode(&cpu_name, err);
    if (cpu_mode < 0) return cpu_mode;
    if (cpu_mode && rm && !strcmp(rm, "device"))
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "CLOVER_GPU_MEM_CPU=%s needs the pool kept by the host (CLOVER_GPU_MEM_REMAP=device maps "
                         "the experts on the device, where the host cannot take any)",
                         cpu_name);
    if (cpu_mode && (!cfg || !cfg->expert_host_open)) /* before the host copy's fill (seconds) */
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "CLOVER_GPU_MEM_CPU=%s: this backend was opened without a host to compute experts on (the "
                         "engine opens one; a bare backend needs backend_config.expert_host_open)",
                         cpu_name);
    if (cpu_mode && budget < (uint64_t)(hp->n_expert + 1) * lay.slot_bytes)
        return error_set(err, CLOVER_E_NOMEM,
                         "CLOVER_GPU_MEM_CPU=%s: --gpu-mem %.2f GiB leaves the pool %.2f GiB, too little for a layer's "
                         "%u experts and the zero slot of the host's pairs (%.2f GiB)",
                         cpu_name, (double)cm->gpu_mem / GIB, (double)budget / GIB, hp->n_expert,
                         (double)(hp->n_expert + 1) * (double)lay.slot_bytes / GIB);
    /* the zero slot from what the budget leaves beyond the pool, else from the pool (one expert fewer) */
    const uint64_t left = cm->gpu_mem - cm->bytes - reserve; /* > budget: expert_pool_budget checked it */
    if (cpu_mode && left - budget < lay.slot_bytes) budget -= lay.slot_bytes;
    cuda_experts *x = mem_calloc(1, sizeof *x);
    if (!x) return error_set(err, CLOVER_E_NOMEM, "--gpu-mem: no memory");
    x->stats = getenv("CLOVER_GPU_MEM_STATS") != NULL;
    x->zero_slot = -1;
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
    const uint64_t zero_bytes = cpu_mode ? lay.slot_bytes : 0;
    if (cuda_alloc((void **)&x->dev, x->pool.pool_bytes + zero_bytes, why) || cuda_stream_create(&x->stream, why) ||
        cuda_event_create(&x->ev_done, why) || cuda_event_create(&x->ev_t0, why) || cuda_event_create(&x->ev_t1, why) ||
        (zero_bytes && (cuda_memset(x->dev + x->pool.pool_bytes, 0, zero_bytes, x->stream, why) ||
                        cuda_stream_sync(x->stream, why)))) {
        cuda_experts_free(x);
        return error_set(err, CLOVER_E_NOMEM, "--gpu-mem: the expert pool of %.2f GiB: %s",
                         (double)budget / GIB, why);
    }
    if (x->stats)
        fprintf(stderr,
                "gpu-mem: budget %.2f GiB = dense weights %.2f + one session %.2f + expert pool %.2f GiB (%zu slots "
                "of %.2f MiB, %.1f%% of the %u x %u experts), policy %s\n",
                (double)cm->gpu_mem / GIB, (double)cm->bytes / GIB, (double)reserve / GIB,
                (double)x->pool.pool_bytes / GIB, expert_pool_slots(&x->pool), (double)lay.slot_bytes / 1048576.0,
                100.0 * (double)expert_pool_slots(&x->pool) / ((double)hp->n_layer * hp->n_expert), hp->n_layer,
                hp->n_expert, expert_policy_name((expert_policy)pol));
    rc = host_setup(x, m, err);
    if (!rc) rc = remap_setup(x, m, err);
    if (!rc && cpu_mode) {
        rc = cuda_host_share_create(m, cfg, cpu_mode, lay.part_bytes[0] + lay.part_bytes[1] + lay.part_bytes[2],
                                    link_guess(x->mode), &x->host, err);
        if (!rc) x->zero_slot = (int32_t)expert_pool_slots(&x->pool);
        if (!rc && x->stats)
            fprintf(stderr, "gpu-mem: the host computes misses where that is faster (CLOVER_GPU_MEM_CPU=%s)\n",
                    cpu_name);
    }
    if (!rc) rc = prefetch_setup(x, m, err);
    if (rc) {
        cuda_experts_free(x);
        return rc;
    }
    cm->ex = x;
    return CLOVER_OK;
}

bool cuda_experts_on_device(const cuda_experts *x) { return x && x->on_device; }

uint64_t cuda_experts_pool_bytes(const cuda_experts *x) { /* the zero slot of the host's pairs is the pool's too */
    return x ? x->pool.pool_bytes + (x->zero_slot >= 0 ? x->pool.lay.slot_bytes : 0) : 0;
}

void cuda_experts_info(const cuda_experts *x, cuda_gpu_mem_info *out) {
    if (!x) return;
    out->remap = x->on_device ? "device" : "host";
    out->reserve = x->reserve;
    const uint64_t zb = x->zero_slot >= 0 ? x->pool.lay.slot_bytes : 0; /* the zero slot is the pool's too */
    out->pool_budget = x->pool.budget + zb;
    out->pool_bytes = x->pool.pool_bytes + zb;
    out->slot_bytes = x->pool.lay.slot_bytes;
    out->n_slots = expert_pool_slots(&x->pool);
    out->hits = x->pool.hits;
    out->misses = x->pool.misses;
    out->evictions = x->pool.cache.evictions;
    out->copied = x->copy_bytes;
    out->copy_s = x->copy_s;
    out->host_mode = host_mode_names[x->mode];
    out->host_copy_bytes = x->hcopy ? x->hcopy_bytes : 0;
    out->host_fill_s = x->fill_s;
    cuda_host_share_stats hs;
    cuda_host_share_info(x->host, &hs);
    out->cpu_mode = hs.mode, out->host_experts = hs.experts, out->host_pairs = hs.pairs, out->host_s = hs.seconds;
    out->prefetched = x->pool.prefetched, out->prefetch_hits = x->pool.prefetch_hits;
    unsigned long long st[4];
    char why[CUDA_WHY];
    if (x->on_device && !cuda_d2h(st, x->ra.stats, sizeof st, why)) { /* the device's counters (after the pass) */
        out->hits = st[0], out->misses = st[1], out->evictions = st[2], out->copied = st[3];
        out->copy_s = 0; /* inside the passes' kernels: not timed apart */
    }
}

/* One part of one expert into its slot, on the pool's stream. */
static int copy_part(cuda_experts *x, char *dst, const char *src, size_t n, char *why) {
    x->n_h2d++;
    if (!x->stage || pinned_at(x, src, n)) return cuda_h2d_async(dst, src, n, x->stream, why);
    if (n > STAGE_BYTES) {
        snprintf(why, CUDA_WHY, "an expert part of %zu bytes exceeds the staging buffer", n);
        return -1;
    }
    if (x->stage_off + n > STAGE_BYTES) { /* the buffer is full: its copies must land before it is rewritten */
        if (cuda_stream_sync(x->stream, why)) return -1;
        x->stage_off = 0;
        x->pass_stage_syncs++;
    }
    memcpy(x->stage + x->stage_off, src, n);
    x->pass_staged++;
    int rc = cuda_h2d_async(dst, x->stage + x->stage_off, n, x->stream, why);
    x->stage_off += (n + 255) & ~(size_t)255;
    return rc;
}

/* Where the products read the pool: slot ids for expert ids, each part at its slot offset. */
static void pool_view(const cuda_experts *x, cuda_expert_view *out) {
    /* the zero slot, when there is one, is the slot after the pool's: a valid id for the kernels */
    *out = (cuda_expert_view){.base = x->dev, .stride = x->pool.lay.slot_bytes,
                              .n_slots = expert_pool_slots(&x->pool) + (x->zero_slot >= 0)};
    for (int p = 0; p < EXPERT_PARTS; p++) out->off[p] = x->pool.lay.part_off[p];
}

int cuda_experts_layer(backend_session *s, uint32_t il, size_t n, cuda_expert_view *out, clover_error *err) {
    cuda_experts *x = s->cm->ex;
    const model_hparams *hp = s->hp;
    const size_t nk = n * hp->n_expert_used;
    char why[CUDA_WHY] = "";
    if (x->on_device) { /* expert_remap.cu: the map and the copies on the pass's stream */
        if (cuda_remap_layer(&x->ra, il, s->sc.ridx, nk, s->sc.rslot, s->stream, why)) {
            /* the map may have run without its copies: the tables would name slots that never received their
             * experts (the host path's expert_pool_forget). Every slot free again, on the stream, no sync (a
             * capture in progress records it into the graph it discards) */
            char w2[CUDA_WHY];
            (void)(cuda_memset(x->remap_mem, 0xFF, (size_t)x->remap_tables, s->stream, w2) ||
                   cuda_memset((char *)x->remap_mem + x->remap_stamp, 0, (size_t)x->remap_stamp_bytes, s->stream, w2));
            return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: layer %u: %s", il, why);
        }
        pool_view(x, out);
        return CLOVER_OK;
    }
    const bool st = x->stats && x->pass_on;
    double t0 = st ? now_s() : 0, t1 = 0;
    /* 1. the routing ids (the sync also drains every kernel that read a slot before this step), and with the
     * host's share the routing weights and the layer's input */
    const bool guessed = x->pf_guessed;
    x->pf_guessed = false;
    if (cuda_d2h_async(s->h_rx, s->sc.ridx, nk * sizeof(int32_t), s->stream, why) ||
        (guessed && cuda_d2h_async(x->h_pf, x->pf_idx, x->pf_n * hp->n_expert_used * sizeof(int32_t), s->stream,
                                   why)) ||
        cuda_stream_sync(s->stream, why)) {
        cuda_host_share_cancel(x->host);
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: routing ids: %s", why);
    }
    if (st) {
        t1 = now_s();
        const double w = t1 - t0;
        x->pass_sync_s += w;
        if (w > x->pass_worst_sync_s) x->pass_worst_sync_s = w, x->pass_worst_layer = il;
        if (w > 1.0) /* a stall: said at once, the pass's line may never come */
            fprintf(stderr, "gpu-mem: pass %llu layer %u: the routing-id sync took %.2f s\n",
                    (unsigned long long)x->n_pass, il, w);
    }
    if (x->timing_pending) { /* the previous copies are done (the stream waited for them) */
        double t = 0;
        if (!cuda_event_seconds(x->ev_t0, x->ev_t1, &t, why)) {
            x->copy_s += t;
            cuda_host_share_observe_copy(x->host, x->pending_copy_bytes, t);
        }
        x->timing_pending = false;
    }
    /* every earlier staged copy has landed (the sync above waited for them): the buffers start empty */
    x->stage_off = 0;
    x->ring_off = 0;
    x->n_segs = x->n_pend = 0;
    x->run_n = 0;
    /* 2. slots and misses */
    int32_t *slots = s->h_rx + s->max_rows * hp->n_expert_used;
    size_t nc = 0;
    const uint64_t hits0 = x->pool.hits, misses0 = x->pool.misses;
    const uint8_t *host = x->host ? cuda_host_share_plan(x->host, &x->pool, il, s->h_rx, n, nk) : NULL;
    if (host && cuda_host_share_fetch(x->host, s->sc.rw, s->sc.x, n, s->stream, why)) { /* before the pool changes */
        cuda_host_share_cancel(x->host);
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: the host's rows: %s", why);
    }
    int rc = expert_pool_step_host(&x->pool, il, s->h_rx, nk, host, x->zero_slot, slots, x->copies, &nc, err);
    if (rc) {
        cuda_host_share_cancel(x->host);
        return error_prefix(err, "CUDA pass: --gpu-mem: layer %u", il);
    }
    if (host) cuda_host_share_take(x->host, il, s->h_rx, slots, n, nk, x->zero_slot);
    if (st) {
        const double t2 = now_s();
        x->pass_step_s += t2 - t1;
        t1 = t2;
        x->pass_steps++;
        x->pass_misses += x->pool.misses - misses0;
        x->pass_uses += x->pool.hits - hits0 + x->pool.misses - misses0;
    }
    /* 3. the misses' copies */
    const expert_pool_layout *lay = &x->pool.lay;
    const model_moe_weights *mw = &s->model->layers[il].moe;
    if (nc) {
        if (cuda_event_record(x->ev_t0, x->stream, why))
            return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: %s", why);
        const uint64_t bytes0 = x->copy_bytes;
        for (size_t i = 0; i < nc; i++) {
            const expert_copy *c = &x->copies[i];
            /* the pool never holds more than its budget: every slot lies inside it */
            if (c->slot < 0 || (uint64_t)(c->slot + 1) * lay->slot_bytes > x->pool.pool_bytes ||
                x->pool.pool_bytes > x->pool.budget) {
                expert_pool_forget(&x->pool);
                return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: slot %d outside the pool", c->slot);
            }
            char *slot = x->dev + (uint64_t)c->slot * lay->slot_bytes;
            int crc = 0;
            if (x->mode == HOST_COPY) /* its image, straight from the pinned copy */
                crc = image_add(x, c->slot, il, c->expert, why);
            else if (x->mode == HOST_RING)
                crc = ring_add(x, mw, il, c->expert, slot, why);
            for (int p = 0; p < EXPERT_PARTS && !crc; p++) {
                const model_weight *w = part_of(mw, p);
                const uint64_t eb = expert_bytes(w);
                if (x->mode == HOST_STAGE1 || x->mode == HOST_PIN) /* part by part (stage1's path as it was) */
                    crc = copy_part(x, slot + lay->part_off[p], (const char *)w->data + (uint64_t)c->expert * eb,
                                    (size_t)eb, why);
                x->copy_bytes += eb;
                x->pass_bytes += eb;
                x->pass_copies++;
            }
            if (crc) {
                expert_pool_forget(&x->pool); /* which slots hold what is no longer known */
                return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: layer %u expert %u: %s", il,
                                 c->expert, why);
            }
        }
        if ((x->mode == HOST_COPY && run_flush(x, why)) || (x->mode == HOST_RING && ring_flush(x, why))) {
            expert_pool_forget(&x->pool);
            return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: layer %u: %s", il, why);
        }
        if (cuda_event_record(x->ev_t1, x->stream, why) || cuda_event_record(x->ev_done, x->stream, why) ||
            cuda_stream_wait_event(s->stream, x->ev_done, why)) {
            expert_pool_forget(&x->pool);
            return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: %s", why);
        }
        x->timing_pending = true;
        x->pending_copy_bytes = x->copy_bytes - bytes0;
        if (st) x->pass_issue_s += now_s() - t1;
    }
    /* the previous layer's prefetch copies land before this layer's products read its slots (a device-side wait:
     * they ran beside the previous layer's work); then this layer's guess of the next one's experts */
    if (x->pf_pending) {
        if (cuda_stream_wait_event(s->stream, x->ev_pf, why)) {
            expert_pool_forget(&x->pool);
            return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: prefetch: %s", why);
        }
        x->pf_pending = false;
    }
    if (guessed && prefetch_issue(x, s, il, why)) {
        expert_pool_forget(&x->pool);
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: layer %u's prefetch: %s", il + 1, why);
    }
    /* 4. the slot ids, then the view the products read */
    if (cuda_h2d_async(s->sc.rslot, slots, nk * sizeof(int32_t), s->stream, why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: --gpu-mem: slot ids: %s", why);
    pool_view(x, out);
    return CLOVER_OK;
}

int cuda_experts_host_join(backend_session *s, float *y, clover_error *err) {
    cuda_experts *x = s->cm ? s->cm->ex : NULL;
    if (!x || !x->host) return CLOVER_OK;
    /* the expert outputs (sc.ye, [n * k][H]) were read by the weighted sum enqueued before: free until the next
     * layer's products, and on the same stream */
    return cuda_host_share_join(x->host, y, s->sc.ye, s->stream, err);
}

void cuda_experts_pass_begin(cuda_experts *x, size_t rows, bool preview) {
    if (x) x->pf_guessed = false; /* a guess of a pass that failed after it */
    if (!x || !x->stats || x->on_device) return; /* on the device: no split to measure, and a pass may be captured */
    x->pass_on = true;
    x->pass_preview = preview;
    x->pass_rows = rows;
    x->pass_step_s = x->pass_sync_s = x->pass_issue_s = x->pass_worst_sync_s = 0;
    x->pass_steps = x->pass_copies = x->pass_bytes = x->pass_misses = x->pass_uses = x->pass_stage_syncs = 0;
    x->pass_staged = 0;
    x->pass_worst_layer = 0;
    x->pass_t0 = now_s();
}

void cuda_experts_pass_end(cuda_experts *x, void *stream, const char *failed) {
    if (!x || !x->stats || !x->pass_on) return;
    x->pass_on = false;
    /* the pass's last layers and head are still in flight: waited for here (a diagnostic's extra sync; never
     * under capture, --gpu-mem captures nothing) so the wall time is the pass's own */
    const double te = now_s();
    char why[CUDA_WHY] = "";
    const int src = stream ? cuda_stream_sync(stream, why) : 0;
    const double t = now_s(), wall = t - x->pass_t0, tail = t - te;
    x->n_pass++;
    x->sum_wall_s += wall;
    x->sum_sync_s += x->pass_sync_s;
    x->sum_step_s += x->pass_step_s;
    x->sum_issue_s += x->pass_issue_s;
    x->sum_copies += x->pass_copies;
    x->sum_stage_syncs += x->pass_stage_syncs;
    x->sum_staged += x->pass_staged;
    fprintf(stderr,
            "gpu-mem: pass %llu (%s, %zu rows%s): %.2f ms wall = syncs %.2f (worst %.2f at layer %u) + steps %.2f + "
            "issue %.2f + rest %.2f (tail %.2f) ms; %llu layer steps, %llu uses, %llu misses, %llu copies, %.1f MiB "
            "(%llu staged, %llu staging syncs)%s%s\n",
            (unsigned long long)x->n_pass, x->pass_preview ? "preview" : "commit", x->pass_rows,
            failed ? ", FAILED" : "", wall * 1e3, x->pass_sync_s * 1e3, x->pass_worst_sync_s * 1e3, x->pass_worst_layer,
            x->pass_step_s * 1e3, x->pass_issue_s * 1e3,
            (wall - x->pass_sync_s - x->pass_step_s - x->pass_issue_s - tail) * 1e3, tail * 1e3,
            (unsigned long long)x->pass_steps, (unsigned long long)x->pass_uses, (unsigned long long)x->pass_misses,
            (unsigned long long)x->pass_copies, (double)x->pass_bytes / 1048576.0,
            (unsigned long long)x->pass_staged, (unsigned long long)x->pass_stage_syncs,
            src ? "; the end sync failed: " : "", src ? why : "");
    if (failed) fprintf(stderr, "gpu-mem: pass %llu failed: %s\n", (unsigned long long)x->n_pass, failed);
}
