/*
 * ep_moe.h: the MoE block spread over the ranks of a transport group
 * (expert parallelism, docs/MULTI_GPU.md), with results bit-identical to
 * cpu_moe_forward on one rank.
 *
 * Sharding: contiguous ranges, rank r holds experts [r*E/N, (r+1)*E/N): one
 * slab of each expert tensor per rank (GGUF stores expert e at e * stride,
 * so a rank maps or uploads one byte range), and the receivers of a row see
 * its experts in ascending id when they read their sources in rank order.
 * Homes: row r of the pass lives on rank ((r+1)*N-1)/n (contiguous ranges
 * of rows, like sequences spread over GPUs).
 *
 * A pass: the router and the routing of every row (replicated weights);
 * dispatch (all-to-all): each home sends a row once to every rank holding
 * one of its chosen experts, with the list of those experts; each rank runs
 * each of its experts on the rows that chose it, in ascending row order, the
 * same rows in the same order as one rank would, so the same products;
 * combine (all-to-all): the unweighted expert outputs go back to the homes,
 * which add them, weighted, in ascending expert id, HF's and one rank's
 * order; then the shared expert over all rows, as one rank does. A rank
 * whose experts the coreset excludes receives nothing: the coreset decides
 * which ranks a block's rows visit. A status all-reduce ends the pass, so
 * every rank learns of a failure of any.
 *
 * Bit-identity holds where the expert width is a multiple of 8 (every
 * Qwen3.5 geometry and the fixtures): SwiGLU runs 8 lanes at a time over a
 * group's rows with a scalar tail, and one rank's groups are not a rank's,
 * so with another width the tail would land on other elements.
 */
#ifndef CLOVER_PARALLEL_EP_MOE_H
#define CLOVER_PARALLEL_EP_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "cpu/moe.h"
#include "parallel/transport.h"

/* The first expert of rank r (r = N gives E), and the rank of expert e. */
size_t ep_expert_first(size_t r, size_t n_expert, size_t n_ranks);
size_t ep_expert_owner(size_t e, size_t n_expert, size_t n_ranks);
/* visit[r] = 1 where rank r holds an allowed expert (allowed NULL: every rank with an expert). */
void ep_ranks_visited(uint8_t *visit, const uint8_t *allowed, size_t n_expert, size_t n_ranks);

/* What the last pass moved: rows each rank received, bytes of the two all-to-alls. */
typedef struct ep_moe_stats {
    uint64_t rows_in[PAR_MAX_RANKS];
    uint64_t dispatch_bytes, combine_bytes;
} ep_moe_stats;

typedef struct ep_moe ep_moe;
/* The group is borrowed (closed by the caller after ep_moe_free). */
int ep_moe_create(par_transport *t, ep_moe **out, clover_error *err);
void ep_moe_free(ep_moe *ep);
const ep_moe_stats *ep_moe_last(const ep_moe *ep);

/* out = MoE(x) over n rows, as cpu_moe_forward(out, x, n, w, allowed, pool, scratch), bit for bit. */
int ep_moe_forward(ep_moe *ep, float *out, const float *x, size_t n, const cpu_moe_weights *w,
                   const uint8_t *allowed, threadpool *pool, clover_error *err);

#endif
