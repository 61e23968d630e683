/*
 * cuda_device.h: is there a usable CUDA device, and which. Callable from C;
 * built only when CMake found a CUDA toolkit (CLOVER_HAVE_CUDA). The CUDA
 * runtime is linked statically and loads the driver itself on first use, so
 * on a machine with no driver or no GPU this answers "no device" with the
 * runtime's reason instead of failing to start.
 */
#ifndef CLOVER_CUDA_DEVICE_H
#define CLOVER_CUDA_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_device_info {
    int index;
    char name[256];
    int cc_major, cc_minor;      /* compute capability */
    int sm_count;
    size_t total_bytes, free_bytes;
    size_t l2_bytes;
    size_t smem_per_block_optin; /* the largest dynamic shared memory a block may ask for */
} cuda_device_info;

/* Number of CUDA devices (>= 0), or -1 with the reason in why (no driver, no device, ...). */
int cuda_device_count(char *why, size_t why_len);

/* Properties and current free memory of device `index`; 0 on success, -1 with why. */
int cuda_device_query(int index, cuda_device_info *info, char *why, size_t why_len);
/* The current device's SM count, read once a process (one device kind a process: the same count on every GPU of a
 * host); 132 (an H100 / H200) when it cannot be read. For kernels that size their grids by it. */
int cuda_sm_count(void);
/* Programmatic dependent launch of the decode kernels (src/cuda/cuda_pdl.cuh):
 * on by default, off with CLOVER_CUDA_PDL=0 or cuda_pdl_set(0). */
void cuda_pdl_set(int on);
/* The same for the many-row launches only (previews, commits, prompts: cuda_pdl.cuh's pdl_launch_rows): on by
 * default except in previews with the coreset (CLOVER_CUDA_PDL_ROWS: cuda_device.cu); cuda_pdl_rows_set(1 / 0)
 * on / off everywhere, negative: the environment again. */
void cuda_pdl_rows_set(int on);
/* The marks of the launches this thread enqueues or captures from now on (bits): inside a lone preview with the
 * coreset, a stacked preview with one, the shared expert's side stream, a lone coreset preview's routed experts
 * (the router to the experts' sum: the launches around the coreset's cluster launch); 0 (the default) none.
 * Returns the marks before, for the caller to restore. */
enum { CUDA_PDL_MARK_CORESET = 1, CUDA_PDL_MARK_STACKED = 2, CUDA_PDL_MARK_SIDE = 4, CUDA_PDL_MARK_MOE = 8 };
int cuda_pdl_rows_pass(int mark);
/* 1 where a many-row launch of this thread would take PDL now (tests). */
int cuda_pdl_rows_now(void);

#ifdef __cplusplus
}
#endif

#endif
