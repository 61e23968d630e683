/*
 * answer_out.c: the streaming callbacks of answer_out.h. A write error on
 * the output (a closed pipe) cancels the request: nobody is reading.
 */
#include "answer_out.h"

#include <string.h>

static void print_piece(answer_out *a, const char *s, size_t n) {
    if (n == 0) return;
    a->wrote = 1;
    if (a->vis) {
        visual_write(a->vis, s, n, a->reasoning);
        return;
    }
    fwrite(s, 1, n, a->out);
    fflush(a->out);
}

static int on_token(void *user, int32_t id, float confidence) {
    (void)confidence;
    answer_out *a = user;
    const char *piece;
    size_t len;
    if (clover_text_stream_push(a->stream, id, &piece, &len, NULL) != CLOVER_OK) return 1;
    print_piece(a, piece, len);
    if (id == a->think_end) a->reasoning = 0; /* </think> itself is still reasoning's */
    return ferror(a->out) ? 1 : 0;
}

static int on_pass(void *user, const clover_pass_view *v) {
    answer_out *a = user;
    if (a->vis) visual_show_pass(a->vis, v);
    return 0;
}

int answer_out_init(answer_out *a, const clover_model *m, FILE *out, int terminal, int blocks, int reasoning,
                    int skip_special, clover_error *err) {
    memset(a, 0, sizeof *a);
    a->m = m;
    a->out = out;
    a->think_end = clover_token_id(m, "</think>");
    a->reasoning = reasoning;
    int rc = clover_text_stream_create(&a->stream, m, skip_special, err);
    if (rc) return rc;
    if (terminal && !cli_term_plain()) a->vis = visual_create(m, out, blocks); /* NULL: plain text */
    return CLOVER_OK;
}

void answer_out_attach(answer_out *a, clover_generate_params *p) {
    p->on_token = on_token;
    p->on_pass = a->vis ? on_pass : NULL;
    p->user = a;
}

void answer_out_finish(answer_out *a) {
    const char *piece;
    size_t len;
    if (a->stream && clover_text_stream_flush(a->stream, &piece, &len, NULL) == CLOVER_OK) print_piece(a, piece, len);
    if (a->vis) {
        visual_finish(a->vis);
    } else if (a->wrote) {
        fputc('\n', a->out);
        fflush(a->out);
    }
}

void answer_out_free(answer_out *a) {
    clover_text_stream_free(a->stream);
    visual_free(a->vis);
    memset(a, 0, sizeof *a);
}
