/*
 * result_text.h: the decoded text of a generation result (internal).
 */
#ifndef CLOVER_ENGINE_RESULT_TEXT_H
#define CLOVER_ENGINE_RESULT_TEXT_H

#include "clover.h"

/* Sets res->text / text_len from res->ids (NULL when the model has no
 * tokenizer). The text is allocated with malloc (free()). */
int engine_result_text(const clover_model *m, clover_generate_result *res, int skip_special, clover_error *err);

#endif
