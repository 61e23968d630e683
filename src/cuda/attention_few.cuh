/*
 * attention_few.cuh: the few-row form of the attention forward (attention_few.cu): its split plan, shared with
 * attention_forward.cu (the dispatcher, the merges and cuda_attn_plan), and its launch. Only attention_forward.cu
 * and attention_few.cu include it.
 *
 * The plan of a sequence with n rows (FEW_MIN_ROWS..FEW_MAX_ROWS) and kv = pos + n keys in view depends only on n,
 * kv, the dims and the process-wide tuning (few_cfg, read once), never on the other sequences of a pass:
 *  - its query vectors for one KV head are the n x group (row, head) pairs, row-major, in groups of FEW_GP = 8
 *    (a group may span rows: group 3; or a row may have several: group 40): G = ceil(n * group / 8) groups;
 *  - a block holds ng = min(cfg.ng, the power of two <= G) groups; its 8 warps are ng groups x kw = 8 / ng key
 *    lanes; qsets = ceil(G / ng) blocks cover a KV head's queries;
 *  - splits: cfg.target blocks (one per SM: the block is register-bound to one) over the sequence,
 *    floor(target / (n_head_kv * qsets)) splits a KV head (at least 1, at most CUDA's MAX_SPLITS = 128), each a
 *    multiple of a block step (kw lanes x FEW_KB keys) and at least cfg.min_split keys (FEW_DEF_MIN_SPLIT = 64
 *    unless CLOVER_CUDA_ATTN_FEW_MIN_SPLIT says otherwise, a multiple of FEW_MIN_SPLIT: a long least split gives a
 *    short context 1-2 splits and no merge, which a stacked pass of many short sequences wants; the plan still
 *    depends on the sequence alone).
 * 35B-A3B (16/2/256), 32 rows over 544 keys: G = 32, ng = 2, kw = 4, qsets = 16, 4 splits of 136 keys: 128 blocks
 * (ng was 4 until 2027-01-05: 8 query sets x 8 splits of 68; 2 is faster on an H100 by fewng27's A/B).
 */
#ifndef CLOVER_ATTENTION_FEW_CUH
#define CLOVER_ATTENTION_FEW_CUH

#include <cuda_runtime.h>

#include "cuda_attention.h"

enum {
    FEW_MIN_ROWS = 2,
    FEW_MAX_ROWS = 64,   /* longer chunks keep the tile form (row tiles give them their parallelism) */
    FEW_THREADS = 256,
    FEW_WARPS = FEW_THREADS / 32,
    FEW_GP = 8,          /* query vectors a warp holds (q and o in registers) */
    FEW_NE = 8,          /* head_dim elements a lane holds: 8 x 32 lanes = CUDA_ATTN_MAX_HEAD_DIM */
    FEW_KB = 2,          /* keys a warp takes a step */
    FEW_MIN_SPLIT = 16,  /* keys; a multiple of every block step (kw * FEW_KB <= 16) */
    FEW_MAX_SPLITS = 128, /* attention_forward.cu's MAX_SPLITS (the merges' weight arrays) */
    FEW_DEF_NG = 2,      /* H100 (bench/device-runs/2027-01-05-fewng27): 4 -> 2, a 32-row preview -0.06..-0.07 ms */
    FEW_DEF_TARGET = 132, /* one block per SM of an H200 */
    /* keys a split at least, by default: 64 since bench/device-runs/2027-01-16-split38 (H100, 16 before): the
     * stacked 16-sequence diffusion pass (~64-128 keys a sequence: 1-2 splits, no merge, where 16 gave 4-6 and a
     * merge) +1.2 / +2.4% (rounds without / with the K2 sums), a lone preview over 544 keys the same plan and time */
    FEW_DEF_MIN_SPLIT = 64
};

/* The process-wide knobs, read once from the environment (attention_forward.cu: few_cfg_get). max_rows 0: the
 * few form is off. */
typedef struct few_cfg {
    int max_rows; /* sequences of FEW_MIN_ROWS..max_rows rows take the few form; 0: none */
    int ng;       /* most query groups a block holds: 1, 2, 4 or 8 */
    int target;   /* blocks a sequence aims at */
    int min_split; /* the fewest keys a split: a multiple of FEW_MIN_SPLIT */
} few_cfg;

typedef struct few_plan {
    int ng, kw, qsets, n_splits, split_len;
} few_plan;

/* the plan of a sequence with n rows (FEW_MIN_ROWS <= n) and kv keys in view */
static __host__ __device__ __forceinline__ few_plan few_plan_of(int n, int kv, const cuda_attn_dims &d,
                                                                const few_cfg &c) {
    few_plan p;
    const int group = d.n_head / d.n_head_kv;
    const int G = (n * group + FEW_GP - 1) / FEW_GP;
    int ng = 1;
    while (ng * 2 <= c.ng && ng * 2 <= G) ng *= 2;
    p.ng = ng;
    p.kw = FEW_WARPS / ng;
    p.qsets = (G + ng - 1) / ng;
    const int base = d.n_head_kv * p.qsets;
    int target = c.target / (base > 0 ? base : 1);
    if (target > FEW_MAX_SPLITS) target = FEW_MAX_SPLITS;
    if (target < 1) target = 1;
    const int step = p.kw * FEW_KB;
    int len = (kv + target - 1) / target;
    len = (len + step - 1) / step * step;
    if (len < c.min_split) len = c.min_split;
    p.split_len = len;
    p.n_splits = kv > 0 ? (kv + len - 1) / len : 1;
    return p;
}

/* The most blocks a (sequence, KV head) takes, qsets x splits, over n = FEW_MIN_ROWS..min(max_rows, c.max_rows)
 * and kv <= max_kv (the grid's x: fixed by max_rows and max_kv, for graph capture); *max_splits: the most splits. */
static inline int few_grid_blocks(const cuda_attn_dims &d, const few_cfg &c, int max_rows, int max_kv,
                                  int *max_splits) {
    int best = 0, most = 1;
    const int top = max_rows < c.max_rows ? max_rows : c.max_rows;
    const int by_len = max_kv > c.min_split ? (max_kv + c.min_split - 1) / c.min_split : 1;
    for (int n = FEW_MIN_ROWS; n <= top; n++) {
        /* the splits at kv = max_kv are the most any kv <= max_kv gives (len grows with kv, but never past
         * kv / target rounded up, so the count never exceeds the target nor ceil(kv / c.min_split)) */
        few_plan p = few_plan_of(n, max_kv > n ? max_kv : n, d, c);
        int base = d.n_head_kv * p.qsets;
        int target = c.target / (base > 0 ? base : 1);
        if (target > FEW_MAX_SPLITS) target = FEW_MAX_SPLITS;
        if (target < 1) target = 1;
        int s = target < by_len ? target : by_len;
        if (p.qsets * s > best) best = p.qsets * s;
        if (s > most) most = s;
    }
    if (max_splits) *max_splits = most;
    return best;
}

/* Launches the few form (attention_few.cu) on st: grid (few_grid_blocks, 1, n_seq x n_head_kv); a sequence
 * outside FEW_MIN_ROWS..c.max_rows rows, and blocks past its plan, exit at once. 0 or a cudaError_t. */
int attn_few_launch(float *out, const float *qg, const cuda_attn_seq *seqs, int n_seq, int max_rows, int max_kv,
                    int causal, const cuda_attn_dims &d, const few_cfg &c, float *part_o, float *part_ml,
                    int grid_stride, cudaStream_t st);

/* cudaFuncSetAttribute of the few form's kernels (dynamic shared memory); 0 or a cudaError_t. */
int attn_few_init(void);

#endif
