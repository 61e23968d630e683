/*
 * json_util.h: the small JSON helpers the converter's readers share
 * (config.json, the safetensors index, the tokenizer files): reading a
 * bounded file whole, parsing it with duplicate keys rejected, and naming a
 * value's JSON type in messages.
 */
#ifndef CLOVER_CONVERT_JSON_UTIL_H
#define CLOVER_CONVERT_JSON_UTIL_H

#include <jansson.h>
#include <stddef.h>

#include "clover.h"

/* Reads path whole into a new buffer (NUL-terminated, free with mem_free);
 * a file over max_bytes is a CLOVER_E_FORMAT error. */
int json_util_read_file(const char *path, size_t max_bytes, char **buf, size_t *len, clover_error *err);
/* Reads and parses path; *out is a new reference. */
int json_util_load(const char *path, size_t max_bytes, json_t **out, clover_error *err);
/* "an object", "a string", ... for messages. */
const char *json_util_kind(const json_t *v);

#endif
