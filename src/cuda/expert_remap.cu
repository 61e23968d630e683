/*
 * expert_remap.cu: --gpu-mem's expert pool kept by the device itself
 * (CLOVER_GPU_MEM_REMAP=device; backend_cuda_experts.c). The host path reads
 * each MoE layer's routing back (a sync of the pass's stream a layer, 40 a
 * decode step of the 35B-A3B, and no captured graph), maps it to slots and
 * issues the misses' copies. Here two kernels on the pass's own stream do
 * that, so a pass under --gpu-mem has no host sync and can be captured:
 *  1. k_pool_map (one block): the layer's routed experts (ids, n*k) marked
 *     in shared memory; each one resident (slot_of[l][e] >= 0) is a hit and
 *     its slot stamped with this step's tick; the misses, in ascending expert
 *     order, take free slots first, then the least recently stamped slot not
 *     stamped this step (exact LRU over slots; a block-wide arg-min a miss,
 *     ties to the lower slot), whose old owner loses it; each miss becomes a
 *     copy job (slot, expert); then rslot[j] = the slot of ids[j] (-1 for an
 *     id outside 0..E-1, which the products turn into NaN outputs as they do
 *     for a bad expert id).
 *  2. k_pool_copy: job j's slot image (every part at its slot offset, laid
 *     out by the host copy of copy mode) read over the bus from the pinned,
 *     mapped host copy and written into the slot, 64 KiB a block, 16 bytes a
 *     thread and 4 loads in flight. Blocks past the job count return.
 * The products then read the slots exactly as on the host path (moe_source:
 * slot ids for expert ids, the pool for the weights): the same bytes, so the
 * same bits as the all-device run whatever the policy or the order.
 * Launched plainly (not PDL): each waits for everything before it, and the
 * products after the copy (PDL) wait for the copy at their pdl_wait; their
 * early L2 prefetches of a slot are hints only (cuda_pdl.cuh).
 */
#include <stdint.h>

#include "cuda_check.h"
#include "cuda_expert_remap.h"
#include "cuda_mem.h"

enum { MAP_THREADS = 1024, COPY_THREADS = 256, COPY_CHUNK = 64 * 1024 };

/* (key, slot) lexicographic minimum: the smaller key, then the lower slot */
__device__ static inline void min_pair(unsigned long long &k, int &s, unsigned long long k2, int s2) {
    if (k2 < k || (k2 == k && s2 < s)) k = k2, s = s2;
}

__global__ void __launch_bounds__(MAP_THREADS, 1) k_pool_map(cuda_remap_args a, int l, const int32_t *ids, int nk,
                                                             int32_t *rslot) {
    extern __shared__ int rs[]; /* [E] this step: -2 not routed, -1 routed and not yet placed, else its slot; then
                                   the misses [min(nk, E)] */
    __shared__ unsigned long long tick, wk[MAP_THREADS / 32];
    __shared__ int n_miss, victim, ws[MAP_THREADS / 32];
    const int E = a.n_expert, tid = threadIdx.x;
    int *miss = rs + E;
    if (tid == 0) {
        tick = ++a.state[0]; /* state[0]: the step counter; state[1]: slots ever filled */
        n_miss = 0;
    }
    for (int e = tid; e < E; e += blockDim.x) rs[e] = -2;
    __syncthreads();
    for (int j = tid; j < nk; j += blockDim.x) {
        const int e = ids[j];
        if (e >= 0 && e < E) rs[e] = -1; /* every writer writes the same value */
    }
    __syncthreads();
    int32_t *slot_of = a.slot_of + (size_t)l * E;
    unsigned long long hits = 0;
    for (int e = tid; e < E; e += blockDim.x) {
        if (rs[e] != -1) continue;
        const int s = slot_of[e];
        if (s >= 0) {
            rs[e] = s;
            a.stamp[s] = tick;
            hits++;
        } else {
            miss[atomicAdd(&n_miss, 1)] = e;
        }
    }
    if (hits) atomicAdd(&a.stats[0], hits);
    __syncthreads();
    const int m = n_miss;
    if (tid == 0 && m > 1) /* ascending expert order (the slots they take do not change a bit; the pool's state
                              then does not depend on the atomics' order) */
        for (int i = 1; i < m; i++) {
            const int v = miss[i];
            int j = i - 1;
            for (; j >= 0 && miss[j] > v; j--) miss[j + 1] = miss[j];
            miss[j + 1] = v;
        }
    __syncthreads();
    for (int i = 0; i < m; i++) {
        const int e = miss[i];
        if (a.state[1] < (unsigned long long)a.n_slots) { /* a slot never filled (block-uniform: read by all) */
            if (tid == 0) victim = (int)a.state[1];
        } else { /* the least recently used slot not used by this step */
            unsigned long long k = ~0ull;
            int s = INT32_MAX;
            for (int q = tid; q < a.n_slots; q += blockDim.x) {
                const unsigned long long st = a.stamp[q];
                min_pair(k, s, st == tick ? ~0ull : st, q);
            }
            for (int o = 16; o > 0; o >>= 1)
                min_pair(k, s, __shfl_xor_sync(0xffffffffu, k, o), __shfl_xor_sync(0xffffffffu, s, o));
            if ((tid & 31) == 0) wk[tid >> 5] = k, ws[tid >> 5] = s;
            __syncthreads();
            if (tid == 0) {
                for (int w = 1; w < (int)(blockDim.x >> 5); w++) min_pair(k, s, wk[w], ws[w]);
                victim = k == ~0ull ? -1 : s; /* -1: every slot holds this step's experts (the budget's floor of
                                                 one layer's experts rules it out) */
            }
        }
        __syncthreads();
        if (tid == 0) {
            const int v = victim;
            if (v >= 0) {
                if (a.state[1] < (unsigned long long)a.n_slots) a.state[1]++;
                const int old = a.owner[v];
                if (old >= 0) {
                    a.slot_of[old] = -1;
                    a.stats[2]++;
                }
                a.owner[v] = l * E + e;
                slot_of[e] = v;
                a.stamp[v] = tick;
                a.jobs[2 * i] = v;
                a.jobs[2 * i + 1] = e;
                a.stats[1]++;
                a.stats[3] += a.img_end[l];
            } else {
                a.jobs[2 * i] = -1; /* no slot: its outputs NaN (never expected) */
                a.jobs[2 * i + 1] = e;
            }
            rs[e] = v;
        }
        __syncthreads();
    }
    if (tid == 0) *a.n_jobs = m;
    for (int j = tid; j < nk; j += blockDim.x) {
        const int e = ids[j];
        rslot[j] = e >= 0 && e < E ? rs[e] : -1;
    }
}

__global__ void __launch_bounds__(COPY_THREADS) k_pool_copy(cuda_remap_args a, int l) {
    const int j = blockIdx.y;
    if (j >= *a.n_jobs) return;
    const int v = a.jobs[2 * j], e = a.jobs[2 * j + 1];
    if (v < 0) return;
    const uint64_t end = a.img_end[l];
    const uint64_t c0 = (uint64_t)blockIdx.x * COPY_CHUNK;
    if (c0 >= end) return;
    const uint64_t c1 = c0 + COPY_CHUNK < end ? c0 + COPY_CHUNK : end;
    const char *src = a.host + a.img_off[l] + (uint64_t)e * a.img_stride[l];
    char *dst = a.pool + (uint64_t)v * a.slot_bytes;
    const uint64_t v1 = c0 + ((c1 - c0) & ~(uint64_t)15); /* the 16-byte part */
    const uint64_t step = (uint64_t)blockDim.x * 16;
    uint64_t off = c0 + (uint64_t)threadIdx.x * 16;
    for (; off + 3 * step < v1; off += 4 * step) { /* four loads over the bus in flight */
        int4 r[4];
#pragma unroll
        for (int u = 0; u < 4; u++) r[u] = __ldcs((const int4 *)(src + off + u * step));
#pragma unroll
        for (int u = 0; u < 4; u++) *(int4 *)(dst + off + u * step) = r[u];
    }
    for (; off < v1; off += step) *(int4 *)(dst + off) = __ldcs((const int4 *)(src + off));
    for (uint64_t b = v1 + threadIdx.x; b < c1; b += blockDim.x) dst[b] = src[b];
}

extern "C" size_t cuda_remap_map_smem(uint32_t n_expert, size_t nk) {
    const size_t m = nk < n_expert ? nk : n_expert;
    return (n_expert + m) * sizeof(int);
}

extern "C" int cuda_remap_layer(const cuda_remap_args *a, uint32_t layer, const int32_t *ids, size_t nk,
                                int32_t *rslot, void *stream, char *why) {
    cudaStream_t st = (cudaStream_t)stream;
    const size_t smem = cuda_remap_map_smem(a->n_expert, nk);
    if (smem > CUDA_REMAP_SMEM_MAX) {
        if (why)
            snprintf(why, CUDA_WHY, "the expert pool's map of %u experts needs more shared memory than a block has",
                     a->n_expert);
        return -1;
    }
    k_pool_map<<<1, MAP_THREADS, smem, st>>>(*a, (int)layer, ids, (int)nk, rslot);
    const size_t jobs = nk < a->n_expert ? nk : a->n_expert;
    const unsigned chunks = (unsigned)((a->img_max + COPY_CHUNK - 1) / COPY_CHUNK);
    k_pool_copy<<<dim3(chunks ? chunks : 1, (unsigned)jobs), COPY_THREADS, 0, st>>>(*a, (int)layer);
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return 0;
    if (why) cuda_note(why, CUDA_WHY, "the expert pool's map and copy", e);
    return -1;
}
