/*
 * byte_buf.h: a growable byte buffer read from the front (the request body,
 * the SSE bytes a stream has not sent yet). Appends never move unread
 * bytes past what the reader has been given.
 */
#ifndef CLOVER_SERVER_BYTE_BUF_H
#define CLOVER_SERVER_BYTE_BUF_H

#include <stddef.h>

typedef struct byte_buf {
    char *v;    /* [cap]; v[n] == '\0' once anything was appended */
    size_t n;   /* bytes written */
    size_t off; /* bytes already taken from the front */
    size_t cap;
} byte_buf;

/* 0, or -1 when out of memory (the buffer is unchanged). */
int byte_buf_append(byte_buf *b, const void *data, size_t len);
/* Unread bytes. */
static inline size_t byte_buf_avail(const byte_buf *b) { return b->n - b->off; }
/* Copies up to max unread bytes to out and consumes them; returns the count. */
size_t byte_buf_take(byte_buf *b, char *out, size_t max);
void byte_buf_free(byte_buf *b);

#endif
