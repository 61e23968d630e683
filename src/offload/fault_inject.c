/*
 * fault_inject.c: CLOVER_FAULT_INJECT (fault_inject.h): parse the plan,
 * count the device calls, say which one fails.
 */
#include "offload/fault_inject.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

static const char *const kind_names[] = {"load", "commit", "preview", "call", "full"};

int fault_plan_parse(fault_plan *p, const char *text, clover_error *err) {
    memset(p, 0, sizeof *p);
    if (!text || !*text) return CLOVER_OK;
    const char *colon = strchr(text, ':');
    int kind = -1;
    for (int k = 0; colon && k < 5; k++)
        if (strlen(kind_names[k]) == (size_t)(colon - text) && !strncmp(text, kind_names[k], (size_t)(colon - text)))
            kind = k;
    char *end = NULL;
    unsigned long long n = 0;
    if (kind >= 0 && colon[1] >= '0' && colon[1] <= '9') {
        errno = 0;
        n = strtoull(colon + 1, &end, 10);
        if (errno) end = NULL;
    }
    bool dead = false, ok = end && n >= 1 && n <= 1000000000ull;
    if (ok && *end) {
        if (!strcmp(end, ":dead")) dead = true;
        else if (strcmp(end, ":once")) ok = false;
    }
    if (ok && kind == FAULT_LOAD && n != 1) ok = false;
    if (ok && kind == FAULT_FULL && *end) ok = false; /* no mode */
    if (!ok)
        return error_set(err, CLOVER_E_INVALID,
                         "CLOVER_FAULT_INJECT='%s': expected KIND:N[:once|:dead] with KIND load (N = 1), commit, "
                         "preview or call and N >= 1, or full:N",
                         text);
    *p = (fault_plan){.armed = true, .kind = kind, .n = (size_t)n, .dead = dead};
    return CLOVER_OK;
}

int fault_plan_from_env(fault_plan *p, clover_error *err) { return fault_plan_parse(p, getenv("CLOVER_FAULT_INJECT"), err); }

bool fault_hit(fault_plan *p, int op, clover_error *err) {
    if (!p->armed) return false;
    if (p->fired && p->dead) {
        error_set(err, CLOVER_E_DEVICE, "injected fault: the device is gone (CLOVER_FAULT_INJECT %s:%zu:dead)",
                  kind_names[p->kind], p->n);
        return true;
    }
    if (p->fired) return false;
    bool counts = p->kind == op || (p->kind == FAULT_CALL && op != FAULT_LOAD);
    if (!counts || ++p->count != p->n) return false;
    p->fired = true;
    error_set(err, CLOVER_E_DEVICE, "injected fault: %s call %zu failed (CLOVER_FAULT_INJECT)", kind_names[p->kind],
              p->n);
    return true;
}

bool fault_full(fault_plan *p, clover_error *err) {
    if (!p->armed || p->kind != FAULT_FULL || ++p->count < p->n) return false;
    error_set(err, CLOVER_E_NOMEM,
              "the device's memory holds no further session (injected: CLOVER_FAULT_INJECT full:%zu)", p->n);
    return true;
}

bool fault_state_lost(const fault_plan *p) { return p->armed && p->fired && p->dead; }
