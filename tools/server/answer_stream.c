/*
 * answer_stream.c: stop sequences and the reasoning / content split over a
 * growing text. Both look only at what is new since the last call (plus the
 * few bytes held back), so a long answer costs linear time.
 *
 * The split mirrors clover_answer_split(answer, thinking = 1): reasoning is
 * the text before the first "</think>" with newlines stripped at both ends,
 * content the text after it without leading newlines; without "</think>"
 * it is all reasoning. Without split the whole answer is content, as it is.
 */
#include "answer_stream.h"

#include <stdlib.h>
#include <string.h>

static const char THINK_END[] = "</think>";
#define THINK_END_LEN (sizeof THINK_END - 1)

enum { PHASE_REASONING_START, PHASE_REASONING, PHASE_CONTENT_START, PHASE_CONTENT };

void answer_stream_init(answer_stream *a, char *const *stops, size_t n_stops, int split) {
    memset(a, 0, sizeof *a);
    a->stops = stops;
    a->n_stops = stops ? n_stops : 0;
    a->split = split;
    a->phase = split ? PHASE_REASONING_START : PHASE_CONTENT;
}

void answer_stream_free(answer_stream *a) {
    free(a->raw);
    memset(a, 0, sizeof *a);
}

/* The first occurrence of needle in hay[from..n), or n. */
static size_t find_from(const char *hay, size_t n, size_t from, const char *needle, size_t m) {
    if (m == 0 || n < m) return n;
    for (size_t i = from; i + m <= n; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, m) == 0) return i;
    return n;
}

/* The longest k < m with hay[n-k..n) == needle[0..k): a suffix that may still grow into needle. */
static size_t partial_suffix(const char *hay, size_t n, const char *needle, size_t m) {
    size_t k = m - 1 < n ? m - 1 : n;
    for (; k > 0; k--)
        if (memcmp(hay + n - k, needle, k) == 0) return k;
    return 0;
}

/* Stop sequences: the answer ends at the stop occurrence that is complete
 * first, i.e. whose END comes first (ties: the one that starts first), and
 * is cut at its start; otherwise a suffix that may still become a stop is
 * held back. Ordering by end, not start, makes the cut independent of how
 * the text arrives in pieces: a long stop that starts earlier but would
 * complete later never counts, whether the text came whole or token by
 * token (so a streamed and a non-streamed answer agree). */
static void scan_stops(answer_stream *a, size_t old_len) {
    size_t hold = 0, first = a->len, first_end = (size_t)-1;
    for (size_t i = 0; i < a->n_stops; i++) {
        const char *s = a->stops[i];
        size_t m = strlen(s);
        size_t from = old_len >= m - 1 ? old_len - (m - 1) : 0;
        size_t at = find_from(a->raw, a->len, from, s, m);
        if (at < a->len && (at + m < first_end || (at + m == first_end && at < first))) {
            first = at;
            first_end = at + m;
        }
        size_t k = partial_suffix(a->raw, a->len, s, m);
        if (k > hold) hold = k;
    }
    if (first < a->len) {
        a->len = first;
        a->raw[first] = '\0';
        a->stopped = 1;
        hold = 0;
    }
    size_t rel = a->len - hold;
    if (rel > a->released) a->released = rel;
}

static size_t rtrim_newlines(const char *s, size_t from, size_t to) {
    while (to > from && s[to - 1] == '\n')
        to--;
    return to;
}

/* Advances the splitter over raw[pos..released); final: nothing more will come. */
static void split_run(answer_stream *a, int final) {
    const char *s = a->raw;
    size_t end = a->released;
    for (;;) {
        switch (a->phase) {
        case PHASE_REASONING_START:
        case PHASE_CONTENT_START:
            while (a->pos < end && s[a->pos] == '\n')
                a->pos++;
            if (a->pos == end) return;
            a->phase = a->phase == PHASE_REASONING_START ? PHASE_REASONING : PHASE_CONTENT;
            break;
        case PHASE_REASONING: {
            size_t at = find_from(s, end, a->pos, THINK_END, THINK_END_LEN);
            size_t stop;
            if (at < end)
                stop = at;
            else if (final)
                stop = end;
            else
                stop = end - partial_suffix(s + a->pos, end - a->pos, THINK_END, THINK_END_LEN);
            size_t keep = rtrim_newlines(s, a->pos, stop);
            if (keep > a->pos) {
                a->reasoning = s + a->pos;
                a->reasoning_len = keep - a->pos;
                if (!a->reasoning_total) a->reasoning_off = a->pos;
                a->reasoning_total = keep - a->reasoning_off;
            }
            if (at < end) {
                a->pos = at + THINK_END_LEN;
                a->phase = PHASE_CONTENT_START;
                break;
            }
            a->pos = final ? end : keep;
            return;
        }
        case PHASE_CONTENT:
        default:
            if (end > a->pos) {
                a->content = s + a->pos;
                a->content_len = end - a->pos;
                if (!a->content_total) a->content_off = a->pos;
                a->content_total = end - a->content_off;
            }
            a->pos = end;
            return;
        }
    }
}

static void clear_deltas(answer_stream *a) {
    a->reasoning = a->content = NULL;
    a->reasoning_len = a->content_len = 0;
}

int answer_stream_push(answer_stream *a, const char *piece, size_t len) {
    clear_deltas(a);
    if (a->stopped || len == 0) return 0;
    if (a->len + len + 1 > a->cap) {
        size_t cap = a->cap ? a->cap : 256;
        while (cap < a->len + len + 1)
            cap *= 2;
        char *p = realloc(a->raw, cap);
        if (!p) return -1;
        a->raw = p;
        a->cap = cap;
    }
    size_t old_len = a->len;
    memcpy(a->raw + a->len, piece, len);
    a->len += len;
    a->raw[a->len] = '\0';
    scan_stops(a, old_len);
    split_run(a, a->stopped);
    return 0;
}

void answer_stream_finish(answer_stream *a) {
    clear_deltas(a);
    a->released = a->len;
    if (a->raw) split_run(a, 1);
}
