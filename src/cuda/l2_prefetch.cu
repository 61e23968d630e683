/*
 * l2_prefetch.cu: asks the L2 cache for byte ranges of constant data (the
 * weights of a product a few kernels ahead) with Hopper's bulk prefetch
 * (cp.async.bulk.prefetch.L2: one instruction a 64 KB piece, no registers,
 * no completion to wait for), so that a latency-bound stretch of a decode
 * step (the GDN recurrence, attention over the cache, the routed experts)
 * also moves the next product's bytes from HBM into L2 (50 MB on an H200).
 * The product then reads L2 instead of HBM. It is a hint only: nothing is
 * written, and whatever has been evicted again is read from memory as before,
 * so results cannot change. The backend launches it on its side stream
 * (backend_cuda_pass.c), beside the main chain.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_ops.h"

enum { PF_THREADS = 32, PF_PIECE = 16384, PF_MAX_BLOCKS = 132 };

/* Thread g asks for pieces g, g + G, ... (G = the grid's threads) of the ranges in turn (range i has
 * ceil(bytes / PF_PIECE) pieces, its last one short): the pieces spread
 * over up to PF_MAX_BLOCKS SMs, each SM's bulk-copy unit taking a share (one unit alone took ~150 us for 27 MB on
 * the H200, 2026-12-12-dec24 call 5). */
__global__ void __launch_bounds__(PF_THREADS) l2_prefetch_kernel(cuda_l2_ranges r, size_t pieces) {
    const size_t G = (size_t)gridDim.x * PF_THREADS;
    for (size_t g = (size_t)blockIdx.x * PF_THREADS + threadIdx.x; g < pieces; g += G) {
        size_t k = g;
        int i = 0;
        while (i < r.n && k >= (r.bytes[i] + PF_PIECE - 1) / PF_PIECE) k -= (r.bytes[i++] + PF_PIECE - 1) / PF_PIECE;
        if (i >= r.n) return;
        const size_t off = k * PF_PIECE, left = r.bytes[i] - off;
        const unsigned sz = (unsigned)(left < PF_PIECE ? left : PF_PIECE);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"((const char *)r.p[i] + off), "r"(sz) : "memory");
    }
}

extern "C" int cuda_l2_prefetch(const cuda_l2_ranges *r, void *stream) {
    cuda_l2_ranges a = {{0}, {0}, 0};
    if (r->n < 0 || r->n > CUDA_L2_MAX_RANGES) return (int)cudaErrorInvalidValue;
    for (int i = 0; i < r->n; i++) { /* 16-byte aligned pieces, multiples of 16 bytes: the range's inside */
        const uintptr_t b = ((uintptr_t)r->p[i] + 15) & ~(uintptr_t)15, e = ((uintptr_t)r->p[i] + r->bytes[i]) & ~(uintptr_t)15;
        if (!r->p[i] || e <= b) continue;
        a.p[a.n] = (const void *)b;
        a.bytes[a.n++] = e - b;
    }
    if (a.n == 0) return 0;
    size_t pieces = 0;
    for (int i = 0; i < a.n; i++) pieces += (a.bytes[i] + PF_PIECE - 1) / PF_PIECE;
    const size_t blocks = (pieces + PF_THREADS - 1) / PF_THREADS;
    l2_prefetch_kernel<<<(unsigned)(blocks < PF_MAX_BLOCKS ? blocks : PF_MAX_BLOCKS), PF_THREADS, 0,
                         (cudaStream_t)stream>>>(a, pieces);
    return (int)cudaGetLastError();
}
