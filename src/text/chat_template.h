/*
 * chat_template.h: Qwen3.5's ChatML chat template, written out in C rather
 * than run through a Jinja interpreter: the engine serves one model family,
 * and a fixed renderer cannot fail on a template feature we lack. It
 * follows the Qwen3.5 template (TRUNK.md 6) rule for rule:
 *  - every message's content is trimmed (Jinja's |trim: Python's strip());
 *  - a system message may only come first: <|im_start|>system\n...<|im_end|>\n;
 *  - user turns: <|im_start|>user\n...<|im_end|>\n;
 *  - assistant turns take reasoning_content, or split their content at
 *    </think>; those after the last real user query (one that is not just
 *    a <tool_response> block) keep it as <think>\n{reasoning}\n</think>\n\n
 *    before the content, earlier ones drop it;
 *  - consecutive tool messages share one user turn of <tool_response> blocks;
 *  - the generation prompt opens <think>\n, or an empty think block when
 *    thinking is off;
 *  - tools (TRUNK.md 6 describes Qwen3.5's XML call form, which nobody here
 *    has read byte for byte; this follows Qwen3's JSON convention from the
 *    real Qwen3 tokenizer_config.json, which tests render through
 *    transformers): a system block "# Tools ... <tools>\n{tool}...\n</tools>"
 *    plus the call instructions, after the system message's content; an
 *    assistant turn's calls follow its content as
 *    <tool_call>\n{"name": "N", "arguments": ARGS}\n</tool_call>, one a line.
 * The public entry points (clover_chat_render, clover_answer_split) live in
 * chat_template.c; this header lets the rest of the library render into a
 * buffer it already has.
 */
#ifndef CLOVER_TEXT_CHAT_TEMPLATE_H
#define CLOVER_TEXT_CHAT_TEMPLATE_H

#include <stddef.h>

#include "clover.h"
#include "text/tokenizer.h"

/* Appends the rendering of msgs[0..n) to out. opts NULL: the defaults.
 * Errors (CLOVER_E_INVALID) name the message: no messages, an unknown
 * role, a system message after the first, no user message at all. */
int chat_template_render(const clover_chat_message *msgs, size_t n, const clover_chat_options *opts,
                         text_bytes *out, clover_error *err);

/* The span of s[0..len) left by Python's str.strip() (Unicode white space). */
void chat_template_trim(const char *s, size_t len, size_t *off, size_t *n);

#endif
