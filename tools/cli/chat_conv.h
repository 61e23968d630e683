/*
 * chat_conv.h: the conversation of `clover chat` as token ids, kept so
 * that every new prompt extends what the session has committed.
 *
 * Why ids and not messages re-rendered each turn: the session reuses its
 * committed ids only when the new prompt starts with all of them (the GDN
 * layers' recurrent state cannot be rolled back to a shorter prefix), and
 * after an answer the session holds the prompt plus the answer's blocks but
 * the last. Qwen3.5's template renders an earlier assistant turn without
 * its reasoning (and re-tokenizing a generated answer need not give the
 * generated ids back), so a re-rendered conversation would part from the
 * committed ids right after the previous "<|im_start|>assistant\n" and
 * every turn would start afresh. Keeping each answer exactly as generated
 * (reasoning included, as Qwen3.6's preserve_thinking does) makes the next
 * prompt = the committed ids + the rest of the last answer + <|im_end|> +
 * the new user turn, and only that tail is committed.
 *
 * The first turn is the chat template over [system?, user]; every later
 * turn appends "\n" + the template over [user] (the text the full
 * template would write after "<|im_end|>"), tokenized the same way.
 */
#ifndef CLOVER_CLI_CHAT_CONV_H
#define CLOVER_CLI_CHAT_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "clover.h"

typedef struct chat_conv {
    const clover_model *m;
    const char *system; /* or NULL */
    int32_t im_end;     /* <|im_end|>, the end of an answer turn (-1: none) */
    int32_t *ids;       /* [n] the conversation so far */
    size_t n, cap;
    size_t turns;       /* user turns so far */
} chat_conv;

void chat_conv_init(chat_conv *c, const clover_model *m, const char *system);
void chat_conv_free(chat_conv *c);
/* Forgets the conversation. */
void chat_conv_reset(chat_conv *c);
/* Appends a user turn and the generation prompt (thinking on or off);
 * afterwards c->ids[0..n) is the next prompt. */
int chat_conv_add_user(chat_conv *c, const char *text, int thinking, clover_error *err);
/* Appends the answer as generated (ids[0..n), a final stop id left out)
 * and closes the turn with <|im_end|>. */
int chat_conv_add_answer(chat_conv *c, const int32_t *ids, size_t n, int stopped, clover_error *err);

#endif
