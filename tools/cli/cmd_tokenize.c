/*
 * cmd_tokenize.c: `clover tokenize`: text to ids (and ids to text) with a
 * model's tokenizer, or with a Hugging Face tokenizer.json alone, so a
 * prompt can be checked against another implementation without loading
 * weights. A model goes through the public API (clover_tokenize ...); a
 * tokenizer.json has no model around it, so that path uses the tokenizer
 * module (src/text) directly, as `clover convert` uses the converter's.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_args.h"
#include "clover.h"
#include "cli_opts.h"
#include "commands.h"
#include "prompt_text.h"
#include "text/tokenizer.h"

static const cli_opt tokenize_opts[] = {
    {"--model", "-m", CLI_STR, 0, 0, "FILE", NULL},
    {"--tokenizer", NULL, CLI_STR, 0, 0, "FILE", NULL},
    {"--decode", NULL, CLI_STR, 0, 0, "LIST", NULL},
    {"--no-special", NULL, CLI_FLAG, 0, 0, NULL, NULL},
    {"--json", NULL, CLI_FLAG, 0, 0, NULL, NULL},
};
static void tokenize_usage(FILE *out) {
    fprintf(out, "usage: clover tokenize [-m MODEL | --tokenizer tokenizer.json] [--json] [--no-special] [TEXT]\n"
                 "       clover tokenize [-m MODEL | --tokenizer tokenizer.json] [--json] [--no-special] --decode LIST\n"
                 "\n"
                 "Prints the token ids of TEXT (or of stdin, byte for byte, when TEXT is absent),\n"
                 "comma-separated, or with --decode the text of the given ids. The tokenizer is the\n"
                 "model's (default: the model built into this binary) or a Hugging Face\n"
                 "tokenizer.json (its tokenizer_config.json is read too when it sits beside it).\n"
                 "\n"
                 "options:\n"
                 "  -m, --model FILE            GGUF model whose tokenizer to use\n"
                 "  --tokenizer FILE            a Hugging Face tokenizer.json instead\n"
                 "  --decode LIST               comma-separated ids to turn into text\n"
                 "  --no-special                encoding: special tokens written in the text (like\n"
                 "                              <|im_start|>) are plain text; decoding: leave control\n"
                 "                              tokens out\n"
                 "  --json                      encoding: {\"ids\": [...], \"pieces\": [...]} (each token's\n"
                 "                              text, bytes that are not UTF-8 as U+FFFD); decoding:\n"
                 "                              {\"text\": ...}\n"
                 "  -h, --help                  this text\n"
                 "\n"
                 "Exit codes: 0 done, 1 the tokenizer failed (one error line), 2 usage.\n");
}

/* The tokenizer in use: a model's, or one loaded from a tokenizer.json. */
typedef struct tok_source {
    clover_model *m;
    tokenizer *t;
} tok_source;

static int src_encode(const tok_source *s, const char *text, size_t len, int special, int32_t **ids, size_t *n,
                      clover_error *err) {
    if (s->m) return clover_tokenize(s->m, text, len, special, ids, n, err);
    token_ids out = {0};
    int rc = tokenizer_encode(s->t, text, len, special ? TOKENIZER_ALLOW_SPECIAL : 0u, &out, err);
    *ids = out.v;
    *n = out.n;
    return rc;
}

/* flags: TOKENIZER_SKIP_SPECIAL, TOKENIZER_REPLACE_INVALID (bytes that are not UTF-8 as U+FFFD). */
static int src_decode(const tok_source *s, const int32_t *ids, size_t n, unsigned flags, char **text, size_t *len,
                      clover_error *err) {
    if (s->m && !(flags & TOKENIZER_REPLACE_INVALID))
        return clover_detokenize(s->m, ids, n, (flags & TOKENIZER_SKIP_SPECIAL) != 0, text, len, err);
    if (s->m) { /* the model's stream decoder replaces as it goes */
        clover_text_stream *st = NULL;
        int rc = clover_text_stream_create(&st, s->m, (flags & TOKENIZER_SKIP_SPECIAL) != 0, err);
        text_bytes out = {0};
        const char *piece;
        size_t plen;
        if (!rc) rc = text_bytes_append(&out, "", 0, err);
        for (size_t i = 0; !rc && i <= n; i++) {
            rc = i < n ? clover_text_stream_push(st, ids[i], &piece, &plen, err)
                       : clover_text_stream_flush(st, &piece, &plen, err);
            if (!rc) rc = text_bytes_append(&out, piece, plen, err);
        }
        clover_text_stream_free(st);
        *text = out.v;
        *len = out.n;
        return rc;
    }
    text_bytes out = {0};
    int rc = text_bytes_append(&out, "", 0, err);
    if (!rc) rc = tokenizer_decode(s->t, ids, n, flags, &out, err);
    *text = out.v;
    *len = out.n;
    return rc;
}

static int print_ids(const tok_source *s, const int32_t *ids, size_t n, int json) {
    if (!json) {
        for (size_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
        printf("\n");
        return 0;
    }
    json_t *jids = json_array(), *pieces = json_array();
    for (size_t i = 0; i < n; i++) {
        char *piece = NULL;
        size_t len = 0;
        clover_error err = {0};
        if (src_decode(s, &ids[i], 1, TOKENIZER_REPLACE_INVALID, &piece, &len, &err)) {
            fprintf(stderr, "clover tokenize: %s\n", err.message);
            free(piece);
            json_decref(jids);
            json_decref(pieces);
            return 1;
        }
        json_array_append_new(jids, json_integer(ids[i]));
        json_array_append_new(pieces, json_stringn(piece, len));
        free(piece);
    }
    json_t *root = json_pack("{s:o,s:o}", "ids", jids, "pieces", pieces);
    char *out = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (!out) {
        fprintf(stderr, "clover tokenize: could not write the JSON output\n");
        return 1;
    }
    printf("%s\n", out);
    free(out);
    return 0;
}

static int print_text(const tok_source *s, const int32_t *ids, size_t n, int skip, int json) {
    char *text = NULL;
    size_t len = 0;
    clover_error err = {0};
    unsigned flags = (skip ? TOKENIZER_SKIP_SPECIAL : 0u) | (json ? TOKENIZER_REPLACE_INVALID : 0u);
    if (src_decode(s, ids, n, flags, &text, &len, &err)) {
        fprintf(stderr, "clover tokenize: %s\n", err.message);
        free(text);
        return 1;
    }
    int rc = 0;
    if (json) {
        json_t *root = json_pack("{s:s%}", "text", text, len);
        char *out = root ? json_dumps(root, JSON_COMPACT) : NULL;
        json_decref(root);
        if (out) printf("%s\n", out);
        else fprintf(stderr, "clover tokenize: could not write the JSON output\n");
        rc = out ? 0 : 1;
        free(out);
    } else {
        fwrite(text, 1, len, stdout); /* the bytes, exactly */
        if (isatty(STDOUT_FILENO) && (len == 0 || text[len - 1] != '\n')) fputc('\n', stdout);
    }
    free(text);
    return rc;
}

typedef struct tokenize_options {
    const char *model, *tokenizer_json, *text;
    int32_t *decode;
    size_t n_decode;
    int json, no_special;
} tokenize_options;

/* 0 ok, 1 --help shown, -1 usage error (reported). */
static int tokenize_parse(int argc, char **argv, tokenize_options *o) {
    {
        const cli_opt_table tables[] = {{tokenize_opts, sizeof tokenize_opts / sizeof tokenize_opts[0]}};
        int nrc = cli_opts_normalize("tokenize", tables, 1, &argc, &argv);
        if (nrc > 0) tokenize_usage(stdout);
        if (nrc > 0) return 1;
        if (nrc < 0) return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            tokenize_usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--json")) {
            o->json = 1;
            continue;
        }
        if (!strcmp(a, "--no-special")) {
            o->no_special = 1;
            continue;
        }
        if (a[0] != '-' || !strcmp(a, "--")) {
            if (!strcmp(a, "--")) a = ++i < argc ? argv[i] : NULL;
            if (!a) break;
            if (o->text) {
                fprintf(stderr, "clover tokenize: one TEXT argument (quote it), not '%s' too\n", a);
                return -1;
            }
            o->text = a;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "clover tokenize: %s needs a value (clover tokenize --help)\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            o->model = v;
        } else if (!strcmp(a, "--tokenizer")) {
            o->tokenizer_json = v;
        } else if (!strcmp(a, "--decode")) {
            free(o->decode);
            if (cli_parse_ids("tokenize", a, v, &o->decode, &o->n_decode)) return -1;
        } else {
            fprintf(stderr, "clover tokenize: unknown option '%s' (clover tokenize --help)\n", a);
            return -1;
        }
    }
    if (o->model && o->tokenizer_json) {
        fprintf(stderr, "clover tokenize: give -m MODEL or --tokenizer FILE, not both\n");
        return -1;
    }
    if (o->decode && o->text) {
        fprintf(stderr, "clover tokenize: give TEXT or --decode LIST, not both\n");
        return -1;
    }
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    tokenize_options o;
    memset(&o, 0, sizeof o);
    int prc = tokenize_parse(argc, argv, &o);
    if (prc) {
        free(o.decode);
        return prc > 0 ? 0 : 2;
    }
    char *input = NULL;
    size_t len = 0;
    if (!o.decode && !o.text) {
        if (isatty(STDIN_FILENO)) {
            fprintf(stderr, "clover tokenize: no text (TEXT, text on stdin, or --decode LIST)\n");
            free(o.decode);
            return 2;
        }
        if (cli_read_stdin("tokenize", &input, &len)) {
            free(o.decode);
            return 1;
        }
        if (len == 0) {
            fprintf(stderr, "clover tokenize: no text (TEXT, text on stdin, or --decode LIST)\n");
            free(input);
            free(o.decode);
            return 2;
        }
    }
    tok_source s = {0};
    clover_error err = {0};
    int code = 1;
    if (o.tokenizer_json) {
        if (tokenizer_load_json(&s.t, o.tokenizer_json, &err)) {
            fprintf(stderr, "clover tokenize: %s\n", err.message);
            goto done;
        }
    } else if (cli_load_model("tokenize", o.model, &s.m)) {
        goto done;
    }
    if (o.decode) {
        code = print_text(&s, o.decode, o.n_decode, o.no_special, o.json);
        goto done;
    }
    const char *text = o.text ? o.text : input;
    if (o.text) len = strlen(o.text);
    int32_t *ids = NULL;
    size_t n = 0;
    if (src_encode(&s, text, len, !o.no_special, &ids, &n, &err)) {
        fprintf(stderr, "clover tokenize: %s\n", err.message);
        free(ids);
        goto done;
    }
    code = print_ids(&s, ids, n, o.json);
    free(ids);
done:
    tokenizer_free(s.t);
    clover_model_free(s.m);
    free(input);
    free(o.decode);
    return code;
}
