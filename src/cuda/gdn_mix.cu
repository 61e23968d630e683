/*
 * gdn_mix.cu: the glue of cuda_gdn.h: the dims check (including whether the
 * kernels' shared memory fits the device), the one-time init, the gated
 * output norm (step 3, for the chunked form; the recurrence fuses it), and
 * cuda_gdn_mix, which chains the steps on one stream.
 * The gated norm rounds as src/cpu/norm.c: 1 / sqrtf(ss / dv + eps), then
 * (w * (o * r)) * (z / (1 + e^-z)).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#include "cuda_pdl.cuh"
#include "cuda_gdn.h"
#include "gdn_internal.h"

enum { NORM_THREADS = 128 };

extern "C" int cuda_gdn_dims_check(const cuda_gdn_dims *d, char *why, size_t why_len) {
    char buf[200];
    buf[0] = 0;
    if (d->n_k_heads < 1 || d->n_v_heads < 1 || d->k_dim < 1 || d->v_dim < 1 || d->conv_k < 1)
        snprintf(buf, sizeof buf,
                 "gated deltanet (cuda): key heads %d, value heads %d, key dim %d, value dim %d, conv kernel %d: "
                 "all must be >= 1",
                 d->n_k_heads, d->n_v_heads, d->k_dim, d->v_dim, d->conv_k);
    else if (d->n_v_heads % d->n_k_heads != 0)
        snprintf(buf, sizeof buf, "gated deltanet (cuda): %d value heads is not a multiple of %d key heads",
                 d->n_v_heads, d->n_k_heads);
    else if (d->k_dim > CUDA_GDN_MAX_DK || d->v_dim > CUDA_GDN_MAX_DV || d->conv_k > CUDA_GDN_MAX_CONV_K)
        snprintf(buf, sizeof buf,
                 "gated deltanet (cuda): key dim %d, value dim %d, conv kernel %d: the kernels take at most %d, %d, %d",
                 d->k_dim, d->v_dim, d->conv_k, CUDA_GDN_MAX_DK, CUDA_GDN_MAX_DV, CUDA_GDN_MAX_CONV_K);
    else if (d->tiled != 0 && d->tiled != 1)
        snprintf(buf, sizeof buf, "gated deltanet (cuda): unknown value-head order %d", d->tiled);
    else if (!(d->eps >= 0.0f))
        snprintf(buf, sizeof buf, "gated deltanet (cuda): norm eps %g must be >= 0", (double)d->eps);
    if (!buf[0]) return 0;
    if (why && why_len) snprintf(why, why_len, "%s", buf);
    return CUDA_GDN_EINVAL;
}

extern "C" int cuda_gdn_init(void) {
    cuda_gdn_dims big = {1, 1, CUDA_GDN_MAX_DK, CUDA_GDN_MAX_DV, 4, 1e-6f, 1};
    int e = gdn_recurrent_init(gdn_recurrent_smem_bytes(&big));
    if (e == 0) e = gdn_chunked_init(gdn_chunked_smem_bytes(&big));
    return e;
}

__global__ void gdn_gated_norm_kernel(float *y, const float *o, const float *z, const float *w, int dv, float eps) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const size_t base = (size_t)blockIdx.x * dv;
    __shared__ float red[NORM_THREADS / 32];
    __shared__ float inv_s;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dv; i += NORM_THREADS) ss += o[base + i] * o[base + i];
    for (int s = 16; s > 0; s >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, s);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int i = 0; i < NORM_THREADS / 32; i++) t += red[i];
        inv_s = 1.0f / sqrtf(t / (float)dv + eps);
    }
    __syncthreads();
    const float inv = inv_s;
    for (int i = threadIdx.x; i < dv; i += NORM_THREADS) {
        float zi = z[base + i];
        y[base + i] = (w[i] * (o[base + i] * inv)) * (zi / (1.0f + expf(-zi)));
    }
}

extern "C" int cuda_gdn_gated_norm(float *y, const float *o, const float *z, const float *w, int n_vec, int dv,
                                   float eps, void *stream) {
    if (n_vec < 0 || dv < 1) return CUDA_GDN_EINVAL;
    if (n_vec == 0) return 0;
    pdl_launch(gdn_gated_norm_kernel, (unsigned)n_vec, NORM_THREADS, 0, (cudaStream_t)stream, y, o, z, w, dv, eps);
    return (int)cudaGetLastError();
}

extern "C" size_t cuda_gdn_mix_workspace_bytes(const cuda_gdn_dims *d, int n_rows) {
    return sizeof(float) * (size_t)n_rows * ((size_t)cuda_gdn_conv_dim(d) + (size_t)d->n_v_heads * d->v_dim);
}

extern "C" int cuda_gdn_mix(float *y, const float *mixed, const float *z, const float *b, const float *a,
                            const cuda_gdn_weights *w, const cuda_gdn_seq *seqs, int n_seq, int n_rows, int max_rows,
                            int chunked, const cuda_gdn_dims *d, void *workspace, void *stream) {
    if (cuda_gdn_dims_check(d, NULL, 0) != 0 || n_rows < 0 || (n_rows > 0 && workspace == NULL))
        return CUDA_GDN_EINVAL;
    if (n_rows == 0 || n_seq == 0) return 0;
    float *qkv = (float *)workspace;                         /* [n_rows][conv_dim] */
    float *o = qkv + (size_t)n_rows * cuda_gdn_conv_dim(d);  /* [n_rows][nv][dv] */
    int e = cuda_gdn_conv(qkv, mixed, w->conv_w, seqs, n_seq, max_rows, d, stream);
    if (e) return e;
    if (!chunked) return cuda_gdn_recurrent(y, qkv, z, b, a, w, seqs, n_seq, d, stream);
    e = cuda_gdn_chunked(o, qkv, b, a, w, seqs, n_seq, d, stream);
    if (e) return e;
    return cuda_gdn_gated_norm(y, o, z, w->norm_w, n_rows * d->n_v_heads, d->v_dim, d->eps, stream);
}

extern "C" const char *cuda_gdn_strerror(int code) {
    if (code == 0) return "no error";
    if (code == CUDA_GDN_EINVAL) return "gated deltanet (cuda): an argument is out of range";
    return cudaGetErrorString((cudaError_t)code);
}
