/*
 * backend_cuda_pass.c: one run of rows through the trunk on the GPU, the
 * device twin of src/cpu/backend_cpu_pass.c (HF's layer: h += mixer(norm(h));
 * h += moe(norm(h)); then the final norm and the head), enqueued on the
 * session's stream with nothing allocated, synchronised or read back inside
 * (except the diagnostic residual stream, which is never part of a graph).
 *
 * Precision, per weight product (cuda_matmul.h), chosen by the weight's type
 * and the pass's row count only, never by other sequences:
 *  - a float file (every weight matrix F32, F16 or BF16: s->fp32): f32
 *    activations and f32 sums always (the decode kernel, in groups of 8 rows
 *    for larger passes), so it runs in FP32 arithmetic end to end, as the
 *    CPU does; in a quantised file the float matrices of a chunk go through
 *    the TF32 GEMM with the rest, except the router (f32 always: its logits
 *    pick experts, and TF32 flips near-ties: on the q8_0 fixture the state
 *    after a prompt then differed from the CPU's by 7.2e-2 against 3.0e-2);
 *  - Q8_0 / K-quant weights: up to 8 rows the CPU's 8-bit activation rounding
 *    (blocks of 32 / 256, d = max|x| / 127), more rows the TF32 tensor-core
 *    GEMM (operands rounded to 10-bit mantissas, f32 accumulation).
 * The MoE routes on the device (cuda_moe_route; up to 8 rows in the router
 * product's own launch, cuda_moe_router), the grouped expert products
 * read each routed expert once for all the rows that use it, and the routed
 * outputs are summed in ascending expert id as the CPU does.
 *
 * A preview pass (p->preview, SPEC.md 2) differs in three operators only:
 * attention sees every block row (no causal mask; its K/V rows are written
 * past the committed length, which no committed read covers), the GDN layers
 * run the block operator over the committed ring and state without writing
 * them, and with the coreset on, every layer's MoE first computes the
 * block's coreset on the device (kept flags in sc.kept, [n_layer][E]) and
 * routes inside it. Its head runs only for the rows listed (those still
 * masked), gathered first (cuda_pass_head_rows; with n_head_rows 0 the pass
 * is the trunk alone, which backend_cuda_preview.c captures as a graph).
 *
 * A session of layers [0, n_run) only (the front of a split,
 * on unless CLOVER_CUDA_LAYER_RANGE=0) stops after layer n_run - 1 with no head: sc.h
 * then holds the residual stream its caller hands to the back.
 */
#include <string.h>

#include "base/error.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_matmul.h"
#include "cuda/cuda_mem.h"
#include "cuda/cuda_moe_router.h"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_preview.h"
#include "quant/quant.h"

enum { D = CUDA_MATMUL_DECODE_MAX_ROWS };

static bool is_float(uint32_t t) { return t == QUANT_F32 || t == QUANT_F16 || t == QUANT_BF16; }

/* Where a product takes the decode kernel (8-bit rows or f32 for float weights), as mm_as decides. Integer
 * weights: by the rows the product reads at once (a stacked pass's rows, else this call's), the decode kernel
 * up to max_rows of them, the integer chunk GEMM past that: the same bits either way (one float order at any
 * row count, cuda_matmul.h), each weight read once for every row instead of once per group of D (tensor cores:
 * at 8 rows the chunk form takes 16 us for the 8192x2048 q8_0 product against the 8-row decode form's 37.5,
 * 2026-12-10-verify). Float weights: by the rows of one sequence (s->cls_rows), never the pass's, so a stacked
 * row keeps the kernel it has alone (their chunk form is TF32, the decode form f32). */
static bool takes_decode_at(const backend_session *s, const model_weight *w, bool exact, size_t max_rows) {
    if (!is_float(w->type) && !s->stack_decode_only && (s->stack ? s->pass_rows : s->cls_rows) > max_rows)
        return false;
    return s->cls_rows <= D || ((s->fp32 || exact) && is_float(w->type));
}

/* Dense products: past s->decode_rows rows (CLOVER_CUDA_DECODE_ROWS, 1..8; 2 when unset) the chunk form. */
static bool takes_decode(const backend_session *s, const model_weight *w, bool exact) {
    return takes_decode_at(s, w, exact, s->decode_rows);
}

/* Grouped expert products: past s->moe_decode_rows rows (CLOVER_CUDA_MOE_DECODE_ROWS, 1..8; 2 when unset) the
 * chunk form. A switch of its own (measured apart: at 8 rows the grouped decode form took 97 us for the gate
 * product's 53 experts, the chunk form 65 us at 32 rows). */
static bool moe_takes_decode(const backend_session *s, const model_weight *w) {
    return takes_decode_at(s, w, false, s->moe_decode_rows);
}

/* Where a product that does not take the decode kernel takes the stream form of 9..32 rows instead of the chunk
 * form (cuda_matmul_stream_takes: the switch on, Q8_0, n_in % 256 == 0, the rows within its cap): the same bits
 * either way (cuda_matmul.h), so the choice may follow the row count. */
static bool takes_stream(const backend_session *s, const model_weight *w, size_t n) {
    return cuda_matmul_stream_takes(w->type, (size_t)w->ne[0], n) &&
           ((uintptr_t)cuda_model_weight(s->cm, w) & 15) == 0 &&
           cuda_matmul_stream_work_bytes(w->type, (size_t)w->ne[0], n) <= s->sc.mm_work_bytes;
}

/* Whether mm_multi takes w at n rows (> D) in cuda_matmul_exact_multi's one launch, every row with the decode
 * product's bits (the router, exact; a float product of few outputs, whose chunk path is the thin decode form). */
static bool takes_exact_rows(const backend_session *s, const model_weight *w, bool exact, size_t n) {
    return n > D && s->exact_rows && is_float(w->type) &&
           (exact || s->fp32 || s->cls_rows <= D || (size_t)w->ne[1] <= CUDA_MATMUL_THIN_MAX_OUT);
}

/* One type and one input width: two products that one decode launch can take together. */
static bool same_width(const model_weight *a, const model_weight *b) {
    return a->type == b->type && a->ne[0] == b->ne[0];
}

static bool same_shape(const model_weight *a, const model_weight *b) {
    return a->type == b->type && a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1];
}

static int mm_as(backend_session *s, const model_weight *w, const float *x, size_t n, float *y, bool exact,
                 clover_error *err) {
    s->xq_of = NULL; /* mm_work is this product's from here */
    const void *dw = cuda_model_weight(s->cm, w);
    const size_t n_in = (size_t)w->ne[0], n_out = (size_t)w->ne[1];
    char why[256] = "";
    if (takes_decode(s, w, exact)) {
        for (size_t r0 = 0; r0 < n; r0 += D) {
            size_t nr = n - r0 < D ? n - r0 : D;
            if (cuda_matmul_decode(w->type, dw, n_out, n_in, x + r0 * n_in, nr, y + r0 * n_out, s->sc.mm_work,
                                   s->stream, why, sizeof why))
                return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s: %s", w->name, why);
        }
        return CLOVER_OK;
    }
    /* 9..32 rows of Q8_0 under CLOVER_CUDA_MMV_STREAM32: the persistent stream form (the chunk form's bits) */
    if (takes_stream(s, w, n)) {
        const cuda_matmul_seg seg = {dw, n_out, y};
        if (cuda_matmul_stream_multi(w->type, &seg, 1, n_in, x, n, s->sc.mm_work, s->stream, why, sizeof why))
            return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s: %s", w->name, why);
        return CLOVER_OK;
    }
    /* the chunk form with its 8-bit rows in mm_work when they fit (sized for R rows), else without scratch */
    const size_t cw = cuda_matmul_chunk_work_bytes(w->type, n_in, n);
    if (cw && cw <= s->sc.mm_work_bytes ? cuda_matmul_chunk_ws(w->type, dw, n_out, n_in, x, n, y, s->sc.mm_work,
                                                                s->stream, why, sizeof why)
                                        : cuda_matmul_chunk(w->type, dw, n_out, n_in, x, n, y, s->stream, why,
                                                            sizeof why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s: %s", w->name, why);
    return CLOVER_OK;
}

static int mm(backend_session *s, const model_weight *w, const float *x, size_t n, float *y, clover_error *err) {
    return mm_as(s, w, x, n, y, false, err);
}

static int mm_multi(backend_session *s, const model_weight *const *w, const bool *exact, float *const *y, size_t nw,
                    const float *x, size_t n, clover_error *err);

/* Two products of the same rows: where both take the chunk form with their 8-bit rows in mm_work (one type and
 * n_in), cuda_matmul_chunk_ws_pair (bit for bit the two calls; one launch under CLOVER_CUDA_IGEMM_FEW=1 at <= 32
 * rows), else mm twice. */
static int mm_pair(backend_session *s, const model_weight *w1, const model_weight *w2, const float *x, size_t n,
                   float *y1, float *y2, clover_error *err) {
    s->xq_of = NULL;
    const size_t n_in = (size_t)w1->ne[0];
    if (w1->type == w2->type && (size_t)w2->ne[0] == n_in && !takes_decode(s, w1, false) &&
        !takes_decode(s, w2, false) && takes_stream(s, w1, n)) { /* one stream launch for both */
        const model_weight *w[2] = {w1, w2};
        const bool ex[2] = {false, false};
        float *const y[2] = {y1, y2};
        return mm_multi(s, w, ex, y, 2, x, n, err);
    }
    const size_t cw = cuda_matmul_chunk_work_bytes(w1->type, n_in, n);
    if (w1->type != w2->type || (size_t)w2->ne[0] != n_in || takes_decode(s, w1, false) ||
        takes_decode(s, w2, false) || !cw || cw > s->sc.mm_work_bytes) {
        int rc;
        if ((rc = mm(s, w1, x, n, y1, err)) || (rc = mm(s, w2, x, n, y2, err))) return rc;
        return CLOVER_OK;
    }
    char why[256] = "";
    if (cuda_matmul_chunk_ws_pair(w1->type, cuda_model_weight(s->cm, w1), (size_t)w1->ne[1],
                                  cuda_model_weight(s->cm, w2), (size_t)w2->ne[1], n_in, x, n, y1, y2, s->sc.mm_work,
                                  s->stream, why, sizeof why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s + %s: %s", w1->name, w2->name, why);
    return CLOVER_OK;
}

/* The segments of a multi-matrix launch: matrix i's device weights, outputs and rows r0.. of its output. */
static void segs_of(const backend_session *s, const model_weight *const *w, float *const *y, size_t nw, size_t r0,
                    cuda_matmul_seg *seg) {
    for (size_t i = 0; i < nw; i++) {
        seg[i].w = cuda_model_weight(s->cm, w[i]);
        seg[i].n_out = (size_t)w[i]->ne[1];
        seg[i].y = y[i] + r0 * seg[i].n_out;
    }
}

/* Up to CUDA_MATMUL_MAX_SEG products of the same rows x in one launch when all take the decode kernel with one
 * type and n_in (bit for bit the separate launches, cuda_matmul.h); else one by one. exact: mm_as's flag. */
static int mm_multi(backend_session *s, const model_weight *const *w, const bool *exact, float *const *y, size_t nw,
                    const float *x, size_t n, clover_error *err) {
    const bool xq_ready = s->xq_of == x && w[0]->type == QUANT_Q8_0 && (size_t)w[0]->ne[0] == s->hp->n_embd;
    s->xq_of = NULL;
    if (nw < 1 || nw > CUDA_MATMUL_MAX_SEG) {
        int rc;
        for (size_t i = 0; i < nw; i++)
            if ((rc = mm_as(s, w[i], x, n, y[i], exact[i], err))) return rc;
        return CLOVER_OK;
    }
    bool same = true;
    for (size_t i = 1; i < nw; i++) same = same && same_width(w[i], w[0]);
    /* float products past D rows whose every row has the decode product's bits on its own path (the router, exact;
     * the shared expert's 1-output gate logit, whose chunk path is the thin decode form): one launch for all of
     * them with those bits (cuda_matmul_exact_multi, matmul_exact.cu) instead of a decode launch per 8 rows and
     * a thin launch (a 32-row preview: 42 us a layer, 1.7 ms of 10.2; the 16-sequence step 46 us a layer, H200,
     * 2026-12-14-trace24). On unless CLOVER_CUDA_EXACT_ROWS=0. */
    bool thin = same;
    for (size_t i = 0; thin && i < nw; i++) thin = takes_exact_rows(s, w[i], exact[i], n);
    bool one = same && nw > 1 && !thin;
    for (size_t i = 0; one && i < nw; i++) one = takes_decode(s, w[i], exact[i]);
    /* 9..32 rows under CLOVER_CUDA_MMV_STREAM32: one quantisation of x and one launch */
    bool stream = same && !thin && !one;
    for (size_t i = 0; stream && i < nw; i++) stream = !takes_decode(s, w[i], exact[i]) && takes_stream(s, w[i], n);
    /* integer chunk products of one type and width: cuda_matmul_chunk_ws_multi (the same bits as mm_as each; one
     * 8-bit copy of the rows for all of them unless CLOVER_CUDA_SHARE_XQ=0) */
    bool shared = same && !thin && !one && !stream && nw >= 2 && !is_float(w[0]->type);
    const size_t cw = shared ? cuda_matmul_chunk_work_bytes(w[0]->type, (size_t)w[0]->ne[0], n) : 0;
    shared = shared && cw && cw <= s->sc.mm_work_bytes;
    for (size_t i = 0; shared && i < nw; i++) shared = !takes_decode(s, w[i], exact[i]) && !takes_stream(s, w[i], n);
    if (!thin && !one && !stream && !shared) {
        int rc;
        for (size_t i = 0; i < nw; i++)
            if ((rc = mm_as(s, w[i], x, n, y[i], exact[i], err))) return rc;
        return CLOVER_OK;
    }
    const uint32_t type = w[0]->type;
    const size_t n_in = (size_t)w[0]->ne[0];
    cuda_matmul_seg seg[CUDA_MATMUL_MAX_SEG];
    char why[256] = "";
    int rc = 0;
    if (one) { /* the decode launches, 8 rows each */
        for (size_t r0 = 0; r0 < n && !rc; r0 += D) {
            const size_t nr = n - r0 < D ? n - r0 : D;
            segs_of(s, w, y, nw, r0, seg);
            rc = cuda_matmul_decode_multi(type, seg, nw, n_in, x + r0 * n_in, nr, s->sc.mm_work, s->stream, why,
                                          sizeof why);
        }
    } else {
        segs_of(s, w, y, nw, 0, seg);
        rc = thin     ? cuda_matmul_exact_multi(type, seg, nw, n_in, x, n, s->stream, why, sizeof why)
             : stream ? cuda_matmul_stream_multi(type, seg, nw, n_in, x, n, s->sc.mm_work, s->stream, why, sizeof why)
                      : cuda_matmul_chunk_ws_multi_xq(type, seg, nw, n_in, x, n, s->sc.mm_work, xq_ready, s->stream,
                                                      why, sizeof why);
    }
    if (rc) return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s and %zu more: %s", w[0]->name, nw - 1, why);
    return CLOVER_OK;
}

/* Where a grouped product reads the experts of w (a stacked expert tensor of the layer): the model's device
 * copy, expert e at w + e * stride; or under --gpu-mem the pool's slots (s->xv, set by layer_moe for this
 * layer): expert e at its slot, the ids the slot ids of sc.rslot. The same kernels either way. */
static void moe_source(const backend_session *s, const model_weight *w, cuda_moe_args *a) {
    a->w = cuda_model_weight(s->cm, w);
    a->expert_stride = quant_row_bytes(w->type, a->n_in) * a->n_out;
    if (!s->xv_moe) return;
    const int part = w == &s->xv_moe->gate_exps ? 0 : w == &s->xv_moe->up_exps ? 1 : 2;
    a->w = s->xv.base + s->xv.off[part];
    a->expert_stride = s->xv.stride;
    a->n_expert = s->xv.n_slots;
    a->n_expert_plan = s->hp->n_expert; /* the chunk form's tiles as in the all-device run */
    a->ids = s->sc.rslot;
}

static const void *moe_up_source(const backend_session *s, const model_weight *w_up) {
    return s->xv_moe ? (const void *)(s->xv.base + s->xv.off[1]) : cuda_model_weight(s->cm, w_up);
}

/* Where a grouped product of n rows takes moe_decode.cu's decode form (CLOVER_CUDA_MOE_DEC32: 1 for 2..32 rows, 2
 * for 1..32): integer weights at any such n (its bits are both older forms' bits, cuda_matmul.h), float weights
 * only where the decode form would take them anyway (their chunk form is TF32, not the decode form's f32). Not
 * where the routing is narrowed to a coreset (unless CLOVER_CUDA_MOE_DEC32_NARROW=1): there ~8 experts take all
 * the rows, ~n slots each, which the chunk form's tensor-core tiles fill and the decode form's per-slot dots do
 * not; the decode form pays where the slots spread over many experts (~1.3 an expert at 16 rows of 8 of 256). */
static bool moe_dec32(const backend_session *s, const model_weight *w, size_t n) {
    const int on = cuda_moe_dec32_enabled();
    if (!on || n > CUDA_MOE_DECODE_MAX_ROWS || n < (on == 2 ? 1u : 2u) || s->hp->n_expert_used > CUDA_MOE_MAX_K)
        return false;
    if (s->moe_narrow && !s->dec32_narrow) return false;
    return !is_float(w->type) || moe_takes_decode(s, w);
}

/* A stacked preview with a sequence that routes inside its coreset. */
static bool stack_has_coreset(const cuda_pass *p) {
    for (size_t i = 0; p->sseq && i < p->n_seq; i++)
        if (p->sseq[i].coreset) return true;
    return false;
}

/* Where a grouped down product of n rows takes the chunk form with integer weights: its quantiser can form the rows
 * silu(g) * u (cuda_moe_args.x_up; the bits of cuda_swiglu then the product, one launch fewer). */
static bool glu_down_moe(const backend_session *s, const model_weight *wd, size_t n) {
    return cuda_glu_quant_on() && !is_float(wd->type) && !moe_dec32(s, wd, n) && !moe_takes_decode(s, wd);
}

/* A grouped expert product over the routing in sc.ridx; with w_up, the experts' gate (w) and up fused with
 * SwiGLU (decode form only: the caller checks moe_fuses); with x_up, the rows silu(x) * x_up (chunk form only:
 * the caller checks glu_down_moe). */
static int moe_mm_as(backend_session *s, const model_weight *w, const model_weight *w_up, const float *x,
                     int per_slot, size_t n, float *y, const float *x_up, clover_error *err) {
    const size_t k = s->hp->n_expert_used;
    cuda_moe_args a = {.type = w->type,
                       .n_expert = s->hp->n_expert,
                       .n_out = (size_t)w->ne[1],
                       .n_in = (size_t)w->ne[0],
                       .ids = s->sc.ridx,
                       .n_rows = n,
                       .k = k,
                       .x = x,
                       .x_per_slot = per_slot,
                       .y = y,
                       .narrow = s->moe_narrow,
                       .preview = s->moe_preview};
    moe_source(s, w, &a);
    char why[256] = "";
    if (x_up && (w_up || moe_dec32(s, w, n) || moe_takes_decode(s, w)))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s: SwiGLU rows on a form without them", w->name);
    a.x_up = x_up;
    if (moe_dec32(s, w, n)) {
        if (w_up ? cuda_moe_dec32_glu(&a, moe_up_source(s, w_up), s->sc.moe_work, s->stream, why, sizeof why)
                 : cuda_moe_dec32(&a, s->sc.moe_work, s->stream, why, sizeof why))
            return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s: %s", w->name, why);
        return CLOVER_OK;
    }
    if (moe_takes_decode(s, w)) {
        for (size_t r0 = 0; r0 < n; r0 += D) {
            cuda_moe_args b = a;
            b.n_rows = n - r0 < D ? n - r0 : D;
            b.ids = a.ids + r0 * k;
            b.x = a.x + (per_slot ? r0 * k : r0) * a.n_in;
            b.y = a.y + r0 * k * a.n_out;
            if (w_up ? cuda_moe_decode_glu(&b, moe_up_source(s, w_up), s->sc.moe_work, s->stream, why,
                                           sizeof why)
                     : cuda_moe_decode(&b, s->sc.moe_work, s->stream, why, sizeof why))
                return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s: %s", w->name, why);
        }
        return CLOVER_OK;
    }
    if (w_up) return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s: no fused chunk form", w->name);
    if (cuda_moe_chunk(&a, s->sc.moe_work, s->stream, why, sizeof why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s: %s", w->name, why);
    return CLOVER_OK;
}

static int moe_mm(backend_session *s, const model_weight *w, const float *x, int per_slot, size_t n, float *y,
                  clover_error *err) {
    return moe_mm_as(s, w, NULL, x, per_slot, n, y, NULL, err);
}

/* The experts' gate and up in chunk form (not the decode kernel), same shape: cuda_moe_chunk_pair, bit for bit the
 * two moe_mm calls (one launch for both under CLOVER_CUDA_IGEMM_FEW=1 at <= 32 rows, else those two calls). */
static int moe_mm_pair(backend_session *s, const model_weight *wg, const model_weight *wu, const float *x, size_t n,
                       float *yg, float *yu, clover_error *err) {
    if (!same_shape(wg, wu) || moe_takes_decode(s, wg)) {
        int rc;
        if ((rc = moe_mm(s, wg, x, 0, n, yg, err)) || (rc = moe_mm(s, wu, x, 0, n, yu, err))) return rc;
        return CLOVER_OK;
    }
    cuda_moe_args a = {.type = wg->type,
                       .n_expert = s->hp->n_expert,
                       .n_out = (size_t)wg->ne[1],
                       .n_in = (size_t)wg->ne[0],
                       .ids = s->sc.ridx,
                       .n_rows = n,
                       .k = s->hp->n_expert_used,
                       .x = x,
                       .x_per_slot = 0,
                       .y = yg,
                       .narrow = s->moe_narrow,
                       .preview = s->moe_preview};
    moe_source(s, wg, &a);
    char why[256] = "";
    if (cuda_moe_chunk_pair(&a, moe_up_source(s, wu), yu, s->sc.moe_work, s->stream, why, sizeof why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s + %s: %s", wg->name, wu->name, why);
    return CLOVER_OK;
}

/* The experts' gate and up go through the fused decode launch when moe_mm would take the decode form for both. */
static bool moe_fuses(const backend_session *s, const model_weight *g, const model_weight *u, size_t n) {
    return same_shape(g, u) && (moe_dec32(s, g, n) || moe_takes_decode(s, g));
}

static int op_status(int rc, const char *what, clover_error *err) {
    if (rc == 0) return CLOVER_OK;
    return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s: %s", what, cuda_ops_last_error());
}

/* h = silu(x Wg^T) * (x Wu^T): one fused launch per 8 rows where both take the decode kernel (bit for bit the
 * two products and cuda_swiglu, cuda_matmul.h), else the two products and the SwiGLU kernel. u is scratch of
 * the up product's size, used only on the unfused path. */
static int mm_glu(backend_session *s, const model_weight *wg, const model_weight *wu, const float *x, size_t n,
                  float *h, float *u, clover_error *err) {
    const size_t n_in = (size_t)wg->ne[0], n_out = (size_t)wg->ne[1];
    if (!same_shape(wg, wu) || !takes_decode(s, wg, false)) {
        int rc;
        if ((rc = mm_pair(s, wg, wu, x, n, h, u, err))) return rc;
        return op_status(cuda_swiglu(h, h, u, n * n_out, s->stream), "SwiGLU", err);
    }
    const void *dg = cuda_model_weight(s->cm, wg), *du = cuda_model_weight(s->cm, wu);
    char why[256] = "";
    for (size_t r0 = 0; r0 < n; r0 += D) {
        size_t nr = n - r0 < D ? n - r0 : D;
        if (cuda_matmul_decode_glu(wg->type, dg, du, n_out, n_in, x + r0 * n_in, nr, h + r0 * n_out, s->sc.mm_work,
                                   s->stream, why, sizeof why))
            return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s + %s: %s", wg->name, wu->name, why);
    }
    return CLOVER_OK;
}

/* Where a down product of n rows h = silu(g) * u takes its integer chunk form with scratch: its quantiser can form
 * h itself (cuda_matmul_chunk_ws_glu; the bits of cuda_swiglu then the product, one launch fewer). */
static bool glu_down_dense(const backend_session *s, const model_weight *wd, size_t n) {
    if (!cuda_glu_quant_on() || is_float(wd->type) || takes_decode(s, wd, false) || takes_stream(s, wd, n))
        return false;
    const size_t cw = cuda_matmul_chunk_work_bytes(wd->type, (size_t)wd->ne[0], n);
    return cw && cw <= s->sc.mm_work_bytes;
}

/* The shared expert's FFN on x into ys: mm_glu then the down product, or, where mm_glu would run the two products
 * and the SwiGLU kernel and the down product takes glu_down_dense, the two products and the down product with
 * the SwiGLU formed by its quantiser (a 32-row preview: 40 launches of k_swiglu fewer). */
static int shexp_ffn(backend_session *s, const model_moe_weights *w, size_t n, clover_error *err) {
    cuda_scratch *sc = &s->sc;
    const model_weight *wg = &w->gate_shexp, *wu = &w->up_shexp, *wd = &w->down_shexp;
    const bool glu_fused = same_shape(wg, wu) && takes_decode(s, wg, false);
    if (glu_fused || !glu_down_dense(s, wd, n)) {
        int rc = mm_glu(s, wg, wu, sc->x, n, sc->gs, sc->us, err);
        return rc ? rc : mm(s, wd, sc->gs, n, sc->ys, err);
    }
    int rc = mm_pair(s, wg, wu, sc->x, n, sc->gs, sc->us, err);
    if (rc) return rc;
    char why[256] = "";
    if (cuda_matmul_chunk_ws_glu(wd->type, cuda_model_weight(s->cm, wd), (size_t)wd->ne[1], (size_t)wd->ne[0], sc->gs,
                                 sc->us, n, sc->ys, sc->mm_work, s->stream, why, sizeof why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s: %s", wd->name, why);
    return CLOVER_OK;
}

static int layer_attention(backend_session *s, const model_layer *ml, const cuda_layer *ly, size_t n, bool causal,
                           const cuda_pass *p, clover_error *err) {
    const model_attention_weights *w = &ml->attn;
    cuda_scratch *sc = &s->sc;
    int rc;
    const model_weight *qkv[3] = {&w->q, &w->k, &w->v};
    const bool ex[3] = {false, false, false};
    float *const out[3] = {sc->qg, sc->k, sc->v};
    if ((rc = mm_multi(s, qkv, ex, out, 3, sc->x, n, err))) return rc;
    /* stacked: n_seq descriptors per layer slot, each sequence at most seq_rows rows (the grid's extent) */
    const cuda_attn_seq *seq = s->d_aseq + (size_t)ly->slot * s->seq_stride;
    const int n_seq = s->stack ? (int)p->n_seq : 1, mr = s->stack ? (int)p->seq_rows : (int)s->max_rows;
    int e = cuda_attn_prepare(sc->qg, sc->k, sc->v, cuda_model_weight(s->cm, &w->q_norm),
                              cuda_model_weight(s->cm, &w->k_norm), sc->inv_freq, seq, n_seq, mr, &s->ad, s->stream);
    if (e) return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: attention prepare: %s", cuda_attn_strerror(e));
    e = cuda_attn_forward(sc->att, sc->qg, seq, n_seq, (int)n, mr, (int)s->max_context, causal ? 1 : 0, &s->ad,
                          sc->attn_work, s->stream);
    if (e) return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: attention: %s", cuda_attn_strerror(e));
    return mm(s, &w->o, sc->att, n, sc->y, err);
}

/* A preview's GDN layer: the block operator over the committed ring and state, read only (no beta). */
static int layer_gdn_block(backend_session *s, const model_layer *ml, const cuda_layer *ly, size_t n,
                           const cuda_pass *p, clover_error *err) {
    const model_hparams *hp = s->hp;
    const model_gdn_weights *w = &ml->gdn;
    const cuda_model *cm = s->cm;
    cuda_scratch *sc = &s->sc;
    int rc;
    /* qkv, z and alpha of the same rows as one mm_multi, as layer_gdn's four (one 8-bit copy of x and one launch
     * where they share a type and width; the bits of the separate products): a 32-row preview had 30 a/b
     * launches and 30 quantisers of its own (~0.26 ms of kernel time, H100 k2core24 seq4) */
    const model_weight *in[3] = {&w->qkv, &w->z, &w->alpha};
    const bool ex[3] = {false, false, false};
    float *const out[3] = {sc->mixed, sc->z, sc->ga};
    if ((rc = mm_multi(s, in, ex, out, 3, sc->x, n, err))) return rc;
    cuda_gdn_block_weights bw = {cuda_model_weight(cm, &w->conv),         cuda_model_weight(cm, &w->conv_right),
                                 cuda_model_weight(cm, &w->a),            cuda_model_weight(cm, &w->dt_bias),
                                 cuda_model_weight(cm, &w->norm),         cuda_model_weight(cm, &w->logit_scale),
                                 cuda_model_weight(cm, &w->history_bias), cuda_model_weight(cm, &w->history_c)};
    if (!s->stack) {
        if (cuda_gdn_block(sc->gout, sc->mixed, sc->z, sc->ga, ly->ring, ly->state, &bw, &s->gd, (int)n,
                           p->ln_ratio, sc->blk_work, s->stream))
            return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: GDN block operator: %s", cuda_preview_last_error());
    } else {
        /* stacked: each sequence's block over its own committed ring and state, on its rows */
        const size_t cd = hp->gdn_conv_dim, zw = (size_t)hp->gdn_nv * hp->gdn_dv, nv = hp->gdn_nv;
        const size_t l = (size_t)(ly - s->layers);
        int alone = 1; /* 1: one call a sequence below (CLOVER_CUDA_STACK_GDN=0); else all in two launches (0) */
        if (cuda_stack_gdn_on() && p->n_seq <= CUDA_GDN_SEQS_MAX) {
            cuda_gdn_block_seqs m = {.n_seq = (int32_t)p->n_seq};
            for (size_t i = 0; i < p->n_seq; i++) {
                const cuda_layer *qy = &p->sseq[i].s->layers[l];
                m.seq[i] = (cuda_gdn_block_seq){.ring = qy->ring, .state = qy->state, .row0 = (int32_t)p->sseq[i].row0,
                                          .b = (int32_t)p->sseq[i].n, .ln_ratio = p->sseq[i].ln_ratio};
            }
            alone = cuda_gdn_block_multi(sc->gout, sc->mixed, sc->z, sc->ga, &bw, &s->gd, &m, sc->blk_work, s->stream);
            if (alone < 0)
                return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: GDN block operators: %s",
                                 cuda_preview_last_error());
        }
        for (size_t i = 0; alone && i < p->n_seq; i++) {
            const cuda_stack_seq *q = &p->sseq[i];
            const cuda_layer *qy = &q->s->layers[l];
            if (cuda_gdn_block(sc->gout + q->row0 * zw, sc->mixed + q->row0 * cd, sc->z + q->row0 * zw,
                               sc->ga + q->row0 * nv, qy->ring, qy->state, &bw, &s->gd, (int)q->n, q->ln_ratio,
                               sc->blk_work, s->stream))
                return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: GDN block operator: %s",
                                 cuda_preview_last_error());
        }
    }
    return mm(s, &w->out, sc->gout, n, sc->y, err);
}

static int layer_gdn(backend_session *s, const model_layer *ml, const cuda_layer *ly, size_t n, const cuda_pass *p,
                     clover_error *err) {
    const model_gdn_weights *w = &ml->gdn;
    cuda_scratch *sc = &s->sc;
    int rc;
    const model_weight *in[4] = {&w->qkv, &w->z, &w->alpha, &w->beta};
    const bool ex[4] = {false, false, false, false};
    float *const out[4] = {sc->mixed, sc->z, sc->ga, sc->gb};
    if ((rc = mm_multi(s, in, ex, out, 4, sc->x, n, err))) return rc;
    /* the CPU's choice: the recurrence for one row, the chunked form for more (a stacked pass: per sequence,
     * so its sequences all have one row, or all more) */
    const int n_seq = s->stack ? (int)p->n_seq : 1, mr = s->stack ? (int)p->seq_rows : (int)s->max_rows;
    const bool chunked = s->stack ? p->seq_rows > 1 : n > 1;
    int e = cuda_gdn_mix(sc->gout, sc->mixed, sc->z, sc->gb, sc->ga, &ly->gw,
                         s->d_gseq + (size_t)ly->slot * s->seq_stride, n_seq, (int)n, mr, chunked, &s->gd,
                         sc->gdn_work, s->stream);
    if (e) return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: Gated DeltaNet: %s", cuda_gdn_strerror(e));
    return mm(s, &w->out, sc->gout, n, sc->y, err);
}

/* adds bits to this thread's launch marks (cuda_device.h); returns the marks before, for the caller to restore */
static int pdl_marks_add(int bits) {
    const int before = cuda_pdl_rows_pass(0);
    cuda_pdl_rows_pass(before | bits);
    return before;
}

/* The shared expert on the side stream: it reads only x (this layer's normed input) and writes only gs, us, ys
 * (and its own mm_work2), none of which the router or the routed experts touch, so it runs beside them instead
 * of after them; combine waits for it (shexp_join). The same kernels on the same inputs: the same bits. H200
 * (2026-12-10 ops at 1 row): the shared expert's two launches 8.9 us a layer, the router, routing and routed
 * experts' four 22 us, on a chip those launches leave mostly idle. Captured graphs get the fork and join as edges. */
enum { SHEXP_SIDE_MAX_ROWS = 64 }; /* decode, stacked decode and one or two blocks' previews and commits */
static int shexp_on_side(backend_session *s, const model_moe_weights *w, size_t n, clover_error *err) {
    char why[CUDA_WHY] = "";
    if (cuda_event_record(s->side_ev[0], s->stream, why) || cuda_stream_wait_event(s->side, s->side_ev[0], why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: shared expert stream: %s", why);
    void *main_stream = s->stream, *main_work = s->sc.mm_work;
    s->stream = s->side;
    s->sc.mm_work = s->sc.mm_work2;
    const int mark = pdl_marks_add(CUDA_PDL_MARK_SIDE); /* its launches marked: PDL as CLOVER_CUDA_PDL_ROWS says */
    int rc = shexp_ffn(s, w, n, err);
    cuda_pdl_rows_pass(mark);
    s->stream = main_stream;
    s->sc.mm_work = main_work;
    /* recorded even after a failure, so that a capture in progress ends joined (and then fails on rc) */
    if (cuda_event_record(s->side_ev[1], s->side, why)) {
        if (!rc) rc = error_set(err, CLOVER_E_INTERNAL, "CUDA pass: shared expert stream: %s", why);
        return rc;
    }
    s->side_open = true;
    return rc;
}

static int shexp_join(backend_session *s, clover_error *err) {
    char why[CUDA_WHY] = "";
    s->side_open = false;
    if (cuda_stream_wait_event(s->stream, s->side_ev[1], why))
        return err ? error_set(err, CLOVER_E_INTERNAL, "CUDA pass: shared expert stream: %s", why) : CLOVER_E_INTERNAL;
    return CLOVER_OK;
}

/* The fused router (moe_router.cu, cuda_moe_router.h): what mm_multi of {gate_inp (exact), gate_inp_shexp} and
 * cuda_moe_route write, bit for bit, in one launch instead of two (the routing's launch and dependency were ~2-3
 * us of the ~7 us a layer of the pair on the H200, issue 24). Where mm_multi would run both as one decode product:
 * up to D rows, an F32 router and a shared expert's gate of its type and width on the decode kernel too (a gate
 * that would take another form keeps the two launches, and its bits); past D rows, up to the session's
 * router_rows (CLOVER_CUDA_ROUTER_ROWS, off by default until measured), where both take cuda_matmul_exact_multi.
 * CLOVER_CUDA_ROUTER_FUSED=0: the two launches at every row count. */
static cuda_router_args router_args(const backend_session *s, const model_moe_weights *w, size_t n) {
    const cuda_scratch *sc = &s->sc;
    const bool sh = s->hp->n_ff_shexp != 0;
    cuda_router_args a = {.type = w->gate_inp.type, .w = cuda_model_weight(s->cm, &w->gate_inp),
                          .n_expert = (size_t)w->gate_inp.ne[1], .n_in = (size_t)w->gate_inp.ne[0],
                          .w2 = sh ? cuda_model_weight(s->cm, &w->gate_inp_shexp) : NULL,
                          .n_out2 = sh ? (size_t)w->gate_inp_shexp.ne[1] : 0, .y2 = sh ? sc->sg : NULL,
                          .x = sc->x, .n_rows = n, .logits = sc->rlog, .idx = sc->ridx, .wts = sc->rw,
                          .k = s->hp->n_expert_used, .counter = sc->route_ctr, .no_stage = s->router_fused == 2};
    return a;
}

static bool router_fuses(const backend_session *s, const model_moe_weights *w, size_t n) {
    if (!s->router_fused || n < 1 || w->gate_inp.type != QUANT_F32 || (size_t)w->gate_inp.ne[1] != s->hp->n_expert)
        return false;
    const bool sh = s->hp->n_ff_shexp != 0;
    if (sh && !same_width(&w->gate_inp_shexp, &w->gate_inp)) return false;
    if (n > D) { /* past D rows where the session's CLOVER_CUDA_ROUTER_ROWS reaches and mm_multi would take the exact
                  * rows' launch for both (so the fused launch writes its bits) */
        if (n > s->router_rows || !takes_exact_rows(s, &w->gate_inp, true, n) ||
            (sh && !takes_exact_rows(s, &w->gate_inp_shexp, false, n)))
            return false;
    } else if (!takes_decode(s, &w->gate_inp, true) || (sh && !takes_decode(s, &w->gate_inp_shexp, false))) {
        return false;
    }
    const cuda_router_args a = router_args(s, w, n);
    return cuda_moe_router_ok(&a);
}

static int router_fused(backend_session *s, const model_moe_weights *w, size_t n, clover_error *err) {
    const cuda_router_args a = router_args(s, w, n);
    char why[256] = "";
    if (cuda_moe_router(&a, s->stream, why, sizeof why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s (routing): %s", w->gate_inp.name, why);
    return CLOVER_OK;
}

/* --gpu-mem with CLOVER_GPU_MEM_PREFETCH=1: layer il + 1's routing guessed from layer il's MoE input (its router,
 * in f32, on rows that have not been through il's experts and il + 1's mixer yet: a guess, whose only effect is
 * which slots hold what; the products read the same bytes either way) for the pool to copy while il computes. */
static int prefetch_guess(backend_session *s, size_t il, size_t n, clover_error *err) {
    cuda_prefetch_buf b;
    if (!cuda_experts_prefetch_buffers(s->cm->ex, (uint32_t)il, s->hp->n_layer, n, &b)) return CLOVER_OK;
    const model_weight *rw[1] = {&s->model->layers[il + 1].moe.gate_inp};
    const bool ex[1] = {true};
    float *const out[1] = {b.log};
    int rc = mm_multi(s, rw, ex, out, 1, s->sc.x, n, err);
    if (!rc)
        rc = op_status(cuda_moe_route(b.idx, b.w, b.log, n, s->hp->n_expert, s->hp->n_expert_used, s->stream),
                       "the next layer's guessed routing", err);
    if (!rc) cuda_experts_prefetch_mark(s->cm->ex, n);
    return rc;
}

/* sc.y = the layer's expert sum (the routed experts' weighted sum, with the gated shared expert where the model
 * has one): one launch. */
static int moe_sum(backend_session *s, size_t n, clover_error *err) {
    cuda_scratch *sc = &s->sc;
    const size_t k = s->hp->n_expert_used, H = s->hp->n_embd;
    if (!s->hp->n_ff_shexp)
        return op_status(cuda_moe_combine(sc->y, sc->ye, sc->ridx, sc->rw, n, k, H, s->stream), "expert sum", err);
    return op_status(cuda_moe_combine_shexp(sc->y, sc->ye, sc->ridx, sc->rw, n, k, H, sc->ys, sc->sg, s->stream),
                     "expert sum + shared expert", err);
}

static int layer_moe_routed(backend_session *s, const model_layer *ml, size_t il, size_t n, const cuda_pass *p,
                            bool side, clover_error *err);

static int layer_moe_enqueue(backend_session *s, const model_layer *ml, size_t il, size_t n, const cuda_pass *p,
                             clover_error *err) {
    const model_moe_weights *w = &ml->moe;
    const size_t Fs = s->hp->n_ff_shexp;
    int rc;
    /* beside the router only where the pass leaves SMs idle: a 512-row chunk's products fill the GPU, and there the
     * side stream only contends (H200, 2026-12-13-final24 prompt24.sh: prompt 512 4,997 tok/s with it, 5,079
     * without) */
    const bool side = Fs && s->side && n <= SHEXP_SIDE_MAX_ROWS;
    if (side && (rc = shexp_on_side(s, w, n, err))) return rc; /* layer_moe joins */
    /* a lone coreset preview's router, coreset and routed experts marked (CLOVER_CUDA_PDL_ROWS 6 / 7 take PDL off
     * for those launches alone: cuda_device.cu) */
    const bool mark_moe = p->preview && p->coreset && !s->stack;
    const int mark = pdl_marks_add(mark_moe ? CUDA_PDL_MARK_MOE : 0);
    rc = layer_moe_routed(s, ml, il, n, p, side, err);
    cuda_pdl_rows_pass(mark);
    return rc;
}

/* layer_moe_enqueue's router, routing, routed experts and their sum (with the shared expert's, joined) */
static int layer_moe_routed(backend_session *s, const model_layer *ml, size_t il, size_t n, const cuda_pass *p,
                            bool side, clover_error *err) {
    const model_moe_weights *w = &ml->moe;
    const model_hparams *hp = s->hp;
    cuda_scratch *sc = &s->sc;
    const size_t k = hp->n_expert_used, F = hp->n_ff_exp, Fs = hp->n_ff_shexp;
    int rc;
    /* the router in FP32 always (when it is a float tensor): its logits choose experts, and a TF32 product
     * would flip near-ties that the CPU's f32 product resolves the other way */
    const model_weight *rw[2] = {&w->gate_inp, &w->gate_inp_shexp}; /* with the shared expert's gate logit */
    const bool ex[2] = {true, false};
    float *const out[2] = {sc->rlog, sc->sg};
    /* rows routed freely over all experts (no coreset, not a stacked preview's per-sequence routing): the router
     * product, the shared expert's gate logit and the routing in one launch where they fit it */
    const bool free_route = !(p->preview && (s->stack || p->coreset));
    if (free_route && router_fuses(s, w, n)) {
        if ((rc = router_fused(s, w, n, err))) return rc;
    } else if ((rc = mm_multi(s, rw, ex, out, Fs ? 2 : 1, sc->x, n, err))) {
        return rc;
    } else if (p->preview && s->stack) {
        /* stacked preview: each sequence's coreset from its own rows' logits (its kept flags at
         * sc.kept[i][layer]), and its rows routed inside it; or routed freely. Every sequence's in two launches (the
         * same bits), or with CLOVER_CUDA_STACK_ROUTE=0 two a sequence. */
        const size_t E = hp->n_expert;
        int alone = 1; /* 1: two calls a sequence below */
        if (cuda_stack_route_on() && p->n_seq <= CUDA_ROUTE_SEQS_MAX) {
            cuda_route_seqs m = {.n_seq = (int32_t)p->n_seq};
            for (size_t i = 0; i < p->n_seq; i++)
                m.seq[i] = (cuda_route_seq){.row0 = (int32_t)p->sseq[i].row0, .n = (int32_t)p->sseq[i].n,
                                            .coreset = p->sseq[i].coreset, .top_p = p->sseq[i].top_p};
            alone = cuda_moe_coreset_route_multi(sc->kept + il * E, hp->n_layer * E, sc->kept_count, sc->ridx,
                                                 sc->rw, sc->rlog, &m, n, E, k, s->stream);
            if (alone < 0)
                return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: coresets and routing: %s",
                                 cuda_preview_last_error());
        }
        for (size_t i = 0; alone && i < p->n_seq; i++) {
            const cuda_stack_seq *q = &p->sseq[i];
            int32_t *ri = sc->ridx + q->row0 * k;
            float *wi = sc->rw + q->row0 * k;
            const float *li = sc->rlog + q->row0 * E;
            if (q->coreset) {
                uint8_t *allowed = sc->kept + (i * hp->n_layer + il) * E;
                if (cuda_moe_coreset(allowed, sc->kept_count, li, q->n, E, k, q->top_p, sc->cs_work, s->stream))
                    return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: coreset: %s", cuda_preview_last_error());
                if ((rc = op_status(cuda_moe_route_allowed(ri, wi, li, allowed, q->n, E, k, s->stream),
                                    "routing inside the coreset", err)))
                    return rc;
            } else if ((rc = op_status(cuda_moe_route(ri, wi, li, q->n, E, k, s->stream), "routing", err))) {
                return rc;
            }
        }
    } else if (p->preview && p->coreset) {
        /* SPEC.md 2.2 on the device: the block's coreset from these logits, then every row routed inside it (one
         * launch where the coreset's cluster form takes the routing too, CLOVER_CUDA_CORESET_ROUTE) */
        uint8_t *allowed = sc->kept + il * hp->n_expert;
        if (cuda_moe_coreset_route(allowed, sc->kept_count, sc->ridx, sc->rw, sc->rlog, n, hp->n_expert, k, p->top_p,
                                   sc->cs_work, s->stream))
            return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: coreset and routing inside it: %s",
                             cuda_preview_last_error());
    } else if ((rc = op_status(cuda_moe_route(sc->ridx, sc->rw, sc->rlog, n, hp->n_expert, k, s->stream), "routing",
                               err))) {
        return rc;
    }
    if (s->count_experts && cuda_mark_experts(sc->used + il * hp->n_expert, sc->ridx, n * k, s->stream))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s", cuda_preview_last_error());
    /* --gpu-mem: this layer's experts into the pool (the routing read back, the misses copied), then the three
     * grouped products read their slots (moe_source) */
    if (s->cm->ex) {
        if (free_route && (rc = prefetch_guess(s, il, n, err))) return rc;
        if ((rc = cuda_experts_layer(s, (uint32_t)il, n, &s->xv, err))) return rc;
        s->xv_moe = w;
    }
    s->moe_narrow = p->preview && (p->coreset || stack_has_coreset(p));
    s->moe_preview = p->preview;
    /* the down product's quantiser forms silu(ge) * ue where it takes the chunk form (glu_down_moe) */
    const float *x_up = NULL;
    if (moe_fuses(s, &w->gate_exps, &w->up_exps, n)) {
        rc = moe_mm_as(s, &w->gate_exps, &w->up_exps, sc->x, 0, n, sc->ge, NULL, err);
    } else if (!(rc = moe_mm_pair(s, &w->gate_exps, &w->up_exps, sc->x, n, sc->ge, sc->ue, err))) {
        if (glu_down_moe(s, &w->down_exps, n))
            x_up = sc->ue;
        else
            rc = op_status(cuda_swiglu(sc->ge, sc->ge, sc->ue, n * k * F, s->stream), "SwiGLU", err);
    }
    if (!rc) rc = moe_mm_as(s, &w->down_exps, NULL, sc->ge, 1, n, sc->ye, x_up, err);
    s->xv_moe = NULL;
    s->moe_narrow = s->moe_preview = false;
    if (rc) return rc;
    if (Fs) {
        if (side) {
            if ((rc = shexp_join(s, err))) return rc;
        } else {
            if ((rc = shexp_ffn(s, w, n, err))) return rc;
        }
    }
    /* the experts' weighted sum (with the gated shared expert's) is left to the residual add and norm after the
     * layer (residual_norm: one launch, the same bits), unless the host adds its misses into it (--gpu-mem) */
    s->moe_sum_pending = !s->cm->ex;
    if (!s->moe_sum_pending) rc = moe_sum(s, n, err);
    if (!rc && s->cm->ex) rc = cuda_experts_host_join(s, sc->y, err);
    return rc;
}

/* Whether layer ml's first products of n rows (mm_multi of x: GDN qkv / z / alpha, attention q / k / v) will take
 * the shared integer chunk path with Q8_0 rows of the model's width, so that the norm before them may write those
 * rows (cuda_add_rms_norm_q8; mm_multi checks again and makes them itself where it does not take them). */
static bool xq_next(const backend_session *s, const model_layer *ml, size_t n) {
    const model_weight *w = ml->kind == MODEL_LAYER_ATTENTION ? &ml->attn.q : &ml->gdn.qkv;
    return w->type == QUANT_Q8_0 && (size_t)w->ne[0] == s->hp->n_embd && n > D && !takes_decode(s, w, false) &&
           !takes_stream(s, w, n) && cuda_matmul_chunk_work_bytes(w->type, (size_t)w->ne[0], n) <= s->sc.mm_work_bytes;
}

/* layer_moe_enqueue, and on its failure the side stream joined all the same: a capture in progress must end with
 * every stream it forked joined, and the next pass must not overtake a shared expert still reading x. */
static int layer_moe(backend_session *s, const model_layer *ml, size_t il, size_t n, const cuda_pass *p,
                     clover_error *err) {
    s->side_open = false;
    s->moe_sum_pending = false;
    int rc = layer_moe_enqueue(s, ml, il, n, p, err);
    if (rc && s->side_open) shexp_join(s, NULL);
    return rc;
}

static int hidden_store(backend_session *s, const cuda_pass *p, size_t slot, clover_error *err) {
    if (!p->hidden) return CLOVER_OK;
    const size_t H = s->hp->n_embd;
    char why[CUDA_WHY];
    if (cuda_stream_sync(s->stream, why) ||
        cuda_d2h(p->hidden + (slot * p->hidden_rows + p->row0) * H, s->sc.h, p->n * H * sizeof(float), why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: residual stream: %s", why);
    return CLOVER_OK;
}

/* The residual add after a layer and the next norm: h += the layer's output, x = norm(h) * nw; where want_q8
 * also the next products' Q8_0 8-bit rows (s->xq_of). A layer that left its expert sum pending (layer_moe) gets
 * the sum, the add and the norm in one launch (cuda_moe_combine_add_rms_norm); else, or where that form does not
 * take the row, the sum into sc.y first. */
static int residual_norm(backend_session *s, const float *nw, size_t n, bool want_q8, clover_error *err) {
    cuda_scratch *sc = &s->sc;
    const size_t H = s->hp->n_embd;
    const float eps = s->hp->rms_eps;
    if (s->moe_sum_pending) {
        s->moe_sum_pending = false;
        const bool shx = s->hp->n_ff_shexp != 0;
        const int t = cuda_moe_combine_add_rms_norm(sc->x, sc->h, sc->ye, sc->ridx, sc->rw, s->hp->n_expert_used,
                                                    shx ? sc->ys : NULL, shx ? sc->sg : NULL, nw, n, H, eps,
                                                    want_q8 ? sc->mm_work : NULL, s->stream);
        if (t < 0) return op_status(-1, "expert sum + residual + norm", err);
        if (t == 0 && want_q8) s->xq_of = sc->x;
        if (t == 0 || t == 2) return CLOVER_OK;
        int rc = moe_sum(s, n, err);
        if (rc) return rc;
    }
    int fused = 1;
    if (want_q8) {
        fused = cuda_add_rms_norm_q8(sc->x, sc->h, sc->y, nw, n, H, eps, sc->mm_work, s->stream);
        if (fused < 0) return op_status(-1, "residual + norm", err);
        if (fused == 0) s->xq_of = sc->x;
    }
    return fused ? op_status(cuda_add_rms_norm(sc->x, sc->h, sc->y, nw, n, H, eps, s->stream), "residual + norm", err)
                 : CLOVER_OK;
}

static int pass_enqueue(backend_session *s, const cuda_pass *p, clover_error *err);
int cuda_pass_enqueue(backend_session *s, const cuda_pass *p, clover_error *err) {
    cuda_experts *x = s->cm ? s->cm->ex : NULL; /* --gpu-mem with CLOVER_GPU_MEM_STATS=1: the pass's split */
    cuda_experts_pass_begin(x, p->n, p->preview);
    int rc = pass_enqueue(s, p, err);
    cuda_experts_pass_end(x, s->stream, rc ? (err ? err->message : "?") : NULL);
    return rc;
}

static int pass_enqueue(backend_session *s, const cuda_pass *p, clover_error *err) {
    const clover_model *m = s->model;
    const model_hparams *hp = s->hp;
    cuda_scratch *sc = &s->sc;
    const size_t n = p->n, H = hp->n_embd;
    char why[CUDA_WHY];
    int rc;
    s->kept_valid = false; /* the session's own scratch is about to be rewritten (the stack's is not a session's) */
    if (s->stack && ((p->preview && !p->sseq) || !p->n_seq || p->n_seq > s->seq_stride || !p->seq_rows ||
                     p->seq_rows > n))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: a stacked pass of %zu sequences (%zu rows each at most)",
                         p->n_seq, p->seq_rows);
    s->cls_rows = s->stack ? p->seq_rows : n;
    s->pass_rows = n;
    /* the per-pass facts: ids, then every layer's descriptor (positions, rows; a stacked pass's caller wrote
     * its sequences' own) */
    if (!s->stack) {
        for (size_t i = 0; i < s->n_attn; i++) {
            s->h_aseq[i].pos = (int32_t)p->pos;
            s->h_aseq[i].row0 = 0;
            s->h_aseq[i].n = (int32_t)n;
        }
        for (size_t i = 0; i < s->n_gdn; i++) {
            s->h_gseq[i].row0 = 0;
            s->h_gseq[i].n = (int32_t)n;
        }
    }
    const size_t na = s->n_attn * s->seq_stride, ng = s->n_gdn * s->seq_stride;
    if (cuda_h2d_async(sc->ids, s->h_ids, n * sizeof(int32_t), s->stream, why) ||
        (na && cuda_h2d_async(s->d_aseq, s->h_aseq, na * sizeof(cuda_attn_seq), s->stream, why)) ||
        (ng && cuda_h2d_async(s->d_gseq, s->h_gseq, ng * sizeof(cuda_gdn_seq), s->stream, why)))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: %s", why);

    if ((rc = op_status(cuda_embed_rows(sc->h, cuda_model_weight(s->cm, &m->token_embd), m->token_embd.type, sc->ids,
                                        n, H, s->stream),
                        "embeddings", err)) ||
        (rc = hidden_store(s, p, 0, err)))
        return rc;
    const bool ranged = s->n_run < hp->n_layer; /* the front of a split: no head, sc.h is what it hands on */
    if (ranged && (p->head_rows ? p->n_head_rows : p->head_r0 < n))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA pass: layers 0..%u of a split run no head", s->n_run);
    for (uint32_t l = 0; l < s->n_run; l++) {
        const model_layer *ml = &m->layers[l];
        const cuda_layer *ly = &s->layers[l];
        /* the input norm: of the embeddings for layer 0; later fused with the previous layer's residual add */
        if (l == 0 &&
            (rc = op_status(cuda_rms_norm(sc->x, sc->h, cuda_model_weight(s->cm, &ml->attn_norm), n, H, hp->rms_eps,
                                          s->stream),
                            "input norm", err)))
            return rc;
        if (ml->kind == MODEL_LAYER_ATTENTION)
            rc = layer_attention(s, ml, ly, n, !p->preview, p, err);
        else
            rc = p->preview ? layer_gdn_block(s, ml, ly, n, p, err) : layer_gdn(s, ml, ly, n, p, err);
        if (rc) return rc;
        if ((rc = op_status(cuda_add_rms_norm(sc->x, sc->h, sc->y, cuda_model_weight(s->cm, &ml->post_norm), n, H,
                                              hp->rms_eps, s->stream),
                            "residual + post norm", err)) ||
            (rc = layer_moe(s, ml, l, n, p, err)))
            return rc;
        /* the residual add, fused with the next layer's input norm (or the final norm: the head normalises
         * its own rows again from h, so the extra rows' norm here is harmless) */
        const model_weight *next_norm = l + 1 < hp->n_layer ? &m->layers[l + 1].attn_norm : &m->output_norm;
        /* the last layer of a range: the next layer's norm is not on the device; x is not read after it (the
         * back normalises h itself), so any norm vector of H floats there does, this layer's own */
        if (l + 1 == s->n_run && ranged) next_norm = &ml->attn_norm;
        /* where the next layer's first products (mm_multi of x) will take the shared Q8_0 chunk path, the norm
         * writes their 8-bit rows too (the quantiser's bytes: one launch less a layer) */
        const bool want_q8 = l + 1 < s->n_run && xq_next(s, &m->layers[l + 1], n);
        if ((rc = residual_norm(s, cuda_model_weight(s->cm, next_norm), n, want_q8, err)) ||
            (rc = hidden_store(s, p, l + 1, err)))
            return rc;
    }
    if (ranged) return CLOVER_OK;
    if (p->head_rows) return cuda_pass_head_rows(s, p->head_rows, p->n_head_rows, err);
    if (p->head_r0 >= n) return CLOVER_OK;
    /* x already holds the final norm of every row (the last fused add + norm) */
    const size_t r0 = p->head_r0, nr = n - r0;
    s->cls_rows = s->stack ? p->seq_rows : nr; /* the head's kernel: by its own rows of one sequence */
    return mm(s, &m->output, sc->x + r0 * H, nr, sc->logits, err);
}

int cuda_pass_head_rows(backend_session *s, const int32_t *rows, size_t n, clover_error *err) {
    return cuda_pass_head_rows_at(s, rows, n, 0, err);
}

int cuda_pass_head_rows_at(backend_session *s, const int32_t *rows, size_t n, size_t out0, clover_error *err) {
    if (!n) return CLOVER_OK;
    cuda_scratch *sc = &s->sc;
    const size_t H = s->hp->n_embd;
    s->cls_rows = n;
    s->pass_rows = n;
    if (cuda_gather_rows(sc->xh + out0 * H, sc->x, rows, n, H, s->stream))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: head rows: %s", cuda_preview_last_error());
    return mm(s, &s->model->output, sc->xh + out0 * H, n, sc->logits + out0 * s->hp->n_vocab, err);
}

bool cuda_pass_head_row_free(const backend_session *s) {
    return !is_float(s->model->output.type) || s->fp32;
}
