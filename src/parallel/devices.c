/*
 * devices.c: clover_devices_check, the --devices option of the commands:
 * the list against this host's CUDA devices, then the NCCL group over them
 * (which names libnccl.so.2 when it cannot be loaded). The CUDA backend has
 * no expert-parallel executor yet (docs/MULTI_GPU.md: no machine with
 * several GPUs was lent to build and check it), so a list that passes both
 * checks still ends in a one-line error saying so, never a silent fallback.
 */
#include <stdio.h>

#include "base/error.h"
#include "parallel/transport.h"
#ifdef CLOVER_HAVE_CUDA
#include "cuda/cuda_device.h"
#endif

int clover_devices_check(const char *spec, clover_error *err) {
#ifdef CLOVER_HAVE_CUDA
    char why[256] = {0};
    int have = cuda_device_count(why, sizeof why);
    if (have < 0) have = 0;
#else
    (void)spec;
    return error_set(err, CLOVER_E_UNSUPPORTED, "--devices: this build has no CUDA backend, so no GPU can be used");
#endif
#ifdef CLOVER_HAVE_CUDA
    int dev[PAR_MAX_RANKS];
    int n = par_parse_devices(spec, have, dev, PAR_MAX_RANKS, err);
    if (n < 0) return n;
    if (n < 2)
        return error_set(err, CLOVER_E_INVALID, "--devices %.64s: expert parallelism needs two devices or more (for "
                         "one GPU use --device cuda)", spec);
    par_config cfg = {.kind = PAR_KIND_NCCL, .n_ranks = (size_t)n, .devices = dev, .timeout_ms = 30000,
                      .fail_rank = -1};
    par_transport *t = NULL;
    int rc = par_open(&cfg, &t, err);
    if (rc) return rc;
    par_close(t);
    return error_set(err, CLOVER_E_UNSUPPORTED, "--devices %.64s: the NCCL group opens, but the CUDA backend has no "
                     "expert-parallel executor yet (docs/MULTI_GPU.md); use --device cuda", spec);
#endif
}
