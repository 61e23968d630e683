/*
 * backend_cuda_experts_host.c: --gpu-mem's misses computed by the host CPU
 * instead of copied (issue 31; llama.cpp's --n-cpu-moe idea, decided per
 * layer by measured rates). CLOVER_GPU_MEM_CPU=off (the default until it has
 * run on a device) | auto (backend/expert_split.h's plan) | all (every miss:
 * tests, and a host that outruns its link).
 *
 * A layer with the host's share, on the pool kept by the host
 * (backend_cuda_experts.c's steps 1-4; CLOVER_GPU_MEM_REMAP=device knows
 * nothing on the host and is refused with this):
 *  1. the routing ids come back (the pool's own step 1) and the plan, which
 *     needs only them and the pool's residency, gives the host the misses
 *     whose wait it shortens; only then (a layer the host takes part in)
 *     the routing weights and the layer's input x come back in a second
 *     sync (n * H floats: 8 KiB a decode row, 4 MiB a 512-row chunk, which
 *     the plan rarely gives the host anything of);
 *  2. the pool does not admit the host's experts (expert_pool_step_host)
 *     and their ids read the pool's zero slot: an all-zero expert whose
 *     products are exactly 0 (a
 *     K-quant or Q8_0 block of scale 0 gives 0 * x_d * sum), so the device's
 *     kernels, unchanged, add nothing for those pairs (0 * w adds +0);
 *  3. the device's kernels of the layer are enqueued as without the host;
 *  4. then (cuda_host_share_join) the calling thread runs the hook, which
 *     computes the host's pairs on the host's threads while the device works
 *     through what was enqueued, and the sum goes up and is added into the
 *     layer's output (cuda_add) before the residual add reads it.
 * The host's arithmetic is the CPU backend's (offload/expert_host_cpu.c), not
 * the device's: a row's result then differs from the all-device run's within
 * the cross-backend bound (the products' sums grouped differently, SwiGLU's
 * exp), so this stays off by default and its test compares within that bound.
 * The pinned buffers are reused layer after layer: step 1's sync of the next
 * layer drains this layer's upload before the hook writes the sum again.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/expert_pool.h"
#include "backend/expert_split.h"
#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "cuda/backend_cuda_experts_host.h"
#include "cuda/cuda_mem.h"
#include "cuda/cuda_ops.h"

/* Starting guesses, replaced by measurements as passes run: the host reads an expert's weights at ~50 GB/s
 * (a server's cores together), computes a row through one at ~100 GFLOP/s, and a layer that involves it at all
 * pays ~30 us (its input down, its sum up, the add, the hand-off). */
#define HOST_BPS 50e9
#define HOST_FLOPS 100e9
#define FIXED_S 30e-6

struct cuda_host_share {
    expert_host hook;
    expert_split split;
    size_t max_rows, H, k, n_expert;
    uint64_t expert_bytes;
    float *h_x, *h_w, *h_y; /* pinned: [max_rows][H], [max_rows][k], [max_rows][H] */
    int32_t *h_id;          /* [max_rows][k]: the hook's ids (-1: the device's pair) */
    uint32_t *rows_of;      /* [n_expert] rows routed to each expert this layer */
    uint32_t *miss_e, *miss_rows, *miss_order; /* [n_expert] the layer's misses, their rows, the plan's order */
    uint8_t *miss_host, *mark;                 /* [n_expert] the plan; mark[e]: the host computes e */
    bool pending;   /* the host has pairs of `layer` to compute */
    bool check;     /* CLOVER_GPU_MEM_CPU_CHECK=1: host_share_check after each layer's hook */
    uint32_t layer;
    size_t n;
    uint64_t pend_experts, pend_pairs;
    /* totals */
    uint64_t experts, pairs, layers;
    double host_s;
};

int cuda_host_share_mode(const char **name, clover_error *err) {
    const char *v = getenv("CLOVER_GPU_MEM_CPU");
    if (name) *name = v;
    if (!v || !*v) return EXPERT_SPLIT_OFF;
    const int m = expert_split_mode_from_name(v);
    if (m < 0) return error_set(err, CLOVER_E_INVALID, "CLOVER_GPU_MEM_CPU=%s: expected off, auto or all", v);
    return m;
}

void cuda_host_share_free(cuda_host_share *h) {
    if (!h) return;
    if (h->hook.close) h->hook.close(h->hook.ctx);
    cuda_host_free(h->h_x);
    cuda_host_free(h->h_w);
    cuda_host_free(h->h_y);
    mem_free(h->h_id);
    mem_free(h->rows_of);
    mem_free(h->miss_e);
    mem_free(h->miss_rows);
    mem_free(h->miss_order);
    mem_free(h->miss_host);
    mem_free(h->mark);
    mem_free(h);
}

int cuda_host_share_create(const clover_model *m, const backend_config *cfg, int mode, uint64_t expert_bytes,
                           double link_bps, cuda_host_share **out, clover_error *err) {
    *out = NULL;
    if (mode == EXPERT_SPLIT_OFF) return CLOVER_OK;
    if (!cfg || !cfg->expert_host_open) /* the caller refused it already, before the host copy's fill */
        return error_set(err, CLOVER_E_UNSUPPORTED, "CLOVER_GPU_MEM_CPU: no backend_config.expert_host_open");
    const model_hparams *hp = &m->hp;
    cuda_host_share *h = mem_calloc(1, sizeof *h);
    if (!h) return error_set(err, CLOVER_E_NOMEM, "--gpu-mem: no memory");
    h->max_rows = cfg->max_rows ? cfg->max_rows : 64;
    h->H = hp->n_embd, h->k = hp->n_expert_used, h->n_expert = hp->n_expert;
    h->expert_bytes = expert_bytes;
    const char *ck = getenv("CLOVER_GPU_MEM_CPU_CHECK");
    h->check = ck && !strcmp(ck, "1");
    const char *tv = getenv("CLOVER_GPU_MEM_CPU_THREADS"); /* the hook's threads (default: the backend's) */
    const size_t threads = tv && *tv ? (size_t)strtoul(tv, NULL, 10) : cfg->n_threads;
    int rc = cfg->expert_host_open(m, threads, h->max_rows, &h->hook, err);
    if (rc) {
        mem_free(h);
        return error_prefix(err, "CLOVER_GPU_MEM_CPU=%s", expert_split_mode_name((expert_split_mode)mode));
    }
    const size_t R = h->max_rows, E = h->n_expert;
    char why[CUDA_WHY] = "";
    if (cuda_host_alloc((void **)&h->h_x, R * h->H * sizeof(float), why) ||
        cuda_host_alloc((void **)&h->h_w, R * h->k * sizeof(float), why) ||
        cuda_host_alloc((void **)&h->h_y, R * h->H * sizeof(float), why) ||
        !(h->h_id = mem_alloc(R * h->k * sizeof(int32_t))) || !(h->rows_of = mem_calloc(E, sizeof(uint32_t))) ||
        !(h->miss_e = mem_alloc(E * sizeof(uint32_t))) || !(h->miss_rows = mem_alloc(E * sizeof(uint32_t))) ||
        !(h->miss_order = mem_alloc(E * sizeof(uint32_t))) || !(h->miss_host = mem_alloc(E)) ||
        !(h->mark = mem_calloc(E, 1))) {
        cuda_host_share_free(h);
        return error_set(err, CLOVER_E_NOMEM, "CLOVER_GPU_MEM_CPU: the host's buffers: %s", *why ? why : "no memory");
    }
    const double row_s = 6.0 * (double)h->H * (double)hp->n_ff_exp / HOST_FLOPS; /* gate, up, down: 2 H F each */
    expert_split_init(&h->split, (expert_split_mode)mode, link_bps, HOST_BPS, row_s, FIXED_S);
    *out = h;
    return CLOVER_OK;
}

int cuda_host_share_fetch(cuda_host_share *h, const float *d_w, const float *d_x, size_t n, void *stream, char *why) {
    if (cuda_d2h_async(h->h_w, d_w, n * h->k * sizeof(float), stream, why) ||
        cuda_d2h_async(h->h_x, d_x, n * h->H * sizeof(float), stream, why) || cuda_stream_sync(stream, why))
        return -1;
    return 0;
}

const uint8_t *cuda_host_share_plan(cuda_host_share *h, const expert_pool *pool, uint32_t il, const int32_t *ids,
                                    size_t n, size_t nk) {
    h->pending = false;
    if (n == 0 || n > h->max_rows) return NULL; /* more rows than the hook takes: the device alone */
    const size_t E = h->n_expert;
    memset(h->rows_of, 0, E * sizeof *h->rows_of);
    for (size_t i = 0; i < nk; i++)
        if (ids[i] >= 0 && (size_t)ids[i] < E) h->rows_of[ids[i]]++; /* a row's k ids are distinct */
    size_t m = 0;
    for (size_t e = 0; e < E; e++)
        if (h->rows_of[e] && !expert_pool_resident(pool, il, (uint32_t)e))
            h->miss_e[m] = (uint32_t)e, h->miss_rows[m++] = h->rows_of[e];
    const size_t c = expert_split_plan(&h->split, h->expert_bytes, h->miss_rows, m, h->miss_host, h->miss_order);
    h->pend_experts = c;
    if (c == 0) return NULL;
    memset(h->mark, 0, E);
    for (size_t i = 0; i < m; i++) h->mark[h->miss_e[i]] = h->miss_host[i];
    return h->mark;
}

void cuda_host_share_take(cuda_host_share *h, uint32_t il, const int32_t *ids, const int32_t *slots, size_t n,
                          size_t nk, int32_t zero_slot) {
    uint64_t pairs = 0;
    for (size_t i = 0; i < nk; i++) {
        const bool host = slots[i] == zero_slot;
        h->h_id[i] = host ? ids[i] : -1;
        pairs += host;
    }
    h->pending = pairs > 0;
    h->layer = il;
    h->n = n;
    h->pend_pairs = pairs;
}

/* CLOVER_GPU_MEM_CPU_CHECK=1 (a diagnostic): before the host's sum goes up, the device's expert outputs of the
 * host's pairs (the zero slot's: every value must be exactly 0) and of its own pairs, a line a layer on stderr. */
static void host_share_check(const cuda_host_share *h, const float *d_ye, void *stream) {
    const size_t nk = h->n * h->k, H = h->H;
    float *ye = malloc(nk * H * sizeof *ye);
    char why[CUDA_WHY] = "";
    if (!ye || cuda_stream_sync(stream, why) || cuda_d2h(ye, d_ye, nk * H * sizeof *ye, why)) {
        fprintf(stderr, "gpu-mem check: layer %u: %s\n", h->layer, *why ? why : "no memory");
        free(ye);
        return;
    }
    size_t nonzero = 0, host_pairs = 0;
    double host_max = 0, dev_max = 0, sum_max = 0;
    for (size_t i = 0; i < nk; i++) {
        const bool host = h->h_id[i] >= 0;
        host_pairs += host;
        for (size_t c = 0; c < H; c++) {
            const double v = fabs((double)ye[i * H + c]);
            if (host) nonzero += ye[i * H + c] != 0.0f, host_max = v > host_max ? v : host_max;
            else dev_max = v > dev_max ? v : dev_max;
        }
    }
    for (size_t i = 0; i < h->n * H; i++) {
        const double v = fabs((double)h->h_y[i]);
        sum_max = v > sum_max ? v : sum_max;
    }
    fprintf(stderr, "gpu-mem check: layer %u, %zu rows: %zu host pairs, %zu nonzero device values there (max %.3g); "
            "device pairs' max %.3g; the host's sum max %.3g\n", h->layer, h->n, host_pairs, nonzero, host_max, dev_max,
            sum_max);
    free(ye);
}

int cuda_host_share_join(cuda_host_share *h, float *y, float *d_tmp, void *stream, clover_error *err) {
    if (!h || !h->pending) return CLOVER_OK;
    h->pending = false;
    const double t0 = timer_now();
    int rc = h->hook.compute(h->hook.ctx, h->layer, h->h_y, h->h_x, h->n, h->h_id, h->h_w, err);
    if (rc) return error_prefix(err, "--gpu-mem: layer %u's experts on the host", h->layer);
    const double t = timer_now() - t0;
    if (h->check) host_share_check(h, d_tmp, stream);
    expert_split_observe_host(&h->split, h->pend_experts * h->expert_bytes, h->pend_pairs, t);
    h->experts += h->pend_experts, h->pairs += h->pend_pairs, h->layers++, h->host_s += t;
    char why[CUDA_WHY] = "";
    if (cuda_h2d_async(d_tmp, h->h_y, h->n * h->H * sizeof(float), stream, why))
        return error_set(err, CLOVER_E_INTERNAL, "--gpu-mem: layer %u: the host's sum: %s", h->layer, why);
    if (cuda_add(y, d_tmp, h->n * h->H, stream))
        return error_set(err, CLOVER_E_INTERNAL, "--gpu-mem: layer %u: adding the host's sum failed", h->layer);
    return CLOVER_OK;
}

void cuda_host_share_cancel(cuda_host_share *h) {
    if (h) h->pending = false;
}

void cuda_host_share_observe_copy(cuda_host_share *h, uint64_t bytes, double seconds) {
    if (h) expert_split_observe_copy(&h->split, bytes, seconds);
}

void cuda_host_share_info(const cuda_host_share *h, cuda_host_share_stats *out) {
    memset(out, 0, sizeof *out);
    if (!h) return;
    out->mode = expert_split_mode_name(h->split.mode);
    out->experts = h->experts, out->pairs = h->pairs, out->layers = h->layers, out->seconds = h->host_s;
    out->link_gbps = h->split.copy_spb > 0 ? 1e-9 / h->split.copy_spb : 0;
    out->host_gbps = h->split.host_spb > 0 ? 1e-9 / h->split.host_spb : 0;
    out->host_row_us = h->split.host_row_s * 1e6;
}
