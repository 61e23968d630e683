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

enum { PF_THREADS = 32, PF_PIECE = 65536 };

__global__ void __launch_bounds__(PF_THREADS) l2_prefetch_kernel(cuda_l2_ranges r) {
    for (int i = 0; i < r.n; i++) {
        const char *p = (const char *)r.p[i];
        const size_t nb = r.bytes[i];
        for (size_t off = (size_t)threadIdx.x * PF_PIECE; off < nb; off += (size_t)PF_THREADS * PF_PIECE) {
            const unsigned sz = (unsigned)(nb - off < PF_PIECE ? nb - off : PF_PIECE);
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(sz) : "memory");
        }
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
    l2_prefetch_kernel<<<1, PF_THREADS, 0, (cudaStream_t)stream>>>(a);
    return (int)cudaGetLastError();
}
