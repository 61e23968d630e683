/*
 * cuda_bench.h: what the CUDA benchmark programs share (bench_cuda_decode.c,
 * bench_cuda_matmul.c, bench_cuda_mixer.c): a CUDA call checked and fatal
 * (a bench has nothing to recover), a host buffer copied to the device, and
 * the device found or the program skipped (exit 77: "skipped", never a pass,
 * on a machine without a GPU). Header-only: each bench is one translation unit.
 */
#ifndef CLOVER_BENCH_CUDA_BENCH_H
#define CLOVER_BENCH_CUDA_BENCH_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "cuda/cuda_device.h"

#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (cudaError_t)(call);                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static inline void *bench_dev_copy(const void *h, size_t bytes) {
    void *d = NULL;
    CU(cudaMalloc(&d, bytes));
    CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* 0 with device 0 described in *info; 77 after "SKIP: ..." where there is no device; a device that is
 * there but cannot be queried ends the program (exit 1, named by prog). */
static inline int bench_cuda_device(const char *prog, cuda_device_info *info) {
    char why[256] = "";
    if (cuda_device_count(why, sizeof why) <= 0) {
        printf("SKIP: no CUDA device (%s)\n", why[0] ? why : "the runtime found 0 devices");
        return 77;
    }
    if (cuda_device_query(0, info, why, sizeof why)) {
        fprintf(stderr, "%s: %s\n", prog, why);
        exit(1);
    }
    return 0;
}

#endif
