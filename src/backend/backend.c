/*
 * backend.c: the single-sequence conveniences of backend.h: one sequence
 * through the batched call, its outcome returned as the call's.
 */
#include "backend/backend.h"

#include <string.h>

int backend_commit1(const backend_ops *ops, backend *be, backend_commit_seq *seq, backend_pass_stats *stats,
                    clover_error *err) {
    ops->commit(be, seq, 1, stats);
    if (seq->rc && err) *err = seq->err;
    return seq->rc;
}

int backend_preview1(const backend_ops *ops, backend *be, backend_preview_seq *seq, backend_pass_stats *stats,
                     clover_error *err) {
    ops->preview(be, seq, 1, stats);
    if (seq->rc && err) *err = seq->err;
    return seq->rc;
}
