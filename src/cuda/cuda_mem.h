/*
 * cuda_mem.h: the runtime calls the C side of the CUDA backend (and the C
 * tests) need, as plain C: device memory, copies, streams, graphs. Every
 * function returns 0, or -1 with the runtime's reason in why (one line:
 * "what: message (cudaErrorName)"). Streams and graphs are opaque void *.
 */
#ifndef CLOVER_CUDA_MEM_H
#define CLOVER_CUDA_MEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { CUDA_WHY = 256 };

/* Selects device `index` for the calling thread. */
int cuda_use_device(int index, char *why);
int cuda_alloc(void **p, size_t bytes, char *why);
void cuda_free(void *p); /* NULL is fine; errors are ignored (teardown) */
int cuda_h2d(void *dst, const void *src, size_t bytes, char *why);
int cuda_d2h(void *dst, const void *src, size_t bytes, char *why);
int cuda_d2d(void *dst, const void *src, size_t bytes, void *stream, char *why);
int cuda_h2d_async(void *dst, const void *src, size_t bytes, void *stream, char *why);
int cuda_d2h_async(void *dst, const void *src, size_t bytes, void *stream, char *why);
int cuda_memset(void *p, int value, size_t bytes, void *stream, char *why);
/* Fills n floats with the bit pattern of a quiet NaN (tests' poisoning). */
int cuda_fill_nan(float *p, size_t n, char *why);
/* Pinned host memory (fast, asynchronous copies). */
int cuda_host_alloc(void **p, size_t bytes, char *why);
void cuda_host_free(void *p);

int cuda_stream_create(void **stream, char *why);
void cuda_stream_destroy(void *stream);
int cuda_stream_sync(void *stream, char *why);
/* Events: the device time between two points of a stream (after a sync). */
int cuda_event_create(void **ev, char *why);
void cuda_event_destroy(void *ev);
int cuda_event_record(void *ev, void *stream, char *why);
int cuda_event_seconds(void *a, void *b, double *s, char *why); /* from a to b, both completed */
/* Blocks until the work before ev's last record is done (at once when never recorded). */
int cuda_event_sync(void *ev, char *why);
/* 1 when that work is done (or ev was never recorded), 0 while it runs, -1 on an error. */
int cuda_event_done(void *ev, char *why);

/* Pins host memory the caller already has (a range of the mapped model file: --gpu-mem's expert copies go
 * over the link from there without a staging copy); read_only: the range may be a read-only mapping. */
int cuda_host_register(void *p, size_t bytes, int read_only, char *why);
void cuda_host_unregister(void *p); /* errors ignored (teardown) */
/* The device's address of registered (or cuda_host_alloc'd) host memory p: 0, or -1 with why. */
int cuda_host_device_ptr(void **dev, void *p, char *why);
/* Work enqueued on `stream` after this waits for `ev` (recorded on another stream). */
int cuda_stream_wait_event(void *stream, void *ev, char *why);

/* Free and total memory of the current device. */
int cuda_mem_info(size_t *free_bytes, size_t *total_bytes, char *why);

/* Graph capture of the work a caller enqueues on `stream` between begin and
 * end, then replay: one launch for a whole decode step. */
int cuda_graph_begin(void *stream, char *why);
int cuda_graph_end(void *stream, void **exec, char *why); /* instantiates */
int cuda_graph_launch(void *exec, void *stream, char *why);
void cuda_graph_destroy(void *exec);

/* Device-to-device copy bandwidth over a buffer of `bytes`, best of reps,
 * counted as (bytes read + bytes written) / time, in GB/s. */
int cuda_copy_bandwidth(size_t bytes, int reps, double *gbps, char *why);

#ifdef __cplusplus
}
#endif

#endif
