/*
 * bench_backend.c: the CPU backend's passes on a real model file, each
 * beside its memory floor.
 *
 * A pass can go no faster than the weight bytes it must read divided by the
 * machine's read bandwidth. This program measures that bandwidth (a
 * read-only sum over a large buffer, one thread and all threads), counts
 * the bytes each pass must read from the bound tensors, and times:
 *  - a prompt of P tokens (commit in chunks of max_rows, the last row's
 *    logits): every layer's weights are read once per chunk (the whole
 *    embedding table is not: only the chunk's rows);
 *  - generation: autoregressive decode, one row per commit with the head,
 *    the greedy pick fed back; a token reads every mixer projection, the
 *    router, the k routed experts it picks (k of E), the shared expert, the
 *    head and one embedding row;
 *  - a preview of a B-row block (mask tokens) with the coreset at top_p and
 *    without it: the same, but per layer the experts the block uses: the
 *    coreset (its size per layer is measured with preview_debug), or with
 *    the coreset off the union of the rows' top-k, measured as the coreset
 *    at top_p = 1 - 1e-6 (every expert with routing mass, which leaves each
 *    row's top-k, and so the pass, unchanged);
 *  - the commit of a B-row block (no logits, as the engine commits a
 *    resolved block): the experts of the block's union (the same estimate).
 * Each figure is printed with its floor, floor / measured as a percentage,
 * the per-operator seconds of backend_pass_stats, the share of the machine
 * the process got (process CPU time / wall time, in cores), the major page
 * faults (pages of the mmap'd file read from disk inside a pass) and the
 * load average: the machine may be shared, so prefer the best-of figures.
 *
 * Before timing, every tensor's bytes are read once (the file is mmap'd: a
 * cold page cache would time the disk); --no-warm skips it.
 *
 *   bench_backend MODEL [--threads N] [--prompt P] [--gen G] [--block B]
 *                 [--rows R] [--reps N] [--top-p F] [--mb MB] [--simd auto|avx512|avx2|scalar]
 *                 [--no-warm] [--gen-only]
 * --simd caps the level of the quantised products (simd_level.h): avx512
 * keeps an AMX CPU on the AVX-512 VNNI kernels (CLOVER_NO_AMX), avx2 keeps
 * an AVX-512 VNNI CPU on the AVX2 kernels (CLOVER_NO_AVX512), scalar turns
 * every fast path off (CLOVER_NO_SIMD); the level run is printed.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/threadpool.h"
#include "base/timer.h"
#include "model/model.h"
#include "quant/quant.h"
#include "quant/simd_level.h"

#include "mem_bench.h"
#include "../tests/unit/backend_seq.h" /* one sequence per call of the batched contract */

enum { MAX_REPS = 64 };

typedef struct options {
    const char *path;
    size_t threads, prompt, gen, block, rows, mb;
    int reps, warm, gen_only;
    float top_p;
} options;

/* ---- small helpers ---- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(const double *t, int n) {
    double s[MAX_REPS];
    memcpy(s, t, (size_t)n * sizeof *t);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static double min_of(const double *t, int n) {
    double m = t[0];
    for (int i = 1; i < n; i++)
        if (t[i] < m) m = t[i];
    return m;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Page faults that had to read the disk so far: the model file is mmap'd,
 * and a page the page cache lost is read again inside a timed pass. */
static long major_faults(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_majflt : 0;
}

static const char *load_average(char *buf, size_t n) {
    snprintf(buf, n, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return buf;
    if (!fgets(buf, (int)n, f)) snprintf(buf, n, "?");
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
    return buf;
}

static size_t argmax(const float *x, size_t n, int *finite) {
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) *finite = 0;
        if (x[i] > x[best]) best = i;
    }
    return best;
}

/* ---- memory bandwidth ---- */

/* GB/s of a read-only sum over buf, the best of reps (the highest bandwidth
 * seen makes the lowest, most demanding floor), on pool (NULL: one thread). */
static double bandwidth(threadpool *pool, const uint64_t *buf, size_t bytes, int reps) {
    bench_sum_job j;
    const size_t tasks = bench_sum_job_init(&j, buf, bytes, pool);
    double t[MAX_REPS];
    bench_time_tasks(pool, tasks, bench_sum_task, &j, t, reps);
    bench_sum_keep(&j);
    return (double)bytes / min_of(t, reps) / 1e9;
}

/* Read bandwidth over mb MB: bw[0] one thread, bw[1] the pool, bw[2] one
 * thread in thread CPU time; all best of 5. Non-zero when out of memory. */
static int measure_bandwidth(threadpool *pool, size_t mb, double bw[3]) {
    const size_t bytes = mb * 1000000 / 64 * 64;
    uint64_t *buf = mem_alloc(bytes);
    if (!buf) {
        fprintf(stderr, "bench_backend: cannot allocate %zu MB\n", mb);
        return -1;
    }
    memset(buf, 1, bytes);
    bw[0] = bandwidth(NULL, buf, bytes, 5);
    bw[1] = bandwidth(pool, buf, bytes, 5);
    double best_cpu = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = cpu_now();
        volatile uint64_t sink = bench_sum_words(buf, bytes / 8);
        (void)sink;
        double dt = cpu_now() - t0;
        if (dt < best_cpu) best_cpu = dt;
    }
    bw[2] = (double)bytes / best_cpu / 1e9;
    mem_free(buf);
    return 0;
}

/* ---- the bytes each pass must read ---- */

typedef struct layer_bytes {
    double mixer_commit;           /* every projection and vector of the mixer a commit uses, the two norms */
    double mixer_preview;          /* the same for a preview (GDN: no ssm_beta, plus the Clover tensors) */
    double router, shared, expert; /* one routed expert: its gate, up and down */
    double macs_mixer, macs_router, macs_shared, macs_expert; /* multiply-adds per row */
} layer_bytes;

typedef struct model_bytes {
    layer_bytes *layer; /* [n_layer] */
    double head, emb_row, out_norm;
    double macs_head;
    size_t k, E;
} model_bytes;

static double wb(const model_weight *w) { return w->data ? (double)w->nbytes : 0.0; }
static double wm(const model_weight *w) { return w->data ? (double)w->ne[0] * (double)w->ne[1] : 0.0; }

static void count_bytes(const clover_model *m, model_bytes *mb) {
    const size_t L = m->hp.n_layer;
    mb->k = m->hp.n_expert_used;
    mb->E = m->hp.n_expert;
    mb->head = wb(&m->output);
    mb->macs_head = wm(&m->output);
    mb->emb_row = wb(&m->token_embd) / (double)m->hp.n_vocab;
    mb->out_norm = wb(&m->output_norm);
    for (size_t l = 0; l < L; l++) {
        const model_layer *ly = &m->layers[l];
        layer_bytes *b = &mb->layer[l];
        memset(b, 0, sizeof *b);
        double norms = wb(&ly->attn_norm) + wb(&ly->post_norm);
        if (ly->kind == MODEL_LAYER_ATTENTION) {
            const model_attention_weights *a = &ly->attn;
            double all = wb(&a->q) + wb(&a->k) + wb(&a->v) + wb(&a->o) + wb(&a->q_norm) + wb(&a->k_norm);
            b->mixer_commit = b->mixer_preview = norms + all;
            b->macs_mixer = wm(&a->q) + wm(&a->k) + wm(&a->v) + wm(&a->o);
        } else {
            const model_gdn_weights *g = &ly->gdn;
            double shared = wb(&g->qkv) + wb(&g->z) + wb(&g->conv) + wb(&g->dt_bias) + wb(&g->a) + wb(&g->alpha) +
                            wb(&g->norm) + wb(&g->out);
            b->mixer_commit = norms + shared + wb(&g->beta);
            b->mixer_preview =
                norms + shared + wb(&g->conv_right) + wb(&g->logit_scale) + wb(&g->history_bias) + wb(&g->history_c);
            b->macs_mixer = wm(&g->qkv) + wm(&g->z) + wm(&g->alpha) + wm(&g->beta) + wm(&g->out);
        }
        const model_moe_weights *e = &ly->moe;
        b->router = wb(&e->gate_inp);
        b->shared = wb(&e->gate_inp_shexp) + wb(&e->gate_shexp) + wb(&e->up_shexp) + wb(&e->down_shexp);
        b->expert = (wb(&e->gate_exps) + wb(&e->up_exps) + wb(&e->down_exps)) / (double)mb->E;
        b->macs_router = wm(&e->gate_inp);
        b->macs_shared = wm(&e->gate_inp_shexp) + wm(&e->gate_shexp) + wm(&e->up_shexp) + wm(&e->down_shexp);
        b->macs_expert = 3.0 * (double)m->hp.n_embd * (double)m->hp.n_ff_exp;
    }
}

/* Bytes of a pass over `rows` rows whose layer l uses experts[l] routed
 * experts (NULL: k each); preview picks the preview mixers; head: rows of logits (0: none). */
static double pass_bytes(const model_bytes *mb, size_t L, const double *experts, int preview, size_t rows, int head) {
    double s = (double)rows * mb->emb_row;
    for (size_t l = 0; l < L; l++) {
        const layer_bytes *b = &mb->layer[l];
        s += (preview ? b->mixer_preview : b->mixer_commit) + b->router + b->shared;
        s += (experts ? experts[l] : (double)mb->k) * b->expert;
    }
    if (head) s += mb->out_norm + mb->head;
    return s;
}

/* ---- timing of passes ---- */

static void stats_add(backend_pass_stats *a, const backend_pass_stats *b);

typedef struct figure {
    double t[MAX_REPS];
    int n;
    backend_pass_stats st; /* summed over the runs */
    char what[48];
    double units; /* tokens or rows a run (0: none) */
    const char *unit;
    double floor_bytes;
    char load[64];          /* load average when it was measured */
    double cores[MAX_REPS]; /* process CPU time / wall time of each run: how much of the machine it got */
    long faults;            /* major page faults during the runs */
    double flops;           /* matrix-product FLOPs of one run (0: not counted) */
} figure;

/* A point in time: wall, process CPU, major faults. */
typedef struct probe {
    double wall, cpu;
    long faults;
} probe;

static probe probe_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (probe){timer_now(), (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec, major_faults()};
}

/* Records the run that began at p0. */
static void figure_add(figure *f, probe p0, const backend_pass_stats *st) {
    const probe p1 = probe_now();
    f->t[f->n] = p1.wall - p0.wall;
    f->cores[f->n] = (p1.cpu - p0.cpu) / (p1.wall - p0.wall > 0 ? p1.wall - p0.wall : 1e-9);
    f->n++;
    f->faults += p1.faults - p0.faults;
    stats_add(&f->st, st);
}

/* Prints a figure's timings and operator split as soon as it is measured. */
static void figure_done(figure *f, const char *what, double units, const char *unit, double floor_bytes) {
    snprintf(f->what, sizeof f->what, "%s", what);
    f->units = units, f->unit = unit, f->floor_bytes = floor_bytes;
    load_average(f->load, sizeof f->load);
    const double med = median_of(f->t, f->n), best = min_of(f->t, f->n);
    printf("%-28s median %9.4f s  best %9.4f s  (%d runs)", what, med, best, f->n);
    if (units > 0) printf("  %8.2f %s (median)  %8.2f (best)", units / med, unit, units / best);
    const double n = (double)f->n, ops = (f->st.gdn_s + f->st.attn_s + f->st.moe_s + f->st.head_s) / n;
    double sum_t = 0;
    for (int i = 0; i < f->n; i++) sum_t += f->t[i];
    printf("\n%-28s per run: gdn %.4f  attn %.4f  moe %.4f  head %.4f  other %.4f s;", "", f->st.gdn_s / n,
           f->st.attn_s / n, f->st.moe_s / n, f->st.head_s / n, sum_t / n - ops);
    if (f->flops > 0) printf(" %.1f GFLOP/s (median);", f->flops / med / 1e9);
    printf(" %.2f cores (median CPU / wall); %ld major faults; load %s\n", median_of(f->cores, f->n), f->faults,
           f->load);
    const double mm = f->st.gdn_mm_s + f->st.attn_mm_s + f->st.moe_mm_s + f->st.head_mm_s;
    if (mm > 0) /* what a faster product kernel could take, and what it could not (the rest of each family) */
        printf("%-28s in products: gdn %.4f  attn %.4f  moe %.4f  head %.4f s (%.0f%% of the families' time)\n", "",
               f->st.gdn_mm_s / n, f->st.attn_mm_s / n, f->st.moe_mm_s / n, f->st.head_mm_s / n,
               ops > 0 ? 100.0 * mm / n / ops : 0.0);
    if (f->st.pool_runs) /* issue 30: what each run of the thread pool cost beyond its work shows in these */
        printf("%-28s pool per run: %.0f runs, %.0f woke sleeping workers, the caller slept in %.0f\n", "",
               (double)f->st.pool_runs / n, (double)f->st.pool_woke / n, (double)f->st.pool_caller_sleeps / n);
}

/* The figure beside its floor: bytes / bw, and floor / measured. */
static void figure_summary(const figure *f, double bw) {
    const double med = median_of(f->t, f->n), best = min_of(f->t, f->n);
    const double floor_s = f->floor_bytes / (bw * 1e9);
    printf("%-28s %9.4f %9.4f", f->what, med, best);
    if (f->units > 0)
        printf(" %8.2f %8.2f %-6s", f->units / med, f->units / best, f->unit);
    else
        printf(" %8s %8s %-6s", "", "", "");
    printf(" %8.4g %8.4f %6.1f%% %6.1f%% %5.2f\n", f->floor_bytes / 1e9, floor_s, 100.0 * floor_s / med,
           100.0 * floor_s / best, median_of(f->cores, f->n));
}

static void stats_add(backend_pass_stats *a, const backend_pass_stats *b) {
    a->gdn_s += b->gdn_s, a->attn_s += b->attn_s, a->moe_s += b->moe_s, a->head_s += b->head_s;
    a->gdn_mm_s += b->gdn_mm_s, a->attn_mm_s += b->attn_mm_s, a->moe_mm_s += b->moe_mm_s, a->head_mm_s += b->head_mm_s;
    a->coreset_kept += b->coreset_kept, a->coreset_layers += b->coreset_layers;
    a->pool_runs += b->pool_runs, a->pool_woke += b->pool_woke, a->pool_caller_sleeps += b->pool_caller_sleeps;
}

/* Reads every tensor's bytes once (pages the mapping in); returns seconds. */
static double warm_weights(const clover_model *m) {
    double t0 = timer_now();
    uint64_t s = 0;
    const model_weight *globals[3] = {&m->token_embd, &m->output_norm, &m->output};
    for (int i = 0; i < 3; i++) s += bench_sum_words(globals[i]->data, globals[i]->nbytes / 8);
    for (size_t l = 0; l < m->hp.n_layer; l++) {
        /* the layer's matrices (a kind's absent ones have no data) and norms */
        const model_layer *ly = &m->layers[l];
        const model_weight *w[] = {&ly->attn_norm,     &ly->post_norm,     &ly->attn.q,        &ly->attn.k,
                                   &ly->attn.v,        &ly->attn.o,        &ly->gdn.qkv,       &ly->gdn.z,
                                   &ly->gdn.alpha,     &ly->gdn.beta,      &ly->gdn.out,       &ly->moe.gate_inp,
                                   &ly->moe.gate_exps, &ly->moe.up_exps,   &ly->moe.down_exps, &ly->moe.gate_shexp,
                                   &ly->moe.up_shexp,  &ly->moe.down_shexp};
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
            if (w[i]->data) s += bench_sum_words(w[i]->data, w[i]->nbytes / 8);
    }
    if (s == 42) printf("(unlikely checksum)\n");
    return timer_now() - t0;
}

static int parse_args(int argc, char **argv, options *o) {
    *o = (options){.prompt = 512, .gen = 16, .block = 32, .rows = 64, .mb = 512, .reps = 5, .warm = 1, .top_p = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-warm") || !strcmp(a, "--gen-only")) {
            if (a[2] == 'n')
                o->warm = 0;
            else
                o->gen_only = 1;
            continue;
        }
        if (a[0] != '-') {
            o->path = a;
            continue;
        }
        if (!v) return -1;
        i++;
        if (!strcmp(a, "--threads"))
            o->threads = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--prompt"))
            o->prompt = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--gen"))
            o->gen = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--block"))
            o->block = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--rows"))
            o->rows = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--mb"))
            o->mb = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--reps"))
            o->reps = atoi(v);
        else if (!strcmp(a, "--top-p"))
            o->top_p = strtof(v, NULL);
        else if (!strcmp(a, "--simd")) { /* the level cap, read once by the first product (simd_level.h) */
            if (!strcmp(v, "scalar")) setenv("CLOVER_NO_SIMD", "1", 1);
            else if (!strcmp(v, "avx2")) setenv("CLOVER_NO_AVX512", "1", 1);
            else if (!strcmp(v, "avx512")) setenv("CLOVER_NO_AMX", "1", 1);
            else if (strcmp(v, "auto") != 0) return -1;
        } else
            return -1;
    }
    if (!o->path || o->prompt == 0 || o->block == 0 || o->mb == 0) return -1;
    if (o->reps < 1) o->reps = 1;
    if (o->reps > MAX_REPS) o->reps = MAX_REPS;
    if (o->gen > MAX_REPS) o->gen = MAX_REPS;
    if (o->rows < o->block) o->rows = o->block;
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows in a log file */
    options o;
    if (parse_args(argc, argv, &o)) {
        fprintf(stderr, "usage: bench_backend MODEL [--threads N] [--prompt P] [--gen G] [--block B] [--rows R]\n"
                        "                     [--reps N] [--top-p F] [--mb MB] [--simd auto|avx512|avx2|scalar] [--no-warm]\n"
                        "                     [--gen-only]\n");
        return 2;
    }
    clover_error err = {0};
    clover_model *m = NULL;
    double t_load = timer_now();
    if (clover_model_load(&m, o.path, &err) != CLOVER_OK) {
        fprintf(stderr, "bench_backend: %s\n", err.message);
        return 1;
    }
    t_load = timer_now() - t_load;
    const model_hparams *hp = &m->hp;
    const size_t L = hp->n_layer, V = hp->n_vocab, E = hp->n_expert, B = o.block;
    char la[64];

    threadpool *pool = NULL;
    if (threadpool_create(&pool, o.threads, &err) != CLOVER_OK) {
        fprintf(stderr, "bench_backend: %s\n", err.message);
        return 1;
    }
    const size_t nt = threadpool_size(pool);
    printf("bench_backend: %s\n", o.path);
    printf("model: %zu layers (%s), hidden %u, %zu experts top-%u of width %u, vocab %zu; experts %s, "
           "attn_q/gdn qkv %s, head %s; loaded in %.2f s\n",
           L, m->layer_kinds, hp->n_embd, E, hp->n_expert_used, hp->n_ff_exp, V,
           quant_type_name(m->layers[0].moe.gate_exps.type),
           quant_type_name(m->layers[0].kind == MODEL_LAYER_GDN ? m->layers[0].gdn.qkv.type : m->layers[0].attn.q.type),
           quant_type_name(m->output.type), t_load);
    printf("threads %zu, SIMD %s, max_rows %zu, load average %s\n", nt, quant_simd_level_name(), o.rows,
           load_average(la, sizeof la));

    model_bytes mb = {0};
    mb.layer = mem_calloc(L, sizeof *mb.layer);
    if (!mb.layer) return 1;
    count_bytes(m, &mb);
    double all_layers = 0, expert_total = 0;
    for (size_t l = 0; l < L; l++) {
        const layer_bytes *b = &mb.layer[l];
        all_layers += b->mixer_commit + b->router + b->shared + (double)E * b->expert;
        expert_total += (double)E * b->expert;
    }
    printf("weights: layers %.3f GB (routed experts %.3f GB, one expert %.3f MB), head %.3f GB, embedding row %.1f "
           "KB\n",
           all_layers / 1e9, expert_total / 1e9, mb.layer[0].expert / 1e6, mb.head / 1e9, mb.emb_row / 1e3);

    if (o.warm) {
        double tw = warm_weights(m);
        const double gbs = (all_layers + mb.head) / tw / 1e9;
        printf("warm-up: read every tensor once in %.2f s (%.2f GB/s%s)\n", tw, gbs,
               all_layers < 1e9 ? ""
               : gbs > 2.0      ? ": the page cache was warm"
                                : ": the page cache was cold, or lost part of the file");
    }

    /* bandwidth, now and again after the passes: the floors use the best seen */
    double bw_now[3], bw_best = 0;
    if (measure_bandwidth(pool, o.mb, bw_now)) return 1;
    printf("read bandwidth (%zu MB read-only sum, best of 5): 1 thread %.2f GB/s, %zu threads %.2f GB/s; "
           "1 thread in thread CPU time (best) %.2f GB/s\n\n",
           o.mb, bw_now[0], nt, bw_now[1], bw_now[2]);
    bw_best = fmax(bw_now[0], bw_now[1]);
    figure figs[8];
    int n_figs = 0;
    memset(figs, 0, sizeof figs);

    backend_config cfg = {.n_threads = o.threads, .max_rows = o.rows, .max_context = 0};
    tseq *s = NULL;
    if (seq_create(&backend_cpu, m, &cfg, &s, &err) != CLOVER_OK) {
        fprintf(stderr, "bench_backend: %s\n", err.message);
        return 1;
    }
    float *logits = mem_alloc((B > 1 ? B : 1) * V * sizeof(float));
    int32_t *ids = mem_alloc((o.prompt > B ? o.prompt : B) * sizeof(int32_t));
    if (!logits || !ids) return 1;
    rng_state r;
    rng_seed(&r, 1234);
    const uint32_t id_limit = hp->n_vocab > 256 ? 256 : hp->n_vocab; /* byte tokens: real text */
    int finite = 1;

    /* prompt: P rows committed from an empty session, the last row's logits */
    const int prompt_reps = o.reps < 3 ? o.reps : 3;
    figure *fp = &figs[n_figs++];
    for (int rep = 0; rep < prompt_reps; rep++) {
        for (size_t i = 0; i < o.prompt; i++) ids[i] = (int32_t)(rng_next(&r) % id_limit);
        seq_reset(s);
        backend_pass_stats st = {0};
        backend_commit_seq out = {.last_logits = logits};
        const probe p0 = probe_now();
        if (seq_commit(s, ids, o.prompt, &out, &st, &err)) goto fail;
        figure_add(fp, p0, &st);
        argmax(logits, V, &finite);
    }
    const size_t chunks = (o.prompt + o.rows - 1) / o.rows;
    double prompt_floor = 0;
    for (size_t c = 0; c < chunks; c++) {
        size_t rows = o.prompt - c * o.rows < o.rows ? o.prompt - c * o.rows : o.rows;
        prompt_floor += all_layers + (double)rows * mb.emb_row;
    }
    prompt_floor += mb.out_norm + mb.head;
    char what[64];
    snprintf(what, sizeof what, "prompt %zu tokens", o.prompt);
    /* multiply-adds of the matrix products a row makes in the trunk (k experts), and the head's */
    double macs_tok = 0;
    for (size_t l = 0; l < L; l++)
        macs_tok += mb.layer[l].macs_mixer + mb.layer[l].macs_router + mb.layer[l].macs_shared +
                    (double)mb.k * mb.layer[l].macs_expert;
    printf("matrix products: %.4g GFLOP a row in the trunk, %.4g GFLOP a row of logits\n", 2.0 * macs_tok / 1e9,
           2.0 * mb.macs_head / 1e9);
    fp->flops = 2.0 * (macs_tok * (double)o.prompt + mb.macs_head);
    figure_done(fp, what, (double)o.prompt, "tok/s", prompt_floor);
    printf("\n");

    /* generation: one row per commit with its logits, greedy */
    figure *fg = &figs[n_figs++];
    int32_t next = (int32_t)argmax(logits, V, &finite);
    for (size_t g = 0; g < o.gen; g++) {
        backend_pass_stats st = {0};
        backend_commit_seq out = {.last_logits = logits};
        const probe p0 = probe_now();
        if (seq_commit(s, &next, 1, &out, &st, &err)) goto fail;
        figure_add(fg, p0, &st);
        next = (int32_t)argmax(logits, V, &finite);
    }
    if (fg->n) {
        fg->flops = 2.0 * (macs_tok + mb.macs_head);
        figure_done(fg, "generation (1 row + head)", 1.0, "tok/s", pass_bytes(&mb, L, NULL, 0, 1, 1));
        printf("%-28s (state read and written a token besides the weights: %.3f GB)\n\n", "",
               (double)seq_state_bytes(s) / 1e9);
    }

    /* previews of a block of mask rows, then block commits */
    if (o.gen_only) {
        printf("(--gen-only: no previews or block commits)\n");
    } else if (!m->has_record) {
        printf("no Clover record: no previews (an autoregressive model)\n");
    } else {
        const float top_p = o.top_p >= 0 ? o.top_p : m->record.coreset_top_p;
        int32_t *block = ids; /* reuses the prompt ids' buffer */
        for (size_t i = 0; i < B; i++) block[i] = (int32_t)m->record.mask_token_id;
        uint8_t *kept = mem_alloc(L * E);
        double *kept_on = mem_calloc(L, sizeof(double)), *kept_union = mem_calloc(L, sizeof(double));
        if (!kept || !kept_on || !kept_union) return 1;
        struct {
            const char *name;
            int coreset;
            float top_p;
            double *kept_sum;
        } kinds[3] = {{"preview, coreset", 1, top_p, kept_on},
                      {"preview, coreset off", 0, 0.0f, NULL},
                      {"preview, union (p=1-1e-6)", 1, 1.0f - 1e-6f, kept_union}};
        figure *fv = &figs[n_figs];
        n_figs += 2; /* the third kind (the union) is timed, not reported: it computes what "off" does */
        figure fu;
        memset(&fu, 0, sizeof fu);
        { /* one untimed preview first: the first one faults in the logits buffer (B x vocab floats) and the
           * session's preview state, ~17 ms of the 40-layer file's first preview on the H200 host, which a
           * --reps 1 run reported as the pass's median ("other") at every level */
            const backend_preview_opts pw = {.record_block_size = m->record.block_size, .coreset = true,
                                             .coreset_top_p = top_p};
            if (seq_preview(s, block, B, &pw, logits, NULL, &err)) goto fail;
        }
        for (int k = 0; k < 3; k++) {
            backend_preview_opts po = {.record_block_size = m->record.block_size,
                                       .coreset = kinds[k].coreset,
                                       .coreset_top_p = kinds[k].top_p};
            for (int rep = 0; rep < o.reps; rep++) {
                backend_pass_stats st = {0};
                const probe p0 = probe_now();
                if (seq_preview(s, block, B, &po, logits, &st, &err)) goto fail;
                figure_add(k < 2 ? &fv[k] : &fu, p0, &st);
                argmax(logits, V, &finite);
                if (kinds[k].kept_sum && seq_preview_debug(s, NULL, kept, &err) == 0)
                    for (size_t l = 0; l < L; l++) {
                        size_t c = 0;
                        for (size_t e = 0; e < E; e++) c += kept[l * E + e] != 0;
                        kinds[k].kept_sum[l] += (double)c / o.reps;
                    }
            }
        }
        printf("coreset size per MoE layer (experts of %zu, mean over %d previews of %zu mask rows):\n", E, o.reps, B);
        double sum_on = 0, sum_union = 0;
        printf("  top_p %.2f:", (double)top_p);
        for (size_t l = 0; l < L; l++) printf(" %.0f", kept_on[l]), sum_on += kept_on[l];
        printf("   (mean %.1f)\n  off (union of the rows' top-%zu):", sum_on / (double)L, mb.k);
        for (size_t l = 0; l < L; l++) printf(" %.0f", kept_union[l]), sum_union += kept_union[l];
        printf("   (mean %.1f)\n", sum_union / (double)L);
        printf("  uniform random routing would give a union of %.1f\n\n",
               (double)E * (1.0 - pow(1.0 - (double)mb.k / (double)E, (double)B)));
        snprintf(what, sizeof what, "preview %zu rows, p=%.2f", B, (double)top_p);
        fv[0].flops = fv[1].flops = 2.0 * (double)B * (macs_tok + mb.macs_head);
        figure_done(&fv[0], what, 0, "", pass_bytes(&mb, L, kept_on, 1, B, 1));
        snprintf(what, sizeof what, "preview %zu rows, no coreset", B);
        figure_done(&fv[1], what, 0, "", pass_bytes(&mb, L, kept_union, 1, B, 1));
        printf("\n");

        /* block commits: B resolved rows (random ids) at the session's end, no
         * logits. Before each, an untimed preview of the same rows at
         * top_p = 1 - 1e-6 counts the experts their routing uses per layer. */
        figure *fc = &figs[n_figs++];
        double *kept_commit = kept_on; /* reused */
        memset(kept_commit, 0, L * sizeof *kept_commit);
        const backend_preview_opts pu = {
            .record_block_size = m->record.block_size, .coreset = true, .coreset_top_p = 1.0f - 1e-6f};
        for (int rep = 0; rep < o.reps; rep++) {
            for (size_t i = 0; i < B; i++) block[i] = (int32_t)(rng_next(&r) % id_limit);
            if (seq_preview(s, block, B, &pu, logits, NULL, &err) ||
                seq_preview_debug(s, NULL, kept, &err))
                goto fail;
            for (size_t l = 0; l < L; l++)
                for (size_t e = 0; e < E; e++) kept_commit[l] += (kept[l * E + e] != 0) / (double)o.reps;
            backend_pass_stats st = {0};
            const probe p0 = probe_now();
            if (seq_commit(s, block, B, NULL, &st, &err)) goto fail;
            figure_add(fc, p0, &st);
        }
        double sum_commit = 0;
        for (size_t l = 0; l < L; l++) sum_commit += kept_commit[l];
        snprintf(what, sizeof what, "commit %zu-row block", B);
        fc->flops = 2.0 * (double)B * macs_tok;
        figure_done(fc, what, (double)B, "rows/s", pass_bytes(&mb, L, kept_commit, 0, B, 0));
        printf("%-28s (floor: %.1f experts a layer, the union of the rows' top-%zu as a preview of the same rows "
               "routes them)\n",
               "", sum_commit / (double)L, mb.k);
        mem_free(kept), mem_free(kept_on), mem_free(kept_union);
    }
    if (measure_bandwidth(pool, o.mb, bw_now)) return 1;
    printf("\nread bandwidth again: 1 thread %.2f GB/s, %zu threads %.2f GB/s; thread CPU time %.2f GB/s\n", bw_now[0],
           nt, bw_now[1], bw_now[2]);
    bw_best = fmax(bw_best, fmax(bw_now[0], bw_now[1]));
    printf("\nsummary: floor = bytes the pass must read / %.2f GB/s (the best wall-clock read bandwidth seen)\n",
           bw_best);
    printf("%-28s %9s %9s %8s %8s %-6s %8s %8s %7s %7s %5s\n", "pass", "median s", "best s", "median", "best", "", "GB",
           "floor s", "f/med", "f/best", "cores");
    for (int i = 0; i < n_figs; i++)
        if (figs[i].n) figure_summary(&figs[i], bw_best);
    printf("\nlogits finite throughout: %s; load average after: %s\n", finite ? "yes" : "NO",
           load_average(la, sizeof la));
    threadpool_free(pool);
    seq_free(s);
    mem_free(logits), mem_free(ids), mem_free(mb.layer);
    clover_model_free(m);
    return finite ? 0 : 1;
fail:
    fprintf(stderr, "bench_backend: %s\n", err.message);
    return 1;
}
