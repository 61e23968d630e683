/*
 * ops_pick.cu: the pick of SPEC.md 3.2 on the device (cuda_ops.h), one block
 * of 1024 threads per row, following src/engine/sampler.c step by step so the
 * same draw gives the same token:
 *  1. the raw row's first maximum (greedy's answer, and the confidence's
 *     reference) and the T = 1 sum of exp(float32(l - max)) in float64;
 *  2. sampled: values float32(l / T) of the finite logits; with top-k
 *     (0 < k < candidates) the k-th largest value is found by an MSB-first
 *     radix select over order-preserving keys (exact, any k) and every value
 *     >= it stays, as the CPU's quickselect cut does;
 *  3. z = sum exp(float32(v - max)) in float64 over the kept values, the
 *     head (top-k's set, or the values with e >= 1e-12 z) gathered into
 *     shared memory, bitonic-sorted by value descending then id ascending;
 *  4. one thread runs the CPU's top-p cut and walk over the sorted head.
 * Sums are tree-ordered instead of sequential (reassociation: a relative
 * 1e-16 in z; a draw within that of a boundary could pick the neighbour).
 * When the CPU would have to redo the pick over the whole list (head too
 * wide, or the walk/cut reaching past an incomplete head) the row gets
 * id -2 and the caller picks it on the host.
 *
 * Greedy rows, split (on unless CLOVER_CUDA_PICK_SPLIT=0; on the H200,
 * 2026-12-05, share24 and pick24: the tests equal, the same ids, decode
 * +0.5-1.1% in three A/B pairs, 315 -> 319 tok/s): step 1 is the whole of a greedy pick, and its 248k float64 exps
 * on one SM took ~107 us of a ~2.8 ms decode step on the H200 (2026-12-14
 * trace: FP64-bound). k_pick_greedy spreads the same 1024 threads' work over
 * a cluster of 8 blocks of 128 (block b runs threads 128b..128b+127 of the
 * one-block kernel, each over the same strided indices in the same order),
 * exchanges the warps' partial results through distributed shared memory,
 * and reduces them exactly as red_argmax / red_sum_d do: the same warp
 * butterflies, then the 32 warps' sums added from 0.0 in warp order, so id
 * and confidence are the one-block kernel's bits. The argmax's combination
 * (larger value, then the lower index) is order-free.
 */
#include <cooperative_groups.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "cuda_ops.h"
#include "cuda_switch.h"

namespace cg = cooperative_groups;

static thread_local char g_err[256];

enum { PICK_THREADS = 1024, PICK_HEAD = CUDA_PICK_MAX_HEAD };

/* float -> uint32 with the same order (negative values flipped). */
__device__ static inline uint32_t fkey(float f) {
    uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ static inline float fkey_inv(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ static double red_sum_d(double v, double *sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double a = 0.0;
        for (int w = 0; w < PICK_THREADS / 32; w++) a += sh[w];
        sh[0] = a;
    }
    __syncthreads();
    double r = sh[0];
    __syncthreads();
    return r;
}

/* red_argmax's rule for one candidate (ov, oi) against (v, i): the larger value, equal values the lower index */
__device__ __forceinline__ static void argmax_take(float &v, int32_t &i, float ov, int32_t oi) {
    if (ov > v || (ov == v && oi >= 0 && (i < 0 || oi < i))) {
        v = ov;
        i = oi;
    }
}

/* One thread's part of step 1 over its indices i = t0, t0 + step, ... < V, in that order: the first maximum (only
 * values > bv replace it: the first of equals stays) and, with sum_exp_strided, the sum of exp(double(row[i] - mx)).
 * Eight indices' loads (and exps) are issued before they are used, then taken in index order: the same compares and
 * the same float64 adds in the same order as the plain loop, so the same bits, with 8x the work in flight. The
 * plain loop was latency-bound: k_pick_greedy's 4 warps an SM took 96 us for 248k exps (the 2026-12-05 trace).
 * The one-block form keeps 1 (its 32 warps fill the SM's FP64 units; 8 would spill at 1024 threads' 64 registers). */
template <int PICK_UNROLL>
__device__ __forceinline__ static void max_strided(const float *row, size_t t0, size_t V, size_t step, float &bv,
                                                   int32_t &bi) {
    size_t i = t0;
    for (; i + (PICK_UNROLL - 1) * step < V; i += PICK_UNROLL * step) {
        float v[PICK_UNROLL];
#pragma unroll
        for (int u = 0; u < PICK_UNROLL; u++) v[u] = row[i + u * step];
#pragma unroll
        for (int u = 0; u < PICK_UNROLL; u++)
            if (v[u] > bv) {
                bv = v[u];
                bi = (int32_t)(i + u * step);
            }
    }
    for (; i < V; i += step)
        if (row[i] > bv) {
            bv = row[i];
            bi = (int32_t)i;
        }
}

template <int PICK_UNROLL>
__device__ __forceinline__ static double sum_exp_strided(const float *row, size_t t0, size_t V, size_t step,
                                                         float mx) {
    double z = 0.0;
    size_t i = t0;
    for (; i + (PICK_UNROLL - 1) * step < V; i += PICK_UNROLL * step) {
        double e[PICK_UNROLL];
#pragma unroll
        for (int u = 0; u < PICK_UNROLL; u++) e[u] = exp((double)(row[i + u * step] - mx));
#pragma unroll
        for (int u = 0; u < PICK_UNROLL; u++) z += e[u];
    }
    for (; i < V; i += step) z += exp((double)(row[i] - mx));
    return z;
}

/* The first maximum (value, index) over the block; NaN never wins (> compare). */
__device__ static void red_argmax(float &v, int32_t &i, float *shv, int32_t *shi) {
    for (int o = 16; o > 0; o >>= 1)
        argmax_take(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) {
        shv[threadIdx.x / 32] = v;
        shi[threadIdx.x / 32] = i;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float bv = shv[0];
        int32_t bi = shi[0];
        for (int w = 1; w < PICK_THREADS / 32; w++) argmax_take(bv, bi, shv[w], shi[w]);
        shv[0] = bv;
        shi[0] = bi;
    }
    __syncthreads();
    v = shv[0];
    i = shi[0];
    __syncthreads();
}

struct pick_shared {
    float hv[PICK_HEAD];
    int32_t hi[PICK_HEAD];
    double dsh[32];
    float fsh[32];
    int32_t ish[32];
    uint32_t hist[256];
    uint32_t count;
};

/* One row's pick, row r of logits by the whole block: k_pick (one set of parameters for every row) and
 * k_pick_each (each row its own) run this same code, so a row's bits do not depend on which launched it. */
__device__ __forceinline__ static void pick_row(int32_t *out_id, float *out_conf, const float *logits,
                                                const double *draws, size_t V, float t, int32_t top_k, float top_p,
                                                int greedy, size_t r) {
    __shared__ pick_shared S;
    const float *row = logits + r * V;
    const unsigned tid = threadIdx.x;

    /* 1. first maximum of the raw row (entries > -inf only, like sampler_argmax) */
    float bv = -INFINITY;
    int32_t bi = -1;
    max_strided<1>(row, tid, V, PICK_THREADS, bv, bi); /* ascending i per thread: the first of equals stays */
    red_argmax(bv, bi, S.fsh, S.ish);
    if (bi < 0 || !isfinite(bv)) {
        if (tid == 0) {
            out_id[r] = -1;
            out_conf[r] = NAN;
        }
        return;
    }
    const float mx = bv;
    double zc = sum_exp_strided<1>(row, tid, V, PICK_THREADS, mx);
    zc = red_sum_d(zc, S.dsh);

    int32_t pick = bi;
    if (!greedy) {
        /* 2. candidates: finite logits, value float32(l / t); m = their number, m0 = the max value */
        double mc = 0.0;
        for (size_t i = tid; i < V; i += PICK_THREADS) mc += isfinite(row[i]) ? 1.0 : 0.0;
        const size_t m = (size_t)red_sum_d(mc, S.dsh);
        const float m0 = mx / t; /* division is monotonic: the max value is the max logit's */
        bool use_cut = top_k > 0 && (size_t)top_k < m;
        float cut = -INFINITY;
        if (use_cut) {
            /* radix select of the top_k-th largest key, 8 bits at a time from the top */
            uint32_t prefix = 0, mask = 0, want = (uint32_t)top_k; /* rank from the top, 1-based */
            for (int shift = 24; shift >= 0; shift -= 8) {
                for (unsigned b = tid; b < 256; b += PICK_THREADS) S.hist[b] = 0;
                __syncthreads();
                for (size_t i = tid; i < V; i += PICK_THREADS) {
                    float l = row[i];
                    if (!isfinite(l)) continue;
                    uint32_t k = fkey(l / t);
                    if ((k & mask) == prefix) atomicAdd(&S.hist[(k >> shift) & 255u], 1u);
                }
                __syncthreads();
                if (tid == 0) {
                    uint32_t acc = 0;
                    int b = 255;
                    for (; b > 0; b--) {
                        if (acc + S.hist[b] >= want) break;
                        acc += S.hist[b];
                    }
                    S.count = ((uint32_t)b << 8) | 0; /* digit */
                    S.hist[0] = want - acc;           /* rank within the digit's bucket */
                }
                __syncthreads();
                uint32_t digit = S.count >> 8;
                want = S.hist[0];
                prefix |= digit << shift;
                mask |= 255u << shift;
                __syncthreads();
            }
            cut = fkey_inv(prefix);
        }
        /* 3. z over the kept values, then the head */
        double z = 0.0;
        for (size_t i = tid; i < V; i += PICK_THREADS) {
            float l = row[i];
            if (!isfinite(l)) continue;
            float v = l / t;
            if (use_cut && !(v >= cut)) continue;
            z += exp((double)(v - m0));
        }
        z = red_sum_d(z, S.dsh);
        double kept_c = 0.0;
        if (tid == 0) S.count = 0;
        __syncthreads();
        for (size_t i = tid; i < V; i += PICK_THREADS) {
            float l = row[i];
            if (!isfinite(l)) continue;
            float v = l / t;
            if (use_cut ? !(v >= cut) : !(exp((double)(v - m0)) >= 1e-12 * z)) continue;
            kept_c += 1.0;
            uint32_t slot = atomicAdd(&S.count, 1u);
            if (slot < PICK_HEAD) {
                S.hv[slot] = v;
                S.hi[slot] = (int32_t)i;
            }
        }
        const size_t head = (size_t)red_sum_d(kept_c, S.dsh);
        /* without top-k the list is complete when every candidate is in the head */
        const bool complete = use_cut || head == m;
        if (head > PICK_HEAD) {
            if (tid == 0) {
                out_id[r] = -2;
                out_conf[r] = NAN;
            }
            return;
        }
        size_t np = 1;
        while (np < head) np <<= 1;
        for (size_t i = head + tid; i < np; i += PICK_THREADS) {
            S.hv[i] = -INFINITY;
            S.hi[i] = INT32_MAX;
        }
        __syncthreads();
        /* bitonic sort: "before" = value descending, then id ascending */
        for (size_t k = 2; k <= np; k <<= 1) {
            for (size_t j = k >> 1; j > 0; j >>= 1) {
                for (size_t i = tid; i < np; i += PICK_THREADS) {
                    size_t l = i ^ j;
                    if (l > i) {
                        float vi = S.hv[i], vl = S.hv[l];
                        int32_t ii = S.hi[i], il = S.hi[l];
                        bool l_before = vl > vi || (vl == vi && il < ii);
                        bool up = (i & k) == 0;
                        if (up ? l_before : !l_before) {
                            S.hv[i] = vl, S.hv[l] = vi;
                            S.hi[i] = il, S.hi[l] = ii;
                        }
                    }
                }
                __syncthreads();
            }
        }
        /* 4. the CPU's walk_candidates, by one thread */
        if (tid == 0) {
            const double tp = (double)top_p;
            double u = draws[r];
            size_t keep = head;
            double zz = 1.0;
            bool cutp = false, ok = true;
            pick = -2;
            if (tp > 0.0 && tp < 1.0) {
                double before = 0.0;
                for (size_t i = 0; i < head; i++) {
                    if (before > tp) {
                        keep = i;
                        cutp = true;
                        break;
                    }
                    before += exp((double)(S.hv[i] - m0)) / z;
                }
                if (!cutp && !complete) {
                    if (!(before > tp)) ok = false;
                    cutp = true;
                }
                if (keep == 0) keep = 1;
                zz = 0.0;
                for (size_t i = 0; i < keep; i++) zz += exp((double)(S.hv[i] - m0)) / z;
            }
            if (ok) {
                for (size_t i = 0; i < keep; i++) {
                    double pi = (exp((double)(S.hv[i] - m0)) / z) / zz;
                    if (u < pi) {
                        pick = S.hi[i];
                        break;
                    }
                    u -= pi;
                }
                if (pick == -2 && (complete || cutp)) pick = S.hi[keep - 1];
            }
            S.ish[0] = pick;
        }
        __syncthreads();
        pick = S.ish[0];
    }
    if (tid == 0) {
        out_id[r] = pick;
        out_conf[r] = pick >= 0 ? (float)(exp((double)(row[pick] - mx)) / zc) : NAN;
    }
}

__global__ void __launch_bounds__(PICK_THREADS) k_pick(int32_t *out_id, float *out_conf, const float *logits,
                                                       const double *draws, size_t V, float t, int32_t top_k,
                                                       float top_p, int greedy) {
    pick_row(out_id, out_conf, logits, draws, V, t, top_k, top_p, greedy, blockIdx.x);
}

enum { PG_BLOCKS = 8, PG_THREADS = PICK_THREADS / PG_BLOCKS, PG_WARPS = PG_THREADS / 32 };

/* Greedy rows (all of them when par is NULL, else those with temperature < 1e-6): pick_row's step 1 and its
 * answer, one cluster of PG_BLOCKS blocks a row (grid (PG_BLOCKS, n)). */
__global__ void __cluster_dims__(PG_BLOCKS, 1, 1) __launch_bounds__(PG_THREADS)
    k_pick_greedy(int32_t *out_id, float *out_conf, const float *logits, size_t V, const cuda_pick_params *par) {
    cg::cluster_group cl = cg::this_cluster();
    const size_t r = blockIdx.y;
    if (par && (double)par[r].temperature >= 1e-6) return; /* sampled: k_pick_each's (the whole cluster returns) */
    __shared__ float wv[PG_WARPS];
    __shared__ int32_t wi[PG_WARPS];
    __shared__ double wz[PG_WARPS];
    const unsigned b = cl.block_rank(), lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const size_t vt = (size_t)b * PG_THREADS + threadIdx.x; /* the one-block kernel's thread */
    const float *row = logits + r * V;
    float bv = -INFINITY;
    int32_t bi = -1;
    max_strided<8>(row, vt, V, PICK_THREADS, bv, bi);
    for (int o = 16; o > 0; o >>= 1)
        argmax_take(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
    if (lane == 0) wv[warp] = bv, wi[warp] = bi;
    cl.sync();
    float mv = -INFINITY;
    int32_t mi = -1;
    for (unsigned q = 0; q < PG_BLOCKS; q++) {
        const float *qv = cl.map_shared_rank(wv, q);
        const int32_t *qi = cl.map_shared_rank(wi, q);
        for (int w = 0; w < PG_WARPS; w++) argmax_take(mv, mi, qv[w], qi[w]);
    }
    if (mi < 0 || !isfinite(mv)) { /* every block took this branch (the same partials) */
        if (b == 0 && threadIdx.x == 0) {
            out_id[r] = -1;
            out_conf[r] = NAN;
        }
        cl.sync(); /* no block leaves while another may still read its shared memory */
        return;
    }
    const float mx = mv;
    double zc = sum_exp_strided<8>(row, vt, V, PICK_THREADS, mx);
    for (int o = 16; o > 0; o >>= 1) zc += __shfl_xor_sync(0xffffffffu, zc, o);
    if (lane == 0) wz[warp] = zc;
    cl.sync();
    if (b == 0 && threadIdx.x == 0) {
        double a = 0.0; /* red_sum_d: the 32 warps' sums from 0.0 in warp order */
        for (int w = 0; w < PG_BLOCKS * PG_WARPS; w++)
            a += cl.map_shared_rank(wz, (unsigned)(w / PG_WARPS))[w % PG_WARPS];
        out_id[r] = mi;
        out_conf[r] = (float)(exp((double)(row[mi] - mx)) / a);
    }
    cl.sync();
}

/* Unless CLOVER_CUDA_PICK_SPLIT=0: greedy rows through k_pick_greedy (read once; cuda_pick_split_set overrides,
 * -1 reads the environment again; cuda_switch.h). */
static int g_split = -1;
static int split_on(void) { return cuda_switch_on(&g_split, "CLOVER_CUDA_PICK_SPLIT", 1); }
extern "C" void cuda_pick_split_set(int on) { cuda_switch_set(&g_split, on); }

/* skip_greedy: k_pick_greedy has done the greedy rows */
__global__ void __launch_bounds__(PICK_THREADS) k_pick_each(int32_t *out_id, float *out_conf, const float *logits,
                                                            const double *draws, const cuda_pick_params *par,
                                                            size_t V, int skip_greedy) {
    const cuda_pick_params p = par[blockIdx.x];
    const int greedy = !((double)p.temperature >= 1e-6);
    if (greedy && skip_greedy) return;
    pick_row(out_id, out_conf, logits, draws, V, p.temperature, p.top_k, p.top_p, greedy, blockIdx.x);
}

extern "C" int cuda_pick_each(int32_t *id, float *conf, const float *logits, const double *u,
                              const cuda_pick_params *p, size_t n, size_t V, void *stream) {
    if (n == 0) return 0;
    const int split = split_on() && n <= 65535;
    if (split) {
        k_pick_greedy<<<dim3(PG_BLOCKS, (unsigned)n), PG_THREADS, 0, (cudaStream_t)stream>>>(id, conf, logits, V, p);
        if (CUDA_LAUNCH_STATUS(g_err, "cuda_pick_each (greedy rows)")) return -1;
    }
    k_pick_each<<<(unsigned)n, PICK_THREADS, 0, (cudaStream_t)stream>>>(id, conf, logits, u, p, V, split);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_pick_each");
}

extern "C" int cuda_pick(int32_t *id, float *conf, const float *logits, const double *u, size_t n, size_t V,
                         const cuda_pick_params *p, void *stream) {
    if (n == 0) return 0;
    int greedy = !((double)p->temperature >= 1e-6);
    if (greedy && split_on() && n <= 65535) {
        k_pick_greedy<<<dim3(PG_BLOCKS, (unsigned)n), PG_THREADS, 0, (cudaStream_t)stream>>>(id, conf, logits, V,
                                                                                            NULL);
        return CUDA_LAUNCH_STATUS(g_err, "cuda_pick (greedy)");
    }
    k_pick<<<(unsigned)n, PICK_THREADS, 0, (cudaStream_t)stream>>>(id, conf, logits, u, V, p->temperature, p->top_k,
                                                                   p->top_p, greedy);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_pick");
}
