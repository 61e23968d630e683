/*
 * synth_sparse.h: writes a sparse synthetic model (header and tables only, no
 * disk blocks for the weights) and loads it, for the tests that check a full
 * preset geometry without 20-230 GB of disk. A file system that cannot hold
 * a sparse file is a skip (a machine fact), never a pass; a sparse file that
 * takes real disk, or a load that fails, is a failure.
 */
#ifndef CLOVER_TEST_SYNTH_SPARSE_H
#define CLOVER_TEST_SYNTH_SPARSE_H

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clover.h"
#include "test.h"

/* The loaded model, or NULL after a failed CHECK. o->sparse must be set. */
static clover_model *synth_sparse_load(const char *path, const clover_synth_options *o) {
    clover_error err = {0};
    int rc = clover_synth(path, o, &err);
    if (rc == CLOVER_E_IO && strstr(err.message, "sparse")) {
        unlink(path);
        TEST_SKIP("the file system of %s cannot hold a sparse file: %s", path, err.message);
    }
    CHECK_MSG(rc == CLOVER_OK, "%s: %s", o->preset, err.message);
    if (rc) return NULL;
    struct stat st;
    CHECK(stat(path, &st) == 0);
    CHECK_MSG((uint64_t)st.st_blocks * 512 < (64u << 20), "the sparse file takes %lld bytes of disk",
              (long long)st.st_blocks * 512);
    clover_model *m = NULL;
    rc = clover_model_load(&m, path, &err);
    CHECK_MSG(rc == CLOVER_OK, "%s: %s", o->preset, err.message);
    return rc == CLOVER_OK ? m : NULL;
}

#endif
