/*
 * matmul_mmv_stream.cu: the persistent, double-buffered form of a dense
 * decode product (cuda_matmul_decode, _decode_glu, _decode_multi) when it has
 * more groups of 8 output rows than the GPU holds blocks (the output head's
 * 31,040 groups; a GDN in-projection's 1,544).
 *
 * Why: mmv_kernel gives a thread block one group: it stages the group's
 * weight rows (cp.async), quantises the activation rows, waits, dots, exits.
 * While a block computes, nothing of its own is in flight, and every block
 * quantises the rows again; the H200 run of 2026-12-07 (bench_cuda_decode)
 * measured those products at 25-39% of the copy bandwidth (the head 540 MB
 * in 331 us). Here a block is resident for the whole product: the rows are
 * quantised once, and group g+grid's weights are copied into the other
 * buffer while group g is dotted, so each SM keeps a group's bytes in flight
 * behind its compute.
 *
 * Bits: each output is computed by mmv_row and mmv_reduce on its staged row
 * exactly as mmv_kernel computes it with staging on (the same functions, the
 * same 8-bit rows); only which block does which group, and when its bytes
 * arrive, changes. test_cuda_matmul's test_mmv_stream checks it bit for bit.
 *
 * On by default since its H200 runs (bench/device-runs/2026-12-07-mmvs: 48
 * cases bit for bit against mmv_kernel, memcheck and racecheck clean; the
 * output head 331.5 -> 238.3 us, a GDN in-projection 19.0 -> 15.9 us, the
 * attention's q/k/v 15.1 -> 12.8 us; a decode step 4.20 -> 4.00 ms);
 * CLOVER_CUDA_MMV_STREAM=0 (or cuda_mmv_stream_set(0)) is the way back.
 */
#include <stdlib.h>
#include <string.h>

#include "matmul_mmv.cuh"

enum { MMVS_SMEM_MAX = 100 * 1024 }; /* two blocks an SM at least (228 KB) */

/* A group's matrix, output rows and destination (the segment of a multi-product). */
typedef struct mmvs_group {
    const uint8_t *w, *w2;
    float *y;
    int n_out, vec, o0, nrow;
} mmvs_group;

__device__ __forceinline__ mmvs_group mmvs_group_of(const mmv_params &p, int g, int rb) {
    mmvs_group r = {p.w, p.w2, p.y, p.n_out, p.vec, 0, 0};
    int bx = g;
    if (p.n_seg > 1) {
        int sg = 0;
        while (sg + 1 < p.n_seg && bx >= p.seg_blk0[sg + 1]) sg++;
        r.w = p.seg_w[sg], r.n_out = p.seg_n_out[sg], r.y = p.seg_y[sg], r.vec = p.seg_vec[sg];
        bx -= p.seg_blk0[sg];
    }
    r.o0 = bx * rb;
    r.nrow = r.n_out - r.o0 < rb ? r.n_out - r.o0 : rb;
    return r;
}

/* Copies group g's weight rows (then its up rows at buf + half) into buf, as one cp.async group. */
__device__ __forceinline__ void mmvs_fetch(const mmv_params &p, int g, int rb, uint8_t *buf, bool glu) {
    const mmvs_group gr = mmvs_group_of(p, g, rb);
    const size_t span = (size_t)gr.nrow * p.row_bytes, off = (size_t)gr.o0 * p.row_bytes;
    mmv_copy(buf, gr.w + off, span);
    if (glu) mmv_copy(buf + (size_t)rb * p.row_bytes, gr.w2 + off, span);
    asm volatile("cp.async.commit_group;" ::: "memory");
}

/* Registers: mmv_kernel's caps, but 3 blocks an SM for the GLU forms (their two 2 x 17 KB buffers allow no more
 * at n_in 2048; at 4 the Q4_K form spills). */
#define MMVS_MIN_BLOCKS(T, FUSE, GLU) ((GLU) ? 3 : MMV_MIN_BLOCKS(T, FUSE, GLU))
template <int T, bool FUSE, bool GLU>
__global__ void __launch_bounds__(32 * MMV_WARPS, MMVS_MIN_BLOCKS(T, FUSE, GLU)) mmvs_kernel(mmv_params p) {
    extern __shared__ __align__(16) uint8_t xsm[]; /* [x rows, x_smem bytes][buffer 0][buffer 1] */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int RPW = GLU ? 1 : p.rpw, RB = MMV_WARPS * RPW;
    const int G = p.n_seg > 1 ? p.n_blocks : (p.n_out + RB - 1) / RB;
    uint8_t *buf0 = xsm + p.x_smem;
    int g = blockIdx.x;
    if (g >= G) return; /* block-uniform; the launch gives every block a group */
    mmvs_fetch(p, g, RB, buf0, GLU); /* weights do not depend on the previous kernel (cuda_pdl.cuh) */
    pdl_wait();
    pdl_trigger();
    const int ns = p.n_slots; /* dense: the slots are the rows */
    int slots[MMV_MAX];
#pragma unroll
    for (int i = 0; i < MMV_MAX; i++) slots[i] = i;
    const uint8_t *xr[MMV_MAX];
    if (FUSE) {
        mmv_fuse_rows<T>(p, slots, ns, xsm);
#pragma unroll
        for (int i = 0; i < MMV_MAX; i++) xr[i] = xsm + (size_t)(i < ns ? i : 0) * p.x_bytes;
    } else {
#pragma unroll
        for (int i = 0; i < MMV_MAX; i++) xr[i] = (const uint8_t *)p.x + (size_t)(i < ns ? i : 0) * p.x_bytes;
    }
    const size_t half = (size_t)RB * p.row_bytes;
#pragma unroll 1
    for (int it = 0; g < G; g += gridDim.x, it++) {
        uint8_t *cur = buf0 + (size_t)(it & 1) * p.buf_bytes, *nxt = buf0 + (size_t)((it + 1) & 1) * p.buf_bytes;
        const int gn = g + gridDim.x;
        if (gn < G) { /* nxt was last read before the previous iteration's closing barrier */
            mmvs_fetch(p, gn, RB, nxt, GLU);
            asm volatile("cp.async.wait_group 1;" ::: "memory"); /* this thread's copies of cur landed */
        } else {
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        }
        __syncthreads(); /* everyone's copies of cur (and, the first time, the fused rows) */
        const mmvs_group gr = mmvs_group_of(p, g, RB);
        const int ow = gr.o0 + warp * RPW;
#pragma unroll 1
        for (int j = 0; j < RPW; j++) {
            const int o = ow + j;
            if (o >= gr.n_out) break;
            const size_t soff = (size_t)(o - gr.o0) * p.row_bytes;
            float acc[MMV_MAX], acc2[GLU ? MMV_MAX : 1];
#pragma unroll
            for (int i = 0; i < MMV_MAX; i++) acc[i] = 0.0f;
#pragma unroll
            for (int i = 0; i < (GLU ? MMV_MAX : 1); i++) acc2[i] = 0.0f;
            mmv_row_any<T>(p.lane_q8, cur + soff, p.n_in, xr, ns, gr.vec, acc);
            if (GLU) mmv_row_any<T>(p.lane_q8, cur + half + soff, p.n_in, xr, ns, gr.vec, acc2);
#pragma unroll
            for (int i = 0; i < MMV_MAX; i++) {
                if (i >= ns) break;
                float v = mmv_reduce_any<T>(p.lane_q8, acc[i]);
                if (GLU) {
                    float u = mmv_reduce_any<T>(p.lane_q8, acc2[i]);
                    v = mmv_swiglu(v, u);
                }
                if (lane == 0) gr.y[(size_t)i * gr.n_out + o] = v;
            }
        }
        __syncthreads(); /* cur is refilled two iterations on */
    }
}

/* 0 off, 1 on with a grid of every resident block (the default), N > 1 on with at most N blocks (tests: many
 * groups a block). CLOVER_CUDA_MMV_STREAM sets it when read first. */
static int g_stream = -1;
static int mmvs_setting(void) {
    int v = __atomic_load_n(&g_stream, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("CLOVER_CUDA_MMV_STREAM");
        v = e ? atoi(e) : 1;
        if (v < 0) v = 0;
        __atomic_store_n(&g_stream, v, __ATOMIC_RELAXED);
    }
    return v;
}
extern "C" void cuda_mmv_stream_set(int v) { __atomic_store_n(&g_stream, v < 0 ? 0 : v, __ATOMIC_RELAXED); }

/* Resident blocks a device holds of this kernel at this shared memory (cached per kernel: its shared memory is
 * a function of n_in and the rows, few values a model). */
template <int T, bool FUSE, bool GLU>
static int mmvs_grid(size_t smem) {
    static int attr_ok = 0, sms = 0;
    static size_t last_smem = 0;
    static int last_blocks = 0;
    void (*k)(mmv_params) = mmvs_kernel<T, FUSE, GLU>;
    if (!attr_ok) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, MMVS_SMEM_MAX) != cudaSuccess) {
            (void)cudaGetLastError(); /* not sticky: mmv_kernel runs instead */
            return 0;
        }
        attr_ok = 1;
    }
    if (smem == last_smem && last_blocks) return last_blocks;
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 32 * MMV_WARPS, smem) != cudaSuccess || per_sm < 1) {
        (void)cudaGetLastError();
        return 0;
    }
    last_smem = smem, last_blocks = per_sm * sms;
    return last_blocks;
}

template <int T, bool FUSE, bool GLU>
static int mmvs_go(const mmv_params *p, size_t smem, int groups, int cap, cudaStream_t st) {
    const int resident = mmvs_grid<T, FUSE, GLU>(smem);
    const int grid = cap > 1 && cap < resident ? cap : resident;
    if (grid < 1 || groups <= grid) return 0; /* one group a block: mmv_kernel's form is as good */
    pdl_launch(mmvs_kernel<T, FUSE, GLU>, dim3((unsigned)grid), dim3(32 * MMV_WARPS), smem, st, *p);
    return 1;
}

template <int T>
static int mmvs_type(const mmv_params *p, size_t smem, int groups, int cap, cudaStream_t st) {
    const bool glu = p->w2 != NULL;
    if (p->fused) return glu ? mmvs_go<T, true, true>(p, smem, groups, cap, st) : mmvs_go<T, true, false>(p, smem, groups, cap, st);
    return glu ? mmvs_go<T, false, true>(p, smem, groups, cap, st) : mmvs_go<T, false, false>(p, smem, groups, cap, st);
}

int mmv_stream_launch(uint32_t type, mmv_params *p, size_t x_smem, cudaStream_t st) {
    const int set = mmvs_setting();
    if (!set || p->ids != NULL || !mm_is_int(type)) return 0;
    uintptr_t al = (uintptr_t)p->w | (uintptr_t)p->w2 | (uintptr_t)p->row_bytes;
    for (int i = 0; i < p->n_seg; i++) al |= (uintptr_t)p->seg_w[i];
    if (al & 15) return 0; /* cp.async moves 16-byte pieces */
    const int rb = MMV_WARPS * (p->w2 ? 1 : p->rpw);
    const size_t buf = (size_t)rb * p->row_bytes * (p->w2 ? 2 : 1), xs = (x_smem + 15) / 16 * 16;
    const size_t smem = xs + 2 * buf;
    if (smem > MMVS_SMEM_MAX) return 0;
    const int groups = p->n_seg > 1 ? p->n_blocks : (p->n_out + rb - 1) / rb;
    p->stage = 1;
    p->lane_q8 = mmv_lane_enabled();
    p->x_smem = (unsigned)xs;
    p->buf_bytes = (unsigned)buf;
    int ok = 0;
    switch (type) {
    case MM_Q8_0: ok = mmvs_type<MM_Q8_0>(p, smem, groups, set, st); break;
    case MM_Q4_K: ok = mmvs_type<MM_Q4_K>(p, smem, groups, set, st); break;
    case MM_Q5_K: ok = mmvs_type<MM_Q5_K>(p, smem, groups, set, st); break;
    case MM_Q6_K: ok = mmvs_type<MM_Q6_K>(p, smem, groups, set, st); break;
    default: break;
    }
    if (!ok) p->stage = 0, p->lane_q8 = 0, p->x_smem = 0, p->buf_bytes = 0; /* mmv_kernel plans its own */
    return ok;
}
