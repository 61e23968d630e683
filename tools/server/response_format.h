/*
 * response_format.h: OpenAI's response_format field (structured output):
 * {"type": "text"} (free text), {"type": "json_object"} (any JSON object)
 * or {"type": "json_schema", "json_schema": {"name": ..., "schema": {...},
 * "strict": ...}}, turned into the schema text clover_generate_params takes.
 * A schema the engine cannot honour is a 400 naming the construct, before
 * the request is queued.
 */
#ifndef CLOVER_SERVER_RESPONSE_FORMAT_H
#define CLOVER_SERVER_RESPONSE_FORMAT_H

#include <jansson.h>

#include "request_parse.h"

/* root: the request body. *schema: NULL (free text) or a new string (free()). */
int response_format_parse(json_t *root, char **schema, server_error *e);

#endif
