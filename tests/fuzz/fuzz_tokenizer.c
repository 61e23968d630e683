/*
 * fuzz_tokenizer.c: the tokenizer on arbitrary bytes. The first input byte
 * picks what to do with the rest:
 *   encode it (special tokens allowed or not, with one of two synthetic
 *   vocabularies), then decode: with the vocabulary whose added tokens do
 *   not strip whitespace, text that is already NFC must come back byte for
 *   byte; the stream decoder's output, chunk by chunk valid UTF-8, must
 *   equal the one-shot decode with U+FFFD replacement;
 *   read it as token ids (pairs of bytes) and stream-decode them the same way;
 *   load it as a tokenizer.json.
 * A broken property traps, so libFuzzer reports it like a crash.
 *
 * The vocabularies are built here from a fixed seed: the 256 byte tokens,
 * hand-picked merges (English, CJK and é byte pairs, two pairs that make the
 * same token) and a few hundred random ones, added tokens of every kind,
 * NFC and Qwen3.5's Split pattern.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "text/bytelevel.h"
#include "text/tok_internal.h"
#include "text/utf8.h"

static const char QWEN35_PATTERN[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
                                     "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

#define REQUIRE(c)                                                                                                     \
    do {                                                                                                               \
        if (!(c)) __builtin_trap();                                                                                    \
    } while (0)

/* raw bytes -> the byte-level form a tokenizer.json stores */
static json_t *bytelevel_string(const char *raw, size_t n) {
    char buf[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < sizeof buf; i++)
        k += utf8_encode(bytelevel_codepoint((uint8_t)raw[i]), (uint8_t *)buf + k);
    return json_stringn(buf, k);
}

typedef struct vocab_builder {
    char tok[4096][9]; /* raw bytes (lengths in len) */
    uint8_t len[4096];
    int n;
    json_t *vocab, *merges;
} vocab_builder;

static int find_raw(const vocab_builder *v, const char *s, size_t n) {
    for (int i = 0; i < v->n; i++)
        if (v->len[i] == n && memcmp(v->tok[i], s, n) == 0) return i;
    return -1;
}

static int add_raw(vocab_builder *v, const char *s, size_t n) {
    int i = find_raw(v, s, n);
    if (i >= 0) return i;
    memcpy(v->tok[v->n], s, n);
    v->len[v->n] = (uint8_t)n;
    json_t *key = bytelevel_string(s, n);
    json_object_set_new(v->vocab, json_string_value(key), json_integer(v->n));
    json_decref(key);
    return v->n++;
}

static void add_merge(vocab_builder *v, const char *a, size_t an, const char *b, size_t bn) {
    char joined[16];
    if (an + bn > 8) return;
    add_raw(v, a, an);
    add_raw(v, b, bn);
    memcpy(joined, a, an);
    memcpy(joined + an, b, bn);
    add_raw(v, joined, an + bn);
    json_t *pair = json_array();
    json_array_append_new(pair, bytelevel_string(a, an));
    json_array_append_new(pair, bytelevel_string(b, bn));
    json_array_append_new(v->merges, pair);
}

static tokenizer *build(bool strip_flags) {
    static vocab_builder v;
    memset(&v, 0, sizeof v);
    v.vocab = json_object();
    v.merges = json_array();
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        add_raw(&v, &c, 1);
    }
    static const char *const pairs[][2] = {
        {"t", "h"},       {"th", "e"},       {" ", "t"},           {" t", "he"},
        {"i", "n"},       {"in", "g"},       {"e", "r"},           {" ", "a"},
        {"a", "a"},       {"aa", "aa"},      {"b", "c"},           {"a", "bc"},
        {"a", "b"},       {"ab", "c"},       {"\xE4", "\xB8"},     {"\xE4\xB8", "\xAD"},
        {"\xC3", "\xA9"}, {"'", "s"},        {" ", " "},           {"  ", "  "},
        {"\n", "\n"},     {"1", "2"},        {"\xF0\x9F", "\x8E"}, {"\xF0\x9F\x8E", "\x89"},
        {"e", "\xCC"},    {"e\xCC", "\x81"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        add_merge(&v, pairs[i][0], strlen(pairs[i][0]), pairs[i][1], strlen(pairs[i][1]));
    rng_state r;
    rng_seed(&r, 42);
    for (int i = 0; i < 600 && v.n < 4000; i++) {
        int a = (int)(rng_next(&r) % (uint64_t)v.n), b = (int)(rng_next(&r) % (uint64_t)v.n);
        add_merge(&v, v.tok[a], v.len[a], v.tok[b], v.len[b]);
    }
    int base = v.n;
    json_t *added = json_array();
    static const struct {
        const char *content;
        int special, normalized, lstrip, rstrip, single_word;
    } adds[] = {
        {"<|x|>", 1, 0, 0, 0, 0}, {"<|x|>>", 0, 0, 0, 0, 0},
        {"<y>", 0, 0, 0, 0, 0},   {"caf\xC3\xA9", 0, 1, 0, 0, 0},
        {"<L>", 0, 0, 1, 0, 0},   {"<R>", 1, 0, 0, 1, 0},
        {"qz", 0, 0, 0, 0, 1},    {"\xE4\xB8\xAD\xE6\x96\x87", 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof adds / sizeof adds[0]; i++) {
        if (!strip_flags && (adds[i].lstrip || adds[i].rstrip)) continue;
        json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", base + (int)i, "content",
                                               adds[i].content, "special", adds[i].special, "normalized",
                                               adds[i].normalized, "lstrip", adds[i].lstrip, "rstrip", adds[i].rstrip,
                                               "single_word", adds[i].single_word));
    }
    json_t *root = json_pack(
        "{s:o, s:{s:s}, s:{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]}, s:{s:s}, s:{s:s, s:o, s:o}}",
        "added_tokens", added, "normalizer", "type", "NFC", "pre_tokenizer", "type", "Sequence", "pretokenizers",
        "type", "Split", "pattern", "Regex", QWEN35_PATTERN, "behavior", "Isolated", "invert", 0, "type", "ByteLevel",
        "add_prefix_space", 0, "trim_offsets", 0, "use_regex", 0, "decoder", "type", "ByteLevel", "model", "type",
        "BPE", "vocab", v.vocab, "merges", v.merges);
    char *js = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    tokenizer *t = NULL;
    clover_error err;
    if (!js || tokenizer_load_json_memory(&t, js, strlen(js), "fuzz.json", &err)) __builtin_trap();
    free(js);
    return t;
}

/* Stream-decodes ids; the chunks must be whole characters and add up to
 * the one-shot decode with replacement. */
static void check_stream(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags) {
    clover_error err;
    text_bytes whole = {0}, all = {0}, chunk = {0};
    REQUIRE(tokenizer_decode(t, ids, n, flags | TOKENIZER_REPLACE_INVALID, &whole, &err) == CLOVER_OK);
    tokenizer_stream s;
    tokenizer_stream_init(&s, t, flags);
    for (size_t i = 0; i <= n; i++) {
        chunk.n = 0;
        REQUIRE((i < n ? tokenizer_stream_push(&s, ids[i], &chunk, &err) : tokenizer_stream_flush(&s, &chunk, &err)) ==
                CLOVER_OK);
        REQUIRE(utf8_valid_prefix((const uint8_t *)chunk.v, chunk.n) == chunk.n);
        REQUIRE(text_bytes_append(&all, chunk.v, chunk.n, &err) == CLOVER_OK);
    }
    REQUIRE(all.n == whole.n && memcmp(all.v, whole.v, whole.n) == 0);
    text_bytes_free(&whole);
    text_bytes_free(&all);
    text_bytes_free(&chunk);
}

/* Whether every valid stretch of s is already NFC (then decoding gives s back). */
static bool all_nfc(const uint8_t *s, size_t n) {
    size_t pos = 0;
    while (pos < n) {
        size_t v = utf8_valid_prefix(s + pos, n - pos);
        if (!normalize_nfc_stable((const char *)s + pos, v)) return false;
        pos += v;
        while (pos < n && utf8_char_len(s + pos, n - pos) == 0) pos++;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static tokenizer *plain, *stripping;
    if (!plain) {
        plain = build(false);
        stripping = build(true);
    }
    if (size == 0) return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    clover_error err;
    switch (mode & 3) {
    case 0:
    case 1: {
        const tokenizer *t = (mode & 1) ? stripping : plain;
        unsigned flags = (mode & 4) ? TOKENIZER_ALLOW_SPECIAL : 0;
        token_ids ids = {0};
        REQUIRE(tokenizer_encode(t, (const char *)data, size, flags, &ids, &err) == CLOVER_OK);
        for (size_t i = 0; i < ids.n; i++) REQUIRE(tokenizer_token_kind(t, ids.v[i]) != TOKENIZER_KIND_NONE);
        if (!(flags & TOKENIZER_ALLOW_SPECIAL))
            for (size_t i = 0; i < ids.n; i++) REQUIRE(tokenizer_token_kind(t, ids.v[i]) != TOKENIZER_KIND_SPECIAL);
        text_bytes out = {0};
        REQUIRE(tokenizer_decode(t, ids.v, ids.n, 0, &out, &err) == CLOVER_OK);
        if (t == plain && all_nfc(data, size)) REQUIRE(out.n == size && (size == 0 || memcmp(out.v, data, size) == 0));
        check_stream(t, ids.v, ids.n, (mode & 8) ? TOKENIZER_SKIP_SPECIAL : 0);
        text_bytes_free(&out);
        token_ids_free(&ids);
        break;
    }
    case 2: {
        size_t n = size / 2;
        int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
        if (!ids) return 0;
        int32_t n_tokens = tokenizer_n_tokens(plain);
        for (size_t i = 0; i < n; i++) ids[i] = (int32_t)((data[2 * i] | (data[2 * i + 1] << 8)) % n_tokens);
        check_stream(plain, ids, n, (mode & 4) ? TOKENIZER_SKIP_SPECIAL : 0);
        free(ids);
        break;
    }
    default: {
        if (size > (1 << 16)) return 0;
        tokenizer *t = NULL;
        if (tokenizer_load_json_memory(&t, (const char *)data, size, "input.json", &err) == CLOVER_OK) {
            static const char probe[] = "Hello w\xC3\xB6rld <|x|> 12 \xE4\xB8\xAD\xFF";
            token_ids ids = {0};
            REQUIRE(tokenizer_encode(t, probe, sizeof probe - 1, TOKENIZER_ALLOW_SPECIAL, &ids, &err) == CLOVER_OK);
            check_stream(t, ids.v, ids.n, 0);
            token_ids_free(&ids);
            tokenizer_free(t);
        } else {
            REQUIRE(err.code < 0 && err.message[0] != '\0');
        }
        break;
    }
    }
    return 0;
}
