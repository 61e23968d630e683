/*
 * gen_opts.h: the generation options that `clover run` and `clover chat`
 * share (every parameter clover_generate takes), parsed the same way and
 * described by one help text.
 */
#ifndef CLOVER_CLI_GEN_OPTS_H
#define CLOVER_CLI_GEN_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "clover.h"
#include "cli_opts.h"

typedef struct gen_opts {
    clover_generate_params p;
    /* penalty overrides: the record's values with these fields replaced */
    clover_penalties pen;
    unsigned pen_set;  /* which fields of pen were given (bit per field) */
    int no_penalties;  /* start from no penalties instead of the record's */
    int32_t *stop, *suppress; /* owned; p points at them after gen_opts_finish */
    size_t n_stop, n_suppress;
    uint64_t threads; /* session threads; 0: every CPU */
    int device;       /* clover_device (--device auto|cpu|cuda) */
    uint64_t gpu_layers; /* --gpu-layers N */
    uint64_t gpu_mem;    /* --gpu-mem N (GiB), in bytes; 0: off */
    uint64_t max_context; /* --ctx-size; 0: the model's */
    uint64_t batch_size;  /* -b: rows per pass (prompt chunk); 0: the engine's */
    const char *diffusion_only; /* the first block-diffusion option given (said once if the model is AR) */
    int min_p_given;
    char *json_schema; /* owned: --json-schema FILE's text, or --grammar json's schema */
    const char *json_schema_path; /* --json-schema FILE (an input: no output may replace it) */
} gen_opts;

/* The options of this file, for cli_opts_normalize. */
extern const cli_opt_table GEN_OPTS_TABLE;


void gen_opts_init(gen_opts *g);
void gen_opts_free(gen_opts *g);
/* An option without a value: 1 when it was one of these. */
int gen_opts_flag(gen_opts *g, const char *opt);
/* An option with a value: 0 taken, -1 a bad value (reported as
 * "clover CMD: ..."), 1 not one of these. */
int gen_opts_valued(gen_opts *g, const char *cmd, const char *opt, const char *value);
/* Points p at the id lists. */
void gen_opts_finish(gen_opts *g);
/* 0, or -1 after a usage error on stderr: an output of the command
 * (--dump-first-preview FILE, CLOVER_ROUTE_TRACE=FILE) that is, or resolves
 * to, one of its inputs (the model, the prompt file, the schema file; NULL
 * entries skipped), refused before anything is loaded or written. */
int gen_opts_check_outputs(const gen_opts *g, const char *cmd, const char *model, const char *prompt_file);
/* Once the model is loaded: the penalties override (when any penalty
 * option was given), the record's values with the given ones replaced;
 * a note on stderr (once) for options that do not apply to this model; a
 * --block that does not divide the record's is a usage error: 2 (reported),
 * else 0. */
int gen_opts_bind(gen_opts *g, const char *cmd, const clover_model *m);

#endif
