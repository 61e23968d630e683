/*
 * prompt_text.h: turning what the user typed into prompt ids, shared by
 * `clover run`, `clover chat` and `clover tokenize`: reading text from
 * stdin, and the chat template followed by the tokenizer (special tokens
 * matched, since the template writes them as text).
 */
#ifndef CLOVER_CLI_PROMPT_TEXT_H
#define CLOVER_CLI_PROMPT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "clover.h"

/* All of stdin (malloc'd, NUL-terminated). 0, or -1 after a one-line error
 * naming cmd. */
int cli_read_stdin(const char *cmd, char **text, size_t *len);
/* All of a file, the same way. */
int cli_read_file(const char *cmd, const char *path, char **text, size_t *len);

/* The chat template over msgs (generation prompt added, thinking on or
 * off), tokenized. *ids is the library's (clover_free). */
int cli_chat_prompt(const clover_model *m, const clover_chat_message *msgs, size_t n, int thinking, int32_t **ids,
                    size_t *n_ids, clover_error *err);

#endif
