/*
 * cli_opts.h: the one option parser in front of every command. Each
 * command declares its options once, in a table (long name, aliases, type,
 * range, help); cli_opts_normalize reads argv against it before the
 * command's own loop sees anything, so every command treats options the
 * same way:
 *  - llama.cpp's everyday spellings (-n, -c, -t, -s, --temp, -ngl, ...)
 *    and the old names are aliases, rewritten to the one long name;
 *  - --name=value is split;
 *  - an unknown option is named as unknown, with the nearest known name
 *    ("did you mean --top-p?"), never taken for a missing value;
 *  - a number is checked whole and against its range;
 * every failure is one line on stderr and a usage error (exit 2). The
 * command's loop then sees only long names with well-formed values.
 */
#ifndef CLOVER_CLI_OPTS_H
#define CLOVER_CLI_OPTS_H

#include <stdio.h>

typedef enum cli_opt_type {
    CLI_FLAG,  /* no value */
    CLI_STR,   /* any text (a path, a name, a list the command parses) */
    CLI_UINT,  /* a whole number in [min, max] */
    CLI_FLOAT, /* a finite number in [min, max] */
} cli_opt_type;

typedef struct cli_opt {
    const char *name;    /* "--ctx-size" */
    const char *aliases; /* space-separated: "-c --max-context", or NULL */
    cli_opt_type type;
    double min, max;     /* for CLI_UINT and CLI_FLOAT */
    const char *arg;     /* the value's name in the help ("N"), NULL for a flag */
    const char *help;    /* one line; NULL: described in the command's own text */
} cli_opt;

typedef struct cli_opt_table {
    const cli_opt *opts;
    size_t n;
} cli_opt_table;

/* Rewrites argv[1..argc) in place into long names and values (a split
 * --name=value takes a new argv slot, so *argv may be replaced by a copy
 * owned by the process: never freed, it lives as long as the command).
 * Positional arguments and everything after "--" pass through. Returns 0,
 * 1 for -h/--help (the caller prints its usage), or -1 after a usage error
 * already reported as "clover CMD: ...". */
int cli_opts_normalize(const char *cmd, const cli_opt_table *tables, size_t n_tables, int *argc, char ***argv);

/* The known name nearest to s (edit distance), or NULL when none is close. */
const char *cli_opts_nearest(const cli_opt_table *tables, size_t n_tables, const char *s);

/* The option of that long name or alias, or NULL. */
const cli_opt *cli_opts_find(const cli_opt_table *tables, size_t n_tables, const char *s);

/* Prints each option of the table as "  -a, --name ARG   help" (those with help). */
void cli_opts_print(FILE *out, const cli_opt_table *t);

#endif
