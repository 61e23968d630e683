/*
 * json_wide.h: a request body read as JSON allows what JSON allows and
 * jansson by default does not: "\u0000" inside strings (JSON_ALLOW_NUL) and
 * integers past int64. jansson refuses an integer it cannot hold as an
 * int64 outright; the body is then read again from a copy in which each
 * such integer is marked a real (its digits + ".0"), so it keeps its value
 * as a number and a field that wants an integer answers a 400 naming the
 * field. The one exception is the top-level "seed", a 64-bit unsigned value
 * (SplitMix64's state): one up to 2^64 - 1 is returned exact, beside the
 * document (whose "seed" then reads 0).
 */
#ifndef CLOVER_SERVER_JSON_WIDE_H
#define CLOVER_SERVER_JSON_WIDE_H

#include <jansson.h>
#include <stdint.h>

/* Parses body; NULL with err set when it is not JSON. *wide_seed is set (and *has_wide_seed = 1) when the top-level
 * "seed" was an integer past int64 that fits in 64 unsigned bits. */
json_t *json_wide_load(const char *body, size_t len, uint64_t *wide_seed, int *has_wide_seed, json_error_t *err);

#endif
