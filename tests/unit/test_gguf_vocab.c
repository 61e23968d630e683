/*
 * test_gguf_vocab.c: a tokenizer-sized string array (248,320 entries, like
 * Qwen3.5's vocabulary) next to f32 and i32 arrays of the same length goes
 * through clover's writer and reader intact, entry for entry: the reader's
 * one-block string arrays keep every length and terminator, and lookups
 * by key still work among them. (Load time is a figure for gguf_dump
 * --time, not asserted here.)
 */
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "test.h"

enum { N_VOCAB = 248320 };

/* Token i: "t<i>" then i % 7 copies of a 2-byte UTF-8 letter; token 3 is empty. */
static size_t token_text(size_t i, char *out) {
    if (i == 3) {
        out[0] = '\0';
        return 0;
    }
    int n = snprintf(out, 32, "t%zu", i);
    for (size_t k = 0; k < i % 7; k++) {
        out[n++] = (char)0xc3;
        out[n++] = (char)0xa9;
    }
    out[n] = '\0';
    return (size_t)n;
}

static void test_vocab_roundtrip(void) {
    char dir[256], path[300];
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/clover-gguf-vocab-XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/vocab.gguf", dir);

    char(*text)[32] = malloc(sizeof(*text) * N_VOCAB);
    const char **tokens = malloc(sizeof(*tokens) * N_VOCAB);
    float *scores = malloc(sizeof(*scores) * N_VOCAB);
    int32_t *types = malloc(sizeof(*types) * N_VOCAB);
    for (size_t i = 0; i < N_VOCAB; i++) {
        token_text(i, text[i]);
        tokens[i] = text[i];
        scores[i] = -(float)i * 0.5f;
        types[i] = (int32_t)(1 + i % 6);
    }
    clover_error err = {0};
    gguf_writer *w = gguf_writer_create();
    CHECK_EQ_INT(gguf_writer_set_string(w, "tokenizer.ggml.model", "gpt2", &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", tokens, N_VOCAB, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_VT_F32, scores, N_VOCAB, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_VT_I32, types, N_VOCAB, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 248044, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_begin(w, path, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_finish(w, &err), CLOVER_OK);
    gguf_writer_free(w);

    gguf_file *f = NULL;
    int rc = gguf_open(&f, path, &err);
    CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
    if (f) {
        const gguf_value *v = NULL;
        CHECK_EQ_INT(gguf_get_array(f, "tokenizer.ggml.tokens", &v, &err), CLOVER_OK);
        CHECK(v && v->v.arr.type == GGUF_VT_STRING && v->v.arr.len == N_VOCAB);
        if (v && v->v.arr.len == N_VOCAB) {
            const gguf_string *s = v->v.arr.data; /* [N_VOCAB] */
            size_t bad = 0;
            for (size_t i = 0; i < N_VOCAB; i++) {
                char want[32];
                size_t len = token_text(i, want);
                bad += s[i].len != len || memcmp(s[i].str, want, len + 1) != 0; /* terminator included */
            }
            CHECK_EQ_INT(bad, 0);
        }
        CHECK_EQ_INT(gguf_get_array(f, "tokenizer.ggml.scores", &v, &err), CLOVER_OK);
        CHECK(v && v->v.arr.len == N_VOCAB && memcmp(v->v.arr.data, scores, sizeof(float) * N_VOCAB) == 0);
        CHECK_EQ_INT(gguf_get_array(f, "tokenizer.ggml.token_type", &v, &err), CLOVER_OK);
        CHECK(v && v->v.arr.len == N_VOCAB && memcmp(v->v.arr.data, types, sizeof(int32_t) * N_VOCAB) == 0);
        uint32_t eos = 0;
        CHECK_EQ_INT(gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &eos, &err), CLOVER_OK);
        CHECK_EQ_INT(eos, 248044);
        gguf_close(f);
    }
    /* the same bytes cut short inside the vocabulary fail cleanly */
    FILE *fp = fopen(path, "rb");
    if (fp) {
        fseek(fp, 0, SEEK_END);
        size_t n = (size_t)ftell(fp);
        fseek(fp, 0, SEEK_SET);
        uint8_t *buf = malloc(n);
        CHECK(fread(buf, 1, n, fp) == n);
        fclose(fp);
        uint8_t *cut = malloc(n / 2);
        memcpy(cut, buf, n / 2);
        CHECK_EQ_INT(gguf_open_memory(&f, cut, n / 2, "cut", &err), CLOVER_E_FORMAT);
        CHECK_MSG(strstr(err.message, "cut: kv 1 'tokenizer.ggml.tokens': ") && strstr(err.message, " of 248320 at offset "), "%s",
                  err.message);
        free(cut);
        free(buf);
    }
    remove(path);
    rmdir(dir);
    free(text);
    free(tokens);
    free(scores);
    free(types);
}

int main(void) {
    RUN(test_vocab_roundtrip);
    return TEST_EXIT();
}
