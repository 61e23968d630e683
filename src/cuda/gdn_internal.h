/*
 * gdn_internal.h: what the GDN files of src/cuda share and nobody else
 * needs: each kernel's shared-memory size and the setter of its limit
 * (called by cuda_gdn_init).
 */
#ifndef CLOVER_CUDA_GDN_INTERNAL_H
#define CLOVER_CUDA_GDN_INTERNAL_H

#include <stddef.h>

#include "cuda_gdn.h"

size_t gdn_recurrent_smem_bytes(const cuda_gdn_dims *d);
size_t gdn_chunked_smem_bytes(const cuda_gdn_dims *d);
extern "C" int gdn_recurrent_init(size_t max_smem);
extern "C" int gdn_chunked_init(size_t max_smem);
/* gdn_recurrent_split.cu: the cluster form of cuda_gdn_recurrent; 1 when it launched, 0 when the caller runs the
 * one-block form (switched off, a value dim it does not take, or its launch refused). */
int gdn_recurrent_split(float *y, const float *qkv, const float *z, const float *b, const float *a,
                        const cuda_gdn_weights *w, const cuda_gdn_seq *seqs, int n_seq, const cuda_gdn_dims *d,
                        void *stream);

#endif
