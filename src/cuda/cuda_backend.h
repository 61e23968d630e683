/*
 * cuda_backend.h: the CUDA backend as the rest of the library sees it (only
 * in builds with CLOVER_HAVE_CUDA): the ops table, whether a model can run
 * on it here, and the device report of `clover info --device`.
 */
#ifndef CLOVER_CUDA_CUDA_BACKEND_H
#define CLOVER_CUDA_CUDA_BACKEND_H

#include <stddef.h>

#include "backend/backend.h"

/* Contract v2's table (backend_cuda.c): what the engine runs on. */
extern const backend_ops backend_cuda;

/* 0 when a device is there and the model's types and shapes are ones the
 * kernels take; else CLOVER_E_UNSUPPORTED and the reason. Uploads nothing. */
int cuda_backend_usable(const clover_model *m, clover_error *err);

/* 1 when the session's decode steps replay a captured CUDA graph (after the
 * first one), 0 when they are enqueued kernel by kernel (CLOVER_CUDA_NO_GRAPH
 * set, or the capture was refused). */
int cuda_backend_graph_used(const backend_session *s);

/* clover_device_report's text (see clover.h). */
size_t cuda_backend_report(const clover_model *m, size_t max_context, char *buf, size_t n);

#endif
