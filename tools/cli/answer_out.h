/*
 * answer_out.h: printing an answer while it is generated, for `clover run`
 * and `clover chat`. Emitted ids go through the model's text stream (only
 * whole UTF-8 characters are printed); on a terminal the text goes through
 * the visual display (reasoning dimmed, blocks shown as they are denoised),
 * elsewhere it is written as is, flushed after every piece.
 */
#ifndef CLOVER_CLI_ANSWER_OUT_H
#define CLOVER_CLI_ANSWER_OUT_H

#include <stdio.h>

#include "clover.h"
#include "visual.h"

typedef struct answer_out {
    const clover_model *m;
    clover_text_stream *stream;
    FILE *out;
    visual *vis;       /* a terminal display, or NULL */
    int32_t think_end; /* </think>, or -1 */
    int reasoning;     /* the text being printed is reasoning (dimmed on a terminal) */
    int wrote;         /* something was printed */
} answer_out;

/* terminal: out is a terminal (safe display, dim reasoning); blocks: also
 * draw the denoising (needs terminal); reasoning: the answer opens inside a
 * think block. 0, or a status with err set. */
int answer_out_init(answer_out *a, const clover_model *m, FILE *out, int terminal, int blocks, int reasoning,
                    int skip_special, clover_error *err);
/* Points p's on_token / on_pass / user at a. */
void answer_out_attach(answer_out *a, clover_generate_params *p);
/* Prints what the stream still holds and ends the line. */
void answer_out_finish(answer_out *a);
void answer_out_free(answer_out *a);

#endif
