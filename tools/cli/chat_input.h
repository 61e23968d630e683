/*
 * chat_input.h: the lines a user types into `clover chat`. On a terminal,
 * with libedit (when the build found it), a line can be edited with the
 * arrow keys and the usual Emacs keys, and Up/Down recall this session's
 * earlier lines; otherwise (a pipe, a file, or no libedit) lines are read
 * as they come. Either way Ctrl-C at the prompt gives a fresh prompt and
 * Ctrl-D (or the end of the input) ends the conversation.
 */
#ifndef CLOVER_CLI_CHAT_INPUT_H
#define CLOVER_CLI_CHAT_INPUT_H

#include <stddef.h>

typedef struct chat_input chat_input;

/* interactive: stdin is a terminal; styled: the prompt may be bold. NULL
 * when out of memory. */
chat_input *chat_input_open(int interactive, int styled);
void chat_input_close(chat_input *in);

/* Shows the prompt (interactive) and reads one line, without its newline,
 * into *line (owned by in, valid until the next call). Returns 1 a line, 0
 * the end of the input, -1 Ctrl-C at the prompt (the caller asks again). */
int chat_input_read(chat_input *in, const char **line);

/* Remembers a line for Up/Down (libedit only; a no-op otherwise). */
void chat_input_remember(chat_input *in, const char *line);

#endif
