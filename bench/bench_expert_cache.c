/*
 * bench_expert_cache.c: replays a routing trace (CLOVER_ROUTE_TRACE,
 * backend/route_trace.h) against expert caches of several byte budgets and
 * prints the hit rate of each policy of backend/expert_cache.h beside its
 * ceiling (Belady's optimum) and the peer's static choice (llama.cpp's
 * --n-cpu-moe keeps whole layers' experts resident: the experts of as many
 * layers as the budget holds, the layers with the most uses first, which is
 * the best such a static choice can do; each expert loaded at its first
 * use, as the caches start empty).
 *
 * Budgets are given at a target geometry (default the 35B-A3B: 40 layers
 * of 256 experts, 1,769,472 bytes an expert at Q4_K), as the share of its
 * expert bytes they hold; the trace's cache gets the same share of the
 * trace's own experts (a trace of a model with fewer layers or experts
 * stands for the target's routing at the same skew).
 *
 *   bench_expert_cache TRACE [--budgets 1,2,4,8,16] [--layers 40] [--experts 256]
 *                      [--expert-bytes 1769472]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/expert_cache.h"

typedef struct use {
    uint32_t layer, expert;
    uint32_t step; /* the MoE call it belongs to */
    uint64_t next; /* the index of the next use of the same expert, EXPERT_NEVER: none */
} use;

typedef struct trace {
    use *u;
    size_t n, cap;
    uint32_t n_layer, n_expert, n_used;
    size_t calls, passes;
} trace;

static int fail(const char *what, const char *path, size_t line) {
    fprintf(stderr, "bench_expert_cache: %s:%zu: %s\n", path, line, what);
    return 1;
}

static int trace_read(trace *t, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_expert_cache: cannot open '%s': %s\n", path, strerror(errno));
        return 1;
    }
    char *line = NULL;
    size_t cap = 0, ln = 0;
    int rc = 0;
    long last_layer = -1;
    while (!rc && getline(&line, &cap, f) > 0) {
        ln++;
        if (ln == 1) {
            if (strcmp(line, "clover-route-trace 1\n")) rc = fail("not a version-1 routing trace", path, ln);
            continue;
        }
        unsigned e, k;
        if (sscanf(line, "experts %u used %u", &e, &k) == 2) {
            if (t->n_expert && t->n_expert != e) rc = fail("a second model in the trace", path, ln);
            t->n_expert = e, t->n_used = k;
            continue;
        }
        char *p = line, *end;
        unsigned long layer = strtoul(p, &end, 10);
        if (end == p || !t->n_expert) {
            rc = fail("expected 'LAYER ROWS EXPERT:ROWS ...' after an 'experts E used K' line", path, ln);
            break;
        }
        strtoul(end, &p, 10); /* rows: not needed to replay */
        if ((long)layer <= last_layer) t->passes++;
        last_layer = (long)layer;
        if (layer + 1 > t->n_layer) t->n_layer = (uint32_t)layer + 1;
        for (;;) {
            while (*p == ' ') p++;
            if (*p == '\n' || !*p) break;
            unsigned long x = strtoul(p, &end, 10);
            if (end == p || *end != ':' || x >= t->n_expert) {
                rc = fail("a bad EXPERT:ROWS pair", path, ln);
                break;
            }
            strtoul(end + 1, &p, 10);
            if (t->n == t->cap) {
                t->cap = t->cap ? 2 * t->cap : 4096;
                use *q = realloc(t->u, t->cap * sizeof *q);
                if (!q) {
                    rc = fail("out of memory", path, ln);
                    break;
                }
                t->u = q;
            }
            t->u[t->n++] = (use){.layer = (uint32_t)layer, .expert = (uint32_t)x, .step = (uint32_t)t->calls};
        }
        t->calls++;
    }
    free(line);
    fclose(f);
    if (!rc && !t->n) rc = fail("no routing records", path, ln);
    if (rc) return rc;
    t->passes++;
    /* next uses, from the end */
    size_t keys = (size_t)t->n_layer * t->n_expert;
    uint64_t *seen = malloc(keys * sizeof *seen);
    if (!seen) return fail("out of memory", path, ln);
    for (size_t i = 0; i < keys; i++) seen[i] = EXPERT_NEVER;
    for (size_t i = t->n; i-- > 0;) {
        size_t key = (size_t)t->u[i].layer * t->n_expert + t->u[i].expert;
        t->u[i].next = seen[key];
        seen[key] = i;
    }
    free(seen);
    return 0;
}

/* Hits of one policy with `slots` slots. */
static double replay(const trace *t, expert_policy p, size_t slots, uint64_t *bypassed) {
    expert_cache c;
    clover_error err = {0};
    if (expert_cache_init(&c, p, t->n_layer, t->n_expert, 1, slots, &err)) {
        fprintf(stderr, "bench_expert_cache: %s\n", err.message);
        exit(1);
    }
    uint32_t step = UINT32_MAX;
    for (size_t i = 0; i < t->n; i++) {
        if (t->u[i].step != step) { /* a new step: its distinct experts (a call lists each once) */
            size_t uses = 0;
            while (i + uses < t->n && t->u[i + uses].step == t->u[i].step) uses++;
            expert_cache_step_of(&c, uses);
            step = t->u[i].step;
        }
        expert_access a;
        expert_cache_access(&c, t->u[i].layer, t->u[i].expert, t->u[i].next, &a, &err);
    }
    double rate = (double)c.hits / (double)t->n;
    *bypassed = c.bypasses;
    expert_cache_free(&c);
    return rate;
}

/* The static peer: whole layers resident, the most-used layers first,
 * each expert loaded at its first use (the caches start cold too). */
static double static_layers(const trace *t, size_t slots) {
    uint64_t per[4096] = {0}, first[4096] = {0};
    size_t keys = (size_t)t->n_layer * t->n_expert;
    unsigned char *seen = calloc(keys, 1);
    if (!seen) return 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t l = t->u[i].layer < 4096 ? t->u[i].layer : 0, k = (size_t)t->u[i].layer * t->n_expert + t->u[i].expert;
        per[l]++;
        first[l] += !seen[k];
        seen[k] = 1;
    }
    free(seen);
    size_t fit = slots / t->n_expert;
    uint64_t hits = 0;
    for (size_t k = 0; k < fit && k < t->n_layer; k++) { /* take the busiest layer left, fit times */
        size_t best = 0;
        for (size_t l = 1; l < t->n_layer; l++)
            if (per[l] - first[l] > per[best] - first[best]) best = l;
        hits += per[best] - first[best];
        per[best] = first[best] = 0;
    }
    return (double)hits / (double)t->n;
}

static int parse_u64(const char *opt, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = s ? strtoull(s, &end, 10) : 0;
    if (!s || errno || *end || !v) {
        fprintf(stderr, "bench_expert_cache: %s needs a positive number, not '%s'\n", opt, s ? s : "");
        return 1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv) {
    const char *path = NULL, *budgets = "1,2,4,8,16";
    uint64_t layers = 40, experts = 256, bytes = 1769472;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--budgets") && v) budgets = argv[++i];
        else if (!strcmp(a, "--layers")) { if (parse_u64(a, v, &layers)) return 2; i++; }
        else if (!strcmp(a, "--experts")) { if (parse_u64(a, v, &experts)) return 2; i++; }
        else if (!strcmp(a, "--expert-bytes")) { if (parse_u64(a, v, &bytes)) return 2; i++; }
        else if (a[0] != '-' && !path) path = a;
        else {
            fprintf(stderr, "usage: bench_expert_cache TRACE [--budgets GiB,GiB,...] [--layers N] [--experts N] "
                            "[--expert-bytes N]\n");
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "bench_expert_cache: no trace file (CLOVER_ROUTE_TRACE=FILE writes one)\n");
        return 2;
    }
    trace t = {0};
    if (trace_read(&t, path)) return 1;
    size_t keys = (size_t)t.n_layer * t.n_expert, distinct = 0;
    {
        unsigned char *seen = calloc(keys, 1);
        for (size_t i = 0; seen && i < t.n; i++) {
            size_t k = (size_t)t.u[i].layer * t.n_expert + t.u[i].expert;
            distinct += !seen[k];
            seen[k] = 1;
        }
        free(seen);
    }
    double target = (double)layers * (double)experts * (double)bytes;
    printf("trace %s: %zu MoE calls in %zu passes, %u layers x %u experts (top %u), %zu expert uses, %zu distinct "
           "(cold misses: the most any cache can hit is %.1f%%)\n",
           path, t.calls, t.passes, t.n_layer, t.n_expert, t.n_used, t.n, distinct,
           100.0 * (double)(t.n - distinct) / (double)t.n);
    printf("budgets at %llu layers x %llu experts of %llu bytes (%.2f GiB of experts); the trace's cache holds the "
           "same share of its %zu experts\n",
           (unsigned long long)layers, (unsigned long long)experts, (unsigned long long)bytes,
           target / (1024.0 * 1024 * 1024), keys);
    printf("%-8s %6s %6s | %7s %7s %7s %7s | %7s %7s | %s\n", "GiB", "share", "slots", "lru", "lfu", "admit",
           "sweep", "opt", "static", "bypassed (admit, opt)");
    for (const char *p = budgets; *p;) {
        char *end;
        double gib = strtod(p, &end);
        if (end == p || gib <= 0) {
            fprintf(stderr, "bench_expert_cache: --budgets '%s': expected GiB values separated by commas\n", budgets);
            return 2;
        }
        p = *end == ',' ? end + 1 : end;
        double share = gib * 1024.0 * 1024 * 1024 / target;
        if (share > 1) share = 1;
        size_t slots = (size_t)(share * (double)keys);
        double rate[EXPERT_N_POLICIES];
        uint64_t byp[EXPERT_N_POLICIES];
        for (int q = 0; q < EXPERT_N_POLICIES; q++) rate[q] = replay(&t, (expert_policy)q, slots, &byp[q]);
        printf("%-8g %6.3f %6zu | %6.1f%% %6.1f%% %6.1f%% %6.1f%% | %6.1f%% %6.1f%% | %llu, %llu\n", gib, share,
               slots, 100 * rate[EXPERT_LRU], 100 * rate[EXPERT_LFU], 100 * rate[EXPERT_ADMIT],
               100 * rate[EXPERT_SWEEP], 100 * rate[EXPERT_OPT],
               100 * static_layers(&t, slots), (unsigned long long)byp[EXPERT_ADMIT],
               (unsigned long long)byp[EXPERT_OPT]);
    }
    free(t.u);
    return 0;
}
