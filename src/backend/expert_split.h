/*
 * expert_split.h: which of a layer's missed experts the host CPU computes
 * instead of copying them to the device (--gpu-mem, issue 31; the hook is
 * backend/expert_host.h). Kept apart from any device so CI tests it on the
 * CPU.
 *
 * The two routes run at the same time: the device computes the resident
 * experts and the copied ones while the host computes its share, so a layer
 * waits for the slower of
 *   copy  = (misses copied) * bytes * copy_spb          (host-to-device link)
 *   host  = fixed + sum over the host's misses of (bytes * host_spb + rows * host_row_s)
 * (spb: seconds a byte). A decode step (one row an expert) is bound by the
 * bytes, where the CPU's memory can outrun the link; a prompt's chunk puts
 * many rows on each expert, where the arithmetic makes the host the slower.
 * The plan gives the host the misses with the fewest rows first and takes
 * the count that minimises the wait; a tie keeps the expert on the device
 * (its arithmetic is the all-device run's).
 *
 * The rates are measured as the passes run (observe_copy from the copies'
 * device events, observe_host from the hook's wall time): an exponential
 * average of the link's seconds a byte, and for the host a least-squares fit
 * of time = bytes * a + rows * b with exponential forgetting, seeded with the
 * starting guesses as pseudo-observations so that it is defined from the
 * first call and a run of equal-shaped calls cannot make it singular.
 */
#ifndef CLOVER_BACKEND_EXPERT_SPLIT_H
#define CLOVER_BACKEND_EXPERT_SPLIT_H

#include <stddef.h>
#include <stdint.h>

typedef enum expert_split_mode {
    EXPERT_SPLIT_OFF,  /* every miss copied (the default until measured on a device) */
    EXPERT_SPLIT_AUTO, /* the plan above */
    EXPERT_SPLIT_ALL,  /* every miss computed by the host (tests; a host much faster than its link) */
} expert_split_mode;

/* "off", "auto", "all"; -1 when unknown. */
int expert_split_mode_from_name(const char *name);
const char *expert_split_mode_name(expert_split_mode m);

typedef struct expert_split {
    expert_split_mode mode;
    double copy_spb;   /* link seconds a byte (estimate) */
    double fixed_s;    /* a layer's cost of involving the host at all: its input down, its sum up, the add */
    /* the host's fit: sums over observations of [B R] x [B R]^T and [B R] x t, decayed by `keep` each time */
    double sbb, sbr, srr, sbt, srt;
    double host_spb, host_row_s; /* the fit's solution (>= 0) */
    double prior_a, prior_b;     /* the starting guesses (seconds a megabyte, a row) */
    double keep;                 /* forgetting factor of the fits, 0 < keep < 1 */
    uint64_t n_copy_obs, n_host_obs;
} expert_split;

/* Starting guesses: the link's bytes a second, the host's bytes a second over an expert's weights, its seconds
 * a row through one expert, the fixed cost of a layer that involves the host. */
void expert_split_init(expert_split *s, expert_split_mode mode, double link_bps, double host_bps, double host_row_s,
                       double fixed_s);

/* The layer's plan: misses[i] = rows routed to missed expert i (each of `bytes`), n of them; to_host[i] set to
 * 1 for the misses the host computes, 0 for those copied. Returns how many go to the host. Deterministic: the
 * host's share is the misses of fewest rows, ties by index. order: scratch of n entries. */
size_t expert_split_plan(const expert_split *s, uint64_t bytes, const uint32_t *rows, size_t n, uint8_t *to_host,
                         uint32_t *order);

/* The predicted wait of a layer (the slower route) when the host takes the given misses. */
double expert_split_wait(const expert_split *s, uint64_t bytes, const uint32_t *rows, size_t n,
                         const uint8_t *to_host);

/* Measurements: bytes copied over the link in seconds; the host's call over `bytes` of expert weights and
 * `rows` (row, expert) pairs in seconds (without the fixed part). Non-positive or non-finite times are
 * ignored. */
void expert_split_observe_copy(expert_split *s, uint64_t bytes, double seconds);
void expert_split_observe_host(expert_split *s, uint64_t bytes, uint64_t rows, double seconds);

#endif
