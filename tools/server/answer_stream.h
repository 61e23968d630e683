/*
 * answer_stream.h: generated text, piece by piece -> what the client sees:
 * the answer cut before the first stop sequence, and (a chat with thinking
 * on) split into reasoning and content, released as deltas that are never
 * taken back.
 *
 * Why text is held back: a piece may end with the start of a stop sequence
 * or of "</think>", and newlines before "</think>" are trimmed from the
 * reasoning; releasing such bytes early could not be undone in a stream.
 * The non-streaming answer is the same stream fed at once, so the
 * concatenated deltas equal it by construction; the split agrees with
 * clover_answer_split(text, thinking = 1) (tests check it on random texts
 * and random cuts) except that a "<think>" repeated inside the reasoning
 * stays in it (the split drops what precedes it, which a stream has
 * already sent). Pure: no model, no I/O.
 */
#ifndef CLOVER_SERVER_ANSWER_STREAM_H
#define CLOVER_SERVER_ANSWER_STREAM_H

#include <stddef.h>

typedef struct answer_stream {
    /* configuration */
    char *const *stops; /* [n_stops] non-empty stop sequences (borrowed) */
    size_t n_stops;
    int split; /* non-zero: the answer opens in reasoning and "</think>" closes it */

    /* the answer so far, cut at the first stop sequence */
    char *raw; /* [cap] (NUL-terminated at len) */
    size_t len, cap;
    size_t released; /* bytes of raw that no stop sequence can still claim */
    int stopped;     /* a stop sequence was found: the answer is complete */

    /* the splitter: raw[0..pos) is decided (sent or trimmed away) */
    size_t pos;
    int phase;

    /* everything released so far: reasoning is raw[reasoning_off..+reasoning_total),
     * content raw[content_off..+content_total) (each part is one contiguous span) */
    size_t reasoning_off, reasoning_total, content_off, content_total;

    /* the deltas of the last push / finish: views into raw, valid until the next call */
    const char *reasoning, *content;
    size_t reasoning_len, content_len;
} answer_stream;

/* stops may be NULL when n_stops is 0; they must outlive the stream. */
void answer_stream_init(answer_stream *a, char *const *stops, size_t n_stops, int split);
void answer_stream_free(answer_stream *a);

/* Appends a piece of generated text (whole UTF-8 characters). Returns 0, or
 * -1 when out of memory. Afterwards the deltas hold what may be sent now;
 * a->stopped tells that a stop sequence ended the answer (further pushes
 * are ignored). */
int answer_stream_push(answer_stream *a, const char *piece, size_t len);

/* The generation ended: releases everything still held. The deltas hold the rest. */
void answer_stream_finish(answer_stream *a);

#endif
