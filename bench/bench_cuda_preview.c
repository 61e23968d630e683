/*
 * bench_cuda_preview.c: block diffusion's passes on the CUDA backend
 * (issue 14) on a Clover model file, after a 512-token prompt, each beside
 * its floor at the copy bandwidth measured in the same run and beside the
 * bar (10 ms) and llama.cpp's 32-row chunk:
 *  - preview of a B-row block (B = 32 unless --block): the first pass (every
 *    row masked) and a pass with half the rows fixed (the 16 most confident
 *    picks of the first greedy pass, fixed to those ids), each with and
 *    without the coreset; every preview picks its masked rows on the device
 *    (greedy, the mask id forbidden), 8 bytes a row back;
 *  - the commit of a B-row block (checkpoint restored between repetitions);
 *  - one whole block resolved (backend resolve, greedy, the record's
 *    threshold) and block-diffusion tokens/s = B / (resolve + commit).
 * The first case is also timed on a session without graphs (what the
 * preview's captured trunk saves). The floor of a pass is the bytes it must read: every dense tensor, the
 * head when a row needs logits, the embedding rows, and the experts the
 * pass actually routes to, measured per layer (a second session with
 * CLOVER_CUDA_COUNT_EXPERTS marks them on the device), over the bandwidth.
 *
 * --profile: only the marked ranges, each between cudaProfilerStart and
 * cudaProfilerStop, for bench/cuda_kernel_trace.c (CUPTI: graph replays as
 * they run) or `ncu --profile-from-start off`: (1) the 512-token prompt's
 * commit, then on the graph session after one unmarked warm-up each (the
 * capture) (2) a preview with the coreset, (3) one without, (4) the commit
 * of the block, and (5) a preview with the coreset on the session without
 * graphs (each kernel its own launch). CLOVER_BENCH_PROFILE_ONLY=N marks range
 * N alone (ncu over range 1's ~18,000 kernels outlasts a device call).
 *
 *   bench_cuda_preview MODEL [--block B] [--reps N] [--peer-pp32 X] [--profile]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_profiler_api.h>

#include "backend/backend.h"
#include "base/rng.h"
#include "base/timer.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_mem.h"
#include "model/model.h"

static double wb(const model_weight *w) { return w->data ? (double)w->nbytes : 0.0; }

/* Every tensor a pass reads whatever the routing (experts apart), the head, one embedding row. */
static void dense_bytes(const clover_model *m, double *dense, double *head, double *emb_row, double *exp_bytes) {
    *dense = 0;
    *head = wb(&m->output) + wb(&m->output_norm);
    *emb_row = wb(&m->token_embd) / (double)m->hp.n_vocab;
    for (size_t l = 0; l < m->hp.n_layer; l++) {
        const model_layer *ly = &m->layers[l];
        double d = wb(&ly->attn_norm) + wb(&ly->post_norm);
        if (ly->kind == MODEL_LAYER_ATTENTION) {
            const model_attention_weights *a = &ly->attn;
            d += wb(&a->q) + wb(&a->k) + wb(&a->v) + wb(&a->o) + wb(&a->q_norm) + wb(&a->k_norm);
        } else {
            const model_gdn_weights *g = &ly->gdn;
            d += wb(&g->qkv) + wb(&g->z) + wb(&g->conv) + wb(&g->dt_bias) + wb(&g->a) + wb(&g->alpha) + wb(&g->beta) +
                 wb(&g->norm) + wb(&g->out) + wb(&g->conv_right) + wb(&g->logit_scale) + wb(&g->history_bias) +
                 wb(&g->history_c);
        }
        const model_moe_weights *e = &ly->moe;
        d += wb(&e->gate_inp) + wb(&e->gate_inp_shexp) + wb(&e->gate_shexp) + wb(&e->up_shexp) + wb(&e->down_shexp);
        *dense += d;
        exp_bytes[l] = (wb(&e->gate_exps) + wb(&e->up_exps) + wb(&e->down_exps)) / (double)m->hp.n_expert;
    }
}

typedef struct bench {
    const clover_model *m;
    backend *be;
    backend_session *s, *cnt, *eager; /* timed; counting the experts; timed without graphs */
    double bw, dense, head, emb_row, *exp_bytes;
    uint8_t *used;
    int reps;
} bench;

/* Experts the last pass of the counting session routed to, and their bytes. */
static int used_bytes(bench *B, double *bytes, size_t *n_used) {
    const size_t L = B->m->hp.n_layer, E = B->m->hp.n_expert;
    char why[CUDA_WHY];
    if (cuda_d2h(B->used, B->cnt->sc.used, L * E, why)) {
        fprintf(stderr, "bench_cuda_preview: %s\n", why);
        return -1;
    }
    *bytes = 0, *n_used = 0;
    for (size_t l = 0; l < L; l++)
        for (size_t e = 0; e < E; e++)
            if (B->used[l * E + e]) *bytes += B->exp_bytes[l], ++*n_used;
    return 0;
}

static int clear_used(bench *B) {
    char why[CUDA_WHY];
    return cuda_memset(B->cnt->sc.used, 0, B->m->hp.n_layer * B->m->hp.n_expert, NULL, why) ||
           cuda_stream_sync(NULL, why);
}

static void report(const bench *B, const char *what, double best_s, double exp_bytes, size_t n_used, size_t rows,
                   bool head, double peer_ms) {
    const double bytes = B->dense + (head ? B->head : 0) + exp_bytes + (double)rows * B->emb_row;
    const double floor_s = bytes / (B->bw * 1e9);
    printf("%-44s %8.3f ms   floor %6.3f ms (%.2f GB, %zu experts over the layers)   %5.1f%% of floor   bar 10 ms: "
           "%s   llama.cpp pp32 chunk %.2f ms: %.2fx\n",
           what, best_s * 1e3, floor_s * 1e3, bytes * 1e-9, n_used, 100.0 * floor_s / best_s,
           best_s <= 0.010 ? "met" : "NOT met", peer_ms, peer_ms / (best_s * 1e3));
}

/* Times a preview (best of reps) on the timed session, then measures its experts on the counting one. */
static int preview_case(bench *B, backend_session *timed, const char *what, const int32_t *block,
                        const uint8_t *pending, size_t b, bool coreset, int32_t *id, float *conf, double peer_ms) {
    const int32_t mask = B->m->record.mask_token_id;
    backend_pick pk = {.temperature = 0.0f, .forbid = &mask, .n_forbid = 1};
    backend_preview_seq q = {.block = block, .b = b, .pending = pending, .pick = &pk,
                             .opts = {.record_block_size = B->m->record.block_size, .coreset = coreset,
                                      .coreset_top_p = B->m->record.coreset_top_p},
                             .pick_out = {.id = id, .conf = conf}};
    clover_error err = {0};
    double best = 1e30;
    backend_pass_stats st = {0};
    for (int r = 0; r < B->reps + 1; r++) { /* the first is a warm-up */
        q.s = timed;
        double t0 = timer_now();
        if (backend_preview1(&backend_cuda, B->be, &q, r ? NULL : &st, &err)) {
            fprintf(stderr, "bench_cuda_preview: %s: %s\n", what, err.message);
            return -1;
        }
        double dt = timer_now() - t0;
        if (r && dt < best) best = dt;
    }
    q.s = B->cnt;
    double eb = 0;
    size_t nu = 0;
    int32_t id2[256];
    float cf2[256];
    q.pick_out = (backend_pick_out){.id = id2, .conf = cf2};
    if (clear_used(B) || backend_preview1(&backend_cuda, B->be, &q, NULL, &err) || used_bytes(B, &eb, &nu)) {
        fprintf(stderr, "bench_cuda_preview: %s (counting): %s\n", what, err.message);
        return -1;
    }
    size_t n_head = 0;
    for (size_t r = 0; r < b; r++) n_head += pending[r] != 0;
    report(B, what, best, eb, nu, b, n_head > 0, peer_ms);
    if (coreset && st.coreset_layers)
        printf("%-44s (coreset: %.1f experts kept a layer on average, of %u)\n", "",
               (double)st.coreset_kept / (double)st.coreset_layers, B->m->hp.n_expert);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_cuda_preview MODEL [--block B] [--reps N] [--peer-pp32 X] [--profile]\n");
        return 2;
    }
    size_t b = 32;
    int reps = 5;
    double peer_pp32 = 1079.0;
    int peer_given = 0, profile = 0;
    for (int i = 2; i < argc; i += 2) {
        if (!strcmp(argv[i], "--profile")) {
            profile = 1, i--;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_cuda_preview: %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--block")) b = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--peer-pp32")) peer_pp32 = atof(argv[i + 1]), peer_given = 1;
        else {
            fprintf(stderr, "bench_cuda_preview: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (b == 0 || b > 256 || reps < 1) {
        fprintf(stderr, "bench_cuda_preview: --block 1..256, --reps >= 1\n");
        return 2;
    }
    char why[CUDA_WHY] = "";
    cuda_device_info info;
    if (cuda_device_count(why, sizeof why) <= 0 || cuda_device_query(0, &info, why, sizeof why)) {
        printf("SKIP: no CUDA device (%s)\n", why);
        return 77;
    }
    bench B = {.reps = reps};
    if (cuda_copy_bandwidth(2ull << 30, 5, &B.bw, why)) {
        fprintf(stderr, "bench_cuda_preview: %s\n", why);
        return 1;
    }
    printf("device %s, %d SMs; copy bandwidth %.0f GB/s ((read + written) / time, 2 GiB, best of 5)\n", info.name,
           info.sm_count, B.bw);
    const double peer_ms = 32.0 / peer_pp32 * 1e3;
    printf("llama.cpp pp32: %.1f tok/s (%s) = %.2f ms a 32-row chunk\n", peer_pp32,
           peer_given ? "llama-bench in this run" : "issue 14's figure, NOT measured in this run", peer_ms);
    clover_model *m = NULL;
    clover_error err = {0};
    if (clover_model_load(&m, argv[1], &err)) {
        fprintf(stderr, "bench_cuda_preview: %s\n", err.message);
        return 1;
    }
    if (!m->has_record) {
        fprintf(stderr, "bench_cuda_preview: %s has no block-diffusion record (make it without --no-diffusion)\n",
                argv[1]);
        return 1;
    }
    B.m = m;
    const size_t L = m->hp.n_layer, E = m->hp.n_expert, V = m->hp.n_vocab, P = 512;
    B.exp_bytes = calloc(L, sizeof(double));
    B.used = malloc(L * E);
    dense_bytes(m, &B.dense, &B.head, &B.emb_row, B.exp_bytes);
    backend_config cfg = {.max_rows = b, .max_context = 2048};
    double t0 = timer_now();
    if (backend_cuda.create(m, &cfg, &B.be, &err) || backend_cuda.session_create(B.be, &B.s, &err)) goto fail;
    setenv("CLOVER_CUDA_COUNT_EXPERTS", "1", 1);
    if (backend_cuda.session_create(B.be, &B.cnt, &err)) goto fail;
    unsetenv("CLOVER_CUDA_COUNT_EXPERTS");
    setenv("CLOVER_CUDA_NO_GRAPH", "1", 1);
    if (backend_cuda.session_create(B.be, &B.eager, &err)) goto fail;
    unsetenv("CLOVER_CUDA_NO_GRAPH");
    printf("model %s: %.2f GB of weights, upload %.1f s; dense %.3f GB, head %.3f GB, block %zu, record B %u, "
           "threshold %.2f, coreset top-p %.2f\n",
           argv[1], (double)cuda_model_bytes(m) * 1e-9, timer_now() - t0, B.dense * 1e-9, B.head * 1e-9, b,
           m->record.block_size, (double)m->record.threshold, (double)m->record.coreset_top_p);
    int32_t *ids = malloc((P + 8 * 256) * sizeof *ids);
    rng_state r;
    rng_seed(&r, 7);
    const int32_t mask = m->record.mask_token_id;
    for (size_t i = 0; i < P + 8 * 256; i++) {
        ids[i] = (int32_t)(rng_next(&r) % V);
        if (ids[i] == mask) ids[i] = (int32_t)((ids[i] + 1) % V);
    }
    backend_commit_seq c = {.s = B.s, .ids = ids, .n = P};
    const char *only_s = getenv("CLOVER_BENCH_PROFILE_ONLY");
    const int only = only_s ? atoi(only_s) : 0; /* 0: every range marked */
#define MARKED(range) (profile && (only == 0 || only == (range)))
    if (MARKED(1)) cudaProfilerStart();
    if (backend_commit1(&backend_cuda, B.be, &c, NULL, &err)) goto fail;
    if (MARKED(1)) cudaProfilerStop(), printf("profiled 1: commit of the %zu-token prompt\n", P);
    c.s = B.cnt;
    if (backend_commit1(&backend_cuda, B.be, &c, NULL, &err)) goto fail;
    c.s = B.eager;
    if (backend_commit1(&backend_cuda, B.be, &c, NULL, &err)) goto fail;

    int32_t block[256], id[256];
    float conf[256];
    uint8_t pending[256];
    for (size_t i = 0; i < b; i++) block[i] = mask, pending[i] = 1;
    if (profile) { /* the marked ranges only; each graph shape captured by an unmarked pass first */
        backend_pick pk = {.temperature = 0.0f, .forbid = &mask, .n_forbid = 1};
        int nr = 2;
        for (int cs = 1; cs >= 0; cs--)
            for (int warm = 1; warm >= 0; warm--) {
                backend_preview_seq q = {.s = B.s, .block = block, .b = b, .pending = pending, .pick = &pk,
                                         .opts = {.record_block_size = m->record.block_size, .coreset = cs != 0,
                                                  .coreset_top_p = m->record.coreset_top_p},
                                         .pick_out = {.id = id, .conf = conf}};
                const bool mark = !warm && MARKED(nr);
                if (mark) cudaProfilerStart();
                const int rc = backend_preview1(&backend_cuda, B.be, &q, NULL, &err);
                if (mark) cudaProfilerStop();
                if (rc) goto fail;
                if (mark) printf("profiled %d: preview %zu rows, first pass, %s (graph)\n", nr, b,
                                 cs ? "coreset" : "no coreset");
                nr += !warm;
            }
        backend_checkpoint *pck = NULL;
        if (backend_cuda.checkpoint_create(B.s, &pck, &err) || backend_cuda.checkpoint_save(B.s, pck, &err)) goto fail;
        for (int warm = 1; warm >= 0; warm--) {
            backend_commit_seq bc = {.s = B.s, .ids = ids + P, .n = b};
            const bool mark = !warm && MARKED(nr);
            if (mark) cudaProfilerStart();
            const int rc = backend_commit1(&backend_cuda, B.be, &bc, NULL, &err);
            if (mark) cudaProfilerStop();
            if (rc || backend_cuda.checkpoint_restore(B.s, pck, &err)) goto fail;
            if (mark) printf("profiled %d: commit of a %zu-row block (graph session)\n", nr, b);
            nr += !warm;
        }
        backend_preview_seq q = {.s = B.eager, .block = block, .b = b, .pending = pending, .pick = &pk,
                                 .opts = {.record_block_size = m->record.block_size, .coreset = true,
                                          .coreset_top_p = m->record.coreset_top_p},
                                 .pick_out = {.id = id, .conf = conf}};
        if (MARKED(nr)) cudaProfilerStart();
        const int rc = backend_preview1(&backend_cuda, B.be, &q, NULL, &err);
        if (MARKED(nr)) cudaProfilerStop();
        if (rc) goto fail;
        if (MARKED(nr)) printf("profiled %d: preview %zu rows, first pass, coreset (eager: no graph)\n", nr, b);
        return 0;
#undef MARKED
    }
    char what[96];
    snprintf(what, sizeof what, "preview %zu rows, first pass, coreset", b);
    if (preview_case(&B, B.s, what, block, pending, b, true, id, conf, peer_ms)) goto fail2;
    snprintf(what, sizeof what, "  the same without the graph (diagnostic)");
    if (preview_case(&B, B.eager, what, block, pending, b, true, id, conf, peer_ms)) goto fail2;
    snprintf(what, sizeof what, "preview %zu rows, first pass, no coreset", b);
    if (preview_case(&B, B.s, what, block, pending, b, false, id, conf, peer_ms)) goto fail2;
    /* half fixed: the b/2 most confident rows of that greedy first pass, at their picks */
    for (size_t k = 0; k < b / 2; k++) {
        size_t best = b;
        for (size_t i = 0; i < b; i++)
            if (pending[i] && (best == b || conf[i] > conf[best])) best = i;
        block[best] = id[best], pending[best] = 0;
    }
    snprintf(what, sizeof what, "preview %zu rows, half fixed, coreset", b);
    if (preview_case(&B, B.s, what, block, pending, b, true, id, conf, peer_ms)) goto fail2;
    snprintf(what, sizeof what, "preview %zu rows, half fixed, no coreset", b);
    if (preview_case(&B, B.s, what, block, pending, b, false, id, conf, peer_ms)) goto fail2;

    /* the block commit, restored between repetitions */
    backend_checkpoint *ck = NULL, *ck2 = NULL;
    if (backend_cuda.checkpoint_create(B.s, &ck, &err) || backend_cuda.checkpoint_save(B.s, ck, &err) ||
        backend_cuda.checkpoint_create(B.cnt, &ck2, &err) || backend_cuda.checkpoint_save(B.cnt, ck2, &err))
        goto fail;
    double best = 1e30;
    for (int rep = 0; rep < reps + 1; rep++) {
        backend_commit_seq bc = {.s = B.s, .ids = ids + P + b * (size_t)rep, .n = b};
        double ts = timer_now();
        if (backend_commit1(&backend_cuda, B.be, &bc, NULL, &err)) goto fail;
        double dt = timer_now() - ts;
        if (rep && dt < best) best = dt;
        if (backend_cuda.checkpoint_restore(B.s, ck, &err)) goto fail;
    }
    {
        backend_commit_seq bc = {.s = B.cnt, .ids = ids + P, .n = b};
        double eb = 0;
        size_t nu = 0;
        if (clear_used(&B) || backend_commit1(&backend_cuda, B.be, &bc, NULL, &err) || used_bytes(&B, &eb, &nu) ||
            backend_cuda.checkpoint_restore(B.cnt, ck2, &err))
            goto fail;
        snprintf(what, sizeof what, "commit of a %zu-row block (after 512)", b);
        report(&B, what, best, eb, nu, b, false, peer_ms);
    }
    const double commit_s = best;
    /* one block resolved inside the backend, greedy, the record's threshold */
    {
        backend_pick pk = {.temperature = 0.0f, .forbid = &mask, .n_forbid = 1};
        int32_t blk[256];
        float cf[256];
        uint8_t fixed_at[256];
        uint64_t rng = 0;
        best = 1e30;
        size_t passes = 0;
        for (int rep = 0; rep < 3; rep++) {
            for (size_t i = 0; i < b; i++) blk[i] = mask;
            backend_resolve_seq q = {.s = B.s, .block = blk, .conf = cf, .b = b,
                                     .opts = {.record_block_size = m->record.block_size, .coreset = true,
                                              .coreset_top_p = m->record.coreset_top_p},
                                     .pick = &pk, .threshold = m->record.threshold, .rng = &rng,
                                     .fixed_at = fixed_at};
            double ts = timer_now();
            if (backend_cuda.resolve(B.be, &q, 1, NULL, NULL)) {
                fprintf(stderr, "bench_cuda_preview: resolve: %s\n", q.err.message);
                goto fail2;
            }
            double dt = timer_now() - ts;
            if (dt < best) best = dt;
            passes = q.passes;
        }
        printf("%-44s %8.3f ms   %zu passes (%.3f ms a pass, %.1f tokens a pass)\n", "resolve of one block (greedy)",
               best * 1e3, passes, best * 1e3 / (double)passes, (double)b / (double)passes);
        printf("%-44s %8.1f tok/s   (%zu tokens / (resolve %.2f ms + commit %.2f ms))\n",
               "block-diffusion tokens/s", (double)b / (best + commit_s), b, best * 1e3, commit_s * 1e3);
    }
    backend_cuda.checkpoint_free(ck);
    backend_cuda.checkpoint_free(ck2);
    backend_cuda.session_free(B.s);
    backend_cuda.session_free(B.cnt);
    backend_cuda.session_free(B.eager);
    backend_cuda.destroy(B.be);
    clover_model_free(m);
    free(ids), free(B.exp_bytes), free(B.used);
    return 0;
fail:
    fprintf(stderr, "bench_cuda_preview: %s\n", err.message);
fail2:
    return 1;
}
