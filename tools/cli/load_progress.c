/*
 * load_progress.c: reading a model file into the page cache with a
 * progress bar (see load_progress.h). Sequential read() with a large buffer
 * and the kernel told it is sequential: the fastest way to pull a file in,
 * and each chunk is a natural point to redraw. The bar is redrawn at most
 * ten times a second, and erased at the end so the next output starts on a
 * clean line.
 */
#include "load_progress.h"
#include "visual.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (8u << 20)
#define BAR_CELLS 30

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void draw(const char *name, uint64_t done, uint64_t total, double seconds) {
    double frac = total ? (double)done / (double)total : 1.0;
    int cells = (int)(frac * BAR_CELLS + 0.5);
    char bar[BAR_CELLS + 1];
    for (int i = 0; i < BAR_CELLS; i++) bar[i] = i < cells ? '#' : '.';
    bar[BAR_CELLS] = '\0';
    double gb = 1e-9, rate = seconds > 0 ? (double)done / seconds * gb : 0.0;
    fprintf(stderr, "\rloading %.40s [%s] %3d%%  %.2f / %.2f GB  %.2f GB/s", name, bar, (int)(frac * 100.0),
            (double)done * gb, (double)total * gb, rate);
    fflush(stderr);
}

void cli_prefetch_model(const char *path) {
    if (!path || !isatty(STDERR_FILENO) || cli_term_plain()) return;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < CLI_PREFETCH_MIN_BYTES) {
        close(fd);
        return;
    }
    char *buf = malloc(CHUNK);
    if (!buf) {
        close(fd);
        return;
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    const uint64_t total = (uint64_t)st.st_size;
    uint64_t done = 0;
    double t0 = now_s(), last = -1.0;
    for (;;) {
        ssize_t got = read(fd, buf, CHUNK);
        if (got <= 0) break; /* the loader reports a real I/O error itself */
        done += (uint64_t)got;
        double t = now_s();
        if (t - last >= 0.1) {
            draw(name, done, total, t - t0);
            last = t;
        }
    }
    draw(name, done, total, now_s() - t0);
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
    free(buf);
    close(fd);
}
