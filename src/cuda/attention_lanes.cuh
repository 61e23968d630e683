/*
 * attention_lanes.cuh: the key walk both lane-sliced attention forms share (attention_forward.cu's decode form,
 * attn_dec_kernel, and attention_few.cu's few-row form, attn_few_kernel): a warp holds LN_GP query vectors with q
 * and o in registers, lanes own slices of head_dim (LN_NE values a lane), and it walks its keys LN_KB at a time.
 * One copy of the step, so the two forms cannot drift apart: a step loads the next keys' K/V rows while it
 * computes the dots (128 FMAs a lane), sums each dot over the 32 lanes by a transposing butterfly (lane pair 2i
 * ends with dot i), keeps one vector's online softmax state a lane (lanes l and l ^ 16 hold the step's two keys),
 * broadcasts the alphas and weights, rescales o (skipped, exactly, when a vector's max did not move) and adds the
 * 128 FMAs of P V. The design and the estimates are in those files' top comments.
 */
#ifndef CLOVER_CUDA_ATTENTION_LANES_CUH
#define CLOVER_CUDA_ATTENTION_LANES_CUH

#include <cuda_runtime.h>
#include <math.h>

enum {
    LN_KB = 2, /* keys a warp takes a step */
    LN_GP = 8, /* query vectors a warp holds */
    LN_NE = 8  /* head_dim elements a lane holds: 8 x 32 lanes = CUDA_ATTN_MAX_HEAD_DIM */
};

/* Loads keys j .. j + LN_KB - 1 (those < s1) of one KV head: lane's slice of each row, 16 bytes at a time when
 * VEC == 4. Zeros where out of range. */
template <int VEC>
static __device__ __forceinline__ void lanes_load(float (&kb)[LN_KB][LN_NE], float (&vb)[LN_KB][LN_NE],
                                                  const float *kbase, const float *vbase, size_t row_stride, int j,
                                                  int s1, int hd, int lane) {
    constexpr int NCH = LN_NE / VEC;
#pragma unroll
    for (int t = 0; t < LN_KB; t++) {
        const bool ok = j + t < s1;
        const size_t off = (size_t)(j + t) * row_stride;
#pragma unroll
        for (int c = 0; c < NCH; c++) {
            const int i = (c * 32 + lane) * VEC; /* first dim of the chunk; VEC == 4 means hd % 4 == 0 */
            if constexpr (VEC == 4) {
                float4 kk = make_float4(0.0f, 0.0f, 0.0f, 0.0f), vv = kk;
                if (ok && i < hd) {
                    kk = __ldg((const float4 *)(kbase + off + i));
                    vv = __ldg((const float4 *)(vbase + off + i));
                }
                kb[t][c * 4 + 0] = kk.x, kb[t][c * 4 + 1] = kk.y, kb[t][c * 4 + 2] = kk.z, kb[t][c * 4 + 3] = kk.w;
                vb[t][c * 4 + 0] = vv.x, vb[t][c * 4 + 1] = vv.y, vb[t][c * 4 + 2] = vv.z, vb[t][c * 4 + 3] = vv.w;
            } else {
                float kk = 0.0f, vv = 0.0f;
                if (ok && i < hd) {
                    kk = __ldg(kbase + off + i);
                    vv = __ldg(vbase + off + i);
                }
                kb[t][c] = kk;
                vb[t][c] = vv;
            }
        }
    }
}

/* One step of the transposing butterfly: a lane keeps the upper W of its 2W sums if lane bit (2W) is set, else
 * the lower, and adds its partner's copy. */
template <int W>
static __device__ __forceinline__ void lanes_halve(float (&part)[LN_KB * LN_GP], int lane) {
    const bool up = (lane & (2 * W)) != 0;
#pragma unroll
    for (int k = 0; k < W; k++) {
        const float send = up ? part[k] : part[k + W];
        const float keep = up ? part[k + W] : part[k];
        part[k] = keep + __shfl_xor_sync(0xffffffffu, send, 2 * W);
    }
}

/* The warp's keys j, j + 1, then j + jstep ... while j < jend, into o (the gq first vectors), m_mine and l_mine
 * (the online softmax state of vector my_h = (lane >> 1) & 7, whose visible keys are those below lim, and none
 * unless mine). */
template <int VEC>
static __device__ __forceinline__ void lanes_walk(float (&o)[LN_GP][LN_NE], float &m_mine, float &l_mine,
                                                  const float (&q)[LN_GP][LN_NE], const float *kbase,
                                                  const float *vbase, size_t row_stride, int j, int jend, int jstep,
                                                  int lim, bool mine, int gq, int hd, float scale, int lane) {
    const int my_t = lane >> 4;
    float kb[LN_KB][LN_NE], vb[LN_KB][LN_NE];
    lanes_load<VEC>(kb, vb, kbase, vbase, row_stride, j, jend, hd, lane);
    for (; j < jend; j += jstep) {
        /* the next step's rows are in flight while this one is computed */
        float kn[LN_KB][LN_NE], vn[LN_KB][LN_NE];
        lanes_load<VEC>(kn, vn, kbase, vbase, row_stride, j + jstep, jend, hd, lane);
        /* the lane's part of the LN_KB x LN_GP dots, index t * LN_GP + h */
        float part[LN_KB * LN_GP];
#pragma unroll
        for (int t = 0; t < LN_KB; t++)
#pragma unroll
            for (int h = 0; h < LN_GP; h++) {
                float a = 0.0f;
#pragma unroll
                for (int e = 0; e < LN_NE; e++) a = fmaf(q[h][e], kb[t][e], a);
                part[t * LN_GP + h] = a;
            }
        /* transposing butterfly: at offset 16 a lane keeps half of its 16 sums (the upper half if lane bit 4 is
         * set) and adds its partner's copy of that half; and so on at 8, 4, 2; then lane 2i holds dot i summed
         * over 16 lanes, and offset 1 completes it */
        static_assert(LN_KB * LN_GP == 16, "the butterfly below halves 16 sums 4 times");
        lanes_halve<8>(part, lane);
        lanes_halve<4>(part, lane);
        lanes_halve<2>(part, lane);
        lanes_halve<1>(part, lane);
        part[0] += __shfl_xor_sync(0xffffffffu, part[0], 1);
        /* lane l has the score of key t = l >> 4 for vector h = (l >> 1) & 7 and keeps that vector's softmax
         * state (lanes l ^ 16 hold the other key: one shuffle makes the max and the sum over the step's keys,
         * the same in both); then alpha and p go to every lane */
        {
            const bool ok = j + my_t < lim && mine;
            const float sv = ok ? part[0] * scale : -INFINITY;
            const float mt = fmaxf(sv, __shfl_xor_sync(0xffffffffu, sv, 16));
            const float m_new = fmaxf(m_mine, mt);
            /* no visible key yet (or a vector past gq): alpha 1, p 0 (no -inf - -inf) */
            const float alpha = m_new == -INFINITY ? 1.0f : expf(m_mine - m_new);
            const float pv = ok ? expf(sv - m_new) : 0.0f;
            l_mine = l_mine * alpha + (pv + __shfl_xor_sync(0xffffffffu, pv, 16));
            m_mine = m_new;
            float p[LN_KB][LN_GP], al[LN_GP];
#pragma unroll
            for (int h = 0; h < LN_GP; h++) {
                al[h] = __shfl_sync(0xffffffffu, alpha, 2 * h);
#pragma unroll
                for (int t = 0; t < LN_KB; t++) p[t][h] = __shfl_sync(0xffffffffu, pv, 2 * (t * LN_GP + h));
            }
#pragma unroll
            for (int h = 0; h < LN_GP; h++) {
                if (h >= gq) break; /* uniform */
                if (al[h] != 1.0f) { /* uniform; o * 1 == o, so skipping is exact */
#pragma unroll
                    for (int e = 0; e < LN_NE; e++) o[h][e] *= al[h];
                }
#pragma unroll
                for (int t = 0; t < LN_KB; t++)
#pragma unroll
                    for (int e = 0; e < LN_NE; e++) o[h][e] = fmaf(p[t][h], vb[t][e], o[h][e]);
            }
        }
#pragma unroll
        for (int t = 0; t < LN_KB; t++)
#pragma unroll
            for (int e = 0; e < LN_NE; e++) kb[t][e] = kn[t][e], vb[t][e] = vn[t][e];
    }
}

/* The warp's walk for the block's merge: o's gq vectors at wo + (warp * LN_GP + h) * hd, and lane 2h's m and l of
 * vector h at wm / wl[warp * LN_GP + h] (the merge reads them after a barrier). */
template <int VEC>
static __device__ __forceinline__ void lanes_stash(float *wo, float *wm, float *wl, const float (&o)[LN_GP][LN_NE],
                                                   float m_mine, float l_mine, int warp, int gq, int hd, int lane) {
    constexpr int NCH = LN_NE / VEC;
#pragma unroll
    for (int h = 0; h < LN_GP; h++) {
        if (h >= gq) continue;
        float *dst = wo + ((size_t)warp * LN_GP + h) * hd;
#pragma unroll
        for (int c = 0; c < NCH; c++) {
            const int i = (c * 32 + lane) * VEC;
            if (i >= hd) continue;
            if constexpr (VEC == 4)
                *(float4 *)(dst + i) = make_float4(o[h][c * 4], o[h][c * 4 + 1], o[h][c * 4 + 2], o[h][c * 4 + 3]);
            else
                dst[i] = o[h][c];
        }
    }
    const int my_h = (lane >> 1) & (LN_GP - 1);
    if (lane < 2 * LN_GP && (lane & 1) == 0) /* lane 2h: vector h's m and l */
        wm[warp * LN_GP + my_h] = m_mine, wl[warp * LN_GP + my_h] = l_mine;
}

#endif
