/*
 * visual.h: the answer on a terminal. Text is written so the terminal
 * cannot be driven by what the model wrote (control characters appear as
 * symbols), reasoning can be dimmed, and, while a block is being
 * denoised, its rows are drawn after the text: a dim mask per row still
 * masked, the fixed rows' tokens coloured by confidence, redrawn after
 * every pass and erased when the block's text is printed for good.
 *
 * The preview is erased by moving the cursor back over it, so the display
 * tracks the column the text has reached (character widths from utf8proc,
 * the terminal's width from the tty).
 */
#ifndef CLOVER_CLI_VISUAL_H
#define CLOVER_CLI_VISUAL_H

#include <stddef.h>
#include <stdio.h>

#include "clover.h"

typedef struct visual visual;

/* 1 when the terminal gets plain text only: NO_COLOR is set (no-color.org)
 * or TERM is "dumb" (no cursor movement). Then there is no block
 * display, no colour and no redrawn progress line. */
int cli_term_plain(void);

/* A display on out (a terminal). show_blocks: draw the block previews.
 * NULL when out of memory (the caller then prints plain text). */
visual *visual_create(const clover_model *m, FILE *out, int show_blocks);
void visual_free(visual *v);

/* Draws the block as this pass left it (replacing the previous drawing). */
void visual_show_pass(visual *v, const clover_pass_view *pv);
/* Writes answer text at the cursor (erasing a preview first); dim for reasoning. */
void visual_write(visual *v, const char *s, size_t n, int dim);
/* Erases a preview and ends the line the text is on. */
void visual_finish(visual *v);

#endif
