/*
 * cuda_switch.h: an on/off switch of a CUDA kernel form (CLOVER_CUDA_*), read from the environment on first use
 * and overridable by tests and benches. One definition, so every switch parses its variable the same way: a
 * default-off switch is on only for "1", a default-on one off only for "0".
 */
#ifndef CLOVER_CUDA_SWITCH_H
#define CLOVER_CUDA_SWITCH_H

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* *g: -1 until read (then 0 or 1). */
static inline int cuda_switch_on(int *g, const char *name, int dflt) {
    int v = __atomic_load_n(g, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv(name);
        v = dflt ? !(e && strcmp(e, "0") == 0) : (e && strcmp(e, "1") == 0);
        __atomic_store_n(g, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* 1 / 0: on / off; negative: the environment again at the next use. */
static inline void cuda_switch_set(int *g, int on) { __atomic_store_n(g, on < 0 ? -1 : on != 0, __ATOMIC_RELAXED); }

/* A number of a kernel form's knob (CLOVER_CUDA_*), read once: *g is INT_MIN until read, then the variable's
 * value (dflt when unset); the caller checks its range at each use. */
static inline int cuda_env_int(int *g, const char *name, int dflt) {
    int v = __atomic_load_n(g, __ATOMIC_RELAXED);
    if (v == INT_MIN) {
        const char *e = getenv(name);
        v = e ? atoi(e) : dflt;
        if (v == INT_MIN) v = dflt;
        __atomic_store_n(g, v, __ATOMIC_RELAXED);
    }
    return v;
}

#endif
