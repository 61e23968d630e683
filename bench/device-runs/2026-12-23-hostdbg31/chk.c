#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/moe.h"
#include "quant/matmul_group.h"
#include "quant/quant.h"
#include "base/threadpool.h"
#include "model/model.h"
#include "clover.h"
#include "offload/expert_host_cpu.h"
#include "quant/simd_level.h"
int main(int argc, char **argv) {
    clover_synth_options o = {.preset = "tiny", .type = argc > 1 ? argv[1] : "q8_0", .seed = 11, .n_layer = 2, .n_embd = 128,
                              .n_expert = 32, .n_ff_exp = 64, .n_threads = 2, .route_skew = 4.0f};
    clover_error err = {0};
    if (clover_synth("/tmp/chk_m.gguf", &o, &err)) { printf("synth: %s\n", err.message); return 1; }
    clover_model *m = NULL;
    if (clover_model_load(&m, "/tmp/chk_m.gguf", &err)) { printf("load: %s\n", err.message); return 1; }
    cpu_moe_weights w;
    cpu_moe_weights_bind(&w, &m->layers[0], &m->hp, 0);
    w.n_ff_shexp = 0;
    const size_t H = w.n_embd, E = w.n_expert, k = w.n_used, N = 32;
    float *x = malloc(N * H * 4), *a = malloc(N * H * 4), *b = malloc(N * H * 4), *lg = malloc(N * E * 4);
    float *wts = malloc(N * k * 4), probs[64];
    int32_t *ids = malloc(N * k * 4);
    uint32_t grp[32] = {0};
    srand(5);
    for (size_t i = 0; i < N * H; i++) x[i] = (float)rand() / RAND_MAX * 2 - 1;
    void *scratch = malloc(cpu_moe_scratch_bytes(&w, N));
    printf("avx512 %d amx %d\n", (int)quant_avx512_active(), (int)quant_amx_active());
    threadpool *pool = NULL;
    threadpool_create(&pool, 1, &err);
    size_t ns[] = {1, 2, 5, 32};
    for (int t = 0; t < 4; t++) {
        size_t n = ns[t];
        const uint8_t *allowed_of[1] = {NULL};
        cpu_moe_forward_groups(a, x, n, &w, grp, allowed_of, NULL, pool, scratch);
        matmul_grouped(pool, w.router_type, w.router, E, H, x, n, lg, NULL);
        for (size_t i = 0; i < n; i++) {
            size_t mm = cpu_moe_route(ids + i * k, wts + i * k, lg + i * E, E, k, NULL, probs);
            for (size_t j = mm; j < k; j++) ids[i * k + j] = -1, wts[i * k + j] = 0;
        }
        cpu_moe_experts(b, x, n, &w, ids, wts, pool, scratch);
        double me = 0, mx = 0;
        for (size_t i = 0; i < n * H; i++) { double d = fabs(a[i] - b[i]); if (d > me) me = d; if (fabs(a[i]) > mx) mx = fabs(a[i]); }
        cpu_moe_forward(a, x, n, &w, NULL, pool, scratch);
        double me2 = 0;
        for (size_t i = 0; i < n * H; i++) { double d = fabs(a[i] - b[i]); if (d > me2) me2 = d; }
        expert_host hk;
        if (expert_host_cpu_open(m, 1, 32, &hk, &err)) { printf("open: %s\n", err.message); return 1; }
        float *c = malloc(N * H * 4);
        if (hk.compute(hk.ctx, 0, c, x, n, ids, wts, &err)) { printf("compute: %s\n", err.message); return 1; }
        double me3 = 0;
        for (size_t i = 0; i < n * H; i++) { double d = fabs(c[i] - b[i]); if (d > me3) me3 = d; }
        hk.close(hk.ctx);
        free(c);
        printf("  hook vs experts %.3g\n", me3);
        printf("%s n=%zu: experts vs forward_groups max|d| %.3g (max|y| %.3g); vs forward %.3g; types g%u u%u d%u\n", o.type, n, me, mx, me2, w.gate_type, w.up_type, w.down_type);
    }
    return 0;
}
