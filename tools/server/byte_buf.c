/*
 * byte_buf.c: doubling growth; when everything was read the buffer starts
 * over, so a long stream keeps reusing the same memory.
 */
#include "byte_buf.h"

#include <stdlib.h>
#include <string.h>

int byte_buf_append(byte_buf *b, const void *data, size_t len) {
    if (b->off == b->n) b->off = b->n = 0;
    if (len > ((size_t)-1) / 2 - b->n) return -1;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1)
            cap *= 2;
        char *p = realloc(b->v, cap);
        if (!p) return -1;
        b->v = p;
        b->cap = cap;
    }
    if (len) memcpy(b->v + b->n, data, len);
    b->n += len;
    b->v[b->n] = '\0';
    return 0;
}

size_t byte_buf_take(byte_buf *b, char *out, size_t max) {
    size_t k = byte_buf_avail(b);
    if (k > max) k = max;
    memcpy(out, b->v + b->off, k);
    b->off += k;
    return k;
}

void byte_buf_free(byte_buf *b) {
    free(b->v);
    memset(b, 0, sizeof *b);
}
