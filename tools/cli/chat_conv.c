/*
 * chat_conv.c: see chat_conv.h.
 */
#include "chat_conv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompt_text.h"

void chat_conv_init(chat_conv *c, const clover_model *m, const char *system) {
    memset(c, 0, sizeof *c);
    c->m = m;
    c->system = system;
    c->im_end = clover_token_id(m, "<|im_end|>");
}

void chat_conv_free(chat_conv *c) {
    free(c->ids);
    memset(c, 0, sizeof *c);
}

void chat_conv_reset(chat_conv *c) {
    c->n = 0;
    c->turns = 0;
}

static int append(chat_conv *c, const int32_t *ids, size_t n, clover_error *err) {
    if (c->n + n > c->cap) {
        size_t cap = c->cap ? c->cap : 1024;
        while (cap < c->n + n) cap *= 2;
        int32_t *v = realloc(c->ids, cap * sizeof *v);
        if (!v) {
            snprintf(err->message, sizeof err->message, "out of memory for a conversation of %zu tokens", c->n + n);
            return err->code = CLOVER_E_NOMEM;
        }
        c->ids = v;
        c->cap = cap;
    }
    if (n) memcpy(c->ids + c->n, ids, n * sizeof *ids);
    c->n += n;
    return CLOVER_OK;
}

int chat_conv_add_user(chat_conv *c, const char *text, int thinking, clover_error *err) {
    clover_chat_message msgs[2];
    size_t k = 0;
    if (c->n == 0 && c->system) msgs[k++] = (clover_chat_message){"system", c->system, NULL};
    msgs[k++] = (clover_chat_message){"user", text, NULL};
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = CLOVER_OK;
    if (c->n > 0) { /* the newline the template writes after the previous <|im_end|> */
        rc = clover_tokenize(c->m, "\n", 1, 1, &ids, &n, err);
        if (!rc) rc = append(c, ids, n, err);
        clover_free(ids);
        ids = NULL;
    }
    if (!rc) rc = cli_chat_prompt(c->m, msgs, k, thinking, &ids, &n, err);
    if (!rc) rc = append(c, ids, n, err);
    clover_free(ids);
    if (!rc) c->turns++;
    return rc;
}

int chat_conv_add_answer(chat_conv *c, const int32_t *ids, size_t n, int stopped, clover_error *err) {
    if (stopped && n > 0) n--; /* the stop id: the turn is closed with <|im_end|> whichever stop it was */
    int rc = append(c, ids, n, err);
    if (!rc && c->im_end >= 0) rc = append(c, &c->im_end, 1, err);
    return rc;
}
