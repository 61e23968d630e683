/*
 * device_check.c: clover_device_check (clover.h), what `clover check`
 * prints: a device backend against a plain CPU backend on the same commits.
 * Whole backends, through backend.h, so the check sees exactly what a
 * session would run: every commit asks for all rows' logits and the
 * residual stream, and both sessions' states are exported in the shared
 * layout (backend.h) and compared layer by layer.
 */
#include <math.h>
#include <string.h>

#include "backend/registry.h"
#include "base/alloc.h"
#include "base/error.h"
#include "base/rng.h"
#include "model/model.h"
#include "parallel/ep_cpu.h"

enum { CHECK_CHUNK = 64, CHECK_BLOCK_NO_RECORD = 8 };

typedef struct side {
    const backend_ops *ops;
    backend *be;
    backend_session *s;
    float *logits, *hidden; /* [chunk][V], [L+1][chunk][H] */
    uint8_t *state;
} side;

/* sum (a-b)^2 and sum b^2 over n values, accumulated in double */
static void diff_into(const float *a, const float *b, size_t n, double *dd, double *bb, double *max_abs) {
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        *dd += d * d;
        *bb += (double)b[i] * b[i];
        if (max_abs && fabs(d) > *max_abs) *max_abs = fabs(d);
    }
}

static double ratio(double dd, double bb) { return bb > 0 ? sqrt(dd / bb) : (dd > 0 ? INFINITY : 0.0); }

static void keep_max(double *at, double v) {
    if (!(v <= *at)) *at = v; /* NaN stays */
}

static int side_open(side *sd, const backend_ops *ops, const clover_model *m, const backend_config *cfg,
                     clover_error *err) {
    sd->ops = ops;
    int rc = ops->probe ? ops->probe(m, cfg, err) : CLOVER_OK;
    if (!rc) rc = ops->create(m, cfg, &sd->be, err);
    if (!rc && ops == &backend_cpu && !cfg->plain) rc = ep_cpu_attach(sd->be, err); /* CLOVER_SIM_RANKS */
    if (!rc) rc = ops->session_create(sd->be, &sd->s, err);
    if (rc) return error_prefix(err, "%s backend", ops->name);
    const size_t V = m->hp.n_vocab, H = m->hp.n_embd, L = m->hp.n_layer;
    sd->logits = mem_alloc(CHECK_CHUNK * V * sizeof(float));
    sd->hidden = mem_alloc((L + 1) * CHECK_CHUNK * H * sizeof(float));
    if (!sd->logits || !sd->hidden) return error_set(err, CLOVER_E_NOMEM, "check: no memory for %d rows", CHECK_CHUNK);
    return CLOVER_OK;
}

static void side_close(side *sd) {
    if (sd->s) sd->ops->session_free(sd->s);
    if (sd->be) sd->ops->destroy(sd->be);
    mem_free(sd->logits);
    mem_free(sd->hidden);
    mem_free(sd->state);
}

/* Compares the two exported states layer by layer (backend.h's layout). */
static int compare_states(const clover_model *m, side *dv, side *cpu, clover_check_result *r, clover_error *err) {
    size_t nb = cpu->ops->state_bytes(cpu->s);
    if (dv->ops->state_bytes(dv->s) != nb)
        return error_set(err, CLOVER_E_INTERNAL, "check: the %s state is %zu bytes, the cpu's %zu", dv->ops->name,
                         dv->ops->state_bytes(dv->s), nb);
    mem_free(dv->state);
    mem_free(cpu->state);
    dv->state = mem_alloc(nb);
    cpu->state = mem_alloc(nb);
    if (!dv->state || !cpu->state) return error_set(err, CLOVER_E_NOMEM, "check: no memory for %zu state bytes", nb);
    int rc = dv->ops->state_export(dv->s, dv->state, nb, err);
    if (!rc) rc = cpu->ops->state_export(cpu->s, cpu->state, nb, err);
    if (rc) return error_prefix(err, "check: state export");
    uint64_t n;
    memcpy(&n, cpu->state, sizeof n);
    const model_hparams *hp = &m->hp;
    size_t off = sizeof n;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        size_t floats = m->layers[l].kind == MODEL_LAYER_ATTENTION
                            ? 2 * (size_t)n * hp->n_head_kv * hp->head_dim
                            : (size_t)(hp->ssm_conv_kernel - 1) * hp->gdn_conv_dim +
                                  (size_t)hp->gdn_nv * hp->gdn_dk * hp->gdn_dv;
        if (off + floats * sizeof(float) > nb)
            return error_set(err, CLOVER_E_INTERNAL, "check: the state ends inside layer %u", l);
        double dd = 0, bb = 0;
        diff_into((const float *)(dv->state + off), (const float *)(cpu->state + off), floats, &dd, &bb, NULL);
        keep_max(&r->state_err[l], ratio(dd, bb));
        off += floats * sizeof(float);
    }
    return CLOVER_OK;
}

/* One commit of ids[0..n) on both, compared. */
static int check_commit(const clover_model *m, side *dv, side *cpu, const int32_t *ids, size_t n,
                        clover_check_result *r, clover_error *err) {
    const size_t V = m->hp.n_vocab, H = m->hp.n_embd, L = m->hp.n_layer;
    side *sides[2] = {dv, cpu};
    for (int i = 0; i < 2; i++) {
        backend_commit_seq q = {.s = sides[i]->s, .ids = ids, .n = n, .all_logits = sides[i]->logits,
                                .hidden = sides[i]->hidden};
        backend_pass_stats st = {0};
        int rc = backend_commit1(sides[i]->ops, sides[i]->be, &q, &st, err);
        if (rc) return error_prefix(err, "check: commit of %zu rows on the %s backend", n, sides[i]->ops->name);
    }
    for (size_t l = 0; l < L; l++) {
        double dd = 0, bb = 0;
        diff_into(dv->hidden + (l + 1) * n * H, cpu->hidden + (l + 1) * n * H, n * H, &dd, &bb, NULL);
        keep_max(&r->hidden_err[l], ratio(dd, bb));
    }
    double dd = 0, bb = 0;
    diff_into(dv->logits, cpu->logits, n * V, &dd, &bb, &r->logits_max_abs);
    keep_max(&r->logits_err, ratio(dd, bb));
    for (size_t i = 0; i < n; i++) {
        const float *a = dv->logits + i * V, *b = cpu->logits + i * V;
        size_t ia = 0, ib = 0;
        for (size_t v = 1; v < V; v++) {
            if (a[v] > a[ia]) ia = v;
            if (b[v] > b[ib]) ib = v;
        }
        r->argmax_equal += ia == ib;
    }
    r->n_rows += n;
    r->n_commits++;
    return compare_states(m, dv, cpu, r, err);
}

void clover_check_result_free(clover_check_result *r) {
    if (!r) return;
    mem_free(r->hidden_err);
    mem_free(r->state_err);
    mem_free(r->layer_kind);
    memset(r, 0, sizeof *r);
}

int clover_device_check(const clover_model *m, const clover_check_params *p, clover_check_result *r,
                        clover_error *err) {
    clover_error local;
    if (!err) err = &local;
    if (!r) return error_set(err, CLOVER_E_INVALID, "check: no result");
    memset(r, 0, sizeof *r);
    if (!m || !p || !p->prompt || !p->n_prompt) return error_set(err, CLOVER_E_INVALID, "check: a model and a prompt are needed");
    if (p->device != CLOVER_DEVICE_CPU && p->device != CLOVER_DEVICE_CUDA)
        return error_set(err, CLOVER_E_INVALID, "check: device %d, expected cpu or cuda", p->device);
    if (p->gpu_mem && p->device != CLOVER_DEVICE_CUDA)
        return error_set(err, CLOVER_E_INVALID, "check: --gpu-mem needs --device cuda");
    backend_config probe_cfg = {.gpu_mem = p->gpu_mem};
    backend_choice ch;
    int rc0 = backend_registry_resolve(p->device, m, p->gpu_mem ? &probe_cfg : NULL, &ch, err);
    if (rc0) return error_prefix(err, "check");
    const backend_ops *dev = ch.ops;
    for (size_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || (uint32_t)p->prompt[i] >= m->hp.n_vocab)
            return error_set(err, CLOVER_E_INVALID, "check: prompt id %d at %zu is outside the vocabulary of %u",
                             p->prompt[i], i, m->hp.n_vocab);
    const size_t B = m->has_record ? m->record.block_size : CHECK_BLOCK_NO_RECORD, L = m->hp.n_layer;
    if (B > CHECK_CHUNK) return error_set(err, CLOVER_E_UNSUPPORTED, "check: blocks of %zu rows, at most %d", B, CHECK_CHUNK);
    if (p->n_blocks > 4096) return error_set(err, CLOVER_E_INVALID, "check: %zu blocks, at most 4096", p->n_blocks);
    const size_t total = p->n_prompt + p->n_blocks * B;
    r->n_layer = L;
    r->hidden_err = mem_calloc(L ? L : 1, sizeof *r->hidden_err);
    r->state_err = mem_calloc(L ? L : 1, sizeof *r->state_err);
    r->layer_kind = mem_calloc(L ? L : 1, sizeof *r->layer_kind);
    int32_t *ids = mem_alloc(total * sizeof *ids);
    if (!r->hidden_err || !r->state_err || !r->layer_kind || !ids) {
        mem_free(ids);
        clover_check_result_free(r);
        return error_set(err, CLOVER_E_NOMEM, "check: no memory");
    }
    for (size_t l = 0; l < L; l++) r->layer_kind[l] = m->layers[l].kind == MODEL_LAYER_ATTENTION;
    memcpy(ids, p->prompt, p->n_prompt * sizeof *ids);
    rng_state g;
    rng_seed(&g, p->seed);
    for (size_t i = p->n_prompt; i < total; i++) ids[i] = (int32_t)(rng_next(&g) % m->hp.n_vocab);

    backend_config ref_cfg = {.n_threads = p->n_threads, .max_rows = CHECK_CHUNK, .max_context = total, .plain = true};
    backend_config dev_cfg = {.n_threads = p->n_threads, .max_rows = p->device_rows ? p->device_rows : CHECK_CHUNK,
                              .max_context = total, .gpu_mem = p->gpu_mem};
    side dv = {0}, cpu = {0};
    int rc = side_open(&dv, dev, m, &dev_cfg, err);
    if (!rc) rc = side_open(&cpu, &backend_cpu, m, &ref_cfg, err);
    r->device = dev->name;
    for (size_t a = 0; !rc && a < p->n_prompt; a += CHECK_CHUNK) {
        size_t n = p->n_prompt - a < CHECK_CHUNK ? p->n_prompt - a : CHECK_CHUNK;
        rc = check_commit(m, &dv, &cpu, ids + a, n, r, err);
    }
    for (size_t k = 0; !rc && k < p->n_blocks; k++) rc = check_commit(m, &dv, &cpu, ids + p->n_prompt + k * B, B, r, err);
    side_close(&dv);
    side_close(&cpu);
    mem_free(ids);
    if (rc) {
        clover_check_result_free(r);
        if (strncmp(err->message, "check:", 6)) error_prefix(err, "check");
    }
    return rc;
}
