/*
 * prompt_text.c: see prompt_text.h.
 */
#include "prompt_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_all(const char *cmd, FILE *in, const char *what, char **text, size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fprintf(stderr, "clover %s: out of memory reading %s\n", cmd, what);
            return -1;
        }
        n += fread(buf + n, 1, cap - n - 1, in);
        if (n + 1 < cap) break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) free(buf);
        buf = bigger;
        cap *= 2;
    }
    if (ferror(in)) {
        fprintf(stderr, "clover %s: could not read %s\n", cmd, what);
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

int cli_read_stdin(const char *cmd, char **text, size_t *len) { return read_all(cmd, stdin, "stdin", text, len); }

int cli_read_file(const char *cmd, const char *path, char **text, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "clover %s: cannot open %s: %s\n", cmd, path, strerror(errno));
        return -1;
    }
    int rc = read_all(cmd, f, path, text, len);
    fclose(f);
    return rc;
}

int cli_chat_prompt(const clover_model *m, const clover_chat_message *msgs, size_t n, int thinking, int32_t **ids,
                    size_t *n_ids, clover_error *err) {
    clover_chat_options o;
    clover_chat_options_init(&o);
    o.enable_thinking = thinking;
    char *text = NULL;
    int rc = clover_chat_render(m, msgs, n, &o, &text, err);
    if (!rc) rc = clover_tokenize(m, text, strlen(text), 1, ids, n_ids, err);
    clover_free(text);
    return rc;
}
