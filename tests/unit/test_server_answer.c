/*
 * test_server_answer.c: the server's answer assembly (tools/server/answer_stream).
 * Hand-made cases first (stop sequences and "</think>" cut across pieces,
 * newlines held back and trimmed), then random texts cut into random
 * pieces: the concatenated deltas must equal the library's own
 * clover_answer_split of the text cut at the first stop sequence (found
 * here by a plain search over the whole text), whatever the cuts.
 */
#include <stdint.h>
#include <string.h>

#include "answer_stream.h"
#include "clover.h"
#include "test.h"

typedef struct collected {
    char reasoning[4096], content[4096];
    size_t rn, cn;
    int boundary_ok; /* every delta starts on a UTF-8 character */
} collected;

static void take(collected *c, const answer_stream *a) {
    if (a->reasoning_len) {
        if (((unsigned char)a->reasoning[0] & 0xC0) == 0x80) c->boundary_ok = 0;
        memcpy(c->reasoning + c->rn, a->reasoning, a->reasoning_len);
        c->rn += a->reasoning_len;
    }
    if (a->content_len) {
        if (((unsigned char)a->content[0] & 0xC0) == 0x80) c->boundary_ok = 0;
        memcpy(c->content + c->cn, a->content, a->content_len);
        c->cn += a->content_len;
    }
    c->reasoning[c->rn] = c->content[c->cn] = '\0';
}

/* Feeds pieces (NULL-terminated list) and collects everything. */
static void feed(answer_stream *a, const char *const *pieces, collected *c) {
    memset(c, 0, sizeof *c);
    c->boundary_ok = 1;
    for (size_t i = 0; pieces[i]; i++) {
        CHECK(answer_stream_push(a, pieces[i], strlen(pieces[i])) == 0);
        take(c, a);
    }
    answer_stream_finish(a);
    take(c, a);
}

static void test_split_across_pieces(void) {
    answer_stream a;
    answer_stream_init(&a, NULL, 0, 1);
    const char *p[] = {"\n\nthe plan", "\n", "</thi", "nk>", "\n\n", "the answer\n", NULL};
    collected c;
    feed(&a, p, &c);
    CHECK(!strcmp(c.reasoning, "the plan"));
    CHECK(!strcmp(c.content, "the answer\n"));
    CHECK(!a.stopped);
    answer_stream_free(&a);
}

static void test_held_newlines_and_false_tag(void) {
    answer_stream a;
    answer_stream_init(&a, NULL, 0, 1);
    CHECK(answer_stream_push(&a, "abc\n", 4) == 0);
    CHECK(a.reasoning_len == 3 && !memcmp(a.reasoning, "abc", 3)); /* the newline waits */
    CHECK(answer_stream_push(&a, "</th", 4) == 0);
    CHECK(a.reasoning_len == 0 && a.content_len == 0);
    CHECK(answer_stream_push(&a, "x", 1) == 0); /* not a tag after all: released with the newline */
    CHECK(a.reasoning_len == 6 && !memcmp(a.reasoning, "\n</thx", 6));
    answer_stream_finish(&a);
    CHECK(a.reasoning_total == 9 && memcmp(a.raw + a.reasoning_off, "abc\n</thx", 9) == 0);
    answer_stream_free(&a);
}

static void test_stop_across_pieces(void) {
    char *stops[] = {"o w", "zzz"};
    answer_stream a;
    answer_stream_init(&a, stops, 2, 0);
    const char *p[] = {"hel", "lo", " wo", "rld", NULL};
    collected c;
    feed(&a, p, &c);
    CHECK(!strcmp(c.content, "hell"));
    CHECK(a.stopped && a.len == 4);
    answer_stream_free(&a);

    /* a partial match that fails is released whole */
    answer_stream_init(&a, stops, 2, 0);
    const char *q[] = {"ab zz", "y", NULL};
    feed(&a, q, &c);
    CHECK(!strcmp(c.content, "ab zzy"));
    CHECK(!a.stopped);
    answer_stream_free(&a);

    /* overlapping stops: "te" completes before the longer stop that starts
     * earlier, so the answer ends at "te" whether the text comes whole or in
     * pieces (the fuzzer found the two disagreeing) */
    char *overlap[] = {"te", "xx abc te yy"};
    const char *whole[] = {"xx abc te yy", NULL};
    const char *bits[] = {"xx a", "bc t", "e yy", NULL};
    answer_stream_init(&a, overlap, 2, 0);
    feed(&a, whole, &c);
    CHECK(!strcmp(c.content, "xx abc "));
    answer_stream_free(&a);
    answer_stream_init(&a, overlap, 2, 0);
    feed(&a, bits, &c);
    CHECK(!strcmp(c.content, "xx abc "));
    answer_stream_free(&a);

    /* a stop inside the reasoning ends the answer there */
    answer_stream_init(&a, stops, 2, 1);
    const char *r[] = {"thinking zzz then", "</think>answer", NULL};
    feed(&a, r, &c);
    CHECK(!strcmp(c.reasoning, "thinking "));
    CHECK(c.cn == 0);
    answer_stream_free(&a);
}

/* ---- random texts ---- */

static uint64_t rng_state = 0x5eed;
static uint32_t next_u32(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static const char *fragments[] = {"a",  "b",     "\n",  "\n\n", "</think>", "</", "think", ">", "<",
                                  "é",  "\xe2\x82\xac", "ST", "OP", "STOP", " ", "x\n", "<think>"};
#define N_FRAGMENTS (sizeof fragments / sizeof fragments[0])

/* Where the answer is cut: at the stop occurrence that completes first (the
 * smallest end; ties: the smallest start). */
static size_t first_stop(const char *t, size_t n, char *const *stops, size_t n_stops) {
    size_t best = n, best_end = (size_t)-1;
    for (size_t i = 0; i < n_stops; i++) {
        const char *hit = strstr(t, stops[i]);
        if (!hit) continue;
        size_t at = (size_t)(hit - t), end = at + strlen(stops[i]);
        if (end < best_end || (end == best_end && at < best)) {
            best = at;
            best_end = end;
        }
    }
    return best;
}

static void test_random_against_answer_split(void) {
    static char *stop_sets[][2] = {{NULL, NULL}, {"STOP", NULL}, {"OP\n", "é\xe2\x82\xac"}, {"ab", "</"}};
    static const size_t n_stop_sets[] = {0, 1, 2, 2};
    size_t compared = 0, skipped = 0;
    for (int iter = 0; iter < 20000; iter++) {
        char text[1024];
        size_t n = 0, cuts[128], n_cuts = 0;
        size_t n_frag = next_u32() % 40;
        for (size_t f = 0; f < n_frag; f++) {
            const char *s = fragments[next_u32() % N_FRAGMENTS];
            memcpy(text + n, s, strlen(s));
            n += strlen(s);
            if (next_u32() % 3 == 0) cuts[n_cuts++] = n; /* pieces end between fragments */
        }
        text[n] = '\0';
        cuts[n_cuts++] = n;
        size_t set = next_u32() % 4;
        int split = (int)(next_u32() % 2);
        char *const *stops = stop_sets[set];
        answer_stream a;
        answer_stream_init(&a, stops, n_stop_sets[set], split);
        collected c;
        memset(&c, 0, sizeof c);
        c.boundary_ok = 1;
        size_t at = 0;
        for (size_t k = 0; k < n_cuts; k++) {
            CHECK(answer_stream_push(&a, text + at, cuts[k] - at) == 0);
            take(&c, &a);
            at = cuts[k];
        }
        answer_stream_finish(&a);
        take(&c, &a);

        size_t cut = first_stop(text, n, stops, n_stop_sets[set]);
        CHECK_EQ_INT(a.len, cut);
        CHECK_EQ_INT(a.stopped, cut < n);
        CHECK(c.boundary_ok);
        text[cut] = '\0';
        if (!split) {
            CHECK_MSG(c.rn == 0 && c.cn == cut && !memcmp(c.content, text, cut), "iteration %d", iter);
        } else {
            /* the documented difference: a "<think>" repeated inside the reasoning stays */
            const char *close = strstr(text, "</think>"), *open = strstr(text, "<think>");
            if (open && (!close || open < close)) {
                skipped++;
            } else {
                clover_answer_parts p;
                clover_answer_split(text, cut, 1, &p);
                CHECK_MSG(c.rn == p.reasoning_len && !memcmp(c.reasoning, text + p.reasoning_off, c.rn),
                          "iteration %d: reasoning differs", iter);
                CHECK_MSG(c.cn == p.content_len && !memcmp(c.content, text + p.content_off, c.cn),
                          "iteration %d: content differs", iter);
                CHECK(a.reasoning_total == p.reasoning_len && a.content_total == p.content_len);
                compared++;
            }
        }
        /* the recorded spans give the same parts as the deltas */
        CHECK(a.reasoning_total == c.rn && (!c.rn || !memcmp(a.raw + a.reasoning_off, c.reasoning, c.rn)));
        CHECK(a.content_total == c.cn && (!c.cn || !memcmp(a.raw + a.content_off, c.content, c.cn)));
        answer_stream_free(&a);
    }
    CHECK(compared > 5000);
    fprintf(stderr, "random: %zu splits compared with clover_answer_split, %zu with a repeated <think> skipped\n",
            compared, skipped);
}

int main(void) {
    RUN(test_split_across_pieces);
    RUN(test_held_newlines_and_false_tag);
    RUN(test_stop_across_pieces);
    RUN(test_random_against_answer_split);
    return TEST_EXIT();
}
