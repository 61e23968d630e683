/*
 * prompt_text.c: see prompt_text.h.
 */
#include "prompt_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_read_stdin(const char *cmd, char **text, size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fprintf(stderr, "clover %s: out of memory reading stdin\n", cmd);
            return -1;
        }
        n += fread(buf + n, 1, cap - n - 1, stdin);
        if (n + 1 < cap) break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) free(buf);
        buf = bigger;
        cap *= 2;
    }
    if (ferror(stdin)) {
        fprintf(stderr, "clover %s: could not read stdin\n", cmd);
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
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
