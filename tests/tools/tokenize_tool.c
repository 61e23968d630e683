/*
 * tokenize_tool.c: drives clover's tokenizer for tests/python/test_tokenizer_parity.py,
 * which compares it with Hugging Face `tokenizers`. One process serves a
 * whole corpus: requests are JSON lines on stdin, one JSON line answers each.
 *
 *   tokenize_tool --json tokenizer.json | --gguf model.gguf | --info ...
 *
 *   {"text": "...", "special": true}   encode (or "hex": "ff41" for raw bytes)
 *     -> {"ids": [...], "decoded": HEX, "stream": [HEX, ...]}
 *        decoded: tokenizer_decode of the ids; stream: the stream decoder's
 *        output after each id, then the flush's
 *   {"ids": [...], "skip_special": false}  decode
 *     -> {"decoded": HEX, "replaced": HEX, "stream": [HEX, ...]}
 *   a failure -> {"error": "message"}
 * With --info it prints the vocabulary size and the special ids and exits.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "text/tokenizer.h"

static json_t *hex_of(const char *p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    char *h = malloc(2 * n + 1);
    if (!h) return json_null();
    for (size_t i = 0; i < n; i++) {
        h[2 * i] = digits[(unsigned char)p[i] >> 4];
        h[2 * i + 1] = digits[(unsigned char)p[i] & 15];
    }
    h[2 * n] = '\0';
    json_t *s = json_string(h);
    free(h);
    return s;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int unhex(const char *h, size_t n, char **out, size_t *out_n) {
    if (n % 2) return -1;
    char *b = malloc(n / 2 + 1);
    if (!b) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hex_digit(h[2 * i]), lo = hex_digit(h[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(b);
            return -1;
        }
        b[i] = (char)(hi << 4 | lo);
    }
    *out = b;
    *out_n = n / 2;
    return 0;
}

static json_t *error_reply(const char *msg) { return json_pack("{s:s}", "error", msg); }

/* Decodes ids three ways: raw, with replacement, and through the stream decoder. */
static json_t *decode_reply(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, json_t *reply) {
    clover_error err = {0};
    text_bytes raw = {0}, rep = {0}, chunk = {0};
    if (tokenizer_decode(t, ids, n, flags, &raw, &err) ||
        tokenizer_decode(t, ids, n, flags | TOKENIZER_REPLACE_INVALID, &rep, &err)) {
        json_decref(reply);
        text_bytes_free(&raw);
        text_bytes_free(&rep);
        return error_reply(err.message);
    }
    json_object_set_new(reply, "decoded", hex_of(raw.v, raw.n));
    json_object_set_new(reply, "replaced", hex_of(rep.v, rep.n));
    json_t *stream = json_array();
    tokenizer_stream s;
    tokenizer_stream_init(&s, t, flags);
    for (size_t i = 0; i <= n; i++) {
        chunk.n = 0;
        int rc = i < n ? tokenizer_stream_push(&s, ids[i], &chunk, &err) : tokenizer_stream_flush(&s, &chunk, &err);
        if (rc) {
            json_decref(stream);
            json_decref(reply);
            text_bytes_free(&raw);
            text_bytes_free(&rep);
            text_bytes_free(&chunk);
            return error_reply(err.message);
        }
        json_array_append_new(stream, hex_of(chunk.v ? chunk.v : "", chunk.n));
    }
    json_object_set_new(reply, "stream", stream);
    text_bytes_free(&raw);
    text_bytes_free(&rep);
    text_bytes_free(&chunk);
    return reply;
}

static json_t *handle(const tokenizer *t, tokenizer_encoder *enc, json_t *req) {
    json_t *text = json_object_get(req, "text"), *hex = json_object_get(req, "hex"), *ids = json_object_get(req, "ids");
    clover_error err = {0};
    if (json_is_array(ids)) {
        size_t n = json_array_size(ids);
        int32_t *v = malloc((n ? n : 1) * sizeof *v);
        if (!v) return error_reply("out of memory");
        for (size_t i = 0; i < n; i++) v[i] = (int32_t)json_integer_value(json_array_get(ids, i));
        unsigned flags = json_is_true(json_object_get(req, "skip_special")) ? TOKENIZER_SKIP_SPECIAL : 0;
        json_t *r = decode_reply(t, v, n, flags, json_object());
        free(v);
        return r;
    }
    char *buf = NULL;
    size_t len = 0;
    if (json_is_string(text)) {
        len = json_string_length(text);
        buf = malloc(len + 1);
        if (!buf) return error_reply("out of memory");
        memcpy(buf, json_string_value(text), len);
    } else if (json_is_string(hex)) {
        if (unhex(json_string_value(hex), json_string_length(hex), &buf, &len)) return error_reply("bad hex");
    } else {
        return error_reply("expected \"text\", \"hex\" or \"ids\"");
    }
    unsigned flags = json_is_false(json_object_get(req, "special")) ? 0 : TOKENIZER_ALLOW_SPECIAL;
    token_ids out = {0};
    int rc = tokenizer_encoder_run(enc, buf, len, flags, &out, &err);
    free(buf);
    if (rc) {
        token_ids_free(&out);
        return error_reply(err.message);
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < out.n; i++) json_array_append_new(arr, json_integer(out.v[i]));
    json_t *reply = json_object();
    json_object_set_new(reply, "ids", arr);
    reply = decode_reply(t, out.v, out.n, 0, reply);
    token_ids_free(&out);
    return reply;
}

static json_t *info(const tokenizer *t) {
    const tokenizer_specials *s = tokenizer_get_specials(t);
    json_t *eos = json_array();
    for (size_t i = 0; i < s->n_eos; i++) json_array_append_new(eos, json_integer(s->eos_ids[i]));
    return json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:o}", "n_tokens",
                     (int)tokenizer_n_tokens(t), "bos", s->bos, "eos", s->eos, "pad", s->pad, "unk", s->unk, "im_start",
                     s->im_start, "im_end", s->im_end, "endoftext", s->endoftext, "think", s->think, "think_end",
                     s->think_end, "mask", s->mask, "add_bos", s->add_bos, "eos_ids", eos);
}

int main(int argc, char **argv) {
    const char *json_path = NULL, *gguf_path = NULL;
    int want_info = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--gguf") && i + 1 < argc)
            gguf_path = argv[++i];
        else if (!strcmp(argv[i], "--info"))
            want_info = 1;
        else {
            fprintf(stderr, "usage: tokenize_tool (--json tokenizer.json | --gguf model.gguf) [--info]\n");
            return 2;
        }
    }
    if (!json_path == !gguf_path) {
        fprintf(stderr, "tokenize_tool: give exactly one of --json, --gguf\n");
        return 2;
    }
    clover_error err = {0};
    tokenizer *t = NULL;
    gguf_file *g = NULL;
    int rc = json_path ? tokenizer_load_json(&t, json_path, &err) : gguf_open(&g, gguf_path, &err);
    if (!rc && gguf_path) rc = tokenizer_load_gguf(&t, g, &err);
    if (rc) {
        fprintf(stderr, "tokenize_tool: %s\n", err.message);
        gguf_close(g);
        return 1;
    }
    if (want_info) {
        json_t *j = info(t);
        char *s = json_dumps(j, JSON_COMPACT);
        puts(s);
        free(s);
        json_decref(j);
        tokenizer_free(t);
        gguf_close(g);
        return 0;
    }
    tokenizer_encoder *enc;
    if (tokenizer_encoder_create(&enc, t, &err)) {
        fprintf(stderr, "tokenize_tool: %s\n", err.message);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, stdin)) > 0) {
        json_error_t je;
        json_t *req = json_loadb(line, (size_t)got, JSON_ALLOW_NUL, &je);
        json_t *reply = req ? handle(t, enc, req) : error_reply(je.text);
        char *s = json_dumps(reply, JSON_COMPACT | JSON_ENSURE_ASCII);
        puts(s ? s : "{\"error\":\"dump failed\"}");
        free(s);
        json_decref(reply);
        json_decref(req);
    }
    fflush(stdout);
    free(line);
    tokenizer_encoder_free(enc);
    tokenizer_free(t);
    gguf_close(g);
    return 0;
}
