/*
 * bench_cuda_mixer.c: speed of the CUDA attention and GDN operators
 * (src/cuda/cuda_attention.h, cuda_gdn.h) at the Qwen3.5-35B-A3B sizes
 * (attention 16 / 2 heads x 256, rot 64; GDN 16 / 32 heads x 128, K 4).
 * Each figure is printed beside its floor: the bytes the operator must move
 * (K/V rows read, state read and written, activations) at the device copy
 * bandwidth measured in the same run (a timed device-to-device copy of
 * 1 GiB). Decode steps are captured in a CUDA graph and replayed, so the
 * time includes what a graph launch costs per kernel, as in a decode step.
 * The peer is the whole-model figure of llama.cpp on the same file
 * (issue 13: tg128 229 tok/s, i.e. 4.37 ms per token for all 40 layers).
 * Prints "SKIP" and exits 77 without a device.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "cuda/cuda_attention.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_gdn.h"

#include "cuda_bench.h"


static float *dev_random(size_t n, rng_state *r, float scale) {
    float *h = malloc(n * sizeof *h), *d = NULL;
    for (size_t i = 0; i < n; i++) h[i] = scale * (rng_uniform(r) * 2.0f - 1.0f);
    CU(cudaMalloc((void **)&d, n * sizeof *d));
    CU(cudaMemcpy(d, h, n * sizeof *d, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

static double copy_bandwidth(void) {
    size_t bytes = (size_t)1 << 30;
    void *a, *b;
    CU(cudaMalloc(&a, bytes));
    CU(cudaMalloc(&b, bytes));
    CU(cudaMemset(a, 1, bytes));
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    CU(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    CU(cudaEventRecord(e0, 0));
    for (int i = 0; i < 10; i++) CU(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    CU(cudaEventRecord(e1, 0));
    CU(cudaEventSynchronize(e1));
    float ms;
    CU(cudaEventElapsedTime(&ms, e0, e1));
    cudaFree(a), cudaFree(b);
    return 2.0 * 10 * (double)bytes / (ms * 1e-3); /* read + write */
}

typedef void (*step_fn)(void *ctx, cudaStream_t st);

/* Seconds per call of fn: captured in a graph when `graph`, else plain launches. */
static double time_step(step_fn fn, void *ctx, int iters, int graph) {
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraphExec_t ex = NULL;
    if (graph) {
        cudaGraph_t g;
        CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        fn(ctx, st);
        CU(cudaStreamEndCapture(st, &g));
        CU(cudaGraphInstantiate(&ex, g, 0));
        CU(cudaGraphDestroy(g));
    }
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    /* warm up for >= 150 ms (the SM clock ramps up from idle: nvidia-smi read
     * 345 MHz before the first run), then time at least `iters` calls and
     * >= 50 ms */
    float ms = 0.0f;
    int reps = 3;
    for (int round = 0; round < 3; round++) {
        CU(cudaEventRecord(e0, st));
        for (int i = 0; i < reps; i++) {
            if (graph)
                CU(cudaGraphLaunch(ex, st));
            else
                fn(ctx, st);
        }
        CU(cudaEventRecord(e1, st));
        CU(cudaEventSynchronize(e1));
        CU(cudaGetLastError());
        CU(cudaEventElapsedTime(&ms, e0, e1));
        if (round == 2) break;
        double per = ms / reps;
        int want = round == 0 ? (int)(150.0 / per) : (int)(50.0 / per);
        reps = want > iters ? want : iters;
        if (reps > 200000) reps = 200000;
    }
    ms /= (float)reps;
    if (ex) cudaGraphExecDestroy(ex);
    cudaStreamDestroy(st);
    return ms * 1e-3;
}

/* ---- attention ---- */
typedef struct attn_ctx {
    cuda_attn_dims d;
    float *qg, *k, *v, *qn, *kn, *invf, *out, *ws;
    cuda_attn_seq *seqs;
    int n, max_kv;
} attn_ctx;

static void attn_step(void *p, cudaStream_t st) {
    attn_ctx *c = p;
    CU(cuda_attn_prepare(c->qg, c->k, c->v, c->qn, c->kn, c->invf, c->seqs, 1, c->n, &c->d, st));
    CU(cuda_attn_forward(c->out, c->qg, c->seqs, 1, c->n, c->n, c->max_kv, 1, &c->d, c->ws, st));
}

static void bench_attention(double bw, int pos, int n, rng_state *r) {
    attn_ctx c = {.d = {16, 2, 256, 64, 1e-6f}, .n = n, .max_kv = pos + n};
    const size_t nh = 16, nkv = 2, hd = 256, ctx = (size_t)pos + n;
    c.qg = dev_random((size_t)n * nh * 2 * hd, r, 1.0f);
    c.k = dev_random((size_t)n * nkv * hd, r, 1.0f);
    c.v = dev_random((size_t)n * nkv * hd, r, 1.0f);
    c.qn = dev_random(hd, r, 1.0f);
    c.kn = dev_random(hd, r, 1.0f);
    c.invf = dev_random(32, r, 0.01f);
    c.out = dev_random((size_t)n * nh * hd, r, 1.0f);
    float *kc = dev_random(ctx * nkv * hd, r, 1.0f), *vc = dev_random(ctx * nkv * hd, r, 1.0f);
    size_t wb = cuda_attn_workspace_bytes(&c.d, n, n, c.max_kv);
    c.ws = NULL;
    if (wb) CU(cudaMalloc((void **)&c.ws, wb));
    cuda_attn_seq s = {.k_cache = kc, .v_cache = vc, .pos = pos, .row0 = 0, .n = n};
    c.seqs = bench_dev_copy(&s, sizeof s);
    double t = time_step(attn_step, &c, n <= 8 ? 500 : 20, 1);
    /* floor: every K/V row in view read once, the rows' q/gate/k/v/out once */
    double bytes = (double)ctx * nkv * hd * 4 * 2 + (double)n * (nh * 3 * hd + 2 * nkv * hd) * 4;
    double flops = 4.0 * nh * hd * (n <= 1 ? (double)ctx : (double)n * ((double)pos + (n + 1) / 2.0));
    cuda_attn_plan_t pl = cuda_attn_plan(&c.d, n, c.max_kv);
    printf("attention  %4d rows at pos %5d: %8.2f us  floor %7.2f us (%5.1f%%)  %7.2f TFLOP/s f32  splits %d x %d\n",
           n, pos, t * 1e6, bytes / bw * 1e6, 100.0 * (bytes / bw) / t, flops / t * 1e-12, pl.n_splits,
           pl.split_len);
    cudaFree(c.qg), cudaFree(c.k), cudaFree(c.v), cudaFree(c.qn), cudaFree(c.kn), cudaFree(c.invf);
    cudaFree(c.out), cudaFree(c.ws), cudaFree(c.seqs), cudaFree(kc), cudaFree(vc);
}

/* ---- GDN ---- */
typedef struct gdn_ctx {
    cuda_gdn_dims d;
    float *mixed, *z, *b, *a, *y, *ws;
    cuda_gdn_weights w;
    cuda_gdn_seq *seqs;
    int n;
} gdn_ctx;

static void gdn_step(void *p, cudaStream_t st) {
    gdn_ctx *c = p;
    CU(cuda_gdn_mix(c->y, c->mixed, c->z, c->b, c->a, &c->w, c->seqs, 1, c->n, c->n, c->n > 1, &c->d, c->ws, st));
}

static void bench_gdn(double bw, int n, rng_state *r) {
    gdn_ctx c = {.d = {16, 32, 128, 128, 4, 1e-6f, 1}, .n = n};
    const size_t cd = (size_t)cuda_gdn_conv_dim(&c.d), nv = 32, dv = 128, S = nv * 128 * dv;
    c.mixed = dev_random((size_t)n * cd, r, 1.0f);
    c.z = dev_random((size_t)n * nv * dv, r, 1.0f);
    c.b = dev_random((size_t)n * nv, r, 1.0f);
    c.a = dev_random((size_t)n * nv, r, 1.0f);
    c.y = dev_random((size_t)n * nv * dv, r, 1.0f);
    c.w.conv_w = dev_random(cd * 4, r, 0.5f);
    c.w.ssm_a = dev_random(nv, r, 1.0f); /* the decay's sign does not change the cost */
    c.w.dt_bias = dev_random(nv, r, 0.5f);
    c.w.norm_w = dev_random(dv, r, 1.0f);
    float *ring = dev_random(3 * cd, r, 1.0f), *state = dev_random(S, r, 0.01f);
    CU(cudaMalloc((void **)&c.ws, cuda_gdn_mix_workspace_bytes(&c.d, n)));
    cuda_gdn_seq s = {.ring = ring, .state = state, .row0 = 0, .n = n};
    c.seqs = bench_dev_copy(&s, sizeof s);
    double t = time_step(gdn_step, &c, n <= 8 ? 500 : 20, 1);
    /* floor: the state read and written once, the ring twice, the rows' activations once each way */
    double bytes = 2.0 * S * 4 + 2.0 * 3 * cd * 4 + (double)n * (2 * cd + 2 * nv * dv + 2 * nv) * 4;
    printf("gdn mix    %4d rows (%s): %8.2f us  floor %7.2f us (%5.1f%%)\n", n, n > 1 ? "chunked  " : "recurrent",
           t * 1e6, bytes / bw * 1e6, 100.0 * (bytes / bw) / t);
    cudaFree(c.mixed), cudaFree(c.z), cudaFree(c.b), cudaFree(c.a), cudaFree(c.y), cudaFree(c.ws);
    cudaFree((void *)c.w.conv_w), cudaFree((void *)c.w.ssm_a), cudaFree((void *)c.w.dt_bias);
    cudaFree((void *)c.w.norm_w), cudaFree(ring), cudaFree(state), cudaFree(c.seqs);
}

int main(void) {
    char why[256] = "";
    if (cuda_device_count(why, sizeof why) <= 0) {
        printf("SKIP: no CUDA device (%s)\n", why);
        return 77;
    }
    cuda_device_info info;
    if (cuda_device_query(0, &info, why, sizeof why) == 0)
        printf("device: %s, %d SMs, %.1f GiB\n", info.name, info.sm_count, info.total_bytes / 1073741824.0);
    CU(cuda_attn_init());
    CU(cuda_gdn_init());
    double bw = copy_bandwidth();
    printf("copy bandwidth (d2d, 1 GiB): %.0f GB/s\n", bw * 1e-9);
    rng_state r;
    rng_seed(&r, 7);
    bench_attention(bw, 0, 1, &r);
    bench_attention(bw, 4095, 1, &r);
    bench_attention(bw, 4092, 4, &r);
    bench_attention(bw, 32767, 1, &r);
    bench_attention(bw, 0, 32, &r);
    bench_attention(bw, 0, 512, &r);
    bench_attention(bw, 0, 2048, &r);
    bench_gdn(bw, 1, &r);
    bench_gdn(bw, 4, &r);
    bench_gdn(bw, 32, &r);
    bench_gdn(bw, 512, &r);
    bench_gdn(bw, 2048, &r);
    printf("peer (whole model, llama.cpp, issue 13): tg128 229 tok/s = 4367 us per token over 10 attention + 30 gdn "
           "layers and the rest\n");
    return 0;
}
