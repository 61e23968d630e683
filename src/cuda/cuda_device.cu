/*
 * cuda_device.cu: device discovery (see cuda_device.h). Every runtime call's
 * status is checked and turned into text; nothing here aborts.
 */
#include "cuda_device.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_pdl.cuh"

static void set_why(char *why, size_t n, const char *what, cudaError_t e) {
    if (why && n) snprintf(why, n, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

extern "C" int cuda_device_count(char *why, size_t why_len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) /* no GPU, or no NVIDIA driver for one */
            snprintf(why, why_len, "no CUDA device found");
        else
            set_why(why, why_len, "no usable CUDA device", e);
        return -1;
    }
    return n;
}

extern "C" int cuda_device_query(int index, cuda_device_info *info, char *why, size_t why_len) {
    memset(info, 0, sizeof *info);
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, index);
    if (e != cudaSuccess) {
        set_why(why, why_len, "cudaGetDeviceProperties", e);
        return -1;
    }
    info->index = index;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->sm_count = p.multiProcessorCount;
    info->total_bytes = p.totalGlobalMem;
    info->l2_bytes = (size_t)p.l2CacheSize;
    info->smem_per_block_optin = p.sharedMemPerBlockOptin;
    int prev = 0;
    if ((e = cudaGetDevice(&prev)) != cudaSuccess || (e = cudaSetDevice(index)) != cudaSuccess) {
        set_why(why, why_len, "cudaSetDevice", e);
        return -1;
    }
    size_t fr = 0, tot = 0;
    e = cudaMemGetInfo(&fr, &tot);
    cudaSetDevice(prev);
    if (e != cudaSuccess) {
        set_why(why, why_len, "cudaMemGetInfo", e);
        return -1;
    }
    info->free_bytes = fr;
    return 0;
}

int cuda_sm_count(void) {
    static int sms = 0;
    int v = __atomic_load_n(&sms, __ATOMIC_RELAXED);
    if (v <= 0) {
        int dev = 0, n = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) !=
                                                      cudaSuccess || n <= 0)
            return 132;
        __atomic_store_n(&sms, n, __ATOMIC_RELAXED);
        v = n;
    }
    return v;
}

/* Programmatic dependent launch (cuda_pdl.cuh): on unless CLOVER_CUDA_PDL=0;
 * cuda_pdl_set overrides (the benches time both). Read at launch time, so a
 * graph keeps what was set when it was captured. */
static int g_pdl = -1;

int cuda_pdl_enabled(void) {
    int v = __atomic_load_n(&g_pdl, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("CLOVER_CUDA_PDL");
        v = !(e && strcmp(e, "0") == 0);
        __atomic_store_n(&g_pdl, v, __ATOMIC_RELAXED);
    }
    return v;
}

extern "C" void cuda_pdl_set(int on) { __atomic_store_n(&g_pdl, on ? 1 : 0, __ATOMIC_RELAXED); }

/* The many-row launches' PDL (pdl_launch_rows). CLOVER_CUDA_PDL_ROWS: 0 off, 1 on everywhere; 2 (unset: AUTO) on
 * except in a lone preview with the coreset; 3 also off in stacked coreset previews; 4 off on the shared expert's
 * side stream only; 5 both 2's and 4's; 6 off only for a lone coreset preview's routed experts (the grouping,
 * quantiser and expert launches after the coreset's cluster launch: pdlwhy28 found PDL's cost there), on in the
 * rest of that pass; 7 both 6's and 4's. The backend marks those launches (cuda_pdl_rows_pass: CUDA_PDL_MARK_* bits)
 * on the thread that enqueues or captures them. Why AUTO: a 32-row coreset preview ran 5.90 -> 5.52-5.55 ms with
 * the row launches' PDL off, block diffusion +1.7%, while the preview without the coreset (+0.03..+0.08 ms) and the
 * commit (+0.07..+0.09 ms) lost a little (H100, bench/device-runs/2027-01-05-sweep27). cuda_pdl_rows_set: 1/0 on/off
 * everywhere, negative: the environment again. Read at launch time, as cuda_pdl_enabled, so a graph keeps what held
 * when it was captured. */
static int g_pdl_rows = -1;
static __thread int t_pdl_rows_mark; /* the calling thread's CUDA_PDL_MARK_* bits */
static int pdl_rows_mode(void) {
    int v = __atomic_load_n(&g_pdl_rows, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("CLOVER_CUDA_PDL_ROWS");
        v = e && e[0] >= '0' && e[0] <= '7' && !e[1] ? e[0] - '0' : 2; /* one digit 0..7; anything else AUTO */
        __atomic_store_n(&g_pdl_rows, v, __ATOMIC_RELAXED);
    }
    return v;
}
int cuda_pdl_rows_enabled(void) {
    /* the marks each mode takes PDL off under (modes 0 and 1: none, the mode itself says) */
    static const int off_under[8] = {0, 0, CUDA_PDL_MARK_CORESET, CUDA_PDL_MARK_CORESET | CUDA_PDL_MARK_STACKED,
                                     CUDA_PDL_MARK_SIDE, CUDA_PDL_MARK_CORESET | CUDA_PDL_MARK_SIDE,
                                     CUDA_PDL_MARK_MOE, CUDA_PDL_MARK_MOE | CUDA_PDL_MARK_SIDE};
    const int m = pdl_rows_mode();
    return m <= 1 ? m : !(t_pdl_rows_mark & off_under[m]);
}
extern "C" void cuda_pdl_rows_set(int on) { __atomic_store_n(&g_pdl_rows, on < 0 ? -1 : on != 0, __ATOMIC_RELAXED); }
extern "C" int cuda_pdl_rows_now(void) { return cuda_pdl_enabled() && cuda_pdl_rows_enabled(); }
extern "C" int cuda_pdl_rows_pass(int mark) {
    const int old = t_pdl_rows_mark;
    t_pdl_rows_mark = mark & (CUDA_PDL_MARK_CORESET | CUDA_PDL_MARK_STACKED | CUDA_PDL_MARK_SIDE | CUDA_PDL_MARK_MOE);
    return old;
}
