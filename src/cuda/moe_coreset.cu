/*
 * moe_coreset.cu: the expert coreset of SPEC.md 2.2 computed on the device,
 * the routing of every block row inside it, and the row gather of the
 * preview's head (cuda_preview.h). cpu_moe_coreset / cpu_moe_route with
 * `allowed` (src/cpu/moe_route.c) are the oracles:
 *  - coreset, one block of 8 warps: a warp per row finds the row's top-k
 *    logits (k rounds of the first maximum = the CPU's insertion top-k,
 *    ties to the lower id) and their float64 softmax probabilities (the sum
 *    by one lane in expert order); a thread per expert sums its probabilities
 *    over the rows in row order (every float64 sum in the CPU's order, so
 *    the totals differ from the CPU's only by the device exp's last-ulp
 *    rounding, given the same logits); the rank of each expert in "larger total,
 *    then lower id" order is counted in parallel; one thread walks the order
 *    with the mass before each expert, as the CPU does. No host round trip:
 *    the kept flags feed the routing kernel directly. This is the form kept
 *    behind CLOVER_CUDA_CORESET=0; by default moe_coreset_warp.cu's kernel
 *    (every row's warp at once, the same sums in the same order) runs, on
 *    a cluster of 8 blocks where the device has them (moe_coreset_cluster.cu).
 *  - routing: k_route's arithmetic (ops_small.cu: float32 softmax, the sum a
 *    block tree) with the experts outside the set excluded from the top-k;
 *    cuda_moe_coreset_route runs both in one launch where the cluster form
 *    takes it (moe_coreset_cluster.cu's fused tail), else the two calls.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "cuda_ops.h"
#include "cuda_pdl.cuh"
#include "cuda_preview.h"
#include "cuda_switch.h"

extern thread_local char g_preview_err[256]; /* gdn_block.cu */
#define g_err g_preview_err

/* 16 warps: a warp per row of a 32-row block in two rounds (4 warps / 8 rounds was 210 us a layer on the H200,
 * 8 warps / 4 rounds ~90 us: the rows' serial float64 sums and top-k rounds are the time; 32 warps would
 * spill at 64 registers); the per-warp rows of e^(l - max) in dynamic shared memory, opted in past 48 KiB. */
enum { CS_WARPS = 16, CS_THREADS = 32 * CS_WARPS, CS_SMEM_MAX = 200 * 1024 };
/* the top-k's taken mask: bit m of lane l is expert l + 32 m (cuda_moe_coreset refuses more experts) */
static_assert(CUDA_ROUTE_MAX_EXPERT <= 32 * 32, "k_coreset: one 32-bit taken mask a lane");

extern "C" size_t cuda_moe_coreset_work_bytes(size_t n, size_t k) {
    return n * k * (sizeof(int32_t) + sizeof(double)) + 16;
}

/* One block: a warp per row (its values loaded in parallel; the float64
 * softmax sum by lane 0 in expert order, as the CPU adds it), a thread per
 * expert for the totals and the ranks, one thread for the walk. */
__global__ void __launch_bounds__(CS_THREADS) k_coreset(uint8_t *allowed, uint32_t *kept_count, const float *logits,
                                                        int n, int E, int k, float top_p, int32_t *tid_,
                                                        double *tp_, int staged, int rw) {
    /* dynamic shared memory: ex [rw][E] (per row warp: e^(l - max) of its row; later the fractions),
     * totals [E], then, when staged, the rows' top-k probabilities [n*k] and ids [n*k] (else in global
     * memory: tid_ / tp_), so the per-expert sums read shared memory instead of L2 */
    extern __shared__ double sm[];
    double *exb = sm, *totals = sm + (size_t)rw * E;
    if (staged) {
        tp_ = totals + E;
        tid_ = (int32_t *)(tp_ + (size_t)n * k);
    }
    __shared__ int32_t order[CUDA_ROUTE_MAX_EXPERT];
    __shared__ double total_s;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
    double *ex_w = exb + (size_t)warp * E;
    /* 1. per row: top-k ids over the raw logits (k rounds of the first maximum: the insertion top-k's result,
     * ties to the lower id), their float64 softmax probabilities */
    for (int r = warp; warp < rw && r < n; r += rw) { /* rw row warps (the shared memory's rows) */
        const float *row = logits + (size_t)r * E;
        float fm = -INFINITY;
        for (int e = lane; e < E; e += 32) fm = fmaxf(fm, row[e]);
        for (int o = 16; o > 0; o >>= 1) fm = fmaxf(fm, __shfl_xor_sync(0xffffffffu, fm, o));
        const double mx = (double)fm;
        for (int e = lane; e < E; e += 32) ex_w[e] = exp((double)row[e] - mx);
        __syncwarp();
        double sum = 0.0;
        if (lane == 0)
            for (int e = 0; e < E; e++) sum += ex_w[e]; /* the CPU's order */
        sum = __shfl_sync(0xffffffffu, sum, 0);
        int32_t chosen[CUDA_ROUTE_MAX_K]; /* in registers: every lane holds the same ids after the reduction */
        unsigned taken = 0; /* bit m: expert lane + 32 m already chosen (E <= 32 * 32); was a scan of the
                             * chosen ids for every expert of every round, k^2 E / 32 steps a lane */
        for (int j = 0; j < k; j++) {
            float best = -INFINITY;
            int32_t bi = INT32_MAX;
            for (int e = lane, m = 0; e < E; e += 32, m++) {
                const float v = row[e];
                if (!(taken >> m & 1u) && (v > best || (v == best && e < bi))) best = v, bi = e;
            }
            for (int o = 16; o > 0; o >>= 1) {
                float ob = __shfl_xor_sync(0xffffffffu, best, o);
                int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
                if (ob > best || (ob == best && oi < bi)) best = ob, bi = oi;
            }
            chosen[j] = bi;
            if (bi >= 0 && bi < E && (bi & 31) == lane) taken |= 1u << (bi >> 5);
        }
        if (lane < k) { /* lane j writes slot j (k <= 16 < 32) */
            int32_t bi = -1;
            for (int j = 0; j < k; j++)
                if (j == lane) bi = chosen[j];
            const bool ok = bi >= 0 && bi < E;
            tid_[(size_t)r * k + lane] = ok ? bi : -1;
            tp_[(size_t)r * k + lane] = ok ? ex_w[bi] / sum : 0.0;
        }
        __syncwarp();
    }
    __syncthreads();
    /* 2. totals per expert, rows in ascending order */
    for (int e = tid; e < E; e += blockDim.x) {
        double t = 0.0;
        for (int r = 0; r < n; r++)
            for (int j = 0; j < k; j++)
                if (tid_[(size_t)r * k + j] == e) t += tp_[(size_t)r * k + j];
        totals[e] = t;
    }
    __syncthreads();
    /* 3. each expert's place in "larger total first, then lower id" order; the total in expert order */
    for (int e = tid; e < E; e += blockDim.x) {
        const double te = totals[e];
        int rank = 0;
        for (int a = 0; a < E; a++) rank += totals[a] > te || (totals[a] == te && a < e);
        order[rank] = e;
    }
    if (tid == 0) {
        double total = 0.0;
        for (int e = 0; e < E; e++) total += totals[e];
        total_s = total < 1e-9 ? 1e-9 : total;
    }
    __syncthreads();
    for (int e = tid; e < E; e += blockDim.x) exb[e] = totals[e] / total_s;
    __syncthreads();
    /* 4. the walk, as cpu_moe_coreset_from_totals. The mass before an expert never decreases (fractions >= 0;
     * once NaN it stays NaN and compares false), so after the first expert not kept none is: every flag is
     * cleared in parallel and one thread walks only the kept prefix (~8-16 experts, not all E) */
    for (int e = tid; e < E; e += blockDim.x) allowed[e] = 0;
    __syncthreads();
    if (tid == 0) {
        double before = 0.0;
        uint32_t kept = 0;
        for (int i = 0; i < E; i++) {
            const int e = order[i];
            if (!(i == 0 || before < (double)top_p)) break;
            allowed[e] = 1;
            kept++;
            before += exb[e];
        }
        *kept_count += kept;
    }
}

/* moe_coreset_warp.cu: the same flags from a block of 32 row warps (the default) */
int coreset_warp_launch(uint8_t *allowed, uint32_t *kept_count, const float *logits, size_t n, size_t E, size_t k,
                        float top_p, cudaStream_t st, char *err, size_t errn);

/* 1 unless CLOVER_CUDA_CORESET=0 (read once) or cuda_preview_set_forms said 0: the kernel of
 * moe_coreset_warp.cu, else k_coreset above */
static int g_coreset_form = -1;
static int coreset_warp_on(void) {
    if (g_coreset_form < 0) {
        const char *v = getenv("CLOVER_CUDA_CORESET");
        g_coreset_form = !(v && strcmp(v, "0") == 0);
    }
    return g_coreset_form;
}

void gdn_block_set_form(int fused); /* gdn_block.cu */

extern "C" void cuda_preview_set_forms(int coreset, int gdn_block) {
    g_coreset_form = coreset;
    gdn_block_set_form(gdn_block);
}

extern "C" int cuda_moe_coreset(uint8_t *allowed, uint32_t *kept_count, const float *logits, size_t n,
                                size_t n_expert, size_t k, float top_p, void *work, void *stream) {
    if (n_expert > CUDA_ROUTE_MAX_EXPERT) {
        snprintf(g_err, sizeof g_err, "cuda_moe_coreset: %zu experts, at most %d", n_expert, CUDA_ROUTE_MAX_EXPERT);
        return -1;
    }
    if (k > n_expert) k = n_expert;
    if (coreset_warp_on()) {
        if (coreset_warp_launch(allowed, kept_count, logits, n, n_expert, k, top_p, (cudaStream_t)stream, g_err,
                                sizeof g_err))
            return -1;
        return CUDA_LAUNCH_STATUS(g_err, "cuda_moe_coreset");
    }
    double *tp = (double *)work;                    /* [n][k] */
    int32_t *ti = (int32_t *)(tp + n * k);          /* [n][k] */
    /* as many row warps as fit in shared memory (32 for 256 experts; fewer for large expert counts) */
    int rw = CS_WARPS;
    while (rw > 1 && ((size_t)rw + 1) * n_expert * sizeof(double) > CS_SMEM_MAX) rw /= 2;
    size_t base = ((size_t)rw + 1) * n_expert * sizeof(double), stage = n * k * (sizeof(double) + sizeof(int32_t));
    const int staged = base + stage <= CS_SMEM_MAX; /* beside the static order[] (4 KiB) */
    if (base > CS_SMEM_MAX) {
        snprintf(g_err, sizeof g_err, "cuda_moe_coreset: %zu experts need %zu bytes of shared memory", n_expert, base);
        return -1;
    }
    static int attr_set = 0;
    if (!attr_set) {
        cudaFuncSetAttribute(k_coreset, cudaFuncAttributeMaxDynamicSharedMemorySize, CS_SMEM_MAX);
        attr_set = 1;
    }
    k_coreset<<<1, CS_THREADS, base + (staged ? stage : 0), (cudaStream_t)stream>>>(
        allowed, kept_count, logits, (int)n, (int)n_expert, (int)k, top_p, ti, tp, staged, rw);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_moe_coreset");
}

/* moe_coreset_cluster.cu: the coreset and the routing inside it in one cluster launch; 0 launched, 1 not taken */
int coreset_route_cluster_launch(uint8_t *allowed, uint32_t *kept_count, int32_t *idx, float *wts,
                                 const float *logits, int n, int E, int k, float top_p, cudaStream_t st);

extern "C" int cuda_moe_coreset_route(uint8_t *allowed, uint32_t *kept_count, int32_t *idx, float *wts,
                                      const float *logits, size_t n, size_t n_expert, size_t k, float top_p,
                                      void *work, void *stream) {
    if (n_expert > CUDA_ROUTE_MAX_EXPERT || k > CUDA_ROUTE_MAX_K || k > n_expert || n > INT32_MAX) {
        snprintf(g_err, sizeof g_err, "cuda_moe_coreset_route: %zu rows, %zu experts, k %zu", n, n_expert, k);
        return -1;
    }
    if (coreset_warp_on() && coreset_route_cluster_launch(allowed, kept_count, idx, wts, logits, (int)n,
                                                          (int)n_expert, (int)k, top_p, (cudaStream_t)stream) == 0)
        return CUDA_LAUNCH_STATUS(g_err, "cuda_moe_coreset_route");
    if (cuda_moe_coreset(allowed, kept_count, logits, n, n_expert, k, top_p, work, stream)) return -1;
    if (cuda_moe_route_allowed(idx, wts, logits, allowed, n, n_expert, k, stream)) {
        snprintf(g_err, sizeof g_err, "%s", cuda_ops_last_error());
        return -1;
    }
    return 0;
}

int coreset_route_multi_launch(uint8_t *allowed, size_t stride, uint32_t *kept_count, int32_t *idx, float *wts,
                               const float *logits, const cuda_route_seqs *m, size_t n_rows, size_t E, size_t k,
                               cudaStream_t st, char *err, size_t errn); /* moe_coreset_warp.cu */

extern "C" int cuda_moe_coreset_route_multi(uint8_t *allowed, size_t stride, uint32_t *kept_count, int32_t *idx,
                                            float *wts, const float *logits, const cuda_route_seqs *m, size_t n_rows,
                                            size_t n_expert, size_t k, void *stream) {
    if (!coreset_warp_on() || m->n_seq <= 0 || m->n_seq > CUDA_ROUTE_SEQS_MAX) return 1;
    if (n_expert > CUDA_ROUTE_MAX_EXPERT || k > CUDA_ROUTE_MAX_K || k > n_expert) {
        snprintf(g_err, sizeof g_err, "cuda_moe_coreset_route_multi: %zu experts, k %zu", n_expert, k);
        return -1;
    }
    for (int i = 0; i < m->n_seq; i++)
        if (m->seq[i].row0 < 0 || m->seq[i].n < 0 || (size_t)m->seq[i].row0 + (size_t)m->seq[i].n > n_rows) {
            snprintf(g_err, sizeof g_err, "cuda_moe_coreset_route_multi: sequence %d's rows %d + %d past %zu", i,
                     (int)m->seq[i].row0, (int)m->seq[i].n, n_rows);
            return -1;
        }
    if (n_rows == 0) return 0;
    if (coreset_route_multi_launch(allowed, stride, kept_count, idx, wts, logits, m, n_rows, n_expert, k,
                                   (cudaStream_t)stream, g_err, sizeof g_err))
        return -1;
    return CUDA_LAUNCH_STATUS(g_err, "cuda_moe_coreset_route_multi");
}

static int g_stack_route = -1;
extern "C" int cuda_stack_route_on(void) { return cuda_switch_on(&g_stack_route, "CLOVER_CUDA_STACK_ROUTE", 1); }
extern "C" void cuda_stack_route_set(int on) { cuda_switch_set(&g_stack_route, on); }

__global__ void k_gather(float *dst, const float *src, const int32_t *rows, size_t width) {
    const size_t r = blockIdx.y;
    pdl_wait(); /* src and rows are earlier kernels' (cuda_pdl.cuh) */
    pdl_trigger();
    const float *s = src + (size_t)rows[r] * width;
    for (size_t c = blockIdx.x * blockDim.x + threadIdx.x; c < width; c += (size_t)gridDim.x * blockDim.x)
        dst[r * width + c] = s[c];
}

extern "C" int cuda_gather_rows(float *dst, const float *src, const int32_t *rows, size_t n, size_t width,
                                void *stream) {
    if (n == 0) return 0;
    dim3 g((unsigned)((width + 255) / 256 < 64 ? (width + 255) / 256 : 64), (unsigned)n);
    pdl_launch_rows(k_gather, g, dim3(256), 0, (cudaStream_t)stream, dst, src, rows, width);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_gather_rows");
}

__global__ void k_mark(uint8_t *used, const int32_t *ids, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    pdl_wait(); /* the ids are the router's (cuda_pdl.cuh) */
    pdl_trigger();
    if (i < n) used[ids[i]] = 1;
}

extern "C" int cuda_mark_experts(uint8_t *used, const int32_t *ids, size_t n_slots, void *stream) {
    if (n_slots == 0) return 0;
    pdl_launch_rows(k_mark, dim3((unsigned)((n_slots + 255) / 256)), dim3(256), 0, (cudaStream_t)stream, used, ids,
                    n_slots);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_mark_experts");
}
