/*
 * alloc.h: the allocation wrapper. Buffers that SIMD code touches are
 * 64-byte aligned (one cache line, room for any vector width); sizes are
 * checked for overflow so a hostile count from a file cannot wrap.
 */
#ifndef CLOVER_BASE_ALLOC_H
#define CLOVER_BASE_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

/* 64-byte aligned; NULL on failure or n == 0. Free with mem_free. */
void *mem_alloc(size_t n);
/* Zero-filled count*size bytes, 64-byte aligned; NULL on overflow or failure. */
void *mem_calloc(size_t count, size_t size);
void mem_free(void *p);

/* a*b into *out; false when it overflows size_t. */
bool mem_mul_ok(size_t a, size_t b, size_t *out);
/* a+b into *out; false when it overflows size_t. */
bool mem_add_ok(size_t a, size_t b, size_t *out);

#endif
