/*
 * cuda_check.h: status checking for the backend's .cu files (CUDA C++ only,
 * never included from C). A failing runtime call is turned into text kept
 * per thread, so the C side can report it as one line; nothing aborts.
 */
#ifndef CLOVER_CUDA_CHECK_H
#define CLOVER_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>

/* Records "what: message (name)" for e in buf (a thread_local char[256]). */
static inline void cuda_note(char *buf, size_t n, const char *what, cudaError_t e) {
    snprintf(buf, n, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* The launch status of the kernel just enqueued: 0, or -1 with the message noted. */
#define CUDA_LAUNCH_STATUS(buf, what)                                   \
    ([&]() -> int {                                                     \
        cudaError_t e_ = cudaGetLastError();                            \
        if (e_ == cudaSuccess) return 0;                                \
        cuda_note(buf, sizeof buf, what, e_);                           \
        return -1;                                                      \
    }())

#endif
