/*
 * bench_json_mask.c: what structured output costs per row on a real
 * vocabulary (src/grammar): building the token trie once, a token mask
 * computed from scratch at each byte of a document (structural positions,
 * string content, numbers), and the same masks from the cache.
 *
 *   bench_json_mask [tokenizer.json] [--check]
 *
 * --check also compares every mask with feeding each token's bytes alone
 * (test_json_schema's oracle, on the real vocabulary) and counts mismatches.
 *
 * Default tokenizer: $CLOVER_SOURCE_DIR/../shared/data/qwen3-tokenizer/tokenizer.json,
 * else ../shared/data/qwen3-tokenizer/tokenizer.json from the working directory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timer.h"
#include "grammar/json_match.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "text/tokenizer.h"

static const char SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":40},"
    "\"color\":{\"enum\":[\"red\",\"green\",\"blue\"]},\"ok\":{\"type\":\"boolean\"},"
    "\"n\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":5000},\"tags\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"string\"},\"maxItems\":4}},\"required\":[\"name\",\"color\",\"ok\"],\"additionalProperties\":false}";
static const char DOC[] =
    "{\"name\": \"The quick brown fox jumps\", \"color\": \"green\", \"ok\": true, \"n\": 4711, "
    "\"tags\": [\"alpha\", \"beta gamma\"]}";

int main(int argc, char **argv) {
    char def[4096];
    const char *src = getenv("CLOVER_SOURCE_DIR");
    snprintf(def, sizeof def, "%s../shared/data/qwen3-tokenizer/tokenizer.json", src ? src : "");
    if (src) snprintf(def, sizeof def, "%s/../shared/data/qwen3-tokenizer/tokenizer.json", src);
    const char *path = argc > 1 && strcmp(argv[1], "--check") ? argv[1] : def;
    const int check = !strcmp(argv[argc - 1], "--check");
    size_t mismatches = 0;
    clover_error err = {0};
    tokenizer *t = NULL;
    if (tokenizer_load_json(&t, path, &err)) {
        fprintf(stderr, "bench_json_mask: %s\n", err.message);
        return 1;
    }
    const size_t V = (size_t)tokenizer_n_tokens(t);
    js_schema *sc = NULL;
    tm_vocab *v = NULL;
    tm_cache *fresh = NULL, *warm = NULL;
    if (js_schema_compile(SCHEMA, strlen(SCHEMA), &sc, &err)) {
        fprintf(stderr, "bench_json_mask: %s\n", err.message);
        return 1;
    }
    double t0 = timer_now();
    if (tm_vocab_build(t, V, &v, &err) || tm_cache_create(sc, v, 1, &fresh, &err) ||
        tm_cache_create(sc, v, 4096, &warm, &err)) {
        fprintf(stderr, "bench_json_mask: %s\n", err.message);
        return 1;
    }
    const double build_s = timer_now() - t0;
    jm_state s;
    jm_init(&s);
    double cold_s = 0, cold_max = 0, warm_s = 0;
    size_t n = strlen(DOC);
    for (size_t i = 0; i <= n; i++) {
        bool acc;
        double a = timer_now();
        tm_mask(fresh, &s, &acc); /* a cache of one entry: computed every time (states differ) */
        double d = timer_now() - a;
        cold_s += d;
        if (d > cold_max) cold_max = d;
        const uint64_t *m = tm_mask(warm, &s, &acc);
        for (size_t id = 0; check && id < V; id++) {
            size_t len = 0;
            const char *b = tokenizer_token_bytes(t, (int32_t)id, &len);
            const tokenizer_kind k = tokenizer_token_kind(t, (int32_t)id);
            bool want = false;
            if (b && len && (k == TOKENIZER_KIND_NORMAL || k == TOKENIZER_KIND_ADDED)) {
                jm_state x;
                jm_copy(&x, &s);
                want = jm_feed_bytes(sc, &x, b, len);
            }
            mismatches += want != (bool)((m[id >> 6] >> (id & 63)) & 1);
        }
        a = timer_now();
        tm_mask(warm, &s, &acc);
        warm_s += timer_now() - a;
        if (i < n && !jm_feed(sc, &s, (unsigned char)DOC[i])) {
            fprintf(stderr, "bench_json_mask: the document is rejected at byte %zu\n", i);
            return 1;
        }
    }
    uint64_t computed, hits, visited;
    tm_cache_stats(fresh, &computed, &hits, &visited);
    printf("vocabulary %zu tokens (longest %zu bytes): trie built in %.1f ms\n", V, tm_vocab_max_len(v),
           build_s * 1e3);
    printf("mask from scratch: %.3f ms mean, %.3f ms max over %zu states (%.0f trie edges a mask)\n",
           cold_s * 1e3 / (double)(n + 1), cold_max * 1e3, n + 1, (double)visited / (double)computed);
    printf("mask from the cache: %.4f ms mean\n", warm_s * 1e3 / (double)(n + 1));
    if (check) printf("masks against per-token feeding: %zu mismatches\n", mismatches);
    tm_cache_free(fresh);
    tm_cache_free(warm);
    tm_vocab_free(v);
    js_schema_free(sc);
    tokenizer_free(t);
    return 0;
}
