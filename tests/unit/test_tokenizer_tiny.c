/*
 * test_tokenizer_tiny.c: the tokenizer on a vocabulary small enough to
 * split by hand. Every expected id list below was worked out on paper from
 * the merges and the Qwen3.5 pattern (see each case's comment), not taken
 * from the code. The same vocabulary is loaded from tokenizer.json and
 * from GGUF metadata, and both must give those ids.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "test.h"
#include "text/tokenizer.h"

static const char QWEN35_PATTERN[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
                                     "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The vocabulary in byte-level form (GPT-2's map: ' ' is U+0120 'Ġ',
 * '\n' U+010A 'Ċ', 0x80 U+0122 'Ģ', 0x81 U+0123 'ģ', 0xA0 U+0142 'ł';
 * printable Latin-1 bytes stand for themselves). */
static const char *const VOCAB[] = {
    "a",
    "b",
    "c",
    "\xC4\xA0" /* Ġ */,
    "ab",
    "bc",
    "abc",
    "\xC4\xA0\x61" /* Ġa */,
    "aa",
    "<",
    ">",
    "|",
    "x",
    "\xC3\x83" /* Ã = 0xC3 */,
    "\xC2\xA9" /* © = 0xA9 */,
    "\xC3\x83\xC2\xA9" /* Ã© = é */,
    "\xC3\xA4" /* ä = 0xE4 */,
    "\xC2\xBD" /* ½ = 0xBD */,
    "\xC5\x82" /* ł = 0xA0 */,
    "\xC3\xBF" /* ÿ = 0xFF */,
    "\xC3\xA0" /* à = 0xE0 */,
    "\xC4\xA2" /* Ģ = 0x80 */,
    "\xC4\x8A" /* Ċ = \n */,
    "e",
    "\xC3\x8C" /* Ì = 0xCC */,
    "\xC4\xA3" /* ģ = 0x81 */,
    "y",
    "'",
    "s",
    "S",
};
enum { N_VOCAB = sizeof VOCAB / sizeof VOCAB[0] };
/* ranks 0..5 */
static const char *const MERGES[] = {"a b", "b c", "ab c", "\xC4\xA0 a", "a a", "\xC3\x83 \xC2\xA9"};
enum { N_MERGES = sizeof MERGES / sizeof MERGES[0] };
enum { ID_X_SPECIAL = 30, ID_Y = 31, ID_YY = 32, N_TOKENS = 33 };

static char *tiny_json(void) {
    json_t *vocab = json_object();
    for (int i = 0; i < N_VOCAB; i++) json_object_set_new(vocab, VOCAB[i], json_integer(i));
    json_t *merges = json_array();
    for (int i = 0; i < N_MERGES; i++) json_array_append_new(merges, json_string(MERGES[i]));
    json_t *added =
        json_pack("[{s:i, s:s, s:b, s:b}, {s:i, s:s, s:b, s:b}, {s:i, s:s, s:b, s:b}]", "id", ID_X_SPECIAL, "content",
                  "<|x|>", "special", 1, "normalized", 0, "id", ID_Y, "content", "<y>", "special", 0, "normalized", 0,
                  "id", ID_YY, "content", "<y>>", "special", 0, "normalized", 0);
    json_t *root = json_pack(
        "{s:o, s:{s:s}, s:{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]}, s:{s:s}, s:{s:s, s:o, s:o}}",
        "added_tokens", added, "normalizer", "type", "NFC", "pre_tokenizer", "type", "Sequence", "pretokenizers",
        "type", "Split", "pattern", "Regex", QWEN35_PATTERN, "behavior", "Isolated", "invert", 0, "type", "ByteLevel",
        "add_prefix_space", 0, "trim_offsets", 0, "use_regex", 0, "decoder", "type", "ByteLevel", "model", "type",
        "BPE", "vocab", vocab, "merges", merges);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

static tokenizer *load_tiny(void) {
    char *js = tiny_json();
    clover_error err = {0};
    tokenizer *t = NULL;
    int rc = tokenizer_load_json_memory(&t, js, strlen(js), "tiny.json", &err);
    CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
    free(js);
    return t;
}

/* Writes the same vocabulary as GGUF metadata and loads it. */
static tokenizer *load_tiny_gguf(const char *path) {
    clover_error err = {0};
    const char *tokens[N_TOKENS];
    int32_t types[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++) {
        tokens[i] = i < N_VOCAB ? VOCAB[i] : "[PAD]";
        types[i] = i < N_VOCAB ? 1 /* NORMAL */ : 5 /* UNUSED */;
    }
    tokens[ID_X_SPECIAL] = "<|x|>";
    types[ID_X_SPECIAL] = 3; /* CONTROL */
    tokens[ID_Y] = "<y>";
    types[ID_Y] = 4; /* USER_DEFINED */
    tokens[ID_YY] = "<y>>";
    types[ID_YY] = 4;
    gguf_writer *w = gguf_writer_create();
    int rc = !w || gguf_writer_set_string(w, "general.architecture", "qwen35moe", &err) ||
             gguf_writer_set_string(w, "tokenizer.ggml.model", "gpt2", &err) ||
             gguf_writer_set_string(w, "tokenizer.ggml.pre", "qwen35", &err) ||
             gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", tokens, N_TOKENS, &err) ||
             gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_VT_I32, types, N_TOKENS, &err) ||
             gguf_writer_set_string_array(w, "tokenizer.ggml.merges", (const char *const *)MERGES, N_MERGES, &err) ||
             gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", ID_X_SPECIAL, &err) ||
             gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false, &err) || gguf_writer_begin(w, path, &err) ||
             gguf_writer_finish(w, &err);
    gguf_writer_free(w);
    CHECK_MSG(rc == 0, "writing %s: %s", path, err.message);
    gguf_file *f = NULL;
    tokenizer *t = NULL;
    rc = gguf_open(&f, path, &err);
    CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
    if (!rc) rc = tokenizer_load_gguf(&t, f, &err);
    CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
    gguf_close(f);
    return t;
}

static void expect_ids(const tokenizer *t, const char *text, size_t len, unsigned flags, const int32_t *want,
                       size_t n_want) {
    token_ids ids = {0};
    clover_error err = {0};
    int rc = tokenizer_encode(t, text, len, flags, &ids, &err);
    CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
    bool same = ids.n == n_want && (n_want == 0 || memcmp(ids.v, want, n_want * sizeof *want) == 0);
    if (!same) {
        fprintf(stderr, "  encoding '%.*s' gave [", (int)len, text);
        for (size_t i = 0; i < ids.n; i++) fprintf(stderr, "%s%d", i ? "," : "", ids.v[i]);
        fprintf(stderr, "], expected [");
        for (size_t i = 0; i < n_want; i++) fprintf(stderr, "%s%d", i ? "," : "", want[i]);
        fprintf(stderr, "]\n");
    }
    CHECK(same);
    token_ids_free(&ids);
}

#define EXPECT(t, text, flags, ...)                                                                                    \
    do {                                                                                                               \
        static const int32_t want_[] = {__VA_ARGS__};                                                                  \
        expect_ids(t, text, sizeof text - 1, flags, want_, sizeof want_ / sizeof want_[0]);                            \
    } while (0)

/* The cases, for whichever loader made t. */
static void check_tiny_cases(const tokenizer *t) {
    const unsigned SP = TOKENIZER_ALLOW_SPECIAL;
    /* a b c: (a,b) rank 0 -> ab; (ab,c) rank 2 -> abc */
    EXPECT(t, "abc", SP, 6);
    /* one piece " abc": Ġ a b c; (Ġ,a) is rank 3 but (a,b) rank 0 goes first,
     * so Ġ never joins a: Ġ + abc */
    EXPECT(t, " abc", SP, 3, 6);
    /* " a": only (Ġ,a) -> Ġa */
    EXPECT(t, " a", SP, 7);
    /* c a b: (c,a) has no merge -> c + ab */
    EXPECT(t, "cab", SP, 2, 4);
    /* equal ranks go leftmost first: aa + a, then aa aa (no "aa aa" merge) */
    EXPECT(t, "aaa", SP, 8, 0);
    EXPECT(t, "aaaa", SP, 8, 8);
    /* added tokens: the special one only when allowed */
    EXPECT(t, "a<|x|>b", SP, 0, ID_X_SPECIAL, 1);
    /* not allowed: plain text; the pattern cuts "a" "<|" "x" "|>" "b" */
    EXPECT(t, "a<|x|>b", 0, 0, 9, 11, 12, 11, 10, 1);
    /* longest at the leftmost position: "<y>" at 0 (not "<y>>", which does
     * not match there), then "<y>>" at 3 */
    EXPECT(t, "<y><y>>", 0, ID_Y, ID_YY);
    EXPECT(t, "<y>>", 0, ID_YY);
    /* NFC: e + U+0301 (bytes CC 81) composes to é (C3 A9) -> Ã© */
    EXPECT(t, "e\xCC\x81", SP, 15);
    EXPECT(t, "\xC3\xA9", SP, 15);
    /* not UTF-8: 0xFF is a word of its own, its byte token ÿ */
    EXPECT(t, "a\xFF\x62", SP, 0, 19, 1);
    /* a cut-off character E4 BD at the end: its byte tokens */
    EXPECT(t, "\xE4\xBD", SP, 16, 17);
    EXPECT(t, "\n", SP, 22);
    /* contractions in both cases are pieces of their own: y + 's / 'S */
    EXPECT(t, "y's", SP, 26, 27, 28);
    EXPECT(t, "y'S", SP, 26, 27, 29);
    /* nothing in, nothing out */
    expect_ids(t, "", 0, SP, NULL, 0);
}

static void test_tiny_json_encode(void) {
    tokenizer *t = load_tiny();
    if (!t) return;
    CHECK_EQ_INT(tokenizer_n_tokens(t), N_TOKENS);
    check_tiny_cases(t);
    tokenizer_free(t);
}

static void test_tiny_gguf_encode(void) {
    char path[] = "/tmp/clover_tok_tiny_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    tokenizer *t = load_tiny_gguf(path);
    unlink(path);
    if (!t) return;
    check_tiny_cases(t);
    CHECK_EQ_INT(tokenizer_token_kind(t, ID_X_SPECIAL), TOKENIZER_KIND_SPECIAL);
    CHECK_EQ_INT(tokenizer_token_kind(t, ID_Y), TOKENIZER_KIND_ADDED);
    CHECK_EQ_INT(tokenizer_token_kind(t, 29), TOKENIZER_KIND_NORMAL);
    CHECK_EQ_INT(tokenizer_get_specials(t)->eos, ID_X_SPECIAL);
    tokenizer_free(t);
}

#undef EXPECT

static void test_tiny_decode(void) {
    tokenizer *t = load_tiny();
    if (!t) return;
    clover_error err = {0};
    text_bytes out = {0};
    int32_t ids1[] = {6, 3, 15}; /* abc, space, é */
    CHECK_EQ_INT(tokenizer_decode(t, ids1, 3, 0, &out, &err), CLOVER_OK);
    CHECK(out.n == 6 && memcmp(out.v, "abc \xC3\xA9", 6) == 0);
    out.n = 0;
    int32_t ids2[] = {0, ID_X_SPECIAL, ID_Y, 1};
    CHECK_EQ_INT(tokenizer_decode(t, ids2, 4, 0, &out, &err), CLOVER_OK);
    CHECK(out.n == 10 && memcmp(out.v, "a<|x|><y>b", 10) == 0);
    out.n = 0;
    CHECK_EQ_INT(tokenizer_decode(t, ids2, 4, TOKENIZER_SKIP_SPECIAL, &out, &err), CLOVER_OK);
    CHECK(out.n == 5 && memcmp(out.v, "a<y>b", 5) == 0);
    /* a cut character: raw bytes, or U+FFFD when asked (one for E4 BD) */
    out.n = 0;
    int32_t ids3[] = {16, 17, 0};
    CHECK_EQ_INT(tokenizer_decode(t, ids3, 3, 0, &out, &err), CLOVER_OK);
    CHECK(out.n == 3 && memcmp(out.v, "\xE4\xBD\x61", 3) == 0);
    out.n = 0;
    CHECK_EQ_INT(tokenizer_decode(t, ids3, 3, TOKENIZER_REPLACE_INVALID, &out, &err), CLOVER_OK);
    CHECK(out.n == 4 && memcmp(out.v, "\xEF\xBF\xBD\x61", 4) == 0);
    /* out of range: an error naming the position */
    int32_t bad[] = {0, N_TOKENS};
    CHECK_EQ_INT(tokenizer_decode(t, bad, 2, 0, &out, &err), CLOVER_E_INVALID);
    CHECK(strstr(err.message, "position 1") != NULL);
    text_bytes_free(&out);

    /* lookups */
    CHECK_EQ_INT(tokenizer_find(t, "<|x|>", 5), ID_X_SPECIAL);
    CHECK_EQ_INT(tokenizer_find(t, "abc", 3), 6);
    CHECK_EQ_INT(tokenizer_find(t, " a", 2), 7);
    CHECK_EQ_INT(tokenizer_find(t, "zz", 2), -1);
    size_t len = 0;
    const char *b = tokenizer_token_bytes(t, 15, &len);
    CHECK(b && len == 2 && memcmp(b, "\xC3\xA9", 2) == 0);
    CHECK(tokenizer_token_bytes(t, -1, &len) == NULL);
    tokenizer_free(t);
}

/* Pushes ids one by one; the concatenated output and each chunk checked. */
static void stream_case(const tokenizer *t, const int32_t *ids, size_t n, const char *const *chunks,
                        const char *flushed) {
    tokenizer_stream s;
    tokenizer_stream_init(&s, t, 0);
    clover_error err = {0};
    text_bytes out = {0};
    for (size_t i = 0; i < n; i++) {
        out.n = 0;
        CHECK_EQ_INT(tokenizer_stream_push(&s, ids[i], &out, &err), CLOVER_OK);
        CHECK_MSG(out.n == strlen(chunks[i]) && memcmp(out.v, chunks[i], out.n) == 0, "chunk %zu: got %zu bytes", i,
                  out.n);
    }
    out.n = 0;
    CHECK_EQ_INT(tokenizer_stream_flush(&s, &out, &err), CLOVER_OK);
    CHECK(out.n == strlen(flushed) && memcmp(out.v, flushed, out.n) == 0);
    text_bytes_free(&out);
}

#define FFFD "\xEF\xBF\xBD"

static void test_tiny_stream(void) {
    tokenizer *t = load_tiny();
    if (!t) return;
    /* 你 = E4 BD A0 in three byte tokens: nothing until the last */
    stream_case(t, (const int32_t[]){16, 17, 18}, 3, (const char *const[]){"", "", "\xE4\xBD\xA0"}, "");
    /* FF can never start a character: U+FFFD at once */
    stream_case(t, (const int32_t[]){19, 0}, 2, (const char *const[]){FFFD, "a"}, "");
    /* E4 held, then 'a' shows it will not complete: U+FFFD then a */
    stream_case(t, (const int32_t[]){16, 0}, 2, (const char *const[]){"", FFFD "a"}, "");
    /* E0 then 80: 80 may not follow E0 (overlong), so U+FFFD for E0 and
     * another for the stray 80 (Python: b'\xe0\x80' -> two U+FFFD) */
    stream_case(t, (const int32_t[]){20, 21}, 2, (const char *const[]){"", FFFD FFFD}, "");
    /* E4 BD held at the end: one U+FFFD at flush */
    stream_case(t, (const int32_t[]){0, 16, 17}, 3, (const char *const[]){"a", "", ""}, FFFD);
    /* é in one token, then a special token: whole tokens pass straight through */
    stream_case(t, (const int32_t[]){15, ID_X_SPECIAL}, 2, (const char *const[]){"\xC3\xA9", "<|x|>"}, "");

    /* a bad id is refused and the held bytes survive it */
    tokenizer_stream s;
    tokenizer_stream_init(&s, t, TOKENIZER_SKIP_SPECIAL);
    clover_error err = {0};
    text_bytes out = {0};
    CHECK_EQ_INT(tokenizer_stream_push(&s, 16, &out, &err), CLOVER_OK);
    CHECK_EQ_INT(tokenizer_stream_push(&s, 1000, &out, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(tokenizer_stream_push(&s, ID_X_SPECIAL, &out, &err), CLOVER_OK); /* skipped */
    CHECK_EQ_INT(tokenizer_stream_push(&s, 17, &out, &err), CLOVER_OK);
    CHECK_EQ_INT(tokenizer_stream_push(&s, 18, &out, &err), CLOVER_OK);
    CHECK(out.n == 3 && memcmp(out.v, "\xE4\xBD\xA0", 3) == 0);
    text_bytes_free(&out);
    tokenizer_free(t);
}

static void test_long_word(void) {
    tokenizer *t = load_tiny();
    if (!t) return;
    /* a megabyte of 'a': one piece; "a a" pairs from the left -> n/2 x "aa" */
    size_t n = 1 << 20;
    char *text = malloc(n);
    memset(text, 'a', n);
    token_ids ids = {0};
    clover_error err = {0};
    CHECK_EQ_INT(tokenizer_encode(t, text, n, 0, &ids, &err), CLOVER_OK);
    CHECK_EQ_INT(ids.n, n / 2);
    size_t wrong = 0;
    for (size_t i = 0; i < ids.n; i++) wrong += ids.v[i] != 8;
    CHECK_EQ_INT(wrong, 0);
    /* and a megabyte of spaces and newlines */
    for (size_t i = 0; i < n; i++) text[i] = (i % 7 == 6) ? '\n' : ' ';
    ids.n = 0;
    CHECK_EQ_INT(tokenizer_encode(t, text, n, 0, &ids, &err), CLOVER_OK);
    text_bytes out = {0};
    CHECK_EQ_INT(tokenizer_decode(t, ids.v, ids.n, 0, &out, &err), CLOVER_OK);
    CHECK(out.n == n && memcmp(out.v, text, n) == 0);
    text_bytes_free(&out);
    token_ids_free(&ids);
    free(text);
    tokenizer_free(t);
}

static void expect_load_error(const char *json, int code, const char *needle) {
    tokenizer *t = NULL;
    clover_error err = {0};
    int rc = tokenizer_load_json_memory(&t, json, strlen(json), "bad.json", &err);
    CHECK_EQ_INT(rc, code);
    CHECK(t == NULL);
    CHECK_MSG(strstr(err.message, needle) != NULL && strstr(err.message, "bad.json") != NULL, "message: %s",
              err.message);
}

static void test_load_errors(void) {
    expect_load_error("{", CLOVER_E_FORMAT, "JSON error");
    expect_load_error("[]", CLOVER_E_FORMAT, "expected a JSON object");
    expect_load_error("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}, \"merges\": []}}", CLOVER_E_UNSUPPORTED,
                      "WordPiece");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}", CLOVER_E_FORMAT,
                      "'b' is not in the vocabulary");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []}}", CLOVER_E_FORMAT,
                      "id -3");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a\"]}}", CLOVER_E_FORMAT,
                      "merges[0]");
    expect_load_error(
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": null}",
        CLOVER_E_UNSUPPORTED, "not a byte-level BPE");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": "
                      "{\"type\": \"ByteLevel\", \"add_prefix_space\": true}}",
                      CLOVER_E_UNSUPPORTED, "add_prefix_space");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": "
                      "{\"type\": \"ByteLevel\", \"add_prefix_space\": false}, \"decoder\": {\"type\": \"WordPiece\"}}",
                      CLOVER_E_UNSUPPORTED, "decoder");

    tokenizer *t = NULL;
    clover_error err = {0};
    CHECK_EQ_INT(tokenizer_load_json(&t, "/nonexistent/tokenizer.json", &err), CLOVER_E_IO);
    CHECK(strstr(err.message, "/nonexistent/tokenizer.json") != NULL);
}

/* One tokenizer shared by threads, each with its own encoder (and one
 * through the convenience call): the same ids as a single thread gets. */
typedef struct thread_job {
    const tokenizer *t;
    const char *text;
    size_t len;
    const token_ids *want;
    int mismatches;
} thread_job;

static void *encode_many(void *arg) {
    thread_job *job = arg;
    tokenizer_encoder *e = NULL;
    clover_error err;
    if (tokenizer_encoder_create(&e, job->t, &err)) {
        job->mismatches = -1;
        return NULL;
    }
    for (int i = 0; i < 200; i++) {
        token_ids ids = {0};
        int rc = (i % 2) ? tokenizer_encoder_run(e, job->text, job->len, TOKENIZER_ALLOW_SPECIAL, &ids, &err)
                         : tokenizer_encode(job->t, job->text, job->len, TOKENIZER_ALLOW_SPECIAL, &ids, &err);
        if (rc || ids.n != job->want->n || memcmp(ids.v, job->want->v, ids.n * sizeof *ids.v) != 0)
            job->mismatches++;
        token_ids_free(&ids);
    }
    tokenizer_encoder_free(e);
    return NULL;
}

static void test_threads(void) {
    tokenizer *t = load_tiny();
    if (!t) return;
    static const char text[] = "abc aaa <|x|> cab e\xCC\x81 <y>> \xE4\xBD\xA0 y's \n\n  abcabc";
    token_ids want = {0};
    clover_error err;
    CHECK_EQ_INT(tokenizer_encode(t, text, sizeof text - 1, TOKENIZER_ALLOW_SPECIAL, &want, &err), CLOVER_OK);
    enum { N = 4 };
    pthread_t th[N];
    thread_job jobs[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = (thread_job){.t = t, .text = text, .len = sizeof text - 1, .want = &want, .mismatches = 0};
        CHECK_EQ_INT(pthread_create(&th[i], NULL, encode_many, &jobs[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(jobs[i].mismatches, 0);
    }
    token_ids_free(&want);
    tokenizer_free(t);
}

int main(void) {
    RUN(test_tiny_json_encode);
    RUN(test_tiny_gguf_encode);
    RUN(test_tiny_decode);
    RUN(test_tiny_stream);
    RUN(test_long_word);
    RUN(test_load_errors);
    RUN(test_threads);
    return TEST_EXIT();
}
