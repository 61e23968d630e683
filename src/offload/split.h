/*
 * split.h: one pass over two backends (issue 15's --gpu-layers N): the
 * front runs layers 0..N-1 (the device), the back runs N..L-1 and the head
 * (the CPU), each row's residual stream handed from one to the other
 * (backend_config's layer range, in_hidden / out_hidden). Each part keeps
 * the state of its own layers; the split's export is the shared layout of
 * the whole model (u64 n, the front's layers, then the back's), so it moves
 * to and from any backend. Resolve runs over the split's preview.
 *
 * A sequence that fails in the back after the front committed it leaves
 * the two parts out of step: its session then fails every call until it is
 * reset (the CPU back fails a commit only where the front would have: a
 * bad id, a full context, both checked by the front first).
 */
#ifndef CLOVER_OFFLOAD_SPLIT_H
#define CLOVER_OFFLOAD_SPLIT_H

#include "backend/backend.h"

extern const backend_ops backend_split;

/* front runs layers [0, n_front), back [n_front, n_layer); 0 < n_front < n_layer. */
int split_create(const clover_model *model, const backend_config *cfg, const backend_ops *front,
                 const backend_ops *back, uint32_t n_front, backend **out, clover_error *err);

#endif
