/*
 * backend_cuda_session.c: creating, resetting and freeing a CUDA session.
 *
 * The admission rule: a session takes its whole state when it is created,
 * the KV caches for max_context positions, every GDN ring and state, and
 * the scratch for max_rows rows, and only if the device's free memory holds
 * all of it (plus a margin for the runtime); otherwise the creation fails
 * with the sizes and what to change. Sessions x context is thereby checked
 * against free device memory one session at a time, and a pass can never
 * run out of memory halfway (nothing is allocated after creation, which is
 * also what lets a decode step be a captured graph with fixed addresses).
 * A 262144-token context of the 35B-A3B is ~10 GB of KV, so the engine's
 * callers pass the context they need (--max-context).
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/rope_table.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_matmul.h"
#include "cuda/cuda_mem.h"
#include "cuda/cuda_moe_router.h"
#include "cuda/cuda_preview.h"
#include "quant/quant.h"

#define SESSION_MARGIN (256ull << 20)
/* --gpu-mem: room inside the budget for the runtime's small allocations (kernel workspaces made on first use) */
#define GPU_MEM_MARGIN (64ull << 20)

static size_t r256(size_t b) { return (b + 255) / 256 * 256; }

typedef struct carver {
    char *base;
    size_t off;
} carver;

static void *carve(carver *c, size_t bytes) {
    void *p = c->base ? c->base + c->off : NULL;
    c->off += r256(bytes ? bytes : 1);
    return p;
}

/* Scratch of a product: the decode form's at `rows`, and the chunk form's 8-bit rows at `chunk_rows`. */
static size_t mm_work_of(const model_weight *w, size_t rows, size_t chunk_rows) {
    if (!w->data) return 0;
    const size_t d = cuda_matmul_decode_work_bytes(w->type, (size_t)w->ne[0], rows);
    const size_t c = cuda_matmul_chunk_work_bytes(w->type, (size_t)w->ne[0], chunk_rows);
    /* the stream form's 8-bit rows at 9..32 rows (CLOVER_CUDA_MMV_STREAM32; sized whether or not it is on) */
    const size_t sr = chunk_rows < CUDA_MATMUL_STREAM_MAX_ROWS ? chunk_rows : CUDA_MATMUL_STREAM_MAX_ROWS;
    const size_t st = cuda_matmul_stream_work_bytes(w->type, (size_t)w->ne[0], sr);
    return d > c ? (d > st ? d : st) : (c > st ? c : st);
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* A row-count switch (1..8): its value, else 2. Why 2 (2026-12-10-rows, H200, bench_batch AR on the 35B-A3B
 * file, pass ms at 2 / 4 / 8 sequences): the decode form everywhere up to 8 rows 6.09 / 10.16 / 18.09, the chunk
 * form from 2 rows 7.64 / 8.75 / 11.15, from 3 rows 6.10 / 9.06 / 11.08; 16 sequences 16.7-16.9 in each. */
static size_t env_rows(const char *name) {
    const char *v = getenv(name);
    return v && *v >= '1' && *v <= '8' && !v[1] ? (size_t)(*v - '0') : 2;
}

static bool is_float_type(uint32_t t) { return t == QUANT_F32 || t == QUANT_F16 || t == QUANT_BF16; }

/* True when the file's big matrices (experts, mixer projections, head) are all float types. */
static bool backend_cuda_model_is_float(const clover_model *m) {
    if (!is_float_type(m->output.type)) return false;
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        const model_layer *ml = &m->layers[l];
        const model_moe_weights *e = &ml->moe;
        if (!is_float_type(e->gate_exps.type) || !is_float_type(e->up_exps.type) || !is_float_type(e->down_exps.type))
            return false;
        if (ml->kind == MODEL_LAYER_ATTENTION ? !is_float_type(ml->attn.q.type) || !is_float_type(ml->attn.o.type)
                                              : !is_float_type(ml->gdn.qkv.type) || !is_float_type(ml->gdn.out.type))
            return false;
    }
    return true;
}

/* n_expert: the ids the products take, the model's experts or (--gpu-mem) at most every expert's slot. */
static size_t moe_work_of(const model_weight *w, const model_hparams *hp, size_t R, int per_slot, size_t n_expert) {
    cuda_moe_args a = {.type = w->type,
                       .n_expert = n_expert,
                       .n_expert_plan = hp->n_expert,
                       .n_out = (size_t)w->ne[1],
                       .n_in = (size_t)w->ne[0],
                       .n_rows = R < CUDA_MATMUL_DECODE_MAX_ROWS ? R : CUDA_MATMUL_DECODE_MAX_ROWS,
                       .k = hp->n_expert_used,
                       .x_per_slot = per_slot};
    a.expert_stride = quant_row_bytes(w->type, a.n_in) * a.n_out;
    size_t d = cuda_moe_decode_work_bytes(&a);
    a.n_rows = R < CUDA_MOE_DECODE_MAX_ROWS ? R : CUDA_MOE_DECODE_MAX_ROWS; /* moe_decode.cu's form (its switch) */
    if (a.k <= CUDA_MOE_MAX_K) d = max_sz(d, cuda_moe_dec32_work_bytes(&a));
    a.n_rows = R;
    return max_sz(d, cuda_moe_chunk_work_bytes(&a));
}

/* Rows of raw logits that come back to the host at once (h_logits, pinned). A session: a whole pass
 * (all_logits, a preview's raw logits). The stacked executor: only its decode rows, one per sequence
 * (backend_cuda_stack.c); its stacked previews never copy raw logits (those run alone), so its 512 rows
 * would pin 508 MB of host memory for a 248k vocabulary where 64 rows (64 MB) are ever used. */
static size_t logit_rows(const backend_session *s) { return s->stack ? s->seq_stride : s->max_rows; }

/* Rows of one cuda_pick_rows call at most (plog, the penalised copies). A session: a pass's rows. The
 * stacked executor picks one decode row per call, or one block's pending rows (at most 256,
 * backend_cuda_stack_preview.c's MAX_B) per call, block after block on one stream: 256 rows, not 512. */
static size_t pick_rows_max(const backend_session *s) {
    return s->stack && s->max_rows > 256 ? 256 : s->max_rows;
}

size_t cuda_session_pick_rows(const backend_session *s) { return pick_rows_max(s); }

/* Lays the arena out (device pointers when base is set); returns its size. */
static size_t session_layout(backend_session *s, char *base) {
    const model_hparams *hp = s->hp;
    const clover_model *m = s->model;
    const size_t R = s->max_rows, H = hp->n_embd, E = hp->n_expert, V = hp->n_vocab, k = hp->n_expert_used;
    const size_t nh = hp->n_head, nkv = hp->n_head_kv, hd = hp->head_dim, F = hp->n_ff_exp, Fs = hp->n_ff_shexp;
    const size_t cd = hp->gdn_conv_dim, nv = hp->gdn_nv, dv = hp->gdn_dv, dk = hp->gdn_dk, K = hp->ssm_conv_kernel;
    const size_t f = sizeof(float), D = CUDA_MATMUL_DECODE_MAX_ROWS;
    carver c = {base, 0};
    cuda_scratch *sc = &s->sc;
    sc->ids = carve(&c, R * 4);
    sc->targets = carve(&c, R * 4);
    sc->h = carve(&c, R * H * f);
    sc->x = carve(&c, R * H * f);
    sc->y = carve(&c, R * H * f);
    sc->qg = carve(&c, R * nh * 2 * hd * f);
    sc->k = carve(&c, R * nkv * hd * f);
    sc->v = carve(&c, R * nkv * hd * f);
    sc->att = carve(&c, R * nh * hd * f);
    sc->mixed = carve(&c, R * cd * f);
    sc->z = carve(&c, R * nv * dv * f);
    sc->gout = carve(&c, R * nv * dv * f);
    sc->ga = carve(&c, R * nv * f);
    sc->gb = carve(&c, R * nv * f);
    sc->rlog = carve(&c, R * E * f);
    sc->ridx = carve(&c, R * k * 4);
    sc->rslot = s->cm && s->cm->gpu_mem ? carve(&c, R * k * 4) : NULL; /* only then: the layout stays main's */
    sc->rw = carve(&c, R * k * f);
    sc->ge = carve(&c, R * k * F * f);
    sc->ue = carve(&c, R * k * F * f);
    sc->ye = carve(&c, R * k * H * f);
    sc->gs = carve(&c, R * (Fs ? Fs : 1) * f);
    sc->us = carve(&c, R * (Fs ? Fs : 1) * f);
    sc->ys = carve(&c, R * H * f);
    sc->sg = carve(&c, R * f);
    sc->logits = carve(&c, R * V * f);
    sc->nll = carve(&c, R * f);
    sc->inv_freq = carve(&c, (hp->n_rot / 2 + 1) * f);
    sc->xh = carve(&c, R * H * f);
    sc->blk_work = carve(&c, s->n_gdn ? cuda_gdn_block_work_floats(&s->gd, (int)R) * f : 0);
    sc->cs_work = carve(&c, cuda_moe_coreset_work_bytes(R, k));
    sc->kept = carve(&c, s->seq_stride * hp->n_layer * E); /* the stack: [sequence][layer][E] */
    sc->kept_count = carve(&c, sizeof(uint32_t));
    sc->route_ctr = carve(&c, sizeof(uint32_t));
    sc->used = carve(&c, (size_t)hp->n_layer * E);
    sc->plog = carve(&c, pick_rows_max(s) * V * f);
    sc->pk_rows = carve(&c, 2 * R * 4);
    sc->pk_u = carve(&c, R * sizeof(double));
    sc->pk_id = carve(&c, R * 4);
    sc->pk_conf = carve(&c, R * f);
    sc->pk_ramp = carve(&c, 2 * R * f);
    sc->pk_forbid = carve(&c, V * 4);
    sc->pk_cids = carve(&c, V * 4);
    sc->pk_counts = carve(&c, V * 4);
    sc->pk_stop = carve(&c, V * 4);
    sc->pk_desc = carve(&c, R * sizeof(cuda_pick_row));
    sc->pk_par = carve(&c, R * sizeof(cuda_pick_params));

    size_t mmw = mm_work_of(&m->output, D, R), moew = 0;
    /* --gpu-mem: the expert products take pool slot ids, up to one per expert of the model */
    const bool pool = s->cm && s->cm->gpu_mem;
    const size_t ids_max = pool ? (size_t)hp->n_layer * E + 1 : E; /* + the zero slot of the host's pairs */
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const model_layer *ml = &m->layers[l];
        const model_moe_weights *mw = &ml->moe;
        mmw = max_sz(mmw, mm_work_of(&mw->gate_inp, D, R));
        mmw = max_sz(mmw, mm_work_of(&mw->gate_shexp, D, R));
        mmw = max_sz(mmw, mm_work_of(&mw->up_shexp, D, R));
        mmw = max_sz(mmw, mm_work_of(&mw->down_shexp, D, R));
        mmw = max_sz(mmw, mm_work_of(&mw->gate_inp_shexp, D, R));
        moew = max_sz(moew, moe_work_of(&mw->gate_exps, hp, R, 0, ids_max));
        moew = max_sz(moew, moe_work_of(&mw->up_exps, hp, R, 0, ids_max));
        moew = max_sz(moew, moe_work_of(&mw->down_exps, hp, R, 1, ids_max));
        if (ml->kind == MODEL_LAYER_ATTENTION) {
            const model_attention_weights *w = &ml->attn;
            mmw = max_sz(mmw, max_sz(max_sz(mm_work_of(&w->q, D, R), mm_work_of(&w->k, D, R)),
                                     max_sz(mm_work_of(&w->v, D, R), mm_work_of(&w->o, D, R))));
        } else {
            const model_gdn_weights *w = &ml->gdn;
            mmw = max_sz(mmw, max_sz(max_sz(mm_work_of(&w->qkv, D, R), mm_work_of(&w->z, D, R)),
                                     max_sz(max_sz(mm_work_of(&w->alpha, D, R), mm_work_of(&w->beta, D, R)),
                                            mm_work_of(&w->out, D, R))));
        }
    }
    sc->mm_work_bytes = mmw;
    sc->moe_work_bytes = moew;
    sc->mm_work = carve(&c, mmw);
    sc->mm_work2 = carve(&c, mmw);
    sc->moe_work = carve(&c, moew);
    sc->attn_work = carve(&c, s->n_attn ? cuda_attn_workspace_bytes(&s->ad, (int)R, (int)R, (int)s->max_context) : 0);
    sc->gdn_work = carve(&c, s->n_gdn ? cuda_gdn_mix_workspace_bytes(&s->gd, (int)R) : 0);
    s->d_aseq = carve(&c, (s->n_attn ? s->n_attn : 1) * s->seq_stride * sizeof(cuda_attn_seq));
    s->d_gseq = carve(&c, (s->n_gdn ? s->n_gdn : 1) * s->seq_stride * sizeof(cuda_gdn_seq));
    for (uint32_t l = 0; l < s->n_run && !s->stack; l++) { /* the stack's sequences bring their own */
        cuda_layer *ly = &s->layers[l];
        if (ly->kind != MODEL_LAYER_GDN) continue;
        ly->ring = carve(&c, (K - 1) * cd * f);
        ly->state = carve(&c, nv * dk * dv * f);
    }
    return c.off;
}

void backend_cuda_session_free(backend_session *s) {
    if (!s) return;
    if (s->stream) cuda_stream_sync(s->stream, NULL);
    cuda_graph_destroy(s->decode_graph);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 65; j++) cuda_graph_destroy(s->sgraph[i][j]);
    for (int i = 0; i < CUDA_PREVIEW_GRAPHS; i++) cuda_graph_destroy(s->pgraph[i].exec);
    cuda_event_destroy(s->ev[0]);
    cuda_event_destroy(s->ev[1]);
    if (s->side) cuda_stream_sync(s->side, NULL);
    cuda_event_destroy(s->side_ev[0]);
    cuda_event_destroy(s->side_ev[1]);
    cuda_stream_destroy(s->side);
    cuda_free(s->arena);
    cuda_free(s->kv);
    cuda_host_free(s->h_aseq);
    cuda_host_free(s->h_gseq);
    if (!s->pinned_shared) {
        cuda_pinned own = {s->h_ids, s->h_targets, s->h_logits, s->h_nll, s->h_pick, 0};
        cuda_pinned_free(&own);
    }
    mem_free(s->dbg_hidden);
    cuda_host_free(s->h_rx);
    cuda_stream_destroy(s->stream);
    if (s->cm) s->cm->session_bytes -= s->pool_bytes_held;
    cuda_model_release(s->cm);
    mem_free(s->layers);
    mem_free(s);
}

/* Carves the pinned pick mirrors (host pointers when base is set); returns the bytes. */
static size_t pick_layout(backend_session *s, char *base) {
    const size_t R = s->max_rows, V = s->hp->n_vocab;
    carver c = {base, 0};
    s->h_pk_rows = carve(&c, 2 * R * 4);
    s->h_pk_id = carve(&c, R * 4);
    s->h_pk_u = carve(&c, R * sizeof(double));
    s->h_pk_conf = carve(&c, R * sizeof(float));
    s->h_pk_ramp = carve(&c, 2 * R * sizeof(float));
    s->h_pk_forbid = carve(&c, V * 4);
    s->h_pk_cids = carve(&c, V * 4);
    s->h_pk_counts = carve(&c, V * 4);
    s->h_pk_stop = carve(&c, V * 4);
    s->h_pk_desc = carve(&c, R * sizeof(cuda_pick_row));
    s->h_pk_par = carve(&c, R * sizeof(cuda_pick_params));
    s->h_kept_count = carve(&c, 4);
    return c.off;
}

int cuda_pinned_make(const clover_model *model, size_t max_rows, size_t logit_rows, cuda_pinned *p, char *why) {
    const model_hparams *hp = &model->hp;
    memset(p, 0, sizeof *p);
    backend_session probe = {.hp = hp, .max_rows = max_rows}; /* for the pick mirrors' layout */
    if (cuda_host_alloc((void **)&p->h_ids, max_rows * 4, why) ||
        cuda_host_alloc((void **)&p->h_targets, max_rows * 4, why) ||
        cuda_host_alloc((void **)&p->h_logits, logit_rows * hp->n_vocab * sizeof(float), why) ||
        cuda_host_alloc((void **)&p->h_nll, max_rows * sizeof(float), why) ||
        cuda_host_alloc(&p->h_pick, pick_layout(&probe, NULL), why)) {
        cuda_pinned_free(p);
        return -1;
    }
    p->rows = max_rows;
    return 0;
}

void cuda_pinned_free(cuda_pinned *p) {
    if (!p) return;
    cuda_host_free(p->h_ids);
    cuda_host_free(p->h_targets);
    cuda_host_free(p->h_logits);
    cuda_host_free(p->h_nll);
    cuda_host_free(p->h_pick);
    memset(p, 0, sizeof *p);
}

/* Zeroes the rings and states (a fresh sequence) on the session's stream. */
static int zero_states(backend_session *s, char *why) {
    const model_hparams *hp = s->hp;
    if (s->stack) return 0;
    size_t ring = (size_t)(hp->ssm_conv_kernel - 1) * hp->gdn_conv_dim * sizeof(float);
    size_t st = (size_t)hp->gdn_nv * hp->gdn_dk * hp->gdn_dv * sizeof(float);
    for (uint32_t l = 0; l < s->n_run; l++) {
        cuda_layer *ly = &s->layers[l];
        if (ly->kind != MODEL_LAYER_GDN) continue;
        if ((ring && cuda_memset(ly->ring, 0, ring, s->stream, why)) || cuda_memset(ly->state, 0, st, s->stream, why))
            return -1;
    }
    return cuda_stream_sync(s->stream, why);
}

/* A session (stack_seqs 0), or the stacked executor for stack_seqs sequences (no KV, no GDN state, scratch for
 * stack_seqs rows, stack_seqs descriptor slots per layer). */
static int session_make(const clover_model *model, const backend_config *cfg, size_t stack_seqs,
                        size_t stack_rows, const cuda_pinned *share, backend_session **out, clover_error *err) {
    *out = NULL;
    if (!model || !cfg) return error_set(err, CLOVER_E_INVALID, "CUDA session: no model or no configuration");
    const model_hparams *hp = &model->hp;
    size_t max_rows = stack_seqs ? stack_rows : cfg->max_rows ? cfg->max_rows : 64;
    size_t max_ctx = cfg->max_context ? cfg->max_context : hp->n_ctx_train;
    if (max_ctx == 0 || max_ctx > (size_t)INT32_MAX)
        return error_set(err, CLOVER_E_INVALID, "CUDA session: a context of %zu tokens, expected 1..%d", max_ctx,
                         INT32_MAX);
    if (max_rows > 4096)
        return error_set(err, CLOVER_E_INVALID, "CUDA session: %zu rows per pass, at most 4096", max_rows);
    backend_session *s = mem_calloc(1, sizeof *s);
    if (!s) return error_set(err, CLOVER_E_NOMEM, "CUDA session: no memory");
    s->model = model;
    s->hp = hp;
    s->max_rows = max_rows;
    s->max_context = max_ctx;
    s->n_run = hp->n_layer;
    s->stack = stack_seqs > 0;
    s->seq_stride = stack_seqs ? stack_seqs : 1;
    s->fp32 = backend_cuda_model_is_float(model);
    /* CLOVER_CUDA_NO_GRAPH (any value): decode steps are enqueued kernel by kernel (a diagnostic) */
    s->graph_failed = getenv("CLOVER_CUDA_NO_GRAPH") != NULL;
    s->count_experts = getenv("CLOVER_CUDA_COUNT_EXPERTS") != NULL;
    s->sgraph_failed = s->graph_failed;
    s->stack_decode_only = getenv("CLOVER_CUDA_STACK_DECODE_ONLY") != NULL;
    /* CLOVER_CUDA_DECODE_ROWS=K (1..8): dense integer products of more than K rows take the chunk form, with the
     * decode form's bits (2 when unset; 8 is the decode form wherever it can run, as before 2026-12-10) */
    s->decode_rows = env_rows("CLOVER_CUDA_DECODE_ROWS");
    s->moe_decode_rows = env_rows("CLOVER_CUDA_MOE_DECODE_ROWS"); /* the grouped expert products' own */
    const char *narrow = getenv("CLOVER_CUDA_MOE_DEC32_NARROW"); /* 1: the MoE decode form inside coresets too */
    s->dec32_narrow = narrow && strcmp(narrow, "1") == 0;
    s->stack_preview_off = getenv("CLOVER_CUDA_NO_STACK_PREVIEW") != NULL;
    s->pick_each = getenv("CLOVER_CUDA_PICK_EACH") != NULL;
    s->pgraph_off = s->graph_failed; /* the same switch for the preview's graphs */
    if (s->count_experts) s->graph_failed = true; /* the marks are per pass: no captured decode step */
    s->ad = (cuda_attn_dims){(int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim, (int)hp->n_rot, hp->rms_eps};
    s->gd = (cuda_gdn_dims){(int)hp->gdn_nk, (int)hp->gdn_nv, (int)hp->gdn_dk, (int)hp->gdn_dv,
                            (int)hp->ssm_conv_kernel, hp->rms_eps, 1};
    char why[CUDA_WHY] = "";
    int rc;
    if (!(s->n_run = cuda_config_layers(model, cfg, err))) { /* a layer range: refused with CLOVER_CUDA_LAYER_RANGE=0 */
        rc = err ? err->code : CLOVER_E_UNSUPPORTED;
        goto fail;
    }
    if (s->stack && s->n_run < hp->n_layer) {
        rc = error_set(err, CLOVER_E_UNSUPPORTED, "CUDA stack: the stacked passes run the whole model, not a range");
        goto fail;
    }
    rc = cuda_model_acquire(model, s->n_run, cfg->gpu_mem, &s->cm, err);
    if (rc) goto fail;
    s->layers = mem_calloc(hp->n_layer, sizeof *s->layers);
    if (!s->layers) {
        rc = error_set(err, CLOVER_E_NOMEM, "CUDA session: no memory");
        goto fail;
    }
    for (uint32_t l = 0; l < s->n_run; l++) { /* a range's later layers have no state and no weights here */
        cuda_layer *ly = &s->layers[l];
        const model_layer *ml = &model->layers[l];
        ly->kind = ml->kind;
        if (ml->kind == MODEL_LAYER_ATTENTION) {
            ly->slot = (int)s->n_attn++;
        } else {
            ly->slot = (int)s->n_gdn++;
            ly->gw = (cuda_gdn_weights){cuda_model_weight(s->cm, &ml->gdn.conv), cuda_model_weight(s->cm, &ml->gdn.a),
                                        cuda_model_weight(s->cm, &ml->gdn.dt_bias),
                                        cuda_model_weight(s->cm, &ml->gdn.norm)};
        }
    }
    /* the admission rule: everything this session will ever hold, against free device memory
     * (the KV caches first: the attention workspace is sized from the context too) */
    size_t kv_tok = s->n_attn * 2 * (size_t)hp->n_head_kv * hp->head_dim * sizeof(float); /* its own layers' */
    size_t kv_bytes = s->stack ? 0 : kv_tok * max_ctx;
    size_t fr = 0, tot = 0;
    if (cuda_mem_info(&fr, &tot, why)) {
        rc = error_set(err, CLOVER_E_UNSUPPORTED, "CUDA session: %s", why);
        goto fail;
    }
    if (kv_bytes + SESSION_MARGIN > fr) {
        rc = error_set(err, CLOVER_E_NOMEM,
                       "CUDA session: a context of %zu tokens needs %.2f GB of KV on the GPU (%zu bytes a token) but "
                       "%.2f GB of %.2f GB are free (the weights and the other sessions hold the rest): ask for a "
                       "shorter context (--max-context) or fewer sessions",
                       max_ctx, (double)kv_bytes * 1e-9, kv_tok, (double)fr * 1e-9, (double)tot * 1e-9);
        goto fail;
    }
    size_t arena_bytes = session_layout(s, NULL);
    if (arena_bytes + kv_bytes + SESSION_MARGIN > fr) {
        rc = error_set(err, CLOVER_E_NOMEM,
                       "CUDA session: a context of %zu tokens needs %.2f GB on the GPU (KV %.2f GB at %zu bytes a "
                       "token, GDN state and scratch %.2f GB) but %.2f GB of %.2f GB are free (the weights and "
                       "the other sessions hold the rest): ask for a shorter context (--max-context) or fewer "
                       "sessions",
                       max_ctx, (double)(arena_bytes + kv_bytes) * 1e-9, (double)kv_bytes * 1e-9, kv_tok,
                       (double)arena_bytes * 1e-9, (double)fr * 1e-9, (double)tot * 1e-9);
        goto fail;
    }
    if (s->cm->gpu_mem) {
        /* --gpu-mem: the pool is sized with the first session (what is left of the budget after the dense weights
         * and this session's KV, state and scratch, plus room for one checkpoint of the GDN states and the
         * runtime's small allocations); a later session must fit beside it */
        const uint64_t mine = arena_bytes + kv_bytes;
        const uint64_t room = cuda_session_fixed_state_bytes(hp, model) + GPU_MEM_MARGIN;
        if (!s->cm->ex && (rc = cuda_experts_create(s->cm, mine + room, cfg, err))) goto fail;
        /* the pool kept by the host: every MoE layer syncs to read its routing back, nothing to capture */
        if (!cuda_experts_on_device(s->cm->ex)) s->graph_failed = s->sgraph_failed = s->pgraph_off = true;
        const uint64_t used = s->cm->bytes + cuda_experts_pool_bytes(s->cm->ex) + s->cm->session_bytes;
        if (used + mine > s->cm->gpu_mem) {
            rc = error_set(err, CLOVER_E_NOMEM,
                           "--gpu-mem %.2f GiB: this session's KV, state and scratch (%.2f GiB, a context of %zu "
                           "tokens) do not fit beside the weights, the expert pool and the other sessions (%.2f GiB): "
                           "ask for a shorter context (--max-context), fewer sessions or a larger --gpu-mem",
                           s->cm->gpu_mem / 1073741824.0, mine / 1073741824.0, max_ctx, used / 1073741824.0);
            goto fail;
        }
        s->cm->session_bytes += mine;
        s->pool_bytes_held = mine;
        if (cuda_host_alloc((void **)&s->h_rx, 2 * max_rows * hp->n_expert_used * sizeof(int32_t), why)) {
            rc = error_set(err, CLOVER_E_NOMEM, "CUDA session: %s", why);
            goto fail;
        }
    }
    if (cuda_stream_create(&s->stream, why) || cuda_alloc(&s->arena, arena_bytes, why) ||
        (kv_bytes && cuda_alloc(&s->kv, kv_bytes, why)) ||
        cuda_host_alloc((void **)&s->h_aseq, (s->n_attn ? s->n_attn : 1) * s->seq_stride * sizeof(cuda_attn_seq),
                        why) ||
        cuda_host_alloc((void **)&s->h_gseq, (s->n_gdn ? s->n_gdn : 1) * s->seq_stride * sizeof(cuda_gdn_seq), why)) {
        rc = error_set(err, CLOVER_E_NOMEM, "CUDA session: %s", why);
        goto fail;
    }
    /* the transfer buffers: the backend's shared set when it gives one for these rows (every pass of a backend
     * runs on one thread and syncs before the next, so one set serves all its sessions), else the session's own */
    cuda_pinned pin;
    if (share && share->rows == max_rows && !s->stack) {
        pin = *share;
        s->pinned_shared = true;
    } else if (cuda_pinned_make(model, max_rows, logit_rows(s), &pin, why)) {
        rc = error_set(err, CLOVER_E_NOMEM, "CUDA session: %s", why);
        goto fail;
    }
    s->h_ids = pin.h_ids, s->h_targets = pin.h_targets, s->h_logits = pin.h_logits, s->h_nll = pin.h_nll;
    s->h_pick = pin.h_pick;
    session_layout(s, s->arena);
    pick_layout(s, s->h_pick);
    if (s->stack && (cuda_event_create(&s->ev[0], why) || cuda_event_create(&s->ev[1], why))) {
        cuda_event_destroy(s->ev[0]); /* no timing then, nothing else lost */
        s->ev[0] = s->ev[1] = NULL;
    }
    /* The shared expert's side stream (backend_cuda_pass.c, layer_moe), unless CLOVER_CUDA_SHEXP_SIDE=0 (A/B):
     * without it, or when making it fails, the shared expert runs on the stream as before (the same bits). */
    const char *side_env = getenv("CLOVER_CUDA_SHEXP_SIDE");
    if (hp->n_ff_shexp && !(side_env && strcmp(side_env, "0") == 0) &&
        (cuda_stream_create(&s->side, why) || cuda_event_create(&s->side_ev[0], why) ||
         cuda_event_create(&s->side_ev[1], why))) {
        cuda_event_destroy(s->side_ev[0]);
        cuda_event_destroy(s->side_ev[1]);
        cuda_stream_destroy(s->side);
        s->side = s->side_ev[0] = s->side_ev[1] = NULL;
    }
    const char *ex_env = getenv("CLOVER_CUDA_EXACT_ROWS"); /* the many-row float form (matmul_exact.cu) unless 0 */
    s->exact_rows = !(ex_env && strcmp(ex_env, "0") == 0);
    /* the router product and the routing in one launch (moe_router.cu) unless CLOVER_CUDA_ROUTER_FUSED=0 */
    const char *rf_env = getenv("CLOVER_CUDA_ROUTER_FUSED");
    s->router_fused = !rf_env || !*rf_env ? 1 : strcmp(rf_env, "0") == 0 ? 0 : strcmp(rf_env, "2") == 0 ? 2 : 1;
    /* and past 8 rows up to CLOVER_CUDA_ROUTER_ROWS=N rows (9..CUDA_ROUTER_MAX_ROWS; anything else: not past 8) */
    const char *rr_env = getenv("CLOVER_CUDA_ROUTER_ROWS");
    const long rr = rr_env ? strtol(rr_env, NULL, 10) : 0;
    s->router_rows = rr > CUDA_MATMUL_DECODE_MAX_ROWS && rr <= CUDA_ROUTER_MAX_ROWS ? (size_t)rr : 0;
    /* CLOVER_CUDA_PREVIEW_HIDDEN (any value): previews record the residual stream for preview_debug */
    if (!s->stack && getenv("CLOVER_CUDA_PREVIEW_HIDDEN") &&
        !(s->dbg_hidden = mem_alloc((hp->n_layer + 1) * max_rows * hp->n_embd * sizeof(float)))) {
        rc = error_set(err, CLOVER_E_NOMEM, "CUDA session: no memory for the preview's residual stream");
        goto fail;
    }
    /* KV caches: one block, layer after layer; descriptors with their fixed pointers */
    size_t per_layer = max_ctx * (size_t)hp->n_head_kv * hp->head_dim;
    for (uint32_t l = 0; l < s->n_run && !s->stack; l++) {
        cuda_layer *ly = &s->layers[l];
        if (ly->kind == MODEL_LAYER_ATTENTION) {
            ly->k_cache = (float *)s->kv + (size_t)ly->slot * 2 * per_layer;
            ly->v_cache = ly->k_cache + per_layer;
            s->h_aseq[ly->slot] = (cuda_attn_seq){.k_cache = ly->k_cache, .v_cache = ly->v_cache};
        } else {
            s->h_gseq[ly->slot] = (cuda_gdn_seq){.ring = ly->ring, .state = ly->state};
        }
    }
    if (hp->n_rot) {
        float inv[512];
        if (hp->n_rot / 2 > 512) {
            rc = error_set(err, CLOVER_E_UNSUPPORTED, "CUDA session: %u rotary dims, at most 1024", hp->n_rot);
            goto fail;
        }
        rope_inv_freq(inv, hp->n_rot, hp->rope_freq_base);
        if (cuda_h2d(s->sc.inv_freq, inv, hp->n_rot / 2 * sizeof(float), why)) {
            rc = error_set(err, CLOVER_E_INTERNAL, "CUDA session: %s", why);
            goto fail;
        }
    }
    if ((s->n_attn && cuda_attn_init() != 0) || (s->n_gdn && cuda_gdn_init() != 0)) {
        rc = error_set(err, CLOVER_E_INTERNAL, "CUDA session: the attention / GDN kernels could not be set up");
        goto fail;
    }
    /* the fused router's counter starts at 0 (each launch leaves it 0; cuda_moe_router.h) */
    if (cuda_memset(s->sc.route_ctr, 0, sizeof(uint32_t), s->stream, why) || zero_states(s, why)) {
        rc = error_set(err, CLOVER_E_INTERNAL, "CUDA session: %s", why);
        goto fail;
    }
    *out = s;
    return CLOVER_OK;
fail:
    backend_cuda_session_free(s);
    return rc;
}

int backend_cuda_session_create(const clover_model *model, const backend_config *cfg, const cuda_pinned *share,
                                backend_session **out, clover_error *err) {
    return session_make(model, cfg, 0, 0, share, out, err);
}

int backend_cuda_stack_create(const clover_model *model, const backend_config *cfg, size_t max_seqs,
                              size_t max_rows, backend_session **out, clover_error *err) {
    if (max_seqs == 0 || max_seqs > 64 || max_rows < max_seqs) {
        *out = NULL;
        return error_set(err, CLOVER_E_INVALID, "CUDA stack: %zu sequences in %zu rows, expected 1..64 in as many rows",
                         max_seqs, max_rows);
    }
    return session_make(model, cfg, max_seqs, max_rows, NULL, out, err);
}

size_t backend_cuda_session_length(const backend_session *s) { return s ? s->n_past : 0; }

void backend_cuda_reset(backend_session *s) {
    if (!s) return;
    s->n_past = 0;
    s->epoch++; /* checkpoints saved before the reset are stale */
    zero_states(s, NULL); /* a failure here resurfaces at the next pass's first call */
}

int cuda_backend_graph_used(const backend_session *s) {
    return s && (s->decode_graph != NULL || (s->be && cuda_backend_stack_graphs(s->be)));
}
