/*
 * cuda_expert_remap.h: --gpu-mem's expert pool kept on the device
 * (expert_remap.cu; backend_cuda_experts.c holds the tables and chooses the
 * mode). One call a MoE layer, on the pass's stream, no host sync: the
 * layer's routed experts mapped to pool slots (misses placed by LRU over the
 * slots) and the misses' slot images copied from the pinned, mapped host
 * copy. C and CUDA both include it.
 */
#ifndef CLOVER_CUDA_EXPERT_REMAP_H
#define CLOVER_CUDA_EXPERT_REMAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The device tables (all device pointers but none on the host) and the pool's geometry. */
typedef struct cuda_remap_args {
    int32_t *slot_of;             /* [n_layer * n_expert]: the slot holding (layer, expert), or -1 */
    int32_t *owner;               /* [n_slots]: layer * n_expert + expert held, or -1 */
    unsigned long long *stamp;    /* [n_slots]: the step that last used the slot */
    unsigned long long *state;    /* [2]: the step counter, the slots ever filled */
    unsigned long long *stats;    /* [4]: hits, misses, evictions, bytes copied */
    int32_t *jobs;                /* [2 * n_expert]: the layer step's copies, (slot, expert) */
    int32_t *n_jobs;              /* [1] */
    const uint64_t *img_off, *img_stride, *img_end; /* [n_layer]: layer l's slot images in the host copy */
    const char *host;             /* the host copy, as the device addresses it (mapped pinned memory) */
    char *pool;                   /* [n_slots][slot_bytes] */
    uint64_t slot_bytes, img_max; /* img_max: the longest image (the copy's grid) */
    uint32_t n_expert;
    int n_slots;
} cuda_remap_args;

/* Layer `layer`'s step for nk routed slots ids[] (device): slot ids into rslot[] (device, nk), the misses'
 * copies enqueued after it. 0, or -1 with the launch error in why (CUDA_WHY bytes). */
int cuda_remap_layer(const cuda_remap_args *a, uint32_t layer, const int32_t *ids, size_t nk, int32_t *rslot,
                     void *stream, char *why);
/* The map kernel's dynamic shared memory for n_expert experts and nk routed slots; at most CUDA_REMAP_SMEM_MAX
 * (48 KiB less room for the kernel's ~400 bytes of static shared memory: static + dynamic must fit 48 KiB without
 * the opt-in attribute; n_expert <= ~6,000). */
#define CUDA_REMAP_SMEM_MAX (47u * 1024u)
size_t cuda_remap_map_smem(uint32_t n_expert, size_t nk);

#ifdef __cplusplus
}
#endif

#endif
