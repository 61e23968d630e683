/*
 * bench_cuda_backend.c: the CUDA backend's passes on a model file, each
 * beside its floor at the device bandwidth measured in the same run, and
 * beside llama.cpp's figure for the same pass.
 *
 * The floor of a pass is the weight bytes it must read over the measured
 * device-to-device copy bandwidth ((read + written) / time, best of 5 over
 * 2 GiB). Bytes per pass:
 *  - decode (1 row): every dense tensor (mixers, norms, routers, shared
 *    experts, the head), k routed experts per layer, one embedding row;
 *  - a chunk of R rows: the dense tensors, the head for the last row, and
 *    the expected number of distinct experts R rows route to per layer,
 *    E (1 - (1 - k/E)^R) (uniform routing: the synthetic files' random
 *    routers are close to it), plus R embedding rows.
 * KV reads are left out of the floor (40 KiB a token for the 35B-A3B: at a
 * 4,096-token context 0.16 GB a step, named beside that figure).
 *
 * Passes: decode from an empty cache and at a 4,096-token context (G steps,
 * the greedy pick fed back), prompts of 512 and 2,048 tokens (commit in
 * chunks of --rows, the last row's logits), and a 32-row chunk commit after a
 * 512-token prompt. llama.cpp's figures are given with --peer-tg/--peer-pp512
 * /--peer-pp32 (llama-bench tg128 / pp512 / pp32 measured in the same run);
 * without them the figures are printed and labelled as such.
 *
 * --prompt-only 1: only the prompts and the chunk commit (a device run's A/B of a chunk-product switch).
 *
 *   bench_cuda_backend MODEL [--rows R] [--gen G] [--prompt-only 1] [--peer-tg X] [--peer-pp512 X] [--peer-pp32 X]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/rng.h"
#include "base/timer.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_mem.h"
#include "model/model.h"

#include "../tests/unit/backend_seq.h" /* one sequence per call of the batched contract */

static double wb(const model_weight *w) { return w->data ? (double)w->nbytes : 0.0; }

typedef struct bytes_of {
    double dense, expert_per_layer, emb_row, head;
    size_t L, E, k;
} bytes_of;

static void count(const clover_model *m, bytes_of *b) {
    memset(b, 0, sizeof *b);
    b->L = m->hp.n_layer, b->E = m->hp.n_expert, b->k = m->hp.n_expert_used;
    b->head = wb(&m->output) + wb(&m->output_norm);
    b->emb_row = wb(&m->token_embd) / (double)m->hp.n_vocab;
    for (size_t l = 0; l < b->L; l++) {
        const model_layer *ly = &m->layers[l];
        double d = wb(&ly->attn_norm) + wb(&ly->post_norm);
        if (ly->kind == MODEL_LAYER_ATTENTION) {
            const model_attention_weights *a = &ly->attn;
            d += wb(&a->q) + wb(&a->k) + wb(&a->v) + wb(&a->o) + wb(&a->q_norm) + wb(&a->k_norm);
        } else {
            const model_gdn_weights *g = &ly->gdn;
            d += wb(&g->qkv) + wb(&g->z) + wb(&g->conv) + wb(&g->dt_bias) + wb(&g->a) + wb(&g->alpha) + wb(&g->beta) +
                 wb(&g->norm) + wb(&g->out);
        }
        const model_moe_weights *e = &ly->moe;
        d += wb(&e->gate_inp) + wb(&e->gate_inp_shexp) + wb(&e->gate_shexp) + wb(&e->up_shexp) + wb(&e->down_shexp);
        b->dense += d;
        b->expert_per_layer += (wb(&e->gate_exps) + wb(&e->up_exps) + wb(&e->down_exps)) / (double)b->E;
    }
    b->expert_per_layer /= (double)b->L; /* the mean expert's bytes per layer */
}

static double chunk_bytes(const bytes_of *b, size_t rows) {
    double used = (double)b->E * (1.0 - pow(1.0 - (double)b->k / (double)b->E, (double)rows));
    return b->dense + b->head + (double)b->L * used * b->expert_per_layer + (double)rows * b->emb_row;
}

static int32_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

static void line(const char *what, double per_s, const char *unit, double floor_s_per_unit, double peer,
                 const char *peer_what) {
    double floor_rate = 1.0 / floor_s_per_unit;
    printf("%-34s %10.1f %s   floor %10.1f %s   %5.1f%% of floor   llama.cpp %s %.1f: %.2fx\n", what, per_s, unit,
           floor_rate, unit, 100.0 * per_s / floor_rate, peer_what, peer, peer > 0 ? per_s / peer : 0.0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_cuda_backend MODEL [--rows R] [--gen G] [--prompt-only 1] [--peer-tg X] [--peer-pp512 X] "
                        "[--peer-pp32 X]\n");
        return 2;
    }
    size_t rows = 512, gen = 64;
    int prompt_only = 0;
    double peer_tg = 229.0, peer_pp512 = 5324.0, peer_pp32 = 1079.0;
    int peers_given = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows")) rows = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--gen")) gen = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--prompt-only")) prompt_only = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--peer-tg")) peer_tg = atof(argv[i + 1]), peers_given = 1;
        else if (!strcmp(argv[i], "--peer-pp512")) peer_pp512 = atof(argv[i + 1]), peers_given = 1;
        else if (!strcmp(argv[i], "--peer-pp32")) peer_pp32 = atof(argv[i + 1]), peers_given = 1;
        else {
            fprintf(stderr, "bench_cuda_backend: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    char why[CUDA_WHY] = "";
    cuda_device_info info;
    if (cuda_device_count(why, sizeof why) <= 0 || cuda_device_query(0, &info, why, sizeof why)) {
        printf("SKIP: no CUDA device (%s)\n", why);
        return 77;
    }
    double bw = 0.0;
    if (cuda_copy_bandwidth(2ull << 30, 5, &bw, why)) {
        fprintf(stderr, "bench_cuda_backend: %s\n", why);
        return 1;
    }
    printf("device %s, %d SMs; copy bandwidth %.0f GB/s ((read + written) / time, 2 GiB, best of 5)\n", info.name,
           info.sm_count, bw);
    printf("llama.cpp figures: %s\n", peers_given ? "given on the command line (llama-bench in this run)"
                                                  : "issue 13's (tg128 229, pp512 5324, pp32 1079 tok/s), NOT "
                                                    "measured in this run");
    clover_model *m = NULL;
    clover_error err = {0};
    double t0 = timer_now();
    if (clover_model_load(&m, argv[1], &err)) {
        fprintf(stderr, "bench_cuda_backend: %s\n", err.message);
        return 1;
    }
    bytes_of b;
    count(m, &b);
    const size_t V = m->hp.n_vocab;
    backend_config cfg = {.max_rows = rows, .max_context = 8192};
    tseq *s = NULL;
    if (seq_create(&backend_cuda, m, &cfg, &s, &err)) {
        fprintf(stderr, "bench_cuda_backend: %s\n", err.message);
        return 1;
    }
    printf("model %s: %.2f GB of weights, load + upload %.1f s; decode reads %.3f GB, a %zu-row chunk ~%.2f GB\n",
           argv[1], (double)cuda_model_bytes(m) * 1e-9, timer_now() - t0,
           (b.dense + b.head + (double)b.L * (double)b.k * b.expert_per_layer + b.emb_row) * 1e-9, rows,
           chunk_bytes(&b, rows) * 1e-9);
    const double decode_bytes = b.dense + b.head + (double)b.L * (double)b.k * b.expert_per_layer + b.emb_row;
    enum { NP = 4096 };
    int32_t *ids = malloc(NP * sizeof *ids);
    float *lg = malloc(V * sizeof *lg);
    rng_state r;
    rng_seed(&r, 7);
    for (size_t i = 0; i < NP; i++) ids[i] = (int32_t)(rng_next(&r) % V);
    backend_commit_seq last = {.last_logits = lg};

    /* decode from an empty cache (one token of prompt), then at a 4,096-token context */
    for (int at = 0; at < (prompt_only ? 0 : 2); at++) {
        seq_reset(s);
        size_t np = at ? NP : 1;
        if (seq_commit(s, ids, np, &last, NULL, &err)) goto fail;
        int32_t next = argmax(lg, V);
        for (int w = 0; w < 3; w++) { /* warm-up (the first captures the graph) */
            if (seq_commit(s, &next, 1, &last, NULL, &err)) goto fail;
            next = argmax(lg, V);
        }
        double ts = timer_now();
        for (size_t g = 0; g < gen; g++) {
            if (seq_commit(s, &next, 1, &last, NULL, &err)) goto fail;
            next = argmax(lg, V);
        }
        double dt = timer_now() - ts;
        line(at ? "decode at a 4096-token context" : "decode from an empty cache", (double)gen / dt, "tok/s",
             decode_bytes / (bw * 1e9), peer_tg, "tg128");
        printf("%-34s (decode steps %s)\n", "", cuda_backend_graph_used(s->s) ? "replay one CUDA graph" : "run kernel by kernel");
        if (at) printf("%-34s (KV read per step at 4096 tokens: %.3f GB, not in the floor)\n", "",
                       (double)cuda_session_kv_bytes_per_token(&m->hp, m) * NP * 1e-9);
    }
    /* the engine's decode path (clover run --ar, the server): the greedy pick on the device, only the id comes
     * back (the lines above copy the whole logits row back and take the argmax on the host, ~0.3 ms a step) */
    if (!prompt_only) {
        seq_reset(s);
        if (seq_commit(s, ids, 1, &last, NULL, &err)) goto fail;
        int32_t tok = argmax(lg, V), id = 0;
        float conf = 0.0f;
        const backend_pick pk = {.temperature = 0.0f};
        double ts = 0.0;
        for (size_t g = 0; g < gen + 3; g++) { /* 3 warm-up steps (the first captures the graph) */
            if (g == 3) ts = timer_now();
            backend_commit_seq q = {.s = s->s, .ids = &tok, .n = 1, .pick = &pk, .n_pick = 1};
            q.pick_out.id = &id, q.pick_out.conf = &conf;
            if (s->ops->commit(s->be, &q, 1, NULL)) {
                err = q.err;
                goto fail;
            }
            tok = id; /* the picked token is the next step's input, as in generation */
        }
        const double dt = timer_now() - ts;
        line("decode, device pick (engine's path)", (double)gen / dt, "tok/s", decode_bytes / (bw * 1e9), peer_tg,
             "tg128");
    }
    /* the same decode steps kernel by kernel (no graph): what the graph saves */
    if (!prompt_only) {
        setenv("CLOVER_CUDA_NO_GRAPH", "1", 1);
        tseq *e = NULL;
        if (seq_create(&backend_cuda, m, &cfg, &e, &err)) goto fail;
        unsetenv("CLOVER_CUDA_NO_GRAPH");
        if (seq_commit(e, ids, 1, &last, NULL, &err)) goto fail;
        int32_t next = argmax(lg, V);
        double ts = timer_now();
        for (size_t g = 0; g < gen; g++) {
            if (seq_commit(e, &next, 1, &last, NULL, &err)) goto fail;
            next = argmax(lg, V);
        }
        double dt = timer_now() - ts;
        line("decode, no graph (diagnostic)", (double)gen / dt, "tok/s", decode_bytes / (bw * 1e9), peer_tg, "tg128");
        seq_free(e);
    }
    /* the graph captured without programmatic dependent launch (cuda_pdl.cuh): what PDL saves */
    if (!prompt_only) {
        cuda_pdl_set(0);
        tseq *e = NULL;
        if (seq_create(&backend_cuda, m, &cfg, &e, &err)) goto fail;
        if (seq_commit(e, ids, 1, &last, NULL, &err)) goto fail;
        int32_t next = argmax(lg, V);
        double ts = 0;
        for (size_t g = 0; g < gen + 3; g++) { /* 3 warm-up steps: the first captures the graph */
            if (g == 3) ts = timer_now();
            if (seq_commit(e, &next, 1, &last, NULL, &err)) goto fail;
            next = argmax(lg, V);
        }
        double dt = timer_now() - ts;
        line("decode, graph without PDL (diag.)", (double)gen / dt, "tok/s", decode_bytes / (bw * 1e9), peer_tg,
             "tg128");
        seq_free(e);
        cuda_pdl_set(1);
    }
    /* prompts */
    const size_t prompts[2] = {512, 2048};
    for (int pi = 0; pi < 2; pi++) {
        size_t P = prompts[pi];
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            seq_reset(s);
            double ts = timer_now();
            if (seq_commit(s, ids, P, &last, NULL, &err)) goto fail;
            double dt = timer_now() - ts;
            if (dt < best) best = dt;
        }
        size_t chunks = (P + rows - 1) / rows;
        double fl = (double)chunks * chunk_bytes(&b, P < rows ? P : rows) / (bw * 1e9) / (double)P;
        char what[64];
        snprintf(what, sizeof what, "prompt of %zu (chunks of %zu)", P, rows);
        line(what, (double)P / best, "tok/s", fl, peer_pp512, "pp512");
    }
    /* a 32-row chunk commit after a 512-token prompt */
    {
        seq_reset(s);
        if (seq_commit(s, ids, 512, NULL, NULL, &err)) goto fail;
        double best = 1e30;
        for (int rep = 0; rep < 8; rep++) {
            double ts = timer_now();
            if (seq_commit(s, ids + 1024 + 32 * rep, 32, NULL, NULL, &err)) goto fail;
            double dt = timer_now() - ts;
            if (dt < best) best = dt;
        }
        line("32-row chunk commit (after 512)", 32.0 / best, "tok/s", (chunk_bytes(&b, 32) - b.head) / (bw * 1e9) / 32.0,
             peer_pp32, "pp32");
    }
    seq_free(s);
    clover_model_free(m);
    free(ids), free(lg);
    return 0;
fail:
    fprintf(stderr, "bench_cuda_backend: %s\n", err.message);
    return 1;
}
