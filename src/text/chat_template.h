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
 *  - tools (TRUNK.md 6, Qwen3.5's XML-function calling; the exact Qwen3.5
 *    chat_template.jinja was not available here, the instruction text is
 *    that of third-party copies of Qwen3.5's / Qwen3.6's): a system block
 *    "# Tools\n\nYou have access to the following functions:\n\n<tools>"
 *    + "\n{tool}" per tool + "\n</tools>" + the call instructions, then
 *    "\n\n" and the system message's content (when not empty); an
 *    assistant turn's calls follow its content ("\n\n" before the first
 *    when there is content, "\n" before the others) as
 *    <tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n...</function>\n</tool_call>,
 *    V a string verbatim or another value as tojson writes it (the Jinja
 *    writes a scalar with |string, Python's str: True, None; JSON's
 *    true/null are kept here, as TRUNK.md 6 has it).
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
