/* alloc.c: aligned, overflow-checked allocation. */
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>

enum { MEM_ALIGN = 64 };

void *mem_alloc(size_t n) {
    if (n == 0) return NULL;
    size_t rounded;
    if (!mem_add_ok(n, MEM_ALIGN - 1, &rounded)) return NULL;
    rounded &= ~(size_t)(MEM_ALIGN - 1);
    return aligned_alloc(MEM_ALIGN, rounded);
}

void *mem_calloc(size_t count, size_t size) {
    size_t n;
    if (!mem_mul_ok(count, size, &n)) return NULL;
    void *p = mem_alloc(n);
    if (p) memset(p, 0, n);
    return p;
}

void mem_free(void *p) { free(p); }

bool mem_mul_ok(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }

bool mem_add_ok(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }
