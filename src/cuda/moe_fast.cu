/*
 * moe_fast.cu: a cheaper form of the routed experts' Q4_K / Q5_K decode
 * product (cuda_moe_decode and _glu take it at 1..8 rows, cuda_moe_dec32 and
 * _glu at 1..32, when cuda_moe_fast_enabled(): on unless
 * CLOVER_CUDA_MOE_FAST=0), with mmv_kernel's bits exactly.
 *
 * Why: at 1 row mmv_kernel's experts run in one wave that first stages its
 * weights and then dots them; the dot (16 lanes a super-block, the sub-block
 * sums of x redone by dp4a in every block, 8 shuffle rounds a super-block and
 * row) costs ~0.5 warp-instructions a weight byte, so the wave's compute
 * comes after its loads instead of hiding under them (H200 run of
 * 2026-12-09-moe24: instruction-bound, DRAM ~10%).
 * Here a super-block takes 4 lanes (a 32-byte chunk of codes each, 16-byte
 * shared-memory loads, 2 shuffle rounds), and the sums of x over each
 * 32-value sub-block (the dmin * m term) are made once per row when the row
 * is quantised. The 8-bit rows are matmul_act.cu's codes (mm_act_block<8>),
 * laid out in shared memory with the 16-byte groups swizzled so that a
 * quarter-warp's loads hit distinct banks.
 * Bits: a super-block's integer sums are exact (any grouping gives the same
 * integers), its term is formed by the expression mmv_block uses, and the
 * terms are stored then added in mmv_row + mmv_reduce's order: even
 * super-blocks in turn from 0.0f, odd ones likewise, then even + odd.
 * Each warp stages its own weight rows with cp.async before the block
 * quantises its rows (gate then up as two commit groups). The down product
 * (no up weights) also asks L2 for its expert's rows before its wait on the
 * preceding kernel (a hint; see moef_kernel).
 */
#include <stdlib.h>
#include <string.h>

#include "matmul_mmv.cuh"

typedef struct moef_params {
    const uint8_t *w, *w2; /* w2: GLU's up weights */
    size_t row_bytes, expert_stride;
    int n_out, n_in, nb; /* nb: super-blocks a row */
    const int32_t *ids;
    int n_slots, k, x_per_slot, n_expert;
    const float *xf;
    float *y;
    int rpw;              /* output rows a warp */
    int cap;              /* slots a group (the 8-bit rows the shared memory holds) */
    unsigned x_row;       /* shared bytes of one 8-bit row: codes, then 8 nb sub-block sums, then nb d */
    unsigned w_off, w_warp; /* the staged weights: at w_off, w_warp bytes a warp */
    unsigned t_off, t_warp; /* the terms: at t_off, t_warp bytes a warp */
    unsigned i_off;         /* the routing's n_slots ids */
} moef_params;

/* The swizzle: 16-byte group gi (0..15) of super-block b's codes lies at group phys(gi, b). Lane (b, c) of the dot
 * reads groups 4c..4c+3; with this map the 8 lanes of a quarter-warp (2 super-blocks, 4 chunks) read 8 distinct
 * bank groups for each of its 4 loads. */
__device__ __forceinline__ int moef_phys(int gi, int b) {
    const int s = ((gi >> 3) & 1) | ((b & 1) << 1);
    return (gi & ~3) | ((gi & 3) ^ s);
}

template <int T, bool GLU>
__global__ void __launch_bounds__(32 * MMV_WARPS, 4) moef_kernel(moef_params p) {
    extern __shared__ __align__(16) uint8_t sm[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int RB = MMV_WARPS * p.rpw, NOUT = p.n_out, nb = p.nb;
    const int o0 = blockIdx.x * RB, ow = o0 + warp * p.rpw;
    const int nrw = NOUT - ow < p.rpw ? (NOUT - ow > 0 ? NOUT - ow : 0) : p.rpw; /* this warp's rows */
    if (!GLU) {
        /* The down product's routing was written before the gate + up product that precedes it (cuda_pdl.cuh)
         * ran, so its expert is most likely known now: start the block's rows towards L2 while that product
         * finishes. Only a hint: the id is read through L2 (no L1 line left stale for the read after the wait)
         * and clamped; a stale one prefetches another expert's rows, and everything is read again after
         * pdl_wait. */
        int e0 = __ldcg(p.ids + blockIdx.y);
        e0 = e0 < 0 ? 0 : e0 >= p.n_expert ? p.n_expert - 1 : e0;
        const int nr = NOUT - o0 < RB ? NOUT - o0 : RB;
        pdl_prefetch_l2(p.w + (size_t)e0 * p.expert_stride + (size_t)o0 * p.row_bytes, (size_t)nr * p.row_bytes);
    }
    pdl_wait();
    pdl_trigger();
    /* the routing in shared memory, one load a thread: the scans below read it n_slots / 32 times a warp instead
     * of once a slot from global memory (at 32 rows of 8 experts a block scanned up to 255 ids one by one) */
    int *sid = (int *)(sm + p.i_off);
    for (int t = threadIdx.x; t < p.n_slots; t += blockDim.x) sid[t] = p.ids[t];
    __syncthreads();
    const int s = blockIdx.y;
    const int e = sid[s];
    if (e < 0 || e >= p.n_expert) { /* a bad id: its outputs are NaN (mmv_kernel's rule) */
        for (int j = 0; j < nrw; j++)
            if (lane == 0) p.y[(size_t)s * NOUT + ow + j] = __int_as_float(0x7fc00000);
        return;
    }
    bool earlier = false;
    for (int t = threadIdx.x; t < s; t += blockDim.x) earlier |= sid[t] == e;
    if (__syncthreads_or(earlier)) return; /* an earlier slot's block does this expert */
    /* this warp's rows of expert e, in flight while the block quantises (gate, then up: two groups) */
    uint8_t *ws = sm + p.w_off + (size_t)warp * p.w_warp;
    const size_t span = (size_t)nrw * p.row_bytes, eo = (size_t)e * p.expert_stride + (size_t)ow * p.row_bytes;
    for (size_t off = (size_t)lane * 16; off < span; off += 32 * 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(ws + off)),
                     "l"(p.w + eo + off)
                     : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    if (GLU) {
        uint8_t *wu = ws + (size_t)p.rpw * p.row_bytes;
        for (size_t off = (size_t)lane * 16; off < span; off += 32 * 16) {
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                             (unsigned)__cvta_generic_to_shared(wu + off)),
                         "l"(p.w2 + eo + off)
                         : "memory");
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    float *tsm = (float *)(sm + p.t_off + (size_t)warp * p.t_warp);
    const int items = nrw * nb;
    int slots[MMV_MAX];
    int next = s;
    for (;;) {
        /* the next group: this expert's slots from `next` on, at most cap, in slot order (32 ids a ballot) */
        int ns = 0;
        while (next < p.n_slots && ns < p.cap) {
            const int t = next + lane;
            unsigned m = __ballot_sync(0xffffffffu, t < p.n_slots && sid[t] == e);
            while (m && ns < p.cap) {
                slots[ns++] = next + __ffs(m) - 1;
                m &= m - 1;
            }
            next = m ? next + __ffs(m) - 1 : next + 32; /* m: the group is full, its next slot starts the next one */
        }
        if (ns == 0) break;
        /* the group's rows, 8-bit: a warp a 256-value piece. Every piece of the warp is asked of L1 first (no
         * registers held), so that its pieces (8 a warp at 8 rows of 2048) cost one round trip, not one each. */
        const int np = ns * nb;
        for (int j = warp; j < np; j += MMV_WARPS) {
            const int xs = p.x_per_slot ? slots[j / nb] : slots[j / nb] / p.k;
            asm volatile("prefetch.L1 [%0];" ::"l"(p.xf + (size_t)xs * p.n_in + (size_t)(j % nb) * 256 + 8 * lane));
        }
        for (int j = warp; j < np; j += MMV_WARPS) {
            const int i = j / nb, b = j % nb;
            const int xs = p.x_per_slot ? slots[i] : slots[i] / p.k;
            const float *src = p.xf + (size_t)xs * p.n_in + (size_t)b * 256 + 8 * lane;
            float xv[8];
#pragma unroll
            for (int v = 0; v < 8; v++) xv[v] = src[v];
            int8_t q[8];
            const float d = mm_act_block<8>(xv, q);
            uint8_t *xr = sm + (size_t)i * p.x_row;
            unsigned lo = 0, hi = 0;
            int sum = 0;
#pragma unroll
            for (int v = 0; v < 4; v++) {
                lo |= (unsigned)(uint8_t)q[v] << (8 * v);
                hi |= (unsigned)(uint8_t)q[v + 4] << (8 * v);
                sum += q[v] + q[v + 4];
            }
            *(uint2 *)(xr + (size_t)b * 256 + 16 * moef_phys(lane >> 1, b) + 8 * (lane & 1)) = make_uint2(lo, hi);
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            if (lane == 0) ((float *)(xr + p.n_in + 32 * nb))[b] = d;
            if ((lane & 3) == 0) ((int *)(xr + p.n_in))[8 * b + (lane >> 2)] = sum;
        }
        __syncthreads(); /* every warp's pieces */
        /* the dot: lane = 4 * item + chunk; item it = (row r, super-block b) */
#pragma unroll 1
        for (int g = 0; g < (GLU ? 2 : 1); g++) {
            if (GLU && g == 0)
                asm volatile("cp.async.wait_group 1;" ::: "memory");
            else
                asm volatile("cp.async.wait_group 0;" ::: "memory");
            __syncwarp();
            const uint8_t *wg = ws + (size_t)g * p.rpw * p.row_bytes;
            float *tg = tsm + g * p.cap * (p.rpw * nb);
#pragma unroll 1
            for (int it0 = 0; it0 < items; it0 += 8) {
                const int it = it0 + (lane >> 2), c = lane & 3;
                const int itc = it < items ? it : items - 1;
                const int r = itc / nb, b = itc % nb;
                const int bytes = T == MM_Q4_K ? MM_Q4_K_BYTES : MM_Q5_K_BYTES;
                const uint8_t *blk = wg + (size_t)r * p.row_bytes + (size_t)b * bytes;
                const unsigned dd = (unsigned)ld32(blk);
                const float d = __half2float(__ushort_as_half((unsigned short)(dd & 0xFFFF)));
                const float dmin = __half2float(__ushort_as_half((unsigned short)(dd >> 16)));
                const unsigned s0 = (unsigned)ld32(blk + 4), s1 = (unsigned)ld32(blk + 8), s2 = (unsigned)ld32(blk + 12);
                int sc0, m0, sc1, m1;
                mm_k4_scale_min_words(2 * c, s0, s1, s2, &sc0, &m0);
                mm_k4_scale_min_words(2 * c + 1, s0, s1, s2, &sc1, &m1);
                const uint8_t *qs = blk + (T == MM_Q4_K ? 16 : 48) + 32 * c;
                const uint4 wa = *(const uint4 *)qs, wb = *(const uint4 *)(qs + 16);
                const unsigned wv[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
                unsigned hv[8] = {0, 0, 0, 0, 0, 0, 0, 0}; /* Q5_K: the fifth bits, at bit 0 (low) and 1 (high) */
                if (T == MM_Q5_K) {
                    const uint4 ha = *(const uint4 *)(blk + 16), hb = *(const uint4 *)(blk + 32);
                    const unsigned h[8] = {ha.x, ha.y, ha.z, ha.w, hb.x, hb.y, hb.z, hb.w};
#pragma unroll
                    for (int v = 0; v < 8; v++) hv[v] = h[v] >> (2 * c);
                }
                /* the 8-bit rows' groups 4c + {0, 1} (low sub-block), 4c + {2, 3} (high), swizzled */
                const int sw = ((c >> 1) & 1) | ((b & 1) << 1);
                const unsigned g0 = 16u * (unsigned)(4 * c + (0 ^ sw)), g1 = 16u * (unsigned)(4 * c + (1 ^ sw));
                const unsigned g2 = 16u * (unsigned)(4 * c + (2 ^ sw)), g3 = 16u * (unsigned)(4 * c + (3 ^ sw));
#pragma unroll 1
                for (int i = 0; i < MMV_MAX; i++) {
                    if (i >= ns) break; /* block-uniform */
                    const uint8_t *xr = sm + (size_t)i * p.x_row;
                    const uint8_t *xq = xr + (size_t)b * 256;
                    const uint4 xa = *(const uint4 *)(xq + g0), xb = *(const uint4 *)(xq + g1);
                    const uint4 xc = *(const uint4 *)(xq + g2), xd = *(const uint4 *)(xq + g3);
                    const unsigned xl[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
                    const unsigned xh[8] = {xc.x, xc.y, xc.z, xc.w, xd.x, xd.y, xd.z, xd.w};
                    int qx_lo = 0, qx_hi = 0; /* codes (0..15, Q5_K 0..31) times x, exact */
#pragma unroll
                    for (int v = 0; v < 8; v++) {
                        unsigned lo = wv[v] & 0x0F0F0F0Fu, hi = (wv[v] >> 4) & 0x0F0F0F0Fu;
                        if (T == MM_Q5_K) {
                            lo |= (hv[v] & 0x01010101u) << 4;
                            hi |= ((hv[v] >> 1) & 0x01010101u) << 4;
                        }
                        qx_lo = __dp4a((int)lo, (int)xl[v], qx_lo);
                        qx_hi = __dp4a((int)hi, (int)xh[v], qx_hi);
                    }
                    const int2 bs = *(const int2 *)(xr + p.n_in + 32 * b + 8 * c);
                    int sum_q = sc0 * qx_lo + sc1 * qx_hi, sum_m = m0 * bs.x + m1 * bs.y;
                    sum_q += __shfl_xor_sync(0xffffffffu, sum_q, 1);
                    sum_m += __shfl_xor_sync(0xffffffffu, sum_m, 1);
                    sum_q += __shfl_xor_sync(0xffffffffu, sum_q, 2);
                    sum_m += __shfl_xor_sync(0xffffffffu, sum_m, 2);
                    const float xd_ = ((const float *)(xr + p.n_in + 32 * nb))[b];
                    const float term =
                        __fmul_rn(xd_, __fsub_rn(__fmul_rn(d, (float)sum_q), __fmul_rn(dmin, (float)sum_m)));
                    if (c == 0 && it < items) tg[i * (p.rpw * nb) + it] = term;
                }
            }
        }
        __syncwarp();
        /* mmv_row + mmv_reduce's order: a lane per (row, slot) */
        if (lane < nrw * ns) {
            const int r = lane / ns, i = lane % ns, o = ow + r;
            float v = 0.0f;
#pragma unroll 1
            for (int g = 0; g < (GLU ? 2 : 1); g++) {
                const float *t = tsm + g * p.cap * (p.rpw * nb) + i * (p.rpw * nb) + r * nb;
                float ae = 0.0f, ao = 0.0f;
                for (int b = 0; b < nb; b += 2) ae = __fadd_rn(ae, t[b]);
                for (int b = 1; b < nb; b += 2) ao = __fadd_rn(ao, t[b]);
                const float sum = __fadd_rn(ae, ao);
                v = g == 0 ? sum : mmv_swiglu(v, sum);
            }
            p.y[(size_t)slots[i] * NOUT + o] = v;
        }
        __syncwarp();   /* the terms are read before the next group writes them */
        __syncthreads(); /* the next group overwrites the shared rows (the staged weights stay) */
    }
}

static int g_fast = -1;
extern "C" int cuda_moe_fast_enabled(void) {
    int v = __atomic_load_n(&g_fast, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *s = getenv("CLOVER_CUDA_MOE_FAST");
        v = !(s && strcmp(s, "0") == 0); /* on unless CLOVER_CUDA_MOE_FAST=0 (H200, 2026-12-10-moe1) */
        __atomic_store_n(&g_fast, v, __ATOMIC_RELAXED);
    }
    return v;
}
static unsigned long long g_fast_launches;
extern "C" unsigned long long cuda_moe_fast_launches(void) { return __atomic_load_n(&g_fast_launches, __ATOMIC_RELAXED); }
extern "C" void cuda_moe_fast_set(int on) { __atomic_store_n(&g_fast, on < 0 ? -1 : on ? 1 : 0, __ATOMIC_RELAXED); }

/* Gate + up rows a warp: 2 (the default since the H200 run of 2026-12-13-final24: the one-row experts' gate + up
 * 9.12 -> 8.04 us, the same ids), 1 or 4 with CLOVER_CUDA_MOEF_RPW (developer A/B); taken down to what fits 48 KB
 * of shared memory. */
static int moef_glu_rpw(void) {
    static int v = -1;
    int r = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (r < 0) {
        const char *e = getenv("CLOVER_CUDA_MOEF_RPW");
        r = e && (strcmp(e, "1") == 0 || strcmp(e, "4") == 0) ? atoi(e) : 2;
        __atomic_store_n(&v, r, __ATOMIC_RELAXED);
    }
    return r;
}

/* Slots a group past 8 rows: 2 (at 35B-A3B's shapes the gate + up then fit 2 weight rows a warp in 48 KB), or
 * CLOVER_CUDA_MOEF_CAP=1..8 (developer A/B; only the blocking changes, never a bit). */
static int moef_wide_cap(void) {
    static int v = -1;
    int c = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (c < 0) {
        const char *e = getenv("CLOVER_CUDA_MOEF_CAP");
        c = e && e[0] >= '1' && e[0] <= '8' && !e[1] ? e[0] - '0' : 2;
        __atomic_store_n(&v, c, __ATOMIC_RELAXED);
    }
    return c;
}

/* 1 when the fast form took the product (the caller checked the arguments), 0 when it does not apply. */
int moef_launch(uint32_t type, const cuda_moe_args *a, const void *w2, cudaStream_t st) {
    if (!cuda_moe_fast_enabled() || (type != MM_Q4_K && type != MM_Q5_K) || a->n_in % 256) return 0;
    moef_params p = {};
    p.w = (const uint8_t *)a->w;
    p.w2 = (const uint8_t *)w2;
    p.row_bytes = mm_row_bytes(type, a->n_in);
    p.expert_stride = a->expert_stride;
    if (((uintptr_t)p.w | (uintptr_t)p.w2 | p.expert_stride | p.row_bytes) & 15) return 0; /* cp.async: 16 bytes */
    p.n_out = (int)a->n_out;
    p.n_in = (int)a->n_in;
    p.nb = (int)(a->n_in / 256);
    p.ids = a->ids;
    p.n_slots = (int)(a->n_rows * a->k);
    p.k = (int)a->k;
    p.x_per_slot = a->x_per_slot != 0;
    p.n_expert = (int)a->n_expert;
    p.xf = a->x;
    p.y = a->y;
    /* rows a warp: mmv_kernel's (its grid: a block per 8 * rpw rows), or for gate + up the developer switch's
     * (fewer blocks, each warp's fixed work over more rows; the same arithmetic a row) where it fits */
    const int glu_rpw = moef_glu_rpw();
    const size_t nb = (size_t)p.nb, ng = w2 ? 2 : 1;
    /* slots a group: one a row up to 8 rows (a row repeating an expert: more groups); past 8 rows (cuda_moe_dec32:
     * a 16-sequence step's 128 slots on ~100 experts, ~1.3 an expert) moef_wide_cap()'s, so that the group's rows
     * and terms leave room for 2 weight rows a warp (half the blocks, each quantising its rows once) */
    p.cap = a->n_rows <= MMV_MAX ? (int)a->n_rows : moef_wide_cap();
    p.x_row = (unsigned)((a->n_in + 36 * nb + 15) / 16 * 16);
    p.w_off = (unsigned)((size_t)p.cap * p.x_row);
    size_t smem = 0;
    for (int rpw = w2 ? glu_rpw : p.row_bytes > 640 ? 1 : 4;; rpw /= 2) {
        p.rpw = rpw;
        p.w_warp = (unsigned)((size_t)p.rpw * p.row_bytes * ng);
        p.t_off = p.w_off + MMV_WARPS * p.w_warp;
        p.t_warp = (unsigned)(ng * (size_t)p.cap * p.rpw * nb * sizeof(float));
        p.i_off = (unsigned)((size_t)p.t_off + MMV_WARPS * (size_t)p.t_warp);
        smem = (size_t)p.i_off + (size_t)p.n_slots * sizeof(int32_t);
        if (smem <= MMV_SMEM_MAX || !w2 || rpw == 1) break;
    }
    if (smem > MMV_SMEM_MAX) return 0;
    const int rb = MMV_WARPS * p.rpw;
    const dim3 grid((unsigned)((a->n_out + rb - 1) / rb), (unsigned)p.n_slots), block(32 * MMV_WARPS);
    if (type == MM_Q4_K)
        pdl_launch(w2 ? moef_kernel<MM_Q4_K, true> : moef_kernel<MM_Q4_K, false>, grid, block, smem, st, p);
    else
        pdl_launch(w2 ? moef_kernel<MM_Q5_K, true> : moef_kernel<MM_Q5_K, false>, grid, block, smem, st, p);
    __atomic_add_fetch(&g_fast_launches, 1, __ATOMIC_RELAXED);
    return 1;
}
