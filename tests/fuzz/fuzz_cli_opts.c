/*
 * fuzz_cli_opts.c: libFuzzer over the command line's one option parser
 * (tools/cli/cli_opts.c) with the real table of generation options that
 * `clover run` and `clover chat` share, plus a small table of every kind
 * (a flag, a text, bounded and unbounded whole numbers, a bounded number,
 * one-letter and long aliases). The input is argv: arguments separated by
 * NUL bytes. Whatever the arguments, the parser returns 0, 1 (help) or -1
 * (a usage error), never reads past an argument (ASan), and on 0 its argv is
 * what the command loops rely on, checked here by rules written out
 * independently of the parser: every option is a table's long name; a
 * value follows every valued option; a whole number is digits (or 0x and
 * hex digits) inside its range; a number is finite and inside its range;
 * nothing after "--" was rewritten. cli_opts_nearest answers NULL or a
 * name the table knows.
 *
 * The parser's messages go to stderr; here they go to /dev/null (the
 * `stderr` stream is repointed, not descriptor 2, so the sanitizers'
 * reports still reach the log).
 */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_opts.h"
#include "gen_opts.h"

#define MAX_ARGS 48

static const cli_opt kinds[] = {
    {"--flag", "-F --old-flag", CLI_FLAG, 0, 0, NULL, "a flag"},
    {"--text", "-x", CLI_STR, 0, 0, "S", "any text"},
    {"--count", "-k --n-count", CLI_UINT, 1, 4096, "N", "a bounded whole number"},
    {"--big", NULL, CLI_UINT, 0, 0, "N", "an unbounded whole number"},
    {"--ratio", "-r", CLI_FLOAT, -2, 2, "X", "a bounded number"},
    {"--floor", NULL, CLI_FLOAT, 0.5, 0, "X", "a number with a floor only"},
};

static const cli_opt *find_long(const cli_opt_table *t, size_t n, const char *s) {
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < t[k].n; i++)
            if (!strcmp(t[k].opts[i].name, s)) return &t[k].opts[i];
    return NULL;
}

/* The value rules, written out without the parser's code. */
static int value_ok(const cli_opt *o, const char *v) {
    int bounded = o->max > o->min;
    if (o->type == CLI_UINT) {
        const char *p = v;
        int hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
        if (hex) p += 2;
        if (!*p) return 0;
        double x = 0;
        for (; *p; p++) {
            if (hex ? !isxdigit((unsigned char)*p) : !isdigit((unsigned char)*p)) return 0;
            int d = isdigit((unsigned char)*p) ? *p - '0' : tolower((unsigned char)*p) - 'a' + 10;
            x = x * (hex ? 16 : 10) + d;
        }
        if (x > 18446744073709551615.0) return 0; /* strtoull would overflow */
        return x >= o->min && (!bounded || x <= o->max);
    }
    if (o->type == CLI_FLOAT) {
        char *end;
        double x = strtod(v, &end);
        return end != v && !*end && isfinite(x) && x >= o->min && (!bounded || x <= o->max);
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *sink;
    if (!sink) {
        sink = fopen("/dev/null", "w");
        if (sink) stderr = sink;
    }
    if (size > 4096) return 0;
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    /* argv: "clover", then the NUL-separated pieces, each its own allocation (ASan sees any overread) */
    char *args[MAX_ARGS + 2];
    int argc = 0;
    args[argc++] = strdup("clover");
    for (size_t i = 0; i <= size && argc < MAX_ARGS + 1;) {
        size_t len = strlen(buf + i);
        args[argc] = malloc(len + 1);
        if (args[argc]) {
            memcpy(args[argc], buf + i, len + 1);
            argc++;
        }
        i += len + 1;
    }
    args[argc] = NULL;
    int given_argc = argc;
    char *given[MAX_ARGS + 2];
    memcpy(given, args, sizeof(char *) * (size_t)(argc + 1));

    const cli_opt_table tables[2] = {{kinds, sizeof kinds / sizeof kinds[0]}, GEN_OPTS_TABLE};
    size_t n_tables = size && (data[0] & 1) ? 2 : 1; /* the small table alone, or both */
    int out_argc = argc;
    char **out = args;
    int rc = cli_opts_normalize("fuzz", tables, n_tables, &out_argc, &out);
    if (rc != 0 && rc != 1 && rc != -1) abort();
    if (rc == 1) { /* help: only when -h or --help was given */
        int help = 0;
        for (int i = 1; i < given_argc; i++) help |= !strcmp(given[i], "-h") || !strcmp(given[i], "--help");
        if (!help) abort();
    }
    if (rc == 0) {
        if (out_argc < 1 || out[out_argc] != NULL || out_argc > 2 * given_argc) abort();
        for (int i = 1; i < out_argc; i++) {
            const char *a = out[i];
            if (!strcmp(a, "--")) break; /* the rest passed through */
            if (a[0] != '-' || a[1] == '\0') continue; /* positional */
            const cli_opt *o = find_long(tables, n_tables, a);
            if (!o) abort(); /* only long names reach the command */
            if (o->type == CLI_FLAG) continue;
            if (i + 1 >= out_argc) abort(); /* a valued option lost its value */
            if (!value_ok(o, out[++i])) abort();
        }
    }
    for (int i = 1; i < given_argc; i++) {
        const char *near = cli_opts_nearest(tables, n_tables, given[i]);
        if (near && !cli_opts_find(tables, n_tables, near)) abort();
    }
    for (int i = 0; i < given_argc; i++) free(given[i]);
    free(buf);
    return 0;
}
