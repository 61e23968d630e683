/*
 * pick_rows.cu: the forbidden ids and the penalties before the device pick
 * (cuda_pick_rows.h). A copy kernel (rows x column tiles), then one block
 * per row patches it in the oracle's order: forbidden ids -> -inf; each
 * counted id (distinct, so one thread each) l -= count * frequency,
 * l -= presence, then the repetition rule; then, by one thread in list
 * order (duplicates add twice, as the CPU), the length ramp on every stop
 * id and the </think> ramp. Every operation is a separately rounded float32
 * operation (__fsub_rn / __fmul_rn / __fdiv_rn / __fadd_rn: no FMA), so the
 * penalised row is the CPU's bit for bit.
 */
#include <math.h>
#include <stdint.h>

#include "cuda_check.h"
#include "cuda_pick_rows.h"

extern thread_local char g_preview_err[256]; /* gdn_block.cu */
#define g_err g_preview_err

__global__ void k_pick_copy(float *dst, const float *src, const int32_t *rows, size_t V) {
    const size_t i = blockIdx.y;
    const float *s = src + (size_t)rows[i] * V;
    float *d = dst + i * V;
    for (size_t c = blockIdx.x * blockDim.x + threadIdx.x; c < V; c += (size_t)gridDim.x * blockDim.x) d[c] = s[c];
}

/* Row i's patch (dst row `row`): the forbidden ids, the counted ids, then the ramps (ramp index ri). */
__device__ __forceinline__ static void patch_row(float *row, const int32_t *forbid, size_t n_forbid,
                                                 const cuda_pick_pen &pen, int has_pen, size_t ri) {
    for (size_t t = threadIdx.x; t < n_forbid; t += blockDim.x) row[forbid[t]] = -INFINITY;
    if (!has_pen) return;
    __syncthreads();
    for (int t = threadIdx.x; t < pen.n_counts; t += blockDim.x) {
        const int32_t id = pen.count_ids[t];
        float l = row[id];
        const float f = __fmul_rn((float)pen.counts[t], pen.frequency);
        l = __fsub_rn(l, f);
        l = __fsub_rn(l, pen.presence);
        if (pen.repetition != 1.0f) l = l < 0.0f ? __fmul_rn(l, pen.repetition) : __fdiv_rn(l, pen.repetition);
        row[id] = l;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (pen.apply_len) {
            const float add = pen.ramp_len[ri];
            for (int t = 0; t < pen.n_stop; t++) row[pen.stop_ids[t]] = __fadd_rn(row[pen.stop_ids[t]], add);
        }
        if (pen.apply_think) row[pen.think_id] = __fadd_rn(row[pen.think_id], pen.ramp_think[ri]);
    }
}

__global__ void k_pick_patch(float *dst, size_t V, const int32_t *forbid, size_t n_forbid, cuda_pick_pen pen,
                             int has_pen) {
    const size_t i = blockIdx.x;
    patch_row(dst + i * V, forbid, n_forbid, pen, has_pen, i);
}

/* The grouped form: each row's source, forbidden ids and penalties from its descriptor. */
__global__ void k_pick_copy_group(float *dst, const float *src, const cuda_pick_row *rows, size_t V) {
    const size_t i = blockIdx.y;
    const float *s = src + (size_t)rows[i].src * V;
    float *d = dst + i * V;
    for (size_t c = blockIdx.x * blockDim.x + threadIdx.x; c < V; c += (size_t)gridDim.x * blockDim.x) d[c] = s[c];
}

__global__ void k_pick_patch_group(float *dst, size_t V, const cuda_pick_row *rows) {
    const size_t i = blockIdx.x;
    const cuda_pick_row *r = &rows[i];
    if (!r->n_forbid && !r->has_pen) return;
    patch_row(dst + i * V, r->forbid, (size_t)r->n_forbid, r->pen, r->has_pen, 0);
}

extern "C" int cuda_pick_prepare(float *dst, const float *src, const int32_t *rows, size_t n, size_t V,
                                 const int32_t *forbid, size_t n_forbid, const cuda_pick_pen *pen, void *stream) {
    if (n == 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    size_t tiles = (V + 255) / 256;
    dim3 g((unsigned)(tiles < 128 ? tiles : 128), (unsigned)n);
    k_pick_copy<<<g, 256, 0, st>>>(dst, src, rows, V);
    if (CUDA_LAUNCH_STATUS(g_err, "cuda_pick_prepare copy")) return -1;
    if (!n_forbid && !pen) return 0;
    cuda_pick_pen none = {};
    k_pick_patch<<<(unsigned)n, 256, 0, st>>>(dst, V, forbid, n_forbid, pen ? *pen : none, pen != NULL);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_pick_prepare patch");
}

extern "C" int cuda_pick_rows(int32_t *id, float *conf, float *work, const float *src, const int32_t *rows, size_t n,
                              size_t V, const int32_t *forbid, size_t n_forbid, const cuda_pick_pen *pen,
                              const cuda_pick_params *p, const double *u, void *stream) {
    if (n == 0) return 0;
    if (cuda_pick_prepare(work, src, rows, n, V, forbid, n_forbid, pen, stream)) return -1;
    if (cuda_pick(id, conf, work, u, n, V, p, stream)) {
        snprintf(g_err, sizeof g_err, "%s", cuda_ops_last_error());
        return -1;
    }
    return 0;
}

extern "C" int cuda_pick_rows_group(int32_t *id, float *conf, float *work, const float *src,
                                    const cuda_pick_row *rows, const cuda_pick_params *par, size_t n, size_t V,
                                    const double *u, void *stream) {
    if (n == 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    size_t tiles = (V + 255) / 256;
    dim3 g((unsigned)(tiles < 128 ? tiles : 128), (unsigned)n);
    k_pick_copy_group<<<g, 256, 0, st>>>(work, src, rows, V);
    if (CUDA_LAUNCH_STATUS(g_err, "cuda_pick_rows_group copy")) return -1;
    k_pick_patch_group<<<(unsigned)n, 256, 0, st>>>(work, V, rows);
    if (CUDA_LAUNCH_STATUS(g_err, "cuda_pick_rows_group patch")) return -1;
    if (cuda_pick_each(id, conf, work, u, par, n, V, stream)) {
        snprintf(g_err, sizeof g_err, "%s", cuda_ops_last_error());
        return -1;
    }
    return 0;
}
