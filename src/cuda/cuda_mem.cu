/*
 * cuda_mem.cu: cuda_mem.h over the CUDA runtime, each call's status checked
 * and turned into one line of text.
 */
#include <math.h>
#include <stdint.h>

#include "cuda_check.h"
#include "cuda_mem.h"

#define TRY(call, what)                      \
    do {                                     \
        cudaError_t e_ = (call);             \
        if (e_ != cudaSuccess) {             \
            if (why) cuda_note(why, CUDA_WHY, what, e_); \
            return -1;                       \
        }                                    \
    } while (0)

static inline cudaStream_t S(void *s) { return (cudaStream_t)s; }

extern "C" int cuda_use_device(int index, char *why) {
    TRY(cudaSetDevice(index), "cudaSetDevice");
    return 0;
}

extern "C" int cuda_alloc(void **p, size_t bytes, char *why) {
    *p = NULL;
    TRY(cudaMalloc(p, bytes ? bytes : 1), "cudaMalloc");
    return 0;
}

extern "C" void cuda_free(void *p) {
    if (p) cudaFree(p);
}

extern "C" int cuda_h2d(void *dst, const void *src, size_t bytes, char *why) {
    TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
    return 0;
}

extern "C" int cuda_d2h(void *dst, const void *src, size_t bytes, char *why) {
    TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
    return 0;
}

extern "C" int cuda_d2d(void *dst, const void *src, size_t bytes, void *stream, char *why) {
    TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, S(stream)), "cudaMemcpyAsync device to device");
    return 0;
}

extern "C" int cuda_h2d_async(void *dst, const void *src, size_t bytes, void *stream, char *why) {
    TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, S(stream)), "cudaMemcpyAsync host to device");
    return 0;
}

extern "C" int cuda_d2h_async(void *dst, const void *src, size_t bytes, void *stream, char *why) {
    TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, S(stream)), "cudaMemcpyAsync device to host");
    return 0;
}

extern "C" int cuda_memset(void *p, int value, size_t bytes, void *stream, char *why) {
    TRY(cudaMemsetAsync(p, value, bytes, S(stream)), "cudaMemsetAsync");
    return 0;
}

__global__ void k_fill_nan(float *p, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = __uint_as_float(0x7fc00000u);
}

extern "C" int cuda_fill_nan(float *p, size_t n, char *why) {
    if (n == 0) return 0;
    size_t g = (n + 255) / 256;
    k_fill_nan<<<(unsigned)(g > 4096 ? 4096 : g), 256>>>(p, n);
    TRY(cudaGetLastError(), "cuda_fill_nan launch");
    TRY(cudaDeviceSynchronize(), "cuda_fill_nan");
    return 0;
}

/* A refused pin or pinned allocation is not sticky, but it stays the runtime's last error, which the next
 * kernel's launch check (CUDA_LAUNCH_STATUS) would report as its own: cleared here, the caller has the reason
 * (--gpu-mem falls back to another host mode on it). */
extern "C" int cuda_host_alloc(void **p, size_t bytes, char *why) {
    *p = NULL;
    const cudaError_t e = cudaMallocHost(p, bytes ? bytes : 1);
    if (e == cudaSuccess) return 0;
    (void)cudaGetLastError();
    *p = NULL;
    if (why) cuda_note(why, CUDA_WHY, "cudaMallocHost", e);
    return -1;
}

extern "C" void cuda_host_free(void *p) {
    if (p) cudaFreeHost(p);
}

extern "C" int cuda_stream_create(void **stream, char *why) {
    cudaStream_t s = NULL;
    TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    *stream = s;
    return 0;
}

extern "C" void cuda_stream_destroy(void *stream) {
    if (stream) cudaStreamDestroy(S(stream));
}

extern "C" int cuda_stream_sync(void *stream, char *why) {
    TRY(cudaStreamSynchronize(S(stream)), "cudaStreamSynchronize");
    return 0;
}

extern "C" int cuda_event_create(void **ev, char *why) {
    cudaEvent_t e = NULL;
    *ev = NULL;
    TRY(cudaEventCreate(&e), "cudaEventCreate");
    *ev = (void *)e;
    return 0;
}

extern "C" void cuda_event_destroy(void *ev) {
    if (ev) cudaEventDestroy((cudaEvent_t)ev);
}

extern "C" int cuda_event_record(void *ev, void *stream, char *why) {
    TRY(cudaEventRecord((cudaEvent_t)ev, S(stream)), "cudaEventRecord");
    return 0;
}

extern "C" int cuda_event_sync(void *ev, char *why) {
    TRY(cudaEventSynchronize((cudaEvent_t)ev), "cudaEventSynchronize");
    return 0;
}

extern "C" int cuda_event_done(void *ev, char *why) {
    const cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) return 0;
    if (why) cuda_note(why, CUDA_WHY, "cudaEventQuery", e);
    return -1;
}

extern "C" int cuda_host_register(void *p, size_t bytes, int read_only, char *why) {
    const cudaError_t e = cudaHostRegister(p, bytes, read_only ? cudaHostRegisterReadOnly : cudaHostRegisterDefault);
    if (e == cudaSuccess) return 0;
    (void)cudaGetLastError(); /* as cuda_host_alloc */
    if (why) cuda_note(why, CUDA_WHY, "cudaHostRegister", e);
    return -1;
}

extern "C" void cuda_host_unregister(void *p) {
    if (p) cudaHostUnregister(p);
}

extern "C" int cuda_host_device_ptr(void **dev, void *p, char *why) {
    TRY(cudaHostGetDevicePointer(dev, p, 0), "cudaHostGetDevicePointer");
    return 0;
}

extern "C" int cuda_stream_wait_event(void *stream, void *ev, char *why) {
    TRY(cudaStreamWaitEvent(S(stream), (cudaEvent_t)ev, 0), "cudaStreamWaitEvent");
    return 0;
}

extern "C" int cuda_event_seconds(void *a, void *b, double *s, char *why) {
    float ms = 0.0f;
    *s = 0.0;
    TRY(cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b), "cudaEventElapsedTime");
    *s = ms * 1e-3;
    return 0;
}

extern "C" int cuda_mem_info(size_t *free_bytes, size_t *total_bytes, char *why) {
    TRY(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
    return 0;
}

extern "C" int cuda_graph_begin(void *stream, char *why) {
    TRY(cudaStreamBeginCapture(S(stream), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    return 0;
}

extern "C" int cuda_graph_end(void *stream, void **exec, char *why) {
    cudaGraph_t g = NULL;
    *exec = NULL;
    TRY(cudaStreamEndCapture(S(stream), &g), "cudaStreamEndCapture");
    cudaGraphExec_t x = NULL;
    cudaError_t e = cudaGraphInstantiate(&x, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        if (why) cuda_note(why, CUDA_WHY, "cudaGraphInstantiate", e);
        return -1;
    }
    *exec = x;
    return 0;
}

extern "C" int cuda_graph_launch(void *exec, void *stream, char *why) {
    TRY(cudaGraphLaunch((cudaGraphExec_t)exec, S(stream)), "cudaGraphLaunch");
    return 0;
}

extern "C" void cuda_graph_destroy(void *exec) {
    if (exec) cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

extern "C" int cuda_copy_bandwidth(size_t bytes, int reps, double *gbps, char *why) {
    *gbps = 0.0;
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int rc = -1;
    cudaError_t e;
    if ((e = cudaMalloc(&a, bytes)) != cudaSuccess || (e = cudaMalloc(&b, bytes)) != cudaSuccess ||
        (e = cudaMemset(a, 1, bytes)) != cudaSuccess || (e = cudaEventCreate(&e0)) != cudaSuccess ||
        (e = cudaEventCreate(&e1)) != cudaSuccess) {
        if (why) cuda_note(why, CUDA_WHY, "cuda_copy_bandwidth", e);
        goto done;
    }
    for (int r = 0; r < reps + 1; r++) { /* the first copy warms up */
        cudaEventRecord(e0);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e1);
        if ((e = cudaEventSynchronize(e1)) != cudaSuccess) {
            if (why) cuda_note(why, CUDA_WHY, "cuda_copy_bandwidth", e);
            goto done;
        }
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, e0, e1);
        double g = 2.0 * (double)bytes / (ms * 1e-3) * 1e-9;
        if (r > 0 && g > *gbps) *gbps = g;
    }
    rc = 0;
done:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return rc;
}
