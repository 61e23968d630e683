/*
 * bench_quantize.c: the f32 -> quantised-type converters, in values per
 * second per core, the dispatched path (AVX2 where the CPU has it) beside the
 * scalar path in the same run.
 *
 * Each figure is thread CPU time (the best of --reps runs over the same
 * seeded Gaussian rows, cache resident), so time-sharing with other
 * processes on a loaded machine does not distort it. The floor is issue 11's
 * goal for Q4_K: 30 M values/s a core. Both paths' outputs are compared
 * byte for byte, and the program fails if they differ.
 *
 *   bench_quantize [--values N] [--reps R]
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "quant/quant.h"

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef void (*quantize_row_fn)(uint32_t type, const float *src, void *dst, size_t n);

/* Best-of-reps seconds of CPU time to quantise n values, 4096 per row. */
static double best_time(quantize_row_fn fn, uint32_t type, const float *x, uint8_t *out, size_t n, int reps) {
    const size_t row = 4096, row_bytes = quant_row_bytes(type, row);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = cpu_now();
        for (size_t i = 0; i < n / row; i++) fn(type, x + i * row, out + i * row_bytes, row);
        const double t = cpu_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    size_t n = 1u << 20;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--values") && i + 1 < argc)
            n = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_quantize [--values N] [--reps R]\n");
            return 2;
        }
    }
    n = n / 4096 * 4096;
    if (n == 0 || reps < 1) {
        fprintf(stderr, "bench_quantize: --values must be at least 4096 and --reps at least 1\n");
        return 2;
    }
    float *x = mem_alloc(n * sizeof *x);
    uint8_t *fast = mem_alloc(n * 2), *slow = mem_alloc(n * 2);
    if (!x || !fast || !slow) {
        fprintf(stderr, "bench_quantize: out of memory\n");
        return 1;
    }
    rng_state r;
    rng_seed(&r, 11);
    for (size_t i = 0; i < n; i++) x[i] = rng_normal(&r) * 0.02f;

    static const struct {
        uint32_t type;
        const char *name;
        double floor; /* M values/s a core; 0: none set */
    } types[] = {{QUANT_Q4_K, "q4_k", 30}, {QUANT_Q5_K, "q5_k", 0}, {QUANT_Q6_K, "q6_k", 0}, {QUANT_Q8_0, "q8_0", 0}};
    printf("quantise f32 -> type, %zu values, thread CPU time, best of %d; SIMD %s\n", n, reps,
           quant_simd_active() ? "on" : "off");
    printf("%-5s %14s %14s %8s %10s %s\n", "type", "dispatched", "scalar", "speedup", "floor", "bytes");
    int status = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const double tf = best_time(quant_quantize_row, types[t].type, x, fast, n, reps);
        const double ts = best_time(quant_quantize_row_scalar, types[t].type, x, slow, n, reps);
        const bool same = memcmp(fast, slow, quant_row_bytes(types[t].type, n)) == 0;
        const double mf = (double)n / tf / 1e6, ms = (double)n / ts / 1e6;
        char floor[32] = "-";
        if (types[t].floor > 0)
            snprintf(floor, sizeof floor, "%.0f %s", types[t].floor, mf >= types[t].floor ? "met" : "MISSED");
        printf("%-5s %10.1f M/s %10.1f M/s %7.2fx %10s %s\n", types[t].name, mf, ms, ts / tf, floor,
               same ? "equal" : "DIFFER");
        if (!same) status = 1;
    }
    printf("peer: llama.cpp's quantize_row_q4_K_ref is not built here (no llama.cpp binary on this machine)\n");
    mem_free(x);
    mem_free(fast);
    mem_free(slow);
    return status;
}
