/*
 * cli_opts.c: see cli_opts.h. The rewritten argv keeps the command loops
 * that already existed (each matches long names with strcmp), so the
 * table is the single place that decides what is an option, what it is
 * called, and which values are well formed.
 */
#include "cli_opts.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char **owned_argv; /* the rewritten argv (kept reachable: it lives as long as the process) */

/* 1 when s is the whole word at p (a space-separated list). */
static int alias_has(const char *list, const char *s) {
    size_t n = strlen(s);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ' ');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !memcmp(p, s, n)) return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

const cli_opt *cli_opts_find(const cli_opt_table *tables, size_t n_tables, const char *s) {
    for (size_t t = 0; t < n_tables; t++)
        for (size_t i = 0; i < tables[t].n; i++) {
            const cli_opt *o = &tables[t].opts[i];
            if (!strcmp(o->name, s) || alias_has(o->aliases, s)) return o;
        }
    return NULL;
}

static size_t distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return (size_t)-1;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

static void consider(const char *cand, size_t clen, const char *s, const char **best, size_t *best_d, char *buf) {
    char name[80];
    if (clen >= sizeof name) return;
    memcpy(name, cand, clen);
    name[clen] = 0;
    size_t d = distance(s, name);
    /* a prefix counts as close: --temp-erature, --thread */
    if (strlen(s) >= 4 && !strncmp(name, s, strlen(s))) d = d < 2 ? d : 2;
    if (d < *best_d) {
        *best_d = d;
        memcpy(buf, name, clen + 1);
        *best = buf;
    }
}

const char *cli_opts_nearest(const cli_opt_table *tables, size_t n_tables, const char *s) {
    static char buf[80];
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t t = 0; t < n_tables; t++)
        for (size_t i = 0; i < tables[t].n; i++) {
            const cli_opt *o = &tables[t].opts[i];
            consider(o->name, strlen(o->name), s, &best, &best_d, buf);
            for (const char *p = o->aliases; p && *p;) {
                const char *e = strchr(p, ' ');
                size_t k = e ? (size_t)(e - p) : strlen(p);
                if (k > 2) consider(p, k, s, &best, &best_d, buf); /* not the one-letter aliases */
                p = e ? e + 1 : NULL;
            }
        }
    size_t len = strlen(s);
    size_t limit = len / 3 > 2 ? len / 3 : 2;
    return best && best_d <= limit ? best : NULL;
}

/* 0, or -1 after reporting why v is not a value of o. */
static int check_value(const char *cmd, const cli_opt *o, const char *v) {
    int bounded = o->max > o->min;
    if (o->type == CLI_UINT) {
        char *end;
        errno = 0;
        int hex = v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
        /* strtoull would skip blanks and take a sign after "0x" ("0x-1" is 2^64 - 1): a digit must follow */
        int digit = hex ? isxdigit((unsigned char)v[2]) : *v >= '0' && *v <= '9';
        unsigned long long x = digit ? strtoull(hex ? v + 2 : v, &end, hex ? 16 : 10) : 0;
        if (!digit || errno || *end) {
            fprintf(stderr, "clover %s: %s needs a whole number, not '%s'\n", cmd, o->name, v);
            return -1;
        }
        if ((double)x < o->min || (bounded && (double)x > o->max)) {
            if (bounded)
                fprintf(stderr, "clover %s: %s %s is out of range: expected %.0f to %.0f\n", cmd, o->name, v, o->min,
                        o->max);
            else
                fprintf(stderr, "clover %s: %s %s is out of range: expected at least %.0f\n", cmd, o->name, v, o->min);
            return -1;
        }
    } else if (o->type == CLI_FLOAT) {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (end == v || *end || errno || !isfinite(x)) {
            fprintf(stderr, "clover %s: %s needs a number, not '%s'\n", cmd, o->name, v);
            return -1;
        }
        if (x < o->min || (bounded && x > o->max)) {
            if (bounded)
                fprintf(stderr, "clover %s: %s %s is out of range: expected %g to %g\n", cmd, o->name, v, o->min, o->max);
            else
                fprintf(stderr, "clover %s: %s %s is out of range: expected at least %g\n", cmd, o->name, v, o->min);
            return -1;
        }
    }
    return 0;
}

static void report_unknown(const char *cmd, const cli_opt_table *tables, size_t n_tables, const char *a) {
    const char *near = cli_opts_nearest(tables, n_tables, a);
    if (near)
        fprintf(stderr, "clover %s: unknown option '%s' (did you mean %s? clover %s --help lists them)\n", cmd, a, near,
                cmd);
    else
        fprintf(stderr, "clover %s: unknown option '%s' (clover %s --help lists them)\n", cmd, a, cmd);
}

int cli_opts_normalize(const char *cmd, const cli_opt_table *tables, size_t n_tables, int *argc, char ***argv) {
    int n = *argc;
    char **in = *argv;
    char **out = calloc((size_t)n * 2 + 1, sizeof *out);
    if (!out) {
        fprintf(stderr, "clover %s: out of memory\n", cmd);
        return -1;
    }
    int k = 0;
    out[k++] = in[0];
    for (int i = 1; i < n; i++) {
        char *a = in[i];
        if (!strcmp(a, "--")) { /* the rest is positional */
            while (i < n) out[k++] = in[i++];
            break;
        }
        if (a[0] != '-' || a[1] == '\0') { /* positional (or "-": stdin) */
            out[k++] = a;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            free(out);
            return 1;
        }
        char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        char name[128];
        const char *value = NULL;
        if (eq) {
            size_t len = (size_t)(eq - a);
            if (len >= sizeof name) len = sizeof name - 1;
            memcpy(name, a, len);
            name[len] = 0;
            value = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        const cli_opt *o = cli_opts_find(tables, n_tables, name);
        if (!o) {
            report_unknown(cmd, tables, n_tables, name);
            free(out);
            return -1;
        }
        if (o->type == CLI_FLAG) {
            if (value) {
                fprintf(stderr, "clover %s: %s takes no value (got '%s')\n", cmd, o->name, value);
                free(out);
                return -1;
            }
            out[k++] = (char *)o->name;
            continue;
        }
        if (!value) {
            if (i + 1 >= n || (o->type == CLI_STR && cli_opts_find(tables, n_tables, in[i + 1]))) {
                fprintf(stderr, "clover %s: %s needs a value%s%s (clover %s --help)\n", cmd, name, o->arg ? ": " : "",
                        o->arg ? o->arg : "", cmd);
                free(out);
                return -1;
            }
            value = in[++i];
        }
        if (check_value(cmd, o, value)) {
            free(out);
            return -1;
        }
        out[k++] = (char *)o->name;
        out[k++] = (char *)value;
    }
    out[k] = NULL;
    free(owned_argv);
    owned_argv = out;
    *argc = k;
    *argv = out;
    return 0;
}

void cli_opts_print(FILE *out, const cli_opt_table *t) {
    for (size_t i = 0; i < t->n; i++) {
        const cli_opt *o = &t->opts[i];
        if (!o->help) continue;
        char names[128];
        int len = 0;
        for (int pass = 0; pass < 3; pass++) { /* the one-letter aliases, the name, the other aliases */
            if (pass == 1) {
                len += snprintf(names + len, sizeof names - (size_t)len, "%s%s", len ? ", " : "", o->name);
                continue;
            }
            for (const char *p = o->aliases; p && *p;) {
                const char *e = strchr(p, ' ');
                int w = e ? (int)(e - p) : (int)strlen(p);
                if ((p[1] != '-') == (pass == 0) && len < (int)sizeof names)
                    len += snprintf(names + len, sizeof names - (size_t)len, "%s%.*s", len ? ", " : "", w, p);
                p = e ? e + 1 : NULL;
            }
        }
        if (o->arg && len < (int)sizeof names) snprintf(names + len, sizeof names - (size_t)len, " %s", o->arg);
        if (strlen(names) > 26)
            fprintf(out, "  %s\n  %-26s  %s\n", names, "", o->help);
        else
            fprintf(out, "  %-26s  %s\n", names, o->help);
    }
}
