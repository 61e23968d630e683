/*
 * cli_args.h: what `clover run` and `clover ppl` share: strict parsing of
 * option values (a bad value is one line on stderr and a usage error) and
 * loading the model (-m FILE, or the default model embedded in the binary).
 */
#ifndef CLOVER_CLI_ARGS_H
#define CLOVER_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "clover.h"

/* Each returns 0, or prints "clover CMD: ..." and returns -1. */
int cli_parse_ids(const char *cmd, const char *opt, const char *s, int32_t **ids, size_t *n);
int cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t max, uint64_t *out);
int cli_parse_float(const char *cmd, const char *opt, const char *s, float *out);
/* --gpu-mem N: N GiB (a decimal above 0) -> bytes; -1 with a one-line message. */
int cli_parse_gib(const char *cmd, const char *opt, const char *s, uint64_t *bytes);

/* Loads path, or when path is NULL the default model ($CLOVER_DEFAULT_MODEL,
 * else the embedded one: default_model.h). Returns 0,
 * or prints the one-line error and returns -1. */
int cli_load_model(const char *cmd, const char *path, clover_model **out);
/* The same, naming the way to give a file in the error (`give`: "-m FILE", "a FILE"),
 * and reading the file ahead only when `prefetch` (a command that runs the model). */
int cli_load_model_for(const char *cmd, const char *path, const char *give, int prefetch, clover_model **out);

#endif
