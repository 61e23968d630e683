/*
 * transport.h: the collectives of expert parallelism (docs/MULTI_GPU.md),
 * behind one interface with two implementations: a simulated group of N
 * ranks inside this process (transport_sim.c, what CI tests) and NCCL
 * (transport_nccl.c, libnccl.so.2 loaded with dlopen at run time, so the
 * binary starts and runs on the CPU without it).
 *
 * One thread drives every rank of the group: a collective takes all ranks'
 * buffers at once, the shape of a single-process NCCL program (one
 * communicator per GPU, ncclGroupStart / send+recv per rank / ncclGroupEnd).
 * Memory is in each rank's space: host memory for the simulation, device
 * memory of rank r's GPU for NCCL.
 *
 * Failure: every wait has a deadline (par_config.timeout_ms). A rank that
 * reports an error, or does not finish in time (a lost GPU), fails the
 * collective with a one-line message naming the rank, and the group is then
 * broken: it is aborted (NCCL: ncclCommAbort) and every later call returns
 * the same error at once. Nothing waits without a deadline.
 */
#ifndef CLOVER_PARALLEL_TRANSPORT_H
#define CLOVER_PARALLEL_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "clover.h"

enum { PAR_MAX_RANKS = 64 };

typedef enum par_kind { PAR_KIND_SIM, PAR_KIND_NCCL } par_kind;

/* Planted faults of the simulation (tests): rank fail_rank, once it has
 * finished fail_after collectives, either reports an error or stops
 * answering (a lost rank: the driver's deadline must fire). */
typedef enum par_fault { PAR_FAULT_NONE, PAR_FAULT_ERROR, PAR_FAULT_STALL } par_fault;

typedef struct par_config {
    par_kind kind;
    size_t n_ranks;     /* 1..PAR_MAX_RANKS */
    const int *devices; /* NCCL: [n_ranks] CUDA device ordinals; sim: unused */
    unsigned timeout_ms; /* deadline of every collective; 0: 30000 */
    par_fault fault;     /* sim only */
    int fail_rank;
    unsigned fail_after;
} par_config;

typedef struct par_transport par_transport;

/* Opens the group; NCCL: a clear error naming libnccl.so.2 when it cannot be loaded,
 * or the device count when a device is missing. */
int par_open(const par_config *cfg, par_transport **out, clover_error *err);
void par_close(par_transport *t);
size_t par_n_ranks(const par_transport *t);
const char *par_kind_name(const par_transport *t);

/* All-to-all of variable-size byte buffers. counts[s * N + d] bytes go from
 * rank s to rank d. send[s] holds rank s's segments for d = 0..N-1 back to
 * back in d order; recv[d] receives the segments from s = 0..N-1 back to
 * back in s order (so the receiver sees its sources in rank order: the
 * fixed order the combine relies on). A count of 0 sends nothing; a NULL
 * buffer is allowed where a rank's counts are all 0. */
int par_alltoallv(par_transport *t, const void *const *send, void *const *recv, const size_t *counts,
                  clover_error *err);

/* *out[r] = max over ranks s of *in[s], for every rank r (ranks agree on a
 * status: any rank's failure code reaches all). in[r], out[r]: one int32 in
 * rank r's space. */
int par_allreduce_max_i32(par_transport *t, const int32_t *const *in, int32_t *const *out, clover_error *err);

/* Parses --devices "0,1,3": distinct ordinals, ascending not required, at
 * most PAR_MAX_RANKS, each below n_available (the devices the host has; a
 * negative n_available skips that check). Returns the count, or a negative
 * status with a one-line message (naming how many devices exist). */
int par_parse_devices(const char *spec, int n_available, int *out, size_t cap, clover_error *err);

/* ---- for the implementations ---- */
typedef struct par_ops {
    const char *name;
    int (*alltoallv)(par_transport *t, const void *const *send, void *const *recv, const size_t *counts,
                     clover_error *err);
    int (*allreduce_max_i32)(par_transport *t, const int32_t *const *in, int32_t *const *out, clover_error *err);
    void (*close)(par_transport *t);
} par_ops;

struct par_transport {
    const par_ops *ops;
    size_t n;
    unsigned timeout_ms;
    int broken;          /* a collective failed: the group is aborted */
    clover_error broken_err;
};

int par_sim_open(const par_config *cfg, par_transport **out, clover_error *err);
int par_nccl_open(const par_config *cfg, par_transport **out, clover_error *err);

#endif
