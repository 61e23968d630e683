/*
 * cli_args.c: option values are parsed strictly (the whole string must be
 * the number; ranges checked) so a typo is a usage error, never a silent 0.
 */
#include "cli_args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "default_model.h"
#include "load_progress.h"

int cli_parse_ids(const char *cmd, const char *opt, const char *s, int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) {
        fprintf(stderr, "clover %s: out of memory\n", cmd);
        return -1;
    }
    size_t k = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long x = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
        if (x < 0 || errno || x > INT32_MAX || (*end != ',' && *end != '\0')) {
            fprintf(stderr, "clover %s: %s needs comma-separated token ids (0, 1, ...), not '%s'\n", cmd, opt, s);
            free(v);
            return -1;
        }
        v[k++] = (int32_t)x;
        p = *end == ',' ? end + 1 : end;
        if (*end == ',' && !*p) {
            fprintf(stderr, "clover %s: %s ends with a comma: '%s'\n", cmd, opt, s);
            free(v);
            return -1;
        }
    }
    *ids = v;
    *n = k;
    return 0;
}

int cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X'); /* decimal, or hex with 0x (never octal) */
    unsigned long long v = *s >= '0' && *s <= '9' ? strtoull(hex ? s + 2 : s, &end, hex ? 16 : 10) : 0;
    if (!(*s >= '0' && *s <= '9') || errno || *end || v > max) {
        fprintf(stderr, "clover %s: %s needs a number up to %llu, not '%s'\n", cmd, opt, (unsigned long long)max, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_float(const char *cmd, const char *opt, const char *s, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v)) {
        fprintf(stderr, "clover %s: %s needs a number, not '%s'\n", cmd, opt, s);
        return -1;
    }
    *out = (float)v;
    return 0;
}

int cli_parse_gib(const char *cmd, const char *opt, const char *s, uint64_t *bytes) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* a budget of device memory: more than nothing, at most 64 TiB (what a device has is the backend's check) */
    if (end == s || *end || errno || !isfinite(v) || v <= 0 || v > 65536) {
        fprintf(stderr, "clover %s: %s needs a size in GiB above 0 (like 8 or 15.5), not '%s'\n", cmd, opt, s);
        return -1;
    }
    *bytes = (uint64_t)(v * 1073741824.0);
    return 0;
}

int cli_load_model(const char *cmd, const char *path, clover_model **out) {
    return cli_load_model_for(cmd, path, "-m FILE", 1, out);
}

int cli_load_model_for(const char *cmd, const char *path, const char *give, int prefetch, clover_model **out) {
    clover_error err = {0};
    int rc;
    const char *env = path ? NULL : default_model_env();
    if (env) path = env;
    if (path) {
        if (prefetch) cli_prefetch_model(path);
        rc = clover_model_load(out, path, &err);
    } else {
        size_t len;
        const void *bytes = default_model_bytes(&len);
        if (!bytes) {
            fprintf(stderr, "clover %s: this build has no embedded default model; give %s or set CLOVER_DEFAULT_MODEL\n",
                    cmd, give);
            return -1;
        }
        char label[256];
        snprintf(label, sizeof label, "(embedded default model: %s)", default_model_name());
        rc = clover_model_load_memory(out, bytes, len, label, &err);
    }
    if (rc != CLOVER_OK) {
        fprintf(stderr, "clover %s: %s%s\n", cmd, err.message,
                env ? " (the file CLOVER_DEFAULT_MODEL names; unset it for the built-in model)" : "");
        return -1;
    }
    return 0;
}
