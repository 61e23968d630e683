/*
 * backend_cpu_solo.h: a CPU session with a backend of its own, driven one
 * sequence per call: contract v1's shape over v2's batched calls. For the
 * golden and backend tests and bench_backend, which test one sequence at a
 * time against fixtures; the engine uses backend.h directly.
 */
#ifndef CLOVER_CPU_BACKEND_CPU_SOLO_H
#define CLOVER_CPU_BACKEND_CPU_SOLO_H

#include "backend/backend.h"

typedef struct backend_commit_out {
    float *last_logits;      /* [n_vocab] or NULL */
    float *all_logits;       /* [n][n_vocab] or NULL */
    const int32_t *targets;  /* [n] or NULL: with nll, score row r against targets[r] */
    float *nll;              /* [n] or NULL */
    float *hidden;           /* [n_layer+1][n][n_embd] or NULL */
} backend_commit_out;

typedef struct cpu_solo_ops {
    int (*session_create)(const clover_model *model, const backend_config *cfg, backend_session **out,
                          clover_error *err);
    void (*session_free)(backend_session *s); /* and its backend */
    size_t (*session_length)(const backend_session *s);
    int (*commit)(backend_session *s, const int32_t *ids, size_t n, const backend_commit_out *out,
                  backend_pass_stats *stats, clover_error *err);
    /* logits [b][n_vocab] required */
    int (*preview)(backend_session *s, const int32_t *block, size_t b, const backend_preview_opts *opts,
                   float *logits, backend_pass_stats *stats, clover_error *err);
    int (*preview_debug)(backend_session *s, float *hidden, uint8_t *kept, clover_error *err);
    void (*reset)(backend_session *s);
    size_t (*state_bytes)(const backend_session *s);
    int (*state_export)(const backend_session *s, void *buf, size_t len, clover_error *err);
    int (*state_import)(backend_session *s, const void *buf, size_t len, clover_error *err);
} cpu_solo_ops;

extern const cpu_solo_ops cpu_solo;

/* The backend a session runs on (to use v2's calls on a solo session). */
backend *backend_cpu_session_backend(backend_session *s);

#endif
