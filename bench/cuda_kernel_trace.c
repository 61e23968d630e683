/*
 * cuda_kernel_trace.c: a kernel-by-kernel time table of any CUDA program, graphs included, without ncu's
 * serialisation (issue 24). Built as libclover_kernel_trace.so and loaded with LD_PRELOAD:
 *
 *   CLOVER_TRACE_OUT=trace.txt LD_PRELOAD=libclover_kernel_trace.so bench_cuda_preview MODEL --profile
 *
 * Why: ncu replays each kernel alone (a 32-row preview's ~1,000 kernels took it past 200 s, and its times are an
 * eager launch's, not a graph replay's); the device has no nsys. CUPTI's activity API (part of the CUDA toolkit,
 * libcupti) records every kernel's start and end as it ran, graph nodes included, at the cost of a timestamp.
 *
 * Windows: the program marks what it wants measured with cudaProfilerStart / cudaProfilerStop (the benches'
 * --profile modes do); each pair is one window, numbered from 1 in order. With no marks, the whole run is one
 * window. At exit, for each window: its kernels' span (first start to last end), the sum of their durations (the
 * gap is idle GPU time between kernels), the count, and a table of kernels grouped by (name, grid, block), the
 * largest total first. Names are the mangled ones: pipe the file through c++filt.
 */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WIN 64
#define MAX_KER (1u << 20)

typedef struct {
    uint64_t start, end;
    const char *name; /* interned */
    int32_t grid[3], block[3];
} kern;

static kern *g_k;
static size_t g_nk;
static uint64_t g_win[MAX_WIN][2];
static int g_nwin, g_open, g_dropped;
static FILE *g_out;

static const char *intern(const char *s) {
    static const char *tab[4096];
    static size_t n;
    if (!s) s = "?";
    for (size_t i = 0; i < n; i++)
        if (!strcmp(tab[i], s)) return tab[i];
    if (n == 4096) return "(too many names)";
    return tab[n++] = strdup(s);
}

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *max_records) {
    *size = 8u << 20;
    *buf = aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && r->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
        if (g_nk == MAX_KER) {
            g_dropped++;
            continue;
        }
        kern *o = &g_k[g_nk++];
        o->start = k->start, o->end = k->end, o->name = intern(k->name);
        o->grid[0] = k->gridX, o->grid[1] = k->gridY, o->grid[2] = k->gridZ;
        o->block[0] = k->blockX, o->block[1] = k->blockY, o->block[2] = k->blockZ;
    }
    free(buf);
}

static void mark(int start) {
    uint64_t t = 0;
    cuptiGetTimestamp(&t);
    if (start && !g_open && g_nwin < MAX_WIN) g_win[g_nwin][0] = t, g_win[g_nwin][1] = UINT64_MAX, g_open = 1;
    else if (!start && g_open) g_win[g_nwin++][1] = t, g_open = 0;
}

static void CUPTIAPI on_api(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId id, const void *data) {
    (void)ud;
    const CUpti_CallbackData *cb = data;
    int start = -1;
    if (dom == CUPTI_CB_DOMAIN_DRIVER_API) {
        if (id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart) start = 1;
        if (id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop) start = 0;
    } else if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
        if (id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000) start = 1;
        if (id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000) start = 0;
    }
    if (start < 0) return;
    /* a start opens at its entry; a stop closes at its exit, after the work before it is synchronised (the
     * benches synchronise before they stop) */
    if (start && cb->callbackSite == CUPTI_API_ENTER) mark(1);
    if (!start && cb->callbackSite == CUPTI_API_EXIT) mark(0);
}

typedef struct {
    const char *name;
    int32_t grid[3], block[3];
    double total;
    size_t n;
} group;

static int by_total(const void *a, const void *b) {
    const double x = ((const group *)a)->total, y = ((const group *)b)->total;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void report_window(int w, uint64_t t0, uint64_t t1) {
    size_t cap = 256, ng = 0, nk = 0;
    group *g = calloc(cap, sizeof *g);
    uint64_t first = UINT64_MAX, last = 0;
    double busy = 0;
    for (size_t i = 0; i < g_nk; i++) {
        const kern *k = &g_k[i];
        if (k->start < t0 || k->start > t1) continue;
        nk++;
        const double d = (double)(k->end - k->start) * 1e-3; /* us */
        busy += d;
        if (k->start < first) first = k->start;
        if (k->end > last) last = k->end;
        size_t j = 0;
        for (; j < ng; j++)
            if (g[j].name == k->name && !memcmp(g[j].grid, k->grid, sizeof k->grid) &&
                !memcmp(g[j].block, k->block, sizeof k->block))
                break;
        if (j == ng) {
            if (ng == cap) g = realloc(g, (cap *= 2) * sizeof *g);
            memset(&g[ng], 0, sizeof *g);
            g[ng].name = k->name;
            memcpy(g[ng].grid, k->grid, sizeof k->grid), memcpy(g[ng].block, k->block, sizeof k->block);
            ng++;
        }
        g[j].total += d, g[j].n++;
    }
    qsort(g, ng, sizeof *g, by_total);
    const double span = nk ? (double)(last - first) * 1e-3 : 0;
    fprintf(g_out, "== window %d: %zu kernels, span %.1f us, kernel time %.1f us (idle between kernels %.1f us)\n", w,
            nk, span, busy, span - busy);
    fprintf(g_out, "   %10s %6s %9s %5s  %-22s %-12s %s\n", "total us", "count", "us each", "%", "grid", "block", "name");
    for (size_t j = 0; j < ng; j++) {
        char gr[48], bl[32];
        snprintf(gr, sizeof gr, "%d,%d,%d", g[j].grid[0], g[j].grid[1], g[j].grid[2]);
        snprintf(bl, sizeof bl, "%d,%d,%d", g[j].block[0], g[j].block[1], g[j].block[2]);
        fprintf(g_out, "   %10.1f %6zu %9.2f %5.1f  %-22s %-12s %s\n", g[j].total, g[j].n, g[j].total / (double)g[j].n,
                busy > 0 ? 100.0 * g[j].total / busy : 0.0, gr, bl, g[j].name);
    }
    free(g);
}

__attribute__((constructor)) static void trace_init(void) {
    g_k = malloc(MAX_KER * sizeof *g_k);
    CUpti_SubscriberHandle sub;
    if (!g_k || cuptiActivityRegisterCallbacks(buf_request, buf_complete) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
        fprintf(stderr, "cuda_kernel_trace: CUPTI activity tracing could not be enabled\n");
        return;
    }
    /* the worker thread hands buffers back every 20 ms, so records reach the table even when the runtime's own
     * teardown at exit runs before this library's destructor */
    cuptiActivityFlushPeriod(20);
    if (cuptiSubscribe(&sub, on_api, NULL) == CUPTI_SUCCESS) {
        cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
        cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
        cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000);
        cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000);
    } else {
        fprintf(stderr, "cuda_kernel_trace: no API callbacks: the whole run is one window\n");
    }
}

__attribute__((destructor)) static void trace_fini(void) {
    if (!g_k) return;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    const char *path = getenv("CLOVER_TRACE_OUT");
    g_out = path ? fopen(path, "a") : NULL;
    if (!g_out) g_out = stderr;
    if (g_open) g_win[g_nwin++][1] = UINT64_MAX;
    fprintf(g_out, "cuda_kernel_trace: %zu kernels recorded%s, %d window%s\n", g_nk,
            g_dropped ? " (some dropped: more than the table holds)" : "", g_nwin ? g_nwin : 1,
            g_nwin == 1 ? "" : "s");
    if (!g_nwin) report_window(0, 0, UINT64_MAX);
    for (int w = 0; w < g_nwin; w++) report_window(w + 1, g_win[w][0], g_win[w][1]);
    if (g_out != stderr) fclose(g_out);
}
