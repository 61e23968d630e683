/*
 * cuda_pdl.cuh: programmatic dependent launch (Hopper, sm_90) for the
 * kernels of a decode step. A decode step is a chain of ~1,000 small
 * dependent kernels; launched plainly, each one starts only after the one
 * before it has finished and flushed, so every kernel pays its launch and
 * ramp (a few microseconds) on the critical path. A kernel launched with
 * pdl_launch may start while its predecessor is still running: it does
 * what needs nothing from the predecessor (prefetch its constant weights
 * into L2), then pdl_wait() blocks until every predecessor grid has
 * completed and its writes are visible.
 *
 * The rule every kernel launched with pdl_launch keeps: before pdl_wait()
 * it reads only constant data (weights) and writes nothing. Kernels call
 * pdl_trigger() after their wait so that their own dependants may start
 * early; since a dependant always waits for full completion, where the
 * trigger sits only changes timing, never results. Launched plainly (or
 * with PDL off), pdl_wait and pdl_trigger are no-ops.
 *
 * PDL is used only on non-default streams (the backend's stream and the
 * graphs captured from it); CLOVER_CUDA_PDL=0 in the environment turns it
 * off (for A/B timing and as a safety switch).
 */
#ifndef CLOVER_CUDA_PDL_CUH
#define CLOVER_CUDA_PDL_CUH

#include <cuda_runtime.h>

__device__ __forceinline__ void pdl_wait(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger(void) { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

/* Prefetches bytes [p, p + n) into L2, the block's threads striding 128-byte lines. */
__device__ __forceinline__ void pdl_prefetch_l2(const void *p, size_t n) {
    const char *c = (const char *)p;
    for (size_t off = (size_t)threadIdx.x * 128; off < n; off += (size_t)blockDim.x * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(c + off));
}

/* 1 unless CLOVER_CUDA_PDL=0 (read once; defined in cuda_device.cu). */
int cuda_pdl_enabled(void);
/* The many-row launches (pdl_launch_rows): 1 unless CLOVER_CUDA_PDL_ROWS=0 (read once; cuda_device.cu). */
int cuda_pdl_rows_enabled(void);

/* kern<<<grid, block, smem, st>>>(args...), with programmatic stream
 * serialisation when `on`, st is not the legacy default stream and PDL is
 * on. A failed launch is left for cudaGetLastError, as <<<>>> leaves it. */
/* A launch's configuration with attribute slot `pdl` set to programmatic stream serialisation; numAttrs counts it
 * when `on`, st is not the legacy default stream and PDL is on (the caller's attributes before the slot). */
static inline cudaLaunchConfig_t pdl_config(int on, dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                            cudaLaunchAttribute *at, int pdl) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    at[pdl].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[pdl].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = (unsigned)pdl + (on && st != NULL && cuda_pdl_enabled() ? 1 : 0);
    return cfg;
}

template <typename... P, typename... A>
static inline void pdl_launch_when(int on, void (*kern)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                   A... args) {
    cudaLaunchAttribute at[1];
    const cudaLaunchConfig_t cfg = pdl_config(on, grid, block, smem, st, at, 0);
    (void)cudaLaunchKernelEx(&cfg, kern, ((P)args)...);
}

/* pdl_launch_when's launch over thread-block clusters of `cluster` blocks along x (sm_90; grid.x a multiple of it),
 * for kernels that share their blocks' shared memory (cooperative_groups::this_cluster). Returns the launch's
 * status, so that a caller can fall back to a form without clusters where the launch is refused. */
template <typename... P, typename... A>
static inline cudaError_t pdl_launch_cluster(int on, unsigned cluster, void (*kern)(P...), dim3 grid, dim3 block,
                                             size_t smem, cudaStream_t st, A... args) {
    cudaLaunchAttribute at[2];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = cluster;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    const cudaLaunchConfig_t cfg = pdl_config(on, grid, block, smem, st, at, 1);
    return cudaLaunchKernelEx(&cfg, kern, ((P)args)...);
}

/* The decode kernels' launch. */
template <typename... P, typename... A>
static inline void pdl_launch(void (*kern)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, A... args) {
    pdl_launch_when(1, kern, grid, block, smem, st, args...);
}

/* 1 where pdl_launch_rows on stream st launches with PDL. */
static inline int pdl_rows_on(cudaStream_t st) { return st != NULL && cuda_pdl_enabled() && cuda_pdl_rows_enabled(); }

/* The launches of the many-row paths (previews, commits, prompts, stacked steps: the integer products, their
 * quantiser and expert grouping, the chunked GDN), under their own switch so that one binary times them with
 * and without PDL while the decode kernels keep it. Their kernels keep the rule above (pdl_wait before any read
 * of what an earlier kernel wrote). */
template <typename... P, typename... A>
static inline void pdl_launch_rows(void (*kern)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                   A... args) {
    pdl_launch_when(cuda_pdl_rows_enabled(), kern, grid, block, smem, st, args...);
}

#endif
