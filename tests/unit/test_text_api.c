/*
 * test_text_api.c: the model's tokenizer behind the public API. The
 * fixture model (tests/fixtures/tiny_clover/hf) is converted to GGUF by the
 * converter library and loaded, so its tokenizer comes through the GGUF
 * path; then against tests/fixtures/tokenizer/manifest.json (Hugging Face
 * tokenizers' encodings):
 *  - clover_tokenize gives every "encode" case's ids, clover_detokenize its
 *    decoded text (with and without control tokens), the text stream the
 *    same text piece by piece, only ever whole UTF-8 characters;
 *  - every "chat" case's rendering tokenizes to its ids;
 *  - clover_token_id finds the added tokens at their manifest ids;
 *  - padding ids past the tokenizer's last token have no text;
 *  - a file without tokenizer metadata still loads and runs, and the text
 *    functions answer CLOVER_E_UNSUPPORTED;
 * and the generation result's text and per-pass view on greedy_default of
 * tests/fixtures/tiny_clover/manifest.json (the reference's passes).
 */
#include <string.h>

#include "backend_test.h"
#include "gguf/gguf.h"
#include "text/utf8.h"

static json_t *tok_manifest;
static test_model the_test_model;
static const clover_model *the_model;

static int load_tok_manifest(void) {
    char path[1024];
    const char *rel = "tests/fixtures/tokenizer/manifest.json";
    const char *p = test_source_path(rel, path, sizeof path);
    json_error_t jerr;
    tok_manifest = json_load_file(p ? p : rel, 0, &jerr);
    CHECK_MSG(tok_manifest != NULL, "%s: %s (set CLOVER_SOURCE_DIR)", p ? p : rel, jerr.text);
    return tok_manifest ? 0 : -1;
}

static int ids_equal(const int32_t *a, size_t na, const json_t *b) {
    if (na != json_array_size(b)) return 0;
    for (size_t i = 0; i < na; i++)
        if (a[i] != (int32_t)json_integer_value(json_array_get(b, i))) return 0;
    return 1;
}

static const char *str_of(const json_t *o, const char *key, size_t *len) {
    const json_t *v = json_object_get(o, key);
    *len = json_string_length(v);
    return json_string_value(v);
}

/* Pushes ids through a text stream; the concatenated pieces (malloc'd). */
static char *stream_all(const clover_model *m, const int32_t *ids, size_t n, int skip, size_t *len) {
    clover_text_stream *s = NULL;
    clover_error err = {0};
    CHECK(clover_text_stream_create(&s, m, skip, &err) == CLOVER_OK);
    if (!s) return NULL;
    size_t cap = 64, k = 0;
    char *all = malloc(cap);
    for (size_t i = 0; i <= n; i++) {
        const char *piece;
        size_t plen;
        int rc = i < n ? clover_text_stream_push(s, ids[i], &piece, &plen, &err)
                       : clover_text_stream_flush(s, &piece, &plen, &err);
        CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
        if (rc) break;
        CHECK(utf8_valid_prefix((const uint8_t *)piece, plen) == plen); /* whole characters only */
        while (k + plen + 1 > cap) all = realloc(all, cap *= 2);
        memcpy(all + k, piece, plen);
        k += plen;
    }
    all[k] = '\0';
    clover_text_stream_free(s);
    *len = k;
    return all;
}

static void test_encode_cases(void) {
    const clover_model *m = the_model;
    size_t i, n_cases = 0;
    json_t *c;
    json_array_foreach(json_object_get(tok_manifest, "encode"), i, c) {
        size_t tlen, dlen, slen;
        const char *text = str_of(c, "text", &tlen);
        const char *decoded = str_of(c, "decoded", &dlen);
        const char *skipped = str_of(c, "decoded_skip_special", &slen);
        json_t *want = json_object_get(c, "ids");
        int32_t *ids = NULL;
        size_t n = 0;
        clover_error err = {0};
        CHECK_MSG(clover_tokenize(m, text, tlen, 1, &ids, &n, &err) == CLOVER_OK, "%s", err.message);
        CHECK_MSG(ids != NULL && ids_equal(ids, n, want), "encode case %zu ('%s'): ids differ", i, text);
        char *out = NULL;
        size_t olen = 99;
        CHECK(clover_detokenize(m, ids, n, 0, &out, &olen, &err) == CLOVER_OK);
        CHECK_MSG(out && olen == dlen && !memcmp(out, decoded, dlen), "case %zu decoded [%s] expected [%s]", i,
                  out ? out : "", decoded);
        clover_free(out);
        CHECK(clover_detokenize(m, ids, n, 1, &out, &olen, &err) == CLOVER_OK);
        CHECK_MSG(out && olen == slen && !memcmp(out, skipped, slen), "case %zu skip_special [%s] expected [%s]", i,
                  out ? out : "", skipped);
        clover_free(out);
        size_t stream_len;
        char *streamed = stream_all(m, ids, n, 0, &stream_len);
        CHECK_MSG(streamed && stream_len == dlen && !memcmp(streamed, decoded, dlen), "case %zu stream [%s]", i,
                  streamed ? streamed : "");
        free(streamed);
        streamed = stream_all(m, ids, n, 1, &stream_len);
        CHECK_MSG(streamed && stream_len == slen && !memcmp(streamed, skipped, slen), "case %zu stream skip [%s]", i,
                  streamed ? streamed : "");
        free(streamed);
        clover_free(ids);
        n_cases++;
    }
    CHECK(n_cases >= 40);
}

static void test_special_tokens_only_when_allowed(void) {
    const clover_model *m = the_model;
    const char *text = "<|im_start|>user\nhi<|im_end|>";
    const int32_t im_start = clover_token_id(m, "<|im_start|>"), im_end = clover_token_id(m, "<|im_end|>");
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(clover_tokenize(m, text, strlen(text), 0, &ids, &n, NULL) == CLOVER_OK);
    for (size_t i = 0; i < n; i++) CHECK(ids[i] != im_start && ids[i] != im_end);
    char *out = NULL;
    size_t len;
    CHECK(clover_detokenize(m, ids, n, 1, &out, &len, NULL) == CLOVER_OK);
    CHECK(out && !strcmp(out, text)); /* plain text, so skip_special keeps it */
    clover_free(out);
    clover_free(ids);
    /* <think> is an added token that is not special: matched either way, never skipped */
    const int32_t think = clover_token_id(m, "<think>");
    CHECK(clover_tokenize(m, "<think>", 7, 0, &ids, &n, NULL) == CLOVER_OK);
    CHECK(n == 1 && ids[0] == think);
    clover_free(ids);
    /* empty text: zero ids, a non-NULL array */
    CHECK(clover_tokenize(m, "", 0, 1, &ids, &n, NULL) == CLOVER_OK);
    CHECK(n == 0 && ids != NULL);
    clover_free(ids);
}

static void test_token_ids(void) {
    const clover_model *m = the_model;
    const char *key;
    json_t *v;
    size_t n = 0;
    json_object_foreach(json_object_get(tok_manifest, "added_tokens"), key, v) {
        CHECK_MSG(clover_token_id(m, key) == (int32_t)json_integer_value(v), "%s", key);
        n++;
    }
    CHECK(n >= 33);
    CHECK_EQ_INT(clover_token_id(m, "<|im_end|>"), 402);
    CHECK_EQ_INT(clover_token_id(m, "no such token"), -1);
    CHECK_EQ_INT(clover_token_id(m, NULL), -1);
    CHECK_EQ_INT(clover_token_id(NULL, "x"), -1);
}

static void test_chat_case_ids(void) {
    const clover_model *m = the_model;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(tok_manifest, "chat"), i, c) {
        json_t *jm = json_object_get(c, "messages");
        clover_chat_message msgs[16];
        size_t n = json_array_size(jm);
        if (n > 16) continue;
        for (size_t k = 0; k < n; k++) {
            json_t *e = json_array_get(jm, k);
            msgs[k] = (clover_chat_message){json_string_value(json_object_get(e, "role")),
                                            json_string_value(json_object_get(e, "content")), NULL};
        }
        clover_chat_options o;
        clover_chat_options_init(&o);
        o.add_generation_prompt = json_is_true(json_object_get(c, "add_generation_prompt"));
        json_t *think = json_object_get(c, "enable_thinking");
        o.enable_thinking = think ? json_is_true(think) : 1;
        char *text = NULL;
        clover_error err = {0};
        CHECK_MSG(clover_chat_render(m, msgs, n, &o, &text, &err) == CLOVER_OK, "%s", err.message);
        int32_t *ids = NULL;
        size_t n_ids = 0;
        CHECK(text && clover_tokenize(m, text, strlen(text), 1, &ids, &n_ids, &err) == CLOVER_OK);
        CHECK_MSG(ids && ids_equal(ids, n_ids, json_object_get(c, "ids")), "chat case %zu ids differ", i);
        clover_free(ids);
        clover_free(text);
    }
}

static void test_bad_ids_and_padding(void) {
    const clover_model *m = the_model;
    clover_model_info info;
    clover_model_get_info(m, &info);
    CHECK(info.n_vocab > 434); /* the fixture pads the embedding past its 434 tokens */
    /* "hi" around a padding id: the id adds nothing */
    int32_t ids[] = {71, (int32_t)info.n_vocab - 1, 72};
    char *out = NULL;
    size_t len = 0;
    clover_error err = {0};
    CHECK(clover_detokenize(m, ids, 3, 0, &out, &len, &err) == CLOVER_OK);
    CHECK(out && len == 2 && !strcmp(out, "hi"));
    clover_free(out);
    /* a cut character joins across a padding id in the stream too: U+00E9 is bytes C3 A9 (ids 127 and 102) */
    int32_t cut[] = {127, (int32_t)info.n_vocab - 2, 102};
    char *streamed = stream_all(m, cut, 3, 0, &len);
    CHECK(streamed && !strcmp(streamed, "\xc3\xa9"));
    free(streamed);
    int32_t bad[] = {1, (int32_t)info.n_vocab};
    out = (char *)"x";
    CHECK_EQ_INT(clover_detokenize(m, bad, 2, 0, &out, &len, &err), CLOVER_E_INVALID);
    CHECK(out == NULL && strstr(err.message, "entry 1") != NULL);
    int32_t neg = -5;
    CHECK_EQ_INT(clover_detokenize(m, &neg, 1, 0, &out, &len, &err), CLOVER_E_INVALID);
    clover_text_stream *s = NULL;
    CHECK(clover_text_stream_create(&s, m, 0, &err) == CLOVER_OK);
    const char *piece;
    CHECK_EQ_INT(clover_text_stream_push(s, -1, &piece, &len, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(clover_text_stream_push(s, (int32_t)info.n_vocab, &piece, &len, &err), CLOVER_E_INVALID);
    CHECK(strstr(err.message, "clover_text_stream_push") != NULL);
    /* a held prefix at flush is one U+FFFD */
    CHECK(clover_text_stream_push(s, 127, &piece, &len, &err) == CLOVER_OK && len == 0);
    CHECK(clover_text_stream_flush(s, &piece, &len, &err) == CLOVER_OK && len == 3 && !memcmp(piece, "\xef\xbf\xbd", 3));
    clover_text_stream_free(s);
    CHECK_EQ_INT(clover_tokenize(m, NULL, 3, 1, (int32_t **)&out, &len, &err), CLOVER_E_INVALID);
}

/* ---- generation: the result's text and the pass view ---- */

typedef struct pass_log {
    const json_t *passes; /* expected: [block][pass] {fixed: [[row, id]...]} */
    int32_t mask;
    size_t views, bad;
    size_t last_block, last_pass;
} pass_log;

/* Each view after pass p of block b must show exactly the rows the
 * reference had fixed by then, with their ids. */
static int on_pass(void *user, const clover_pass_view *v) {
    pass_log *log = user;
    log->views++;
    const json_t *block = json_array_get(log->passes, v->block_index);
    if (!block || v->pass > json_array_size(block)) {
        log->bad++;
        return 0;
    }
    int32_t want[64];
    if (v->block_size > 64) {
        log->bad++;
        return 0;
    }
    for (size_t r = 0; r < v->block_size; r++) want[r] = -1;
    size_t now = 0;
    for (size_t p = 0; p < v->pass; p++) {
        const json_t *fixed = json_object_get(json_array_get(block, p), "fixed");
        size_t i;
        json_t *rf;
        json_array_foreach(fixed, i, rf) {
            want[json_integer_value(json_array_get(rf, 0))] = (int32_t)json_integer_value(json_array_get(rf, 1));
        }
        if (p + 1 == v->pass) now = json_array_size(fixed);
    }
    size_t n_fixed = 0;
    for (size_t r = 0; r < v->block_size; r++) {
        int fixed = want[r] >= 0;
        n_fixed += fixed;
        if (v->fixed[r] != fixed || v->ids[r] != (fixed ? want[r] : log->mask)) log->bad++;
        if (fixed && (v->guesses[r] != v->ids[r] || !(v->confidences[r] > 0.0f))) log->bad++;
        if (v->pass == 0 && (v->guesses[r] != log->mask || v->confidences[r] != 0.0f)) log->bad++;
    }
    if (v->n_fixed != n_fixed || v->n_fixed_now != now) log->bad++;
    log->last_block = v->block_index;
    log->last_pass = v->pass;
    return 0;
}

static void test_generation_text_and_pass_view(void) {
    const clover_model *m = the_model;
    fixture fx;
    if (fixture_open(&fx, "tiny_clover")) return;
    const json_t *c = NULL, *e;
    size_t i;
    json_array_foreach(json_object_get(fx.manifest, "generate"), i, e) {
        if (!strcmp(json_string_value(json_object_get(e, "name")), "greedy_default")) c = e;
    }
    CHECK(c != NULL);
    if (!c) {
        fixture_close(&fx);
        return;
    }
    size_t n_prompt;
    int32_t *prompt = fixture_ids(json_object_get(c, "prompt_ids"), &n_prompt);
    const json_t *exp = json_object_get(c, "expected");
    /* the prompt text tokenizes to the reference's prompt ids */
    size_t tlen;
    const char *ptext = str_of(c, "prompt_text", &tlen);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    CHECK(clover_tokenize(m, ptext, tlen, 1, &ids, &n_ids, NULL) == CLOVER_OK);
    CHECK(ids && n_ids == n_prompt && !memcmp(ids, prompt, n_prompt * sizeof *ids));
    clover_free(ids);

    clover_session *s = NULL;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = 2;
    clover_error err = {0};
    CHECK(clover_session_create(&s, m, &sp, &err) == CLOVER_OK);
    pass_log log = {.passes = json_object_get(exp, "passes"),
                    .mask = (int32_t)json_integer_value(fixture_get(fx.manifest, "record", "mask_token_id", NULL))};
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.max_tokens = (size_t)json_integer_value(fixture_get((json_t *)c, "options", "max_tokens", NULL));
    p.on_pass = on_pass;
    p.user = &log;
    clover_generate_result r;
    CHECK(s && clover_generate(s, prompt, n_prompt, &p, &r, &err) == CLOVER_OK);
    CHECK(ids_equal(r.ids, r.n_generated, json_object_get(exp, "tokens")));
    /* one view at the start of each block and one after each of its passes */
    size_t want_views = 0;
    for (size_t b = 0; b < r.n_blocks; b++) want_views += 1 + r.passes_per_block[b];
    CHECK_EQ_INT(log.views, want_views);
    CHECK_EQ_INT(log.bad, 0);
    CHECK_EQ_INT(log.last_block, r.n_blocks - 1);
    CHECK_EQ_INT(log.last_pass, r.passes_per_block[r.n_blocks - 1]);
    /* the text: the ids but the final stop, decoded as the stream releases
     * them (the random model's bytes are not all UTF-8: U+FFFD stands in) */
    CHECK(r.finish == CLOVER_FINISH_STOP);
    size_t len = 0;
    char *text = stream_all(m, r.ids, r.n_generated - 1, 0, &len);
    CHECK(r.text && text && r.text_len == len && !memcmp(r.text, text, len) && r.text[len] == '\0');
    CHECK(r.text && utf8_valid_prefix((const uint8_t *)r.text, r.text_len) == r.text_len);
    CHECK(r.text && strstr(r.text, "</think>") != NULL); /* id 425 is among the reference's tokens */
    free(text);
    clover_generate_result_free(&r);

    /* skip_special leaves control tokens out; on_pass may cancel */
    p.skip_special = 1;
    p.on_pass = NULL;
    CHECK(clover_generate(s, prompt, n_prompt, &p, &r, &err) == CLOVER_OK);
    text = stream_all(m, r.ids, r.n_generated - 1, 1, &len);
    CHECK(r.text && text && !strcmp(r.text, text));
    CHECK(r.text && strstr(r.text, "</think>") != NULL); /* not a control token: kept */
    free(text);
    clover_generate_result_free(&r);
    clover_session_free(s);
    free(prompt);
    fixture_close(&fx);
}

static int cancel_at_second_view(void *user, const clover_pass_view *v) {
    (void)v;
    return ++*(int *)user >= 2;
}

static void test_on_pass_cancels(void) {
    const clover_model *m = the_model;
    clover_session *s = NULL;
    CHECK(clover_session_create(&s, m, NULL, NULL) == CLOVER_OK);
    int views = 0;
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.on_pass = cancel_at_second_view;
    p.user = &views;
    int32_t prompt[] = {401, 84, 82, 261, 198};
    clover_generate_result r;
    CHECK(s && clover_generate(s, prompt, 5, &p, &r, NULL) == CLOVER_OK);
    CHECK(r.finish == CLOVER_FINISH_CANCELLED && views == 2 && r.n_generated == 0);
    CHECK(r.text && r.text_len == 0);
    CHECK_EQ_INT(clover_session_length(s), 0); /* a cancelled request leaves nothing to reuse */
    clover_generate_result_free(&r);
    clover_session_free(s);
}

/* ---- a file without tokenizer metadata ---- */

/* Copies src to dst without the tokenizer.* keys. */
static int copy_without_tokenizer(const char *src, const char *dst) {
    gguf_file *f = NULL;
    clover_error err = {0};
    int rc = gguf_open(&f, src, &err);
    CHECK_MSG(rc == 0, "%s", err.message);
    if (rc) return rc;
    gguf_writer *w = gguf_writer_create();
    for (size_t i = 0; !rc && i < gguf_kv_count(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        if (strncmp(kv->key.str, "tokenizer.", 10) != 0) rc = gguf_writer_set_value(w, kv->key.str, &kv->value, &err);
    }
    for (size_t i = 0; !rc && i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        rc = gguf_writer_add_tensor(w, t->name.str, t->n_dims, t->ne, t->type, &err);
    }
    if (!rc) rc = gguf_writer_begin(w, dst, &err);
    for (size_t i = 0; !rc && i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        rc = gguf_writer_write(w, t->data, t->nbytes, &err);
    }
    if (!rc) rc = gguf_writer_finish(w, &err);
    CHECK_MSG(rc == 0, "%s", err.message);
    gguf_writer_free(w);
    gguf_close(f);
    return rc;
}

static void test_model_without_tokenizer(void) {
    const test_model *tm = &the_test_model;
    char path[512];
    snprintf(path, sizeof path, "%s/no_tokenizer.gguf", tm->tmpdir);
    if (copy_without_tokenizer(tm->path, path)) return;
    clover_model *m = NULL;
    clover_error err = {0};
    CHECK_MSG(clover_model_load(&m, path, &err) == CLOVER_OK, "%s", err.message);
    if (m) {
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_EQ_INT(clover_tokenize(m, "hi", 2, 1, &ids, &n, &err), CLOVER_E_UNSUPPORTED);
        CHECK(strstr(err.message, "no tokenizer") != NULL && strstr(err.message, "no_tokenizer.gguf") != NULL);
        char *text = NULL;
        int32_t one = 1;
        CHECK_EQ_INT(clover_detokenize(m, &one, 1, 0, &text, &n, &err), CLOVER_E_UNSUPPORTED);
        clover_text_stream *s = NULL;
        CHECK_EQ_INT(clover_text_stream_create(&s, m, 0, &err), CLOVER_E_UNSUPPORTED);
        CHECK_EQ_INT(clover_token_id(m, "<|im_end|>"), -1);
        /* it still generates from ids; the result has no text */
        clover_session *sess = NULL;
        CHECK(clover_session_create(&sess, m, NULL, &err) == CLOVER_OK);
        clover_generate_params p;
        clover_generate_params_init(&p);
        p.max_tokens = 3;
        int32_t prompt[] = {1, 2, 3};
        clover_generate_result r;
        CHECK(sess && clover_generate(sess, prompt, 3, &p, &r, &err) == CLOVER_OK);
        CHECK(r.n_generated >= 1 && r.text == NULL && r.text_len == 0);
        clover_generate_result_free(&r);
        clover_session_free(sess);
    }
    clover_model_free(m);
    unlink(path);
}

int main(void) {
    if (load_tok_manifest()) return TEST_EXIT();
    fixture fx;
    if (fixture_open(&fx, "tiny_clover") == 0) {
        if (test_model_convert(&the_test_model, &fx, CONVERT_F32) == 0) {
            the_model = the_test_model.model;
            RUN(test_encode_cases);
            RUN(test_special_tokens_only_when_allowed);
            RUN(test_token_ids);
            RUN(test_chat_case_ids);
            RUN(test_bad_ids_and_padding);
            RUN(test_generation_text_and_pass_view);
            RUN(test_on_pass_cancels);
            RUN(test_model_without_tokenizer);
        }
        test_model_free(&the_test_model);
        fixture_close(&fx);
    }
    json_decref(tok_manifest);
    return TEST_EXIT();
}
