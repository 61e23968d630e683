/*
 * backend_cuda.c: the CUDA backend on contract v2 (backend.h), the table
 * the engine runs on (backend_cuda).
 *
 *  backend   one per (model, device): holds a reference to the model's
 *            device weights (cuda_model, uploaded once when the backend is
 *            created and shared by its sessions), the configuration every
 *            session is made with, and the host pick context.
 *            It also owns the pinned host buffers every session's pass
 *            transfers through (one set, cuda_pinned; CLOVER_CUDA_OWN_PINNED:
 *            one per session).
 *  sessions  backend_cuda_session.c's, unchanged: each takes its whole
 *            state and its scratch when it is created, against free device
 *            memory (the admission rule), so a pass never runs out of memory.
 *
 Commit: every one-row commit of a call (a decode step; a sequence alone
 * too) goes into ONE stacked pass (backend_cuda_stack.c: the weights read
 * once for all those rows, attention and GDN per sequence, the picks on the
 * device in one grouped launch (CLOVER_CUDA_PICK_EACH: one per sequence),
 * one host sync), each row on the kernels it has alone, so a row's
 * bits do not depend on the others. Other commits (prompt chunks, a drafted
 * block's verification, NLL, all logits) run each sequence in turn with the
 * one-sequence pass (backend_cuda_commit.c, chunks of max_rows from the
 * sequence's first row) and pick on the host (backend/pick.c, the
 * contract's oracle). Every argument of a sequence is checked before its
 * pass is enqueued, so a failing sequence leaves its session as it was and
 * the others run as if it had not been there.
 *
 * Preview and resolve (block diffusion) run per sequence in
 * backend_cuda_preview.c: the pass, the coreset and the pick on the device,
 * 8 bytes a picked row back. A
 * checkpoint is a device copy of the GDN rings and states and the length
 * (KV rows below the length are never rewritten: restoring truncates).
 */
#include <stdlib.h>
#include <string.h>

#include "backend/expert_pool.h"
#include "backend/pick.h"
#include "base/alloc.h"
#include "base/error.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_matmul.h"
#include "cuda/cuda_mem.h"
#include "backend/sampler.h"

/* Room the runtime and a session's scratch need beyond the weights, for probe's "fits". */
#define PROBE_MARGIN (512ull << 20)

struct backend {
    const clover_model *model;
    backend_config cfg; /* max_rows and max_context after defaults */
    cuda_model *cm;
    host_pick_ctx pick;
    uint32_t *counts; /* [n_vocab] the pick's penalty counts (unused on the causal path, but required) */
    backend_session *stack; /* the stacked executor of one-row commits (backend_cuda_stack.c), made on first use */
    bool stack_off;         /* it could not be made, or CLOVER_CUDA_NO_STACK: one-row commits run one by one */
    cuda_pinned pinned;     /* the sessions' shared pinned transfer buffers (made with the first session) */
    bool own_pinned;        /* CLOVER_CUDA_OWN_PINNED: each session pins its own, as before */
    bool stack_chunks;      /* CLOVER_CUDA_STACK_CHUNKS=1: prompt chunks stacked too (off until run on a device) */
    bool dev_snapshot;      /* state copies (prompt snapshots) in device memory unless CLOVER_CUDA_DEVICE_SNAPSHOT=0 */
    uint32_t n_run;         /* layers [0, n_run) (backend_config's range; n_layer: the whole model) */
    bool ranged;            /* n_run < n_layer: the front of a split (on unless CLOVER_CUDA_LAYER_RANGE=0) */
};

/* Sequences of one stacked pass at most (the engine's calls carry up to 64), and its rows (16 blocks of 32). */
enum { STACK_SEQS = 64, STACK_ROWS = 512 };

struct backend_checkpoint {
    backend_session *s;
    void *dev;   /* every GDN layer's ring then state, in layer order */
    size_t n_past;
    uint64_t epoch;
    bool valid;
};

static size_t ring_bytes(const model_hparams *hp) {
    return (size_t)(hp->ssm_conv_kernel - 1) * hp->gdn_conv_dim * sizeof(float);
}
static size_t st_bytes(const model_hparams *hp) { return (size_t)hp->gdn_nv * hp->gdn_dk * hp->gdn_dv * sizeof(float); }

static int cuda_probe(const clover_model *model, const backend_config *cfg, clover_error *err) {
    if (!model) return error_set(err, CLOVER_E_INVALID, "CUDA backend: no model");
    const uint32_t n_run = cuda_config_layers(model, cfg, err); /* main's refusal of a range unless switched on */
    if (!n_run) return err ? err->code : CLOVER_E_UNSUPPORTED;
    int rc = cuda_backend_usable(model, err);
    if (rc) return rc;
    char why[CUDA_WHY] = "";
    const uint64_t gm = cfg ? cfg->gpu_mem : 0;
    size_t fr = 0, tot = 0, w = gm ? cuda_model_dense_bytes(model) : cuda_model_range_bytes(model, n_run);
    if (cuda_mem_info(&fr, &tot, why)) return error_set(err, CLOVER_E_UNSUPPORTED, "CUDA backend: %s", why);
    if (gm && n_run < model->hp.n_layer)
        return error_set(err, CLOVER_E_UNSUPPORTED, "--gpu-mem and --gpu-layers do not go together (the experts' "
                                                    "pool serves the whole model on the device)");
    if (gm && gm > tot)
        return error_set(err, CLOVER_E_UNSUPPORTED, "--gpu-mem %.2f GiB: the device has %.2f GiB", gm / 1073741824.0,
                         tot / 1073741824.0);
    if (gm && w > gm)
        return error_set(err, CLOVER_E_NOMEM,
                         "--gpu-mem %.2f GiB: the dense weights alone (everything but the routed experts) need "
                         "%.2f GiB",
                         gm / 1073741824.0, w / 1073741824.0);
    if (gm) {
        expert_pool_layout lay;
        int lrc = cuda_experts_layout(model, &lay, err);
        if (lrc) return lrc;
    }
    if (w + PROBE_MARGIN > tot)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "CUDA backend: the model's weights (%.2f GiB) do not fit the device's %.2f GiB", w / 1073741824.0,
                         tot / 1073741824.0);
    return CLOVER_OK;
}

static void cuda_destroy(backend *be) {
    if (!be) return;
    backend_cuda_session_free(be->stack);
    cuda_pinned_free(&be->pinned);
    host_pick_ctx_free(&be->pick);
    mem_free(be->counts);
    if (be->cm) cuda_model_release(be->cm);
    mem_free(be);
}

static int cuda_create(const clover_model *model, const backend_config *cfg, backend **out, clover_error *err) {
    if (!out) return error_set(err, CLOVER_E_INVALID, "CUDA backend: no output pointer");
    *out = NULL;
    int rc = cuda_probe(model, cfg, err);
    if (rc) return rc;
    backend *be = mem_calloc(1, sizeof *be);
    if (!be) return error_set(err, CLOVER_E_NOMEM, "CUDA backend: out of memory");
    be->model = model;
    if (cfg) be->cfg = *cfg;
    if (!be->cfg.max_rows) be->cfg.max_rows = 64;
    if (!be->cfg.max_context) be->cfg.max_context = model->hp.n_ctx_train;
    be->counts = mem_calloc(model->hp.n_vocab, sizeof *be->counts);
    if (!be->counts) {
        cuda_destroy(be);
        return error_set(err, CLOVER_E_NOMEM, "CUDA backend: out of memory");
    }
    /* CLOVER_CUDA_NO_STACK (any value): each decode step alone, as before issue 25's stacked pass (A/B timing) */
    be->stack_off = getenv("CLOVER_CUDA_NO_STACK") != NULL;
    be->own_pinned = getenv("CLOVER_CUDA_OWN_PINNED") != NULL;
    const char *sc = getenv("CLOVER_CUDA_STACK_CHUNKS");
    be->stack_chunks = sc && strcmp(sc, "0") != 0;
    const char *ds = getenv("CLOVER_CUDA_DEVICE_SNAPSHOT");
    be->dev_snapshot = !(ds && strcmp(ds, "0") == 0);
    be->pick = (host_pick_ctx){.pool = NULL, .n_vocab = model->hp.n_vocab, .counts = be->counts, .n_samp = 1};
    be->n_run = cuda_config_layers(model, cfg, err); /* the probe passed: not 0 */
    be->ranged = be->n_run < model->hp.n_layer;
    if (be->ranged) be->stack_off = true; /* the stacked passes run whole models only: sequence by sequence */
    /* --gpu-mem: every MoE layer syncs to read its routing back, so no captured graphs; the stacked executor
     * (graphs and a 512-row scratch) stays off: sequences run one by one (docs/OFFLOAD.md) */
    if (be->cfg.gpu_mem) be->stack_off = true, be->dev_snapshot = false; /* and no snapshot copies in its budget */
    if ((rc = cuda_model_acquire(model, be->n_run, be->cfg.gpu_mem, &be->cm, err))) { /* the weights go up once */
        cuda_destroy(be);
        return rc;
    }
    *out = be;
    return CLOVER_OK;
}

void cuda_backend_gpu_mem(const backend *be, cuda_gpu_mem_info *out) {
    memset(out, 0, sizeof *out);
    if (!be || !be->cm || !be->cm->gpu_mem) return;
    out->gpu_mem = be->cm->gpu_mem;
    out->dense = be->cm->bytes;
    out->sessions = be->cm->session_bytes;
    cuda_experts_info(be->cm->ex, out);
}

static size_t cuda_max_rows(const backend *be) { return be ? be->cfg.max_rows : 0; }

static int cuda_session_create(backend *be, backend_session **out, clover_error *err) {
    if (!be || !out) return error_set(err, CLOVER_E_INVALID, "CUDA session: no backend or no output pointer");
    char why[CUDA_WHY] = "";
    if (!be->own_pinned && !be->pinned.h_pick &&
        cuda_pinned_make(be->model, be->cfg.max_rows, be->cfg.max_rows, &be->pinned, why))
        return error_set(err, CLOVER_E_NOMEM, "CUDA session: %s", why);
    int rc = backend_cuda_session_create(be->model, &be->cfg, be->own_pinned ? NULL : &be->pinned, out, err);
    if (!rc) (*out)->be = be;
    return rc;
}

/* Everything a sequence's picks need, checked before its pass (backend_cpu_commit.c's rules). */
static int pick_check(backend *be, const backend_commit_seq *q, clover_error *err) {
    if (!q->n_pick) return CLOVER_OK;
    if (q->n_pick > q->n) return error_set(err, CLOVER_E_INVALID, "commit: %zu picks of %zu rows", q->n_pick, q->n);
    if (!q->pick) return error_set(err, CLOVER_E_INVALID, "commit: %zu picks but no pick parameters", q->n_pick);
    if (!q->pick_out.id || !q->pick_out.conf)
        return error_set(err, CLOVER_E_INVALID, "commit: picks need id and conf arrays");
    if (host_pick_check(&be->pick, q->pick, err)) return error_prefix(err, "commit");
    sampler_params sp = {q->pick->temperature, q->pick->top_k, q->pick->top_p};
    if (!sampler_is_greedy(&sp) && !q->u)
        return error_set(err, CLOVER_E_INVALID, "commit: sampled picks need their draws");
    if (q->pick->n_top && !q->pick_out.top_id)
        return error_set(err, CLOVER_E_INVALID, "commit: %zu top log-probabilities but no array", q->pick->n_top);
    return CLOVER_OK;
}

static int commit_one(backend *be, backend_commit_seq *q, backend_pass_stats *stats, clover_error *err) {
    backend_session *s = q->s;
    if (!s) return error_set(err, CLOVER_E_INVALID, "commit: no session");
    if (s->be != be) return error_set(err, CLOVER_E_INVALID, "commit: the session belongs to another backend");
    if (q->n == 0) {
        if (q->last_logits || q->n_pick)
            return error_set(err, CLOVER_E_INVALID, "commit: no rows, so there are no last logits and no picks");
        return CLOVER_OK;
    }
    if (be->ranged && (!q->out_hidden || q->last_logits || q->all_logits || q->nll || q->targets || q->n_pick))
        return error_set(err, CLOVER_E_INVALID,
                         "commit: this backend ends before layer %u: out_hidden is required, and no logits, NLL or "
                         "picks",
                         be->n_run);
    if (be->ranged) {
        cuda_commit_out o = {.hidden = q->hidden, .out_hidden = q->out_hidden};
        return cuda_commit_rows(s, q->ids, q->n, &o, stats, err);
    }
    int rc = pick_check(be, q, err);
    if (rc) return rc;
    const size_t V = s->hp->n_vocab, np = q->n_pick;
    /* the picked rows' logits: the last row's alone for one pick, else every row's */
    float *tmp = NULL, *last = q->last_logits, *all = q->all_logits;
    if (np == 1 && !all && !last) last = tmp = mem_alloc(V * sizeof(float));
    else if (np > 1 && !all) all = tmp = mem_alloc(q->n * V * sizeof(float));
    if (np && !all && !last) return error_set(err, CLOVER_E_NOMEM, "commit: no memory for the picked rows' logits");
    float *rows = np ? mem_alloc(np * V * sizeof(float)) : NULL; /* picking rewrites them: a copy */
    if (np && !rows) {
        mem_free(tmp);
        return error_set(err, CLOVER_E_NOMEM, "commit: no memory for %zu picked rows", np);
    }
    cuda_commit_out o = {.last_logits = last, .all_logits = all, .targets = q->targets, .nll = q->nll,
                         .hidden = q->hidden};
    rc = cuda_commit_rows(s, q->ids, q->n, &o, stats, err);
    if (!rc && np) {
        memcpy(rows, all ? all + (q->n - np) * V : last, np * V * sizeof(float));
        backend_pick pk = *q->pick;
        pk.pen = NULL; /* no penalties on the causal path */
        size_t idx[256];
        for (size_t a = 0; a < np && !rc; a += 256) {
            size_t m = np - a < 256 ? np - a : 256;
            for (size_t i = 0; i < m; i++) idx[i] = a + i;
            rc = host_pick_rows(&be->pick, &pk, rows, idx, m, q->u ? q->u + a : NULL, NULL, 0, &q->pick_out, stats,
                                err); /* fails only on non-finite logits: a model fault, after the commit */
            if (rc) error_prefix(err, "commit");
        }
    }
    mem_free(rows);
    mem_free(tmp);
    return rc;
}

/* A one-row commit with no per-row output but the last logits and the pick: a decode step, which the stacked
 * pass takes (every one, a sequence alone too, so alone and stacked run the same code). */
static bool stackable(const backend_commit_seq *q) {
    /* diagnostic sessions (CLOVER_CUDA_NO_GRAPH, CLOVER_CUDA_COUNT_EXPERTS at their creation) keep their own pass */
    return q->n == 1 && !q->all_logits && !q->nll && !q->targets && !q->hidden && !q->in_hidden && !q->out_hidden &&
           !(q->s && (q->s->graph_failed || q->s->count_experts));
}

/* A prompt chunk the stacked pass takes (CLOVER_CUDA_STACK_CHUNKS=1): 2..max_rows rows with no per-row output,
 * at most the last row's logits and its pick (what commit_one computes for it, its last row's head alone). Never
 * more rows than its session's max_rows: commit_one runs such a commit as passes of max_rows rows, and the chunk's
 * rows must see the passes they would alone (a 37-row prompt on a 2-row session stacked as one 37-row pass took
 * the chunked GDN over 37 rows and TF32 float products: test_cuda_backend's decode_q8_small_rows failed with it,
 * prompt logits rel err 0.0056 against the CPU, H200 2026-12-14-moe24). */
static bool chunk_stackable(const backend *be, const backend_commit_seq *q) {
    return be->stack_chunks && q->n >= 2 && q->n <= be->stack->max_rows && q->s && q->n <= q->s->max_rows &&
           q->n_pick <= 1 && !q->all_logits &&
           !q->nll && !q->targets && !q->hidden && !q->in_hidden && !q->out_hidden &&
           !(q->s && (q->s->graph_failed || q->s->count_experts));
}

/* What commit_one and cuda_commit_rows check, for a stacked row or chunk: nothing is enqueued for a failing one. */
static int stack_check(backend *be, const backend_commit_seq *q, clover_error *err) {
    backend_session *s = q->s;
    if (!s) return error_set(err, CLOVER_E_INVALID, "commit: no session");
    if (s->be != be) return error_set(err, CLOVER_E_INVALID, "commit: the session belongs to another backend");
    if (!q->ids) return error_set(err, CLOVER_E_INVALID, "commit: %zu rows but no ids", q->n);
    const uint32_t V = s->hp->n_vocab;
    for (size_t r = 0; r < q->n; r++)
        if (q->ids[r] < 0 || (uint32_t)q->ids[r] >= V)
            return error_set(err, CLOVER_E_INVALID, "commit: token id %d at row %zu is outside the vocabulary 0..%u",
                             (int)q->ids[r], r, V - 1);
    if (q->n > s->max_context - s->n_past)
        return error_set(err, CLOVER_E_INVALID,
                         "commit: %zu rows after %zu committed exceed the session's context of %zu", q->n, s->n_past,
                         s->max_context);
    return pick_check(be, q, err);
}

/* Chunk groups of one call (CLOVER_CUDA_STACK_CHUNKS=1): [0] chunks of 2..D rows, [1] of more (the float
 * products' two forms, cuda_matmul.h's decode rows D); a group runs when its next chunk would not fit. */
typedef struct chunk_group {
    backend_commit_seq *q[STACK_SEQS];
    size_t n, rows;
} chunk_group;

static void chunk_flush(backend *be, chunk_group *g, backend_pass_stats *stats) {
    if (g->n) cuda_stack_decode(be->stack, &be->pick, g->q, g->n, stats);
    g->n = g->rows = 0;
}

static void chunk_add(backend *be, chunk_group *g, backend_commit_seq *q, backend_pass_stats *stats) {
    if (g->n == STACK_SEQS || g->rows + q->n > be->stack->max_rows) chunk_flush(be, g, stats);
    g->q[g->n++] = q;
    g->rows += q->n;
}

/* The stacked executor, made on first use; false when it cannot be (then commits run one by one). At 512 rows
 * it holds ~2 GB of device scratch for the 35B-A3B (1.08 GB of it the attention splits' partials, laid out per
 * row for the longest context); where that does not fit, one row per sequence (~0.3 GB, what the decode steps
 * need; previews then stack up to 64 rows) rather than no stacking at all. */
static bool stack_ready(backend *be) {
    if (be->stack) return true;
    if (be->stack_off) return false;
    clover_error e = {0};
    if (backend_cuda_stack_create(be->model, &be->cfg, STACK_SEQS, STACK_ROWS, &be->stack, &e) &&
        backend_cuda_stack_create(be->model, &be->cfg, STACK_SEQS, STACK_SEQS, &be->stack, &e)) {
        be->stack_off = true;
        be->stack = NULL;
        return false;
    }
    be->stack->be = be;
    return true;
}

bool cuda_backend_stack_graphs(const backend *be) {
    if (!be || !be->stack) return false;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 65; j++)
            if (be->stack->sgraph[i][j]) return true;
    return false;
}

/* --gpu-mem: the pool's counters before a call, and their growth over it into the call's stats. */
static void pool_mark(const backend *be, cuda_gpu_mem_info *m) { cuda_backend_gpu_mem(be, m); }
static void pool_add(const backend *be, const cuda_gpu_mem_info *m0, backend_pass_stats *stats) {
    if (!stats || !be || !be->cm || !be->cm->ex) return;
    cuda_gpu_mem_info m;
    cuda_backend_gpu_mem(be, &m);
    stats->expert_hits += m.hits - m0->hits;
    stats->expert_misses += m.misses - m0->misses;
    stats->expert_copy_bytes += m.copied - m0->copied;
    stats->expert_copy_s += m.copy_s - m0->copy_s;
    stats->expert_host += m.host_experts - m0->host_experts;
    stats->expert_host_s += m.host_s - m0->host_s;
}

static int cuda_commit_calls(backend *be, backend_commit_seq *seqs, size_t n_seqs, backend_pass_stats *stats);
static int cuda_commit(backend *be, backend_commit_seq *seqs, size_t n_seqs, backend_pass_stats *stats) {
    cuda_gpu_mem_info m0;
    pool_mark(be, &m0);
    int rc = cuda_commit_calls(be, seqs, n_seqs, stats);
    pool_add(be, &m0, stats);
    return rc;
}

static int cuda_commit_calls(backend *be, backend_commit_seq *seqs, size_t n_seqs, backend_pass_stats *stats) {
    int first = CLOVER_OK;
    backend_commit_seq *st[STACK_SEQS];
    size_t ns = 0;
    bool any = false;
    for (size_t i = 0; i < n_seqs && be && !any; i++) any = stackable(&seqs[i]) || (be->stack_chunks && seqs[i].n > 1);
    const bool stacked = any && stack_ready(be);
    chunk_group groups[2];
    groups[0].n = groups[0].rows = groups[1].n = groups[1].rows = 0;
    for (size_t i = 0; i < n_seqs; i++) {
        backend_commit_seq *q = &seqs[i];
        q->err.code = 0;
        q->err.message[0] = 0;
        q->rc = CLOVER_OK;
        if (!be) {
            q->rc = error_set(&q->err, CLOVER_E_INVALID, "commit: no backend");
        } else if (stacked && stackable(q)) {
            if (!(q->rc = stack_check(be, q, &q->err))) st[ns++] = q;
            if (ns == STACK_SEQS) {
                cuda_stack_decode(be->stack, &be->pick, st, ns, stats);
                ns = 0;
            }
        } else if (stacked && chunk_stackable(be, q)) {
            if (!(q->rc = stack_check(be, q, &q->err)))
                chunk_add(be, &groups[q->n > CUDA_MATMUL_DECODE_MAX_ROWS], q, stats);
        } else {
            q->rc = commit_one(be, q, stats, &q->err);
        }
    }
    if (ns) cuda_stack_decode(be->stack, &be->pick, st, ns, stats);
    chunk_flush(be, &groups[0], stats);
    chunk_flush(be, &groups[1], stats);
    for (size_t i = 0; i < n_seqs; i++)
        if (seqs[i].rc && !first) first = seqs[i].rc;
    return first;
}

static int cuda_preview_calls(backend *be, backend_preview_seq *seqs, size_t n_seqs, backend_pass_stats *stats);
static int cuda_preview(backend *be, backend_preview_seq *seqs, size_t n_seqs, backend_pass_stats *stats) {
    cuda_gpu_mem_info m0;
    pool_mark(be, &m0);
    int rc = cuda_preview_calls(be, seqs, n_seqs, stats);
    pool_add(be, &m0, stats);
    return rc;
}

static int cuda_preview_calls(backend *be, backend_preview_seq *seqs, size_t n_seqs, backend_pass_stats *stats) {
    int first = CLOVER_OK;
    if (be && n_seqs && stack_ready(be)) { /* every preview of the call in stacked passes (backend_cuda_stack_preview.c) */
        int rc = cuda_stack_previews(be, be->stack, &be->pick, seqs, n_seqs, stats);
        if (rc != 1) return rc;
    }
    for (size_t i = 0; i < n_seqs; i++) {
        backend_preview_seq *q = &seqs[i];
        q->err.code = 0;
        q->err.message[0] = 0;
        if (!be) q->rc = error_set(&q->err, CLOVER_E_INVALID, "preview: no backend");
        else if (!q->s) q->rc = error_set(&q->err, CLOVER_E_INVALID, "preview: no session");
        else if (q->s->be != be)
            q->rc = error_set(&q->err, CLOVER_E_INVALID, "preview: the session belongs to another backend");
        else q->rc = cuda_preview_seq(q->s, &be->pick, q, stats, &q->err);
        if (q->rc && !first) first = q->rc;
    }
    return first;
}

static int cuda_resolve_calls(backend *be, backend_resolve_seq *seqs, size_t n_seqs, const volatile int *cancel,
                              backend_pass_stats *stats);
static int cuda_resolve(backend *be, backend_resolve_seq *seqs, size_t n_seqs, const volatile int *cancel,
                        backend_pass_stats *stats) {
    cuda_gpu_mem_info m0;
    pool_mark(be, &m0);
    int rc = cuda_resolve_calls(be, seqs, n_seqs, cancel, stats);
    pool_add(be, &m0, stats);
    return rc;
}

static int cuda_resolve_calls(backend *be, backend_resolve_seq *seqs, size_t n_seqs, const volatile int *cancel,
                              backend_pass_stats *stats) {
    int first = CLOVER_OK;
    if (be && n_seqs && stack_ready(be)) { /* every block of the call, a round of stacked passes at a time */
        int rc = cuda_stack_resolves(be, be->stack, &be->pick, seqs, n_seqs, cancel, stats);
        if (rc != 1) return rc;
    }
    for (size_t i = 0; i < n_seqs; i++) {
        backend_resolve_seq *q = &seqs[i];
        q->err.code = 0;
        q->err.message[0] = 0;
        if (!be) q->rc = error_set(&q->err, CLOVER_E_INVALID, "resolve: no backend");
        else if (!q->s) q->rc = error_set(&q->err, CLOVER_E_INVALID, "resolve: no session");
        else if (q->s->be != be)
            q->rc = error_set(&q->err, CLOVER_E_INVALID, "resolve: the session belongs to another backend");
        else if (be->ranged) /* the split resolves over its previews (backend_resolve_by_preview) */
            q->rc = error_set(&q->err, CLOVER_E_UNSUPPORTED,
                              "resolve: this backend runs layers 0..%u of a split, which resolves by previews",
                              be->n_run);
        else q->rc = cuda_resolve_seq(q->s, &be->pick, q, cancel, stats, &q->err);
        if (q->rc && !first) first = q->rc;
    }
    return first;
}

static int cuda_last_logits(backend_session *s, float *out, clover_error *err) {
    if (!s) return error_set(err, CLOVER_E_INVALID, "last_logits: no session");
    if (!out) return CLOVER_OK; /* kept by every stacked decode step */
    if (!s->kept_valid || s->kept_at != s->n_past || s->kept_epoch != s->epoch)
        return error_set(err, CLOVER_E_INVALID, "last_logits: none kept (the session ran another pass since)");
    char why[CUDA_WHY] = "";
    if (cuda_d2h(out, s->sc.logits, s->hp->n_vocab * sizeof(float), why))
        return error_set(err, CLOVER_E_INTERNAL, "last_logits: %s", why);
    return CLOVER_OK;
}

static size_t gdn_bytes(const backend_session *s) {
    size_t n = 0;
    for (uint32_t l = 0; l < s->n_run; l++)
        if (s->layers[l].kind == MODEL_LAYER_GDN) n += ring_bytes(s->hp) + st_bytes(s->hp);
    return n;
}

static int cuda_checkpoint_create(backend_session *s, backend_checkpoint **out, clover_error *err) {
    if (!s || !out) return error_set(err, CLOVER_E_INVALID, "checkpoint: no session or no output pointer");
    *out = NULL;
    backend_checkpoint *c = mem_calloc(1, sizeof *c);
    if (!c) return error_set(err, CLOVER_E_NOMEM, "checkpoint: no memory");
    char why[CUDA_WHY] = "";
    size_t bytes = gdn_bytes(s);
    if (bytes && cuda_alloc(&c->dev, bytes, why)) {
        mem_free(c);
        return error_set(err, CLOVER_E_NOMEM, "checkpoint: %zu bytes of device memory: %s", bytes, why);
    }
    c->s = s;
    *out = c;
    return CLOVER_OK;
}

static void cuda_checkpoint_free(backend_checkpoint *c) {
    if (!c) return;
    cuda_free(c->dev);
    mem_free(c);
}

/* Copies every GDN ring and state to (save) or from (restore) the checkpoint, on the session's stream. */
static int gdn_copy(backend_session *s, const backend_checkpoint *c, bool save, char *why) {
    const size_t ring = ring_bytes(s->hp), st = st_bytes(s->hp);
    char *p = c->dev;
    for (uint32_t l = 0; l < s->n_run; l++) {
        cuda_layer *ly = &s->layers[l];
        if (ly->kind != MODEL_LAYER_GDN) continue;
        if (ring && (save ? cuda_d2d(p, ly->ring, ring, s->stream, why) : cuda_d2d(ly->ring, p, ring, s->stream, why)))
            return -1;
        if (save ? cuda_d2d(p + ring, ly->state, st, s->stream, why) : cuda_d2d(ly->state, p + ring, st, s->stream, why))
            return -1;
        p += ring + st;
    }
    return cuda_stream_sync(s->stream, why);
}

static int cuda_checkpoint_save(backend_session *s, backend_checkpoint *c, clover_error *err) {
    if (!s || !c || c->s != s) return error_set(err, CLOVER_E_INVALID, "checkpoint_save: not this session's checkpoint");
    char why[CUDA_WHY] = "";
    c->valid = false;
    if (gdn_copy(s, c, true, why)) return error_set(err, CLOVER_E_INTERNAL, "checkpoint_save: %s", why);
    c->n_past = s->n_past;
    c->epoch = s->epoch;
    c->valid = true;
    return CLOVER_OK;
}

static int cuda_checkpoint_restore(backend_session *s, const backend_checkpoint *c, clover_error *err) {
    if (!s || !c || c->s != s)
        return error_set(err, CLOVER_E_INVALID, "checkpoint_restore: not this session's checkpoint");
    if (!c->valid || c->epoch != s->epoch || c->n_past > s->n_past)
        return error_set(err, CLOVER_E_INVALID,
                         "checkpoint_restore: the checkpoint (length %zu) is stale: the session was reset, imported "
                         "or restored since it was saved",
                         c->n_past);
    char why[CUDA_WHY] = "";
    if (gdn_copy(s, c, false, why)) {
        backend_cuda_reset(s); /* half-restored GDN states would be wrong: start over, loudly */
        return error_set(err, CLOVER_E_INTERNAL, "checkpoint_restore: %s (the session was reset)", why);
    }
    s->n_past = c->n_past; /* the KV rows below it are the checkpoint's: commits only append */
    s->epoch++;
    ((backend_checkpoint *)c)->epoch = s->epoch; /* the checkpoint stays valid for another restore */
    return CLOVER_OK;
}

/* State copies in device memory unless CLOVER_CUDA_DEVICE_SNAPSHOT=0 or --gpu-mem; otherwise the engine exports. */
static int cuda_state_save(const backend_session *s, backend_state_copy **copy, clover_error *err) {
    if (!s || !s->be || !s->be->dev_snapshot)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "state_save: device copies off (CLOVER_CUDA_DEVICE_SNAPSHOT=0 or --gpu-mem)");
    return backend_cuda_state_save(s, copy, err);
}

static int cuda_truncate(backend_session *s, size_t n, clover_error *err) {
    if (!s) return error_set(err, CLOVER_E_INVALID, "truncate: no session");
    if (n > s->n_past)
        return error_set(err, CLOVER_E_INVALID, "truncate: to %zu rows, but the session holds %zu", n, s->n_past);
    if (n == s->n_past) return CLOVER_OK;
    if (s->n_gdn)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "truncate: the model's GDN states cannot be rewound; restore a checkpoint instead");
    s->n_past = n; /* attention layers just forget the KV rows past n */
    return CLOVER_OK;
}

const backend_ops backend_cuda = {
    .name = "cuda",
    .probe = cuda_probe,
    .report = cuda_backend_report,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .max_rows = cuda_max_rows,
    .session_create = cuda_session_create,
    .session_free = backend_cuda_session_free,
    .session_length = backend_cuda_session_length,
    .reset = backend_cuda_reset,
    .commit = cuda_commit,
    .preview = cuda_preview,
    .resolve = cuda_resolve,
    .preview_debug = cuda_preview_debug,
    .last_logits = cuda_last_logits,
    .state_bytes = backend_cuda_state_bytes,
    .state_export = backend_cuda_state_export,
    .state_save = cuda_state_save,
    .state_load = backend_cuda_state_load,
    .state_copy_free = backend_cuda_state_copy_free,
    .state_import = backend_cuda_state_import,
    .checkpoint_create = cuda_checkpoint_create,
    .checkpoint_free = cuda_checkpoint_free,
    .checkpoint_save = cuda_checkpoint_save,
    .checkpoint_restore = cuda_checkpoint_restore,
    .truncate = cuda_truncate,
};
