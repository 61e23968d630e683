/*
 * tensor_progress.c: see tensor_progress.h. The bar shows the fraction of
 * bytes written, the tensor in hand and the rate, so a user converting a
 * 20 GB model sees both how far it is and whether the disk is the limit.
 */
#include "tensor_progress.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/timer.h"

#define BAR_CELLS 30

void cli_tensor_progress_start(cli_tensor_progress *p) { *p = (cli_tensor_progress){.t0 = timer_now()}; }

void cli_tensor_progress_draw(void *user, const char *tensor, size_t index, size_t count, uint64_t done,
                              uint64_t total) {
    cli_tensor_progress *p = user;
    double now = timer_now();
    if (done < total && now - p->last < 0.1) return;
    p->last = now;
    double frac = total ? (double)done / (double)total : 1.0;
    int fill = (int)(frac * BAR_CELLS);
    char bar[BAR_CELLS + 1];
    for (int i = 0; i < BAR_CELLS; i++) bar[i] = i < fill ? '#' : '.';
    bar[BAR_CELLS] = '\0';
    double el = now - p->t0;
    fprintf(stderr, "\r[%s] %3.0f%% %zu/%zu %-36.36s %.1f GB %.0f MB/s ", bar, frac * 100.0, index + 1, count, tensor,
            (double)done / 1e9, el > 0 ? (double)done / 1e6 / el : 0.0);
    fflush(stderr);
    p->drawn = 1;
}

void cli_tensor_progress_end(cli_tensor_progress *p) {
    if (p->drawn) fputc('\n', stderr);
    p->drawn = 0;
}

int cli_parse_threads(const char *cmd, const char *s, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 1 || v > 4096) {
        fprintf(stderr, "clover %s: --threads '%s' is not a thread count (1..4096)\n", cmd, s);
        return -1;
    }
    *out = v;
    return 0;
}
