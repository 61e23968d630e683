/*
 * bench_cuda_pin.c: what pinning host memory costs on this machine, the way
 * --gpu-mem pins the model file (issue 31: gpumem31's 35B-A3B bench held its
 * pool but never got to the session arena allocated right after the pin, for
 * 200 s). Each line is printed before the next call starts (a call that never
 * returns shows as the last "..." line) and is one measurement:
 *   cudaMallocHost of 1 GiB (pinned anonymous memory: the host-copy option);
 *   cudaHostRegister of 1 GiB of malloc'd, touched memory (default flags);
 *   the model file mapped as clover maps it (PROT_READ, MAP_PRIVATE): the
 *   pages read first (the page cache, or the disk), then cudaHostRegister
 *   read-only of 64 MiB and of 1 GiB (a size effect), and unregister;
 *   the same 1 GiB mapped MAP_SHARED, read-only;
 *   a 256 MiB cudaMemcpyAsync from each pinned region to the device (GB/s),
 *   and from unpinned file pages (the driver's own staging).
 * Usage: bench_cuda_pin FILE [OFFSET_GIB (default 4: inside the experts)].
 * Built only with the CUDA backend (bench/CMakeLists.txt); no device: exit 77.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cuda/cuda_device.h"
#include "cuda/cuda_mem.h"

#define MIB (1024.0 * 1024.0)

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void say(const char *what) {
    printf("%s ...\n", what);
    fflush(stdout);
}

static void took(const char *what, size_t bytes, double s, int rc, const char *why) {
    printf("%-52s %9.1f MiB %9.3f s %8.2f GB/s%s%s\n", what, (double)bytes / MIB, s, s > 0 ? (double)bytes / s * 1e-9 : 0.0,
           rc ? "  FAILED: " : "", rc ? why : "");
    fflush(stdout);
}

/* A 256 MiB host-to-device copy from src (timed to the stream's sync). */
static void copy_rate(const char *what, const void *src, void *dev, void *stream) {
    char why[256] = "";
    const size_t n = 256u << 20;
    say(what);
    double t0 = now_s();
    int rc = cuda_h2d_async(dev, src, n, stream, why) || cuda_stream_sync(stream, why);
    took(what, n, now_s() - t0, rc, why);
}

/* Reads one byte a page of [p, p + n) (the pages into memory first, so a pin times the pin). */
static unsigned touch(const char *p, size_t n, size_t page) {
    unsigned s = 0;
    for (size_t i = 0; i < n; i += page) s += (unsigned char)p[i];
    return s;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_cuda_pin FILE [OFFSET_GIB]\n");
        return 2;
    }
    char why[256] = "";
    if (cuda_device_count(why, sizeof why) <= 0) {
        printf("SKIP: no CUDA device (%s)\n", why);
        return 77;
    }
    if (cuda_use_device(0, why)) {
        fprintf(stderr, "bench_cuda_pin: %s\n", why);
        return 1;
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), G = 1u << 30, M64 = 64u << 20;
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        fprintf(stderr, "bench_cuda_pin: cannot open %s\n", argv[1]);
        return 1;
    }
    size_t off = (size_t)(argc > 2 ? atof(argv[2]) : 4.0) * G;
    off &= ~(page - 1);
    if ((size_t)st.st_size < off + 2 * G) off = (size_t)st.st_size > 2 * G ? ((size_t)st.st_size - 2 * G) & ~(page - 1) : 0;
    if ((size_t)st.st_size < off + G + M64) {
        fprintf(stderr, "bench_cuda_pin: %s is smaller than 1.1 GiB\n", argv[1]);
        return 1;
    }
    void *dev = NULL, *stream = NULL;
    if (cuda_alloc(&dev, 256u << 20, why) || cuda_stream_create(&stream, why)) {
        fprintf(stderr, "bench_cuda_pin: %s\n", why);
        return 1;
    }
    printf("file %s, %.2f GiB, region at %.2f GiB, page %zu\n", argv[1], (double)st.st_size / G, (double)off / G, page);

    /* pinned anonymous memory */
    void *h = NULL;
    say("cudaMallocHost 1 GiB");
    double t0 = now_s();
    int rc = cuda_host_alloc(&h, G, why);
    took("cudaMallocHost 1 GiB", G, now_s() - t0, rc, why);
    if (!rc) {
        memset(h, 1, G);
        copy_rate("copy 256 MiB from cudaMallocHost memory", h, dev, stream);
        cuda_host_free(h);
    }
    /* malloc'd memory, registered */
    char *a = malloc(G);
    if (a) {
        memset(a, 1, G);
        say("cudaHostRegister 1 GiB of malloc'd memory");
        t0 = now_s();
        rc = cuda_host_register(a, G, 0, why);
        took("cudaHostRegister 1 GiB of malloc'd memory", G, now_s() - t0, rc, why);
        if (!rc) {
            copy_rate("copy 256 MiB from registered malloc'd memory", a, dev, stream);
            t0 = now_s();
            cuda_host_unregister(a);
            took("cudaHostUnregister of it", G, now_s() - t0, 0, "");
        }
        free(a);
    }
    /* the file, as clover maps it, then MAP_SHARED */
    const int flags[2] = {MAP_PRIVATE, MAP_SHARED};
    const char *names[2] = {"MAP_PRIVATE", "MAP_SHARED"};
    for (int f = 0; f < 2; f++) {
        char *m = mmap(NULL, G + M64, PROT_READ, flags[f], fd, (off_t)off);
        if (m == MAP_FAILED) {
            printf("mmap %s failed\n", names[f]);
            continue;
        }
        char what[128];
        snprintf(what, sizeof what, "%s: read every page of 1.06 GiB", names[f]);
        say(what);
        t0 = now_s();
        unsigned sum = touch(m, G + M64, page);
        took(what, G + M64, now_s() - t0, 0, "");
        if (sum == 0xFFFFFFFFu) printf("(sum %u)\n", sum);
        if (f == 0) copy_rate("copy 256 MiB from unpinned file pages", m, dev, stream);
        snprintf(what, sizeof what, "%s: cudaHostRegister read-only 64 MiB", names[f]);
        say(what);
        t0 = now_s();
        rc = cuda_host_register(m + G, M64, 1, why);
        took(what, M64, now_s() - t0, rc, why);
        if (!rc) cuda_host_unregister(m + G);
        snprintf(what, sizeof what, "%s: cudaHostRegister read-only 1 GiB", names[f]);
        say(what);
        t0 = now_s();
        rc = cuda_host_register(m, G, 1, why);
        took(what, G, now_s() - t0, rc, why);
        if (!rc) {
            snprintf(what, sizeof what, "%s: copy 256 MiB from the registered file pages", names[f]);
            copy_rate(what, m, dev, stream);
            t0 = now_s();
            cuda_host_unregister(m);
            took("cudaHostUnregister of it", G, now_s() - t0, 0, "");
        }
        munmap(m, G + M64);
    }
    cuda_stream_destroy(stream);
    cuda_free(dev);
    close(fd);
    return 0;
}
