/*
 * batch.c: engines (one backend object shared by many sessions) and the
 * public request API: requests step one pass at a time, alone or many in
 * one backend call (clover.h, continuous batching).
 *
 * clover_batch_step plans every running request (host work up to its next
 * backend operation), groups the planned commits and previews by backend
 * object, runs each group in one batched call per kind (commit, preview,
 * resolve: a diffusion block's passes in one call; backend.h: the sequences'
 * results do not depend on each other, and a failure is the sequence's
 * own), then lets each request absorb its results. A request that fails or
 * ends is settled there, exactly as clover_generate settles it.
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "backend/registry.h"
#include "base/timer.h"
#include "engine/request.h"

struct clover_engine {
    const clover_model *model;
    const backend_ops *be;
    backend *bk;
    clover_session_params params;
    const char *device; /* the backend it runs on: "cpu", "cuda" */
    char why[1100];     /* why that one (the registry's words) */
};

struct clover_request {
    engine_request rq;
    clover_generate_params p;
    clover_generate_result res;
    int32_t *prompt;
    bool done;
    int rc;
    clover_error err;
};

/* An engine on a given backend (ops): clover_engine_create after the
 * registry's choice, and the tests' fake backends. */
int engine_create_on(clover_engine **out, const clover_model *model, const backend_ops *ops,
                     const clover_session_params *params, const char *why, clover_error *err) {
    clover_error local;
    if (!err) err = &local;
    if (!out) return error_set(err, CLOVER_E_INVALID, "clover_engine_create: out must not be NULL");
    *out = NULL;
    if (!model || !ops) return error_set(err, CLOVER_E_INVALID, "clover_engine_create: model must not be NULL");
    if (params && params->gpu_layers)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "--gpu-layers: an engine runs the whole model on one device (cpu or cuda), not split");
    clover_engine *e = mem_calloc(1, sizeof *e);
    if (!e) return error_set(err, CLOVER_E_NOMEM, "clover_engine_create: no memory");
    if (params) e->params = *params;
    e->model = model;
    backend_config cfg;
    engine_backend_config(model, &e->params, ops, &cfg);
    int rc = engine_backend_open(model, &cfg, ops, &e->be, &e->bk, err);
    if (rc) {
        mem_free(e);
        return error_prefix(err, "engine on the %s backend", ops->name);
    }
    e->device = ops->name;
    snprintf(e->why, sizeof e->why, "%s", why ? why : "asked for");
    if (e->be == &backend_cpu && ops != &backend_cpu) { /* the device was dropped earlier in this process */
        e->device = backend_cpu.name;
        snprintf(e->why, sizeof e->why, "the %s device failed earlier in this process", ops->name);
    }
    *out = e;
    return CLOVER_OK;
}

int clover_engine_create(clover_engine **out, const clover_model *model, const clover_session_params *params,
                         clover_error *err) {
    clover_error local;
    if (!err) err = &local;
    if (!out) return error_set(err, CLOVER_E_INVALID, "clover_engine_create: out must not be NULL");
    *out = NULL;
    if (!model) return error_set(err, CLOVER_E_INVALID, "clover_engine_create: model must not be NULL");
    backend_choice ch;
    backend_config cfg, *pc = NULL;
    if (params && params->gpu_mem) { /* --gpu-mem: the CUDA backend asked for; its probe checks the budget */
        int rc = engine_gpu_mem_check(params, err);
        if (rc) return rc;
        engine_backend_config(model, params, backend_registry_cuda(), &cfg);
        pc = &cfg;
    }
    int rc = backend_registry_resolve(params ? params->device : CLOVER_DEVICE_AUTO, model, pc, &ch, err);
    if (rc) return rc;
    return engine_create_on(out, model, ch.ops, params, ch.why, err);
}

const char *clover_engine_backend(const clover_engine *e) { return e ? e->device : "none"; }

const char *clover_engine_device_reason(const clover_engine *e) { return e ? e->why : ""; }

void clover_engine_free(clover_engine *e) {
    if (!e) return;
    e->be->destroy(e->bk);
    mem_free(e);
}

int clover_engine_session_create(clover_session **out, clover_engine *e, const clover_session_params *params,
                                 clover_error *err) {
    clover_error local;
    if (!err) err = &local;
    if (!e) return error_set(err, CLOVER_E_INVALID, "clover_engine_session_create: engine must not be NULL");
    clover_session_params p = e->params; /* the engine's geometry, the caller's snapshot options */
    if (params) {
        p.no_snapshot = params->no_snapshot;
        p.snapshot_max_bytes = params->snapshot_max_bytes;
    }
    return engine_session_create_on(out, e->model, e->be, e->bk, &p, err);
}

int clover_request_create(clover_request **out, clover_session *s, const int32_t *prompt, size_t n_prompt,
                          const clover_generate_params *params, clover_error *err) {
    clover_error local;
    if (!err) err = &local;
    if (!out) return error_set(err, CLOVER_E_INVALID, "clover_request_create: out must not be NULL");
    *out = NULL;
    if (!s) return error_set(err, CLOVER_E_INVALID, "clover_request_create: session must not be NULL");
    if (s->active) return error_set(err, CLOVER_E_INVALID, "clover_request_create: the session has a request running");
    if (n_prompt && !prompt)
        return error_set(err, CLOVER_E_INVALID, "clover_request_create: %zu prompt ids but a NULL array", n_prompt);
    clover_request *r = mem_calloc(1, sizeof *r);
    if (r) r->prompt = mem_alloc((n_prompt ? n_prompt : 1) * sizeof *prompt);
    if (!r || !r->prompt) {
        if (r) mem_free(r);
        return error_set(err, CLOVER_E_NOMEM, "clover_request_create: no memory for %zu prompt ids", n_prompt);
    }
    if (n_prompt) memcpy(r->prompt, prompt, n_prompt * sizeof *prompt);
    if (params)
        r->p = *params;
    else
        clover_generate_params_init(&r->p);
    r->rq = (engine_request){.s = s, .prompt = r->prompt, .n_prompt = n_prompt, .p = &r->p, .res = &r->res};
    r->rq.t_start = timer_now();
    int rc = engine_request_setup(&r->rq, err);
    if (rc) {
        engine_request_release(&r->rq);
        clover_generate_result_free(&r->res);
        mem_free(r->prompt);
        mem_free(r);
        return rc;
    }
    s->active = true;
    *out = r;
    return CLOVER_OK;
}

/* Ends a request with status rc (settled as clover_generate settles). */
static void request_end(clover_request *r, int rc) {
    r->rc = engine_request_settle(&r->rq, rc, &r->err);
    r->done = true;
    r->rq.s->active = false;
}

int clover_request_done(const clover_request *r) { return r ? r->done : 1; }

int clover_batch_step(clover_request *const *rqs, size_t n) { return clover_batch_step_ex(rqs, n, NULL); }

int clover_batch_step_ex(clover_request *const *rqs, size_t n, clover_step_stats *sst) {
    clover_step_stats unused;
    if (!sst) sst = &unused;
    memset(sst, 0, sizeof *sst);
    const double t_step = timer_now();
    if (n && !rqs) return CLOVER_E_INVALID;
    for (size_t i = 0; i < n; i++) /* plan */
        if (rqs[i] && !rqs[i]->done) {
            clover_request *r = rqs[i];
            int rc = engine_request_plan(&r->rq, &r->err);
            if (rc || r->rq.op == RQ_OP_NONE) request_end(r, rc);
        }
    /* run: per backend object and kind, one call over every planned sequence */
    backend_commit_seq cs[64];
    backend_preview_seq ps[64];
    backend_resolve_seq rs[64];
    clover_request *cr[64], *pr[64], *rr[64];
    bool *ran = mem_calloc(n ? n : 1, sizeof *ran);
    if (!ran) return CLOVER_E_NOMEM;
    for (size_t i0 = 0; i0 < n; i0++) {
        clover_request *lead = rqs[i0];
        if (!lead || lead->done || lead->rq.op == RQ_OP_NONE || ran[i0]) continue;
        backend *bk = lead->rq.s->bk;
        const backend_ops *be = lead->rq.s->be;
        size_t nc = 0, np = 0, nr = 0;
        backend_pass_stats cst = {0}, pst = {0}, rst = {0};
        for (size_t i = i0; i < n; i++) {
            clover_request *r = rqs[i];
            if (!r || r->done || r->rq.op == RQ_OP_NONE || r->rq.s->bk != bk || ran[i]) continue;
            if ((r->rq.op == RQ_OP_COMMIT && nc == 64) || (r->rq.op == RQ_OP_PREVIEW && np == 64) ||
                (r->rq.op == RQ_OP_RESOLVE && nr == 64))
                continue;
            ran[i] = true;
            if (r->rq.op == RQ_OP_COMMIT)
                cs[nc] = r->rq.s->cseq, cr[nc++] = r;
            else if (r->rq.op == RQ_OP_RESOLVE)
                rs[nr] = r->rq.s->rseq, rr[nr++] = r;
            else
                ps[np] = r->rq.s->pseq, pr[np++] = r;
        }
        double t = timer_now();
        if (nc) be->commit(bk, cs, nc, &cst);
        double t1 = timer_now();
        if (np) be->preview(bk, ps, np, &pst);
        double t2 = timer_now();
        if (nr) be->resolve(bk, rs, nr, NULL, &rst); /* each sequence's own cancel flag is in it */
        const double dc = t1 - t, dp = t2 - t1, dr = timer_now() - t2; /* a call's whole time is each of its sequences' */
        sst->sequences += nc + np + nr;
        sst->backend_calls += (nc != 0) + (np != 0) + (nr != 0);
        sst->backend_passes += cst.passes + pst.passes + rst.passes;
        sst->backend_s += dc + dp + dr;
        for (size_t k = 0; k < nc; k++) sst->rows += cs[k].n;
        for (size_t k = 0; k < np; k++) sst->rows += ps[k].b;
        for (size_t k = 0; k < nr; k++) sst->rows += rs[k].b;
        for (size_t k = 0; k < nc; k++) {
            clover_request *r = cr[k];
            r->rq.s->cseq = cs[k];
            r->rq.t_op = timer_now() - dc;
            int rc = engine_request_absorb(&r->rq, &cst, &r->err);
            if (rc) request_end(r, rc);
        }
        for (size_t k = 0; k < np; k++) {
            clover_request *r = pr[k];
            r->rq.s->pseq = ps[k];
            r->rq.t_op = timer_now() - dp;
            int rc = engine_request_absorb(&r->rq, &pst, &r->err);
            if (rc) request_end(r, rc);
        }
        for (size_t k = 0; k < nr; k++) {
            clover_request *r = rr[k];
            r->rq.s->rseq = rs[k];
            r->rq.t_op = timer_now() - dr;
            int rc = engine_request_absorb(&r->rq, &rst, &r->err);
            if (rc) request_end(r, rc);
        }
    }
    mem_free(ran);
    int running = 0;
    for (size_t i = 0; i < n; i++) running += rqs[i] && !rqs[i]->done;
    sst->step_s = timer_now() - t_step;
    return running;
}

int clover_request_step(clover_request *r) {
    if (!r) return CLOVER_E_INVALID;
    clover_batch_step(&r, 1);
    return r->done ? r->rc : CLOVER_OK;
}

int clover_request_result(clover_request *r, clover_generate_result *out, clover_error *err) {
    clover_error local;
    if (!err) err = &local;
    if (!r || !out) return error_set(err, CLOVER_E_INVALID, "clover_request_result: request and out must not be NULL");
    memset(out, 0, sizeof *out);
    if (!r->done) return error_set(err, CLOVER_E_INVALID, "clover_request_result: the request is still running");
    if (r->rc) {
        *err = r->err;
        return r->rc;
    }
    *out = r->res;
    memset(&r->res, 0, sizeof r->res);
    return CLOVER_OK;
}

void clover_request_free(clover_request *r) {
    if (!r) return;
    if (!r->done) {
        request_cancel(&r->rq);
        request_end(r, CLOVER_OK);
    }
    engine_request_release(&r->rq);
    clover_generate_result_free(&r->res);
    mem_free(r->prompt);
    mem_free(r);
}
