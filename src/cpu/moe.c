/*
 * moe.c: the MoE block over n rows. Route every row, bucket the (row, weight)
 * pairs by expert with a counting sort (so the experts are visited in
 * ascending id, HF's accumulation order), and run each used expert once on
 * the gathered rows; then the gated shared expert. The fast and the oracle
 * forms share this driver and differ only in the matmul and SwiGLU they call.
 *
 * The experts go through matmul_batch eight at a time (their gate and up
 * products in one run of the pool, then their down products in another),
 * and the shared expert rides with the first group: a decode step's MoE is
 * three runs of the pool instead of ~28, and each run costs a wake-up of
 * the threads and a wait for the slowest, tens of microseconds on a busy
 * machine against ~30 us of work per expert matrix.
 *
 * cpu_moe_experts (a device backend's host experts) is the same driver with
 * the routing handed in instead of computed and the shared expert off: one
 * code path, so its bits are the CPU backend's for the same routing.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cpu/act.h"
#include "cpu/cpu_simd.h"
#include "cpu/moe.h"
#include "backend/route_trace.h"
#include "quant/matmul.h"
#include "quant/matmul_group.h"
#include "quant/quant.h"
#include "base/threadpool.h"

typedef void (*moe_batch_fn)(threadpool *pool, const mm_group_item *items, size_t n_items);
typedef void (*moe_swiglu_fn)(float *h, const float *gate, const float *up, size_t n);

static int moe_check_matrix(const char *name, uint32_t type, const void *p, size_t rows, size_t n_in, size_t stride,
                            clover_error *err) {
    if (!p) return error_set(err, CLOVER_E_FORMAT, "moe: tensor %s is missing", name);
    if (!quant_type_supported(type))
        return error_set(err, CLOVER_E_UNSUPPORTED, "moe: tensor %s has type %s, which clover does not compute with",
                         name, quant_type_name(type));
    size_t rb = quant_row_bytes(type, n_in);
    if (rb == 0)
        return error_set(err, CLOVER_E_FORMAT, "moe: tensor %s: rows of %zu are not a whole number of %s blocks (%zu)",
                         name, n_in, quant_type_name(type), quant_block_elems(type));
    if (stride && stride < rows * rb)
        return error_set(err, CLOVER_E_FORMAT, "moe: tensor %s: expert stride %zu bytes is below one expert (%zu x %zu)",
                         name, stride, rows, rb);
    return CLOVER_OK;
}

int cpu_moe_weights_check(const cpu_moe_weights *w, clover_error *err) {
    if (w->n_embd == 0 || w->n_ff == 0 || w->n_expert == 0)
        return error_set(err, CLOVER_E_FORMAT, "moe: hidden %zu, expert width %zu, experts %zu: all must be >= 1",
                         w->n_embd, w->n_ff, w->n_expert);
    if (w->n_used == 0 || w->n_used > w->n_expert)
        return error_set(err, CLOVER_E_FORMAT, "moe: %zu experts per token, expected 1..%zu", w->n_used, w->n_expert);
    size_t H = w->n_embd, F = w->n_ff, Fs = w->n_ff_shexp;
    int rc;
    if ((rc = moe_check_matrix("ffn_gate_inp", w->router_type, w->router, w->n_expert, H, 0, err)) ||
        (rc = moe_check_matrix("ffn_gate_exps", w->gate_type, w->gate_exps, F, H, w->gate_stride, err)) ||
        (rc = moe_check_matrix("ffn_up_exps", w->up_type, w->up_exps, F, H, w->up_stride, err)) ||
        (rc = moe_check_matrix("ffn_down_exps", w->down_type, w->down_exps, H, F, w->down_stride, err)))
        return rc;
    if (w->gate_stride == 0 || w->up_stride == 0 || w->down_stride == 0)
        return error_set(err, CLOVER_E_FORMAT, "moe: expert strides must be set");
    if (Fs == 0) return CLOVER_OK;
    if ((rc = moe_check_matrix("ffn_gate_shexp", w->sh_gate_type, w->sh_gate, Fs, H, 0, err)) ||
        (rc = moe_check_matrix("ffn_up_shexp", w->sh_up_type, w->sh_up, Fs, H, 0, err)) ||
        (rc = moe_check_matrix("ffn_down_shexp", w->sh_down_type, w->sh_down, H, Fs, 0, err)) ||
        (rc = moe_check_matrix("ffn_gate_inp_shexp", w->sh_inp_type, w->sh_inp, 1, H, 0, err)))
        return rc;
    return CLOVER_OK;
}

/* The scratch, carved in this order (each part rounded to 64 bytes). The
 * expert buffers hold every (row, expert) pair of the pass at once, so that
 * a group of experts goes through one matmul_batch. */
typedef struct moe_scratch {
    float *logits;   /* [n][E] */
    float *probs;    /* [E] */
    int32_t *idx;    /* [n][k] */
    float *wts;      /* [n][k] */
    int32_t *count;  /* [E + 1]: rows per expert, then offsets */
    int32_t *rows;   /* [n*k]: row of each (expert, slot), bucketed by expert */
    float *rw;       /* [n*k]: its routing weight */
    float *xe;       /* [n*k][H]: the gathered rows, expert after expert */
    float *ge;       /* [n*k][F] gate, then h */
    float *ue;       /* [n*k][F] up */
    float *ye;       /* [n*k][H] expert outputs */
    float *gs;       /* [n][Fs] shared expert: gate, then h */
    float *us;       /* [n][Fs] shared expert: up */
    float *ys;       /* [n][H] shared expert output */
    float *sg;       /* [n] shared-expert gate logits */
    uint32_t *own;   /* [n] grouped: the rows of each row's group */
    uint32_t *sown;  /* [n*k] grouped: the slots of each slot's group in its expert */
    int32_t *rslot;  /* [n][k] the slots of each row, ascending (the sum a row a task) */
    int32_t *rcount; /* [n] how many */
} moe_scratch;

enum {
    MOE_SLOTS = 19,
    MOE_GROUP = 16,     /* experts per matmul_batch (cpu_grouped) */
    MOE_GROUP_OLD = 8,  /* CLOVER_CPU_GROUPED=0 */
    PAR_ROWS = 8,       /* gathered rows per task */
    PAR_SWIGLU = 4096,  /* SwiGLU elements per task (a multiple of 8: the AVX2 loop's vectors stay the same) */
    PAR_COLS = 64,      /* columns of the weighted sum per task (whole 64-byte lines) */
};

static size_t moe_round(size_t bytes) { return (bytes + 63) / 64 * 64; }

static size_t moe_layout(const cpu_moe_weights *w, size_t n, char *base, moe_scratch *s) {
    size_t E = w->n_expert, k = w->n_used, H = w->n_embd, F = w->n_ff, Fs = w->n_ff_shexp, nk = n * k;
    size_t sizes[MOE_SLOTS] = {n * E * 4,  E * 4,      nk * 4,     nk * 4,     (E + 1) * 4,
                               nk * 4,     nk * 4,     nk * H * 4, nk * F * 4, nk * F * 4,
                               nk * H * 4, n * Fs * 4, n * Fs * 4, n * H * 4,  n * 4,
                               n * 4,      nk * 4,     nk * 4,     n * 4};
    void **slots[MOE_SLOTS] = {(void **)&s->logits, (void **)&s->probs, (void **)&s->idx,  (void **)&s->wts,
                               (void **)&s->count,  (void **)&s->rows,  (void **)&s->rw,   (void **)&s->xe,
                               (void **)&s->ge,     (void **)&s->ue,    (void **)&s->ye,   (void **)&s->gs,
                               (void **)&s->us,     (void **)&s->ys,    (void **)&s->sg,   (void **)&s->own,
                               (void **)&s->sown,   (void **)&s->rslot, (void **)&s->rcount};
    size_t off = 0;
    for (int i = 0; i < MOE_SLOTS; i++) {
        if (base) *slots[i] = base + off;
        off += moe_round(sizes[i]);
    }
    return off;
}

size_t cpu_moe_scratch_bytes(const cpu_moe_weights *w, size_t n) {
    moe_scratch unused;
    return moe_layout(w, n, NULL, &unused);
}

/* The oracle runs one group only (own NULL). */
static void moe_batch_scalar(threadpool *pool, const mm_group_item *items, size_t n_items) {
    (void)pool;
    for (size_t i = 0; i < n_items; i++)
        matmul_oracle(items[i].m.type, items[i].m.w, items[i].m.n_out, items[i].m.n_in, items[i].m.x,
                      items[i].m.n_rows, items[i].m.y);
}

/* own: the group row counts of the item's rows (NULL: one group). */
static mm_group_item moe_item(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows,
                              float *y, const uint32_t *own) {
    return (mm_group_item){{.type = type, .w = w, .n_out = n_out, .n_in = n_in, .x = x, .n_rows = n_rows, .y = y},
                           own};
}

/* own[i] = the length of the run of equal group ids that holds entry i. */
static void moe_runs(uint32_t *own, const uint32_t *group, const int32_t *rows, size_t n) {
    for (size_t a = 0; a < n;) {
        const uint32_t g = group[rows ? (size_t)rows[a] : a];
        size_t b = a + 1;
        while (b < n && group[rows ? (size_t)rows[b] : b] == g) b++;
        for (size_t i = a; i < b; i++) own[i] = (uint32_t)(b - a);
        a = b;
    }
}

static bool moe_gather_always(void) {
    const char *e = getenv("CLOVER_MOE_GATHER");
    return e && *e && strcmp(e, "0") != 0;
}

/* Whether an expert's m slots' rows are rows 0..n-1 in order (all of x). */
static bool moe_all_rows(const int32_t *rows, size_t m, size_t n) {
    if (m != n) return false;
    for (size_t i = 0; i < m; i++)
        if (rows[i] != (int32_t)i) return false;
    return true;
}

/* The row-wise work of moe_run as pool tasks (cpu_grouped). */
typedef struct moe_par {
    int kind; /* 0 gather, 1 SwiGLU, 2 the weighted sum and the shared expert's gated add, 3 the same a row a task */
    size_t n, H, slots, n_rows, Fs;
    float *dst;              /* xe, h, or out */
    const float *x;          /* gather: the rows; SwiGLU: gate */
    const float *up;         /* SwiGLU */
    size_t n2, tasks1;       /* SwiGLU: a second run of n2 elements (dst2 / x2 / up2) after the first's tasks1 tasks */
    float *dst2;
    const float *x2, *up2;
    const int32_t *rows;     /* gather, sum: the slots' rows */
    const float *ye, *rw;    /* sum: the experts' outputs and weights */
    const float *ys, *sg;    /* sum: the shared expert's output and gate logits (ys NULL: none) */
    moe_swiglu_fn swiglu;
    const int32_t *rslot, *rcount; /* row sum: each row's slots, ascending */
    size_t k;
    const cpu_moe_epilogue *epi;   /* row sum: then this for the row */
} moe_par;

static void moe_par_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    const moe_par *p = ctx;
    if (p->kind == 0) {
        const size_t a = task * PAR_ROWS, b = a + PAR_ROWS < p->slots ? a + PAR_ROWS : p->slots;
        for (size_t i = a; i < b; i++) memcpy(p->dst + i * p->H, p->x + (size_t)p->rows[i] * p->H, p->H * sizeof *p->x);
        return;
    }
    if (p->kind == 1) {
        if (task >= p->tasks1) { /* the second run's elements, split from its own start as alone */
            const size_t a = (task - p->tasks1) * PAR_SWIGLU, m = p->n2 - a < PAR_SWIGLU ? p->n2 - a : PAR_SWIGLU;
            p->swiglu(p->dst2 + a, p->x2 + a, p->up2 + a, m);
            return;
        }
        const size_t a = task * PAR_SWIGLU, m = p->n - a < PAR_SWIGLU ? p->n - a : PAR_SWIGLU;
        p->swiglu(p->dst + a, p->x + a, p->up + a, m);
        return;
    }
    if (p->kind == 3) { /* row `task`: its slots in slot order, as kind 2 adds them to each of its elements */
        const size_t H = p->H, r = task;
        float *o = p->dst + r * H;
        memset(o, 0, H * sizeof *o);
        for (int32_t j = 0; j < p->rcount[r]; j++) {
            const size_t i = (size_t)p->rslot[r * p->k + (size_t)j];
            const float *y = p->ye + i * H;
            const float wt = p->rw[i];
            for (size_t c = 0; c < H; c++) o[c] += y[c] * wt;
        }
        if (p->ys) {
            float gate = cpu_sigmoid(p->sg[r]);
            const float *y = p->ys + r * H;
            for (size_t c = 0; c < H; c++) o[c] = o[c] + gate * y[c];
        }
        p->epi->row(p->epi->ctx, r);
        return;
    }
    const size_t c0 = task * PAR_COLS, c1 = c0 + PAR_COLS < p->H ? c0 + PAR_COLS : p->H, H = p->H;
    for (size_t r = 0; r < p->n_rows; r++) memset(p->dst + r * H + c0, 0, (c1 - c0) * sizeof *p->dst);
    for (size_t i = 0; i < p->slots; i++) { /* the slots in order: each element's sum in the serial order */
        float *o = p->dst + (size_t)p->rows[i] * H;
        const float *y = p->ye + i * H;
        const float wt = p->rw[i];
        for (size_t c = c0; c < c1; c++) o[c] += y[c] * wt;
    }
    if (!p->ys) return;
    for (size_t r = 0; r < p->n_rows; r++) {
        float gate = cpu_sigmoid(p->sg[r]);
        float *o = p->dst + r * H;
        const float *y = p->ys + r * H;
        for (size_t c = c0; c < c1; c++) o[c] = o[c] + gate * y[c];
    }
}

/* swiglu over n elements at h, and over n2 at h2 (n2 0: none): on the pool
 * in 8-aligned runs from each one's start (par, and more than two tasks'
 * worth): then *p and *ph describe those tasks for the caller to run (in
 * the down products' run: matmul_grouped_batch_after) and 1 is returned;
 * else done here, one call each, and 0. The same bits either way. */
static int moe_swiglu_plan(bool par, moe_swiglu_fn swiglu, float *h, const float *gate, const float *up, size_t n,
                           float *h2, const float *gate2, const float *up2, size_t n2, moe_par *p,
                           threadpool_phase *ph) {
    const size_t t1 = (n + PAR_SWIGLU - 1) / PAR_SWIGLU, t2 = (n2 + PAR_SWIGLU - 1) / PAR_SWIGLU;
    if (!par || n + n2 <= 2 * PAR_SWIGLU) { /* a decode step's 8 x 512 + 512: not worth a wake-up */
        if (n) swiglu(h, gate, up, n);
        if (n2) swiglu(h2, gate2, up2, n2);
        return 0;
    }
    *p = (moe_par){.kind = 1, .n = n, .dst = h, .x = gate, .up = up, .tasks1 = t1, .n2 = n2, .dst2 = h2, .x2 = gate2,
                   .up2 = up2, .swiglu = swiglu};
    *ph = (threadpool_phase){t1 + t2, moe_par_task, p};
    return 1;
}

/* batch's products after pre's tasks (NULL: none): in one run of the pool on the fast path (par: batch is
 * matmul_grouped_batch), else pre first. */
static void moe_batch_after(threadpool *pool, bool par, moe_batch_fn batch, const threadpool_phase *pre,
                            const mm_group_item *items, size_t n_items) {
    if (par) {
        matmul_grouped_batch_after(pool, pre, items, n_items);
        return;
    }
    threadpool_run_phase(pool, pre);
    if (n_items) batch(pool, items, n_items);
}

/* A routing decided by the caller (cpu_moe_experts): it replaces the router and the routing step. */
typedef struct moe_given {
    const int32_t *ids; /* [n][k], -1: no expert in that slot */
    const float *wts;   /* [n][k] */
} moe_given;

/* Returns 1 when epi (non-NULL) ran in the sum's run (kind 3), else 0. given: NULL, or the routing to use. */
/* The routing of row r (softmax, top-k among its sequence's allowed experts, weights), -1 past its last pick. On
 * the pool (par, a row a task: 32 rows of 256 experts took ~38 us a layer on the calling thread while the pool
 * waited), so the probabilities live on the task's stack; only more experts than that holds (then run on the
 * caller) use the scratch. The same bits either way. */
enum { MOE_ROUTE_STACK = 1024 };
typedef struct {
    int32_t *idx;
    float *wts;
    const float *logits;
    size_t E, k;
    const uint8_t *allowed;
    const uint32_t *group;
    const uint8_t *const *allowed_of;
    float *probs; /* E > MOE_ROUTE_STACK: the caller's scratch */
} moe_route_job;

static void moe_route_task(void *ctx, size_t r, size_t thread) {
    (void)thread;
    const moe_route_job *j = ctx;
    float stack[MOE_ROUTE_STACK];
    const uint8_t *al = j->group ? j->allowed_of[j->group[r]] : j->allowed;
    const size_t k = j->k;
    size_t m = cpu_moe_route(j->idx + r * k, j->wts + r * k, j->logits + r * j->E, j->E, k, al,
                             j->E > MOE_ROUTE_STACK ? j->probs : stack);
    for (size_t i = m; i < k; i++) j->idx[r * k + i] = -1;
}

static int moe_run(float *out, const float *x, size_t n, const cpu_moe_weights *w, const uint8_t *allowed,
                   const uint32_t *group, const uint8_t *const *allowed_of, const float *pre_logits,
                   const moe_given *given, threadpool *pool, void *scratch, moe_batch_fn batch, moe_swiglu_fn swiglu,
                   const threadpool_phase *before, const cpu_moe_epilogue *epi) {
    const size_t E = w->n_expert, k = w->n_used, H = w->n_embd, F = w->n_ff, Fs = w->n_ff_shexp;
    moe_scratch s;
    moe_layout(w, n, scratch, &s);
    const uint32_t *own = NULL; /* the rows' group sizes (NULL: one group) */
    if (group) {
        moe_runs(s.own, group, NULL, n);
        own = s.own;
    }

    /* route (on the caller's logits when it has them: the same product) */
    const float *logits = s.logits;
    const bool par = pool && threadpool_size(pool) > 1 && cpu_grouped(); /* the row-wise work on the pool */
    if (given) { /* no router: the routing is the caller's */
        threadpool_run_phase(pool, before);
    } else if (pre_logits && cpu_grouped()) {
        logits = pre_logits;
        threadpool_run_phase(pool, before);
    } else {
        const mm_group_item router = moe_item(w->router_type, w->router, E, H, x, n, s.logits, own);
        moe_batch_after(pool, par, batch, before, &router, 1); /* the caller's step that writes x, then the router */
    }
    for (size_t e = 0; e <= E; e++) s.count[e] = 0;
    const int32_t *idx = given ? given->ids : s.idx; /* [n][k], -1 past a row's last expert or where masked */
    const float *wts = given ? given->wts : s.wts;
    if (given) {
        for (size_t i = 0; i < n * k; i++)
            if (idx[i] >= 0) s.count[idx[i] + 1]++;
    } else {
        moe_route_job rj = {.idx = s.idx, .wts = s.wts, .logits = logits, .E = E, .k = k, .allowed = allowed,
                            .group = group, .allowed_of = allowed_of, .probs = s.probs};
        if (par && n >= 2 && E <= MOE_ROUTE_STACK)
            threadpool_run(pool, n, moe_route_task, &rj);
        else
            for (size_t r = 0; r < n; r++) moe_route_task(&rj, r, 0);
        for (size_t i = 0; i < n * k; i++)
            if (s.idx[i] >= 0) s.count[s.idx[i] + 1]++;
    }
    /* bucket by expert: count[e] becomes the first slot of expert e */
    for (size_t e = 0; e < E; e++) s.count[e + 1] += s.count[e];
    for (size_t r = 0; r < n; r++) {
        for (size_t i = 0; i < k; i++) {
            int32_t e = idx[r * k + i];
            if (e < 0) continue;
            int32_t slot = s.count[e]++;
            s.rows[slot] = (int32_t)r;
            s.rw[slot] = wts[r * k + i];
        }
    }
    /* count[e] now ends expert e's run of slots; it starts at count[e - 1] (0 for e = 0). A given routing is
     * a device backend's, which records its own (whole) routing: a line here would count its rows twice. */
    if (!given && route_trace_enabled()) route_trace_record(w->layer, E, k, n, s.count);
    const size_t slots = (size_t)s.count[E - 1];
    /* par (above): the row-wise work on the pool (cpu_grouped; never for the oracle, which has no pool) */
    const size_t group_experts = par ? MOE_GROUP : MOE_GROUP_OLD;
    /* An expert routed every row, in row order (a preview's coreset of fewer experts than k routes every row to
     * each), reads x itself: then its gate and up products and the shared expert's share one 8-bit staging of x
     * (matmul_batch stages the rows of one x pointer once), where each expert staged its own gathered copy of the
     * same rows (the same values, so the same bytes and outputs). When every used expert is one, nothing is
     * gathered. CLOVER_MOE_GATHER=1 gathers every expert's rows as before (A/B timing; the same bits). */
    const bool use_x = !moe_gather_always();
    bool all_full = use_x;
    for (size_t e = 0; e < E && all_full; e++) {
        const size_t a = e ? (size_t)s.count[e - 1] : 0, m = (size_t)s.count[e] - a;
        all_full = m == 0 || moe_all_rows(s.rows + a, m, n);
    }
    /* the gather on the pool: the first phase of the first group's products (one run of the pool) */
    moe_par gather = {.kind = 0, .H = H, .slots = slots, .dst = s.xe, .x = x, .rows = s.rows};
    threadpool_phase gather_ph = {(slots + PAR_ROWS - 1) / PAR_ROWS, moe_par_task, &gather};
    const threadpool_phase *pre = NULL;
    if (!all_full && par && slots > PAR_ROWS)
        pre = &gather_ph;
    else if (!all_full)
        for (size_t i = 0; i < slots; i++) memcpy(s.xe + i * H, x + (size_t)s.rows[i] * H, H * sizeof *x);
    if (group) /* per expert: the slots of each group (contiguous: slots are in row order) */
        for (size_t e = 0; e < E; e++) {
            const size_t a = e ? (size_t)s.count[e - 1] : 0;
            moe_runs(s.sown + a, group, s.rows + a, (size_t)s.count[e] - a);
        }
    const uint32_t *sown = group ? s.sown : NULL;

    /* the experts in groups: gate and up of a group in one batch, SwiGLU, then the downs;
     * the shared expert rides with the first group */
    mm_group_item items[2 * MOE_GROUP + 3];
    _Static_assert(2 * MOE_GROUP + 3 <= MATMUL_BATCH_MAX, "a group's products fit one matmul_batch");
    size_t e = 0;
    bool shared_done = Fs == 0;
    while (e < E || !shared_done) {
        size_t ni = 0, first_slot = 0, end_slot = 0, e0 = e;
        for (size_t g = 0; e < E && g < group_experts; e++) {
            const size_t a = e ? (size_t)s.count[e - 1] : 0, m = (size_t)s.count[e] - a;
            if (m == 0) continue;
            if (g == 0) first_slot = a;
            end_slot = a + m;
            const float *xin = all_full || (use_x && moe_all_rows(s.rows + a, m, n)) ? x : s.xe + a * H;
            items[ni++] = moe_item(w->gate_type, (const char *)w->gate_exps + e * w->gate_stride, F, H, xin, m,
                                   s.ge + a * F, sown ? sown + a : NULL);
            items[ni++] = moe_item(w->up_type, (const char *)w->up_exps + e * w->up_stride, F, H, xin, m,
                                   s.ue + a * F, sown ? sown + a : NULL);
            g++;
        }
        const bool with_shared = !shared_done;
        if (with_shared) {
            items[ni++] = moe_item(w->sh_gate_type, w->sh_gate, Fs, H, x, n, s.gs, own);
            items[ni++] = moe_item(w->sh_up_type, w->sh_up, Fs, H, x, n, s.us, own);
            items[ni++] = moe_item(w->sh_inp_type, w->sh_inp, 1, H, x, n, s.sg, own);
        }
        if (ni == 0) break;
        moe_batch_after(pool, par, batch, pre, items, ni);
        pre = NULL;
        /* the group's SwiGLU, and the shared expert's with the first group: the first phase of the downs' run */
        const size_t ns = with_shared ? n * Fs : 0;
        moe_par sw;
        threadpool_phase sw_ph;
        const bool sw_pool = moe_swiglu_plan(par, swiglu, s.ge + first_slot * F, s.ge + first_slot * F,
                                             s.ue + first_slot * F, (end_slot - first_slot) * F, s.gs, s.gs, s.us, ns,
                                             &sw, &sw_ph);
        ni = 0;
        for (size_t ee = e0; ee < e; ee++) {
            const size_t a = ee ? (size_t)s.count[ee - 1] : 0, m = (size_t)s.count[ee] - a;
            if (m == 0) continue;
            items[ni++] = moe_item(w->down_type, (const char *)w->down_exps + ee * w->down_stride, H, F, s.ge + a * F,
                                   m, s.ye + a * H, sown ? sown + a : NULL);
        }
        if (with_shared) {
            items[ni++] = moe_item(w->sh_down_type, w->sh_down, H, Fs, s.gs, n, s.ys, own);
            shared_done = true;
        }
        moe_batch_after(pool, par, batch, sw_pool ? &sw_ph : NULL, items, ni);
    }
    threadpool_run_phase(pool, pre); /* no products at all: the gather alone */

    /* accumulate in ascending expert id (HF's index_add_ order), then the gated shared expert */
    if (par && epi) { /* a row a task, then the caller's epilogue for it: one run (one row: inline, a decode step) */
        for (size_t r = 0; r < n; r++) s.rcount[r] = 0;
        for (size_t i = 0; i < slots; i++) { /* slot order: each row's list ascends */
            const size_t r = (size_t)s.rows[i];
            s.rslot[r * k + (size_t)s.rcount[r]++] = (int32_t)i;
        }
        moe_par p = {.kind = 3, .H = H, .slots = slots, .n_rows = n, .dst = out, .ye = s.ye, .rw = s.rw,
                     .ys = Fs ? s.ys : NULL, .sg = s.sg, .rslot = s.rslot, .rcount = s.rcount, .k = k, .epi = epi};
        threadpool_run(pool, n, moe_par_task, &p);
        return 1;
    }
    if (par) {
        moe_par p = {.kind = 2, .H = H, .slots = slots, .n_rows = n, .dst = out, .rows = s.rows, .ye = s.ye, .rw = s.rw,
                     .ys = Fs ? s.ys : NULL, .sg = s.sg};
        threadpool_run(pool, (H + PAR_COLS - 1) / PAR_COLS, moe_par_task, &p);
        return 0;
    }
    memset(out, 0, n * H * sizeof *out);
    for (size_t i = 0; i < slots; i++) {
        float *o = out + (size_t)s.rows[i] * H;
        const float *y = s.ye + i * H;
        const float wt = s.rw[i];
        for (size_t c = 0; c < H; c++) o[c] += y[c] * wt;
    }
    if (Fs == 0) return 0;
    for (size_t r = 0; r < n; r++) {
        float gate = cpu_sigmoid(s.sg[r]);
        float *o = out + r * H;
        const float *y = s.ys + r * H;
        for (size_t c = 0; c < H; c++) o[c] = o[c] + gate * y[c];
    }
    return 0;
}

void cpu_moe_forward(float *out, const float *x, size_t n, const cpu_moe_weights *w, const uint8_t *allowed,
                     threadpool *pool, void *scratch) {
    moe_run(out, x, n, w, allowed, NULL, NULL, NULL, NULL, pool, scratch, matmul_grouped_batch, cpu_swiglu, NULL, NULL);
}

void cpu_moe_forward_groups(float *out, const float *x, size_t n, const cpu_moe_weights *w, const uint32_t *group,
                            const uint8_t *const *allowed_of, const float *logits, threadpool *pool, void *scratch) {
    moe_run(out, x, n, w, NULL, group, allowed_of, logits, NULL, pool, scratch, matmul_grouped_batch, cpu_swiglu, NULL,
            NULL);
}

int cpu_moe_forward_groups_then(float *out, const float *x, size_t n, const cpu_moe_weights *w, const uint32_t *group,
                                const uint8_t *const *allowed_of, const float *logits, threadpool *pool, void *scratch,
                                const threadpool_phase *before, const cpu_moe_epilogue *epi) {
    return moe_run(out, x, n, w, NULL, group, allowed_of, logits, NULL, pool, scratch, matmul_grouped_batch, cpu_swiglu,
                   before, epi);
}

void cpu_moe_experts(float *out, const float *x, size_t n, const cpu_moe_weights *w, const int32_t *ids,
                     const float *wts, threadpool *pool, void *scratch) {
    cpu_moe_weights routed = *w; /* the routed experts only: moe_run skips a shared expert of width 0 */
    routed.n_ff_shexp = 0;
    const moe_given given = {ids, wts};
    moe_run(out, x, n, &routed, NULL, NULL, NULL, NULL, &given, pool, scratch, matmul_grouped_batch, cpu_swiglu, NULL,
            NULL);
}

void cpu_moe_weights_bind(cpu_moe_weights *out, const model_layer *ml, const model_hparams *hp, uint32_t layer) {
    const model_moe_weights *mw = &ml->moe;
    const size_t H = hp->n_embd, F = hp->n_ff_exp;
    *out = (cpu_moe_weights){
        .n_embd = H,
        .n_ff = F,
        .n_expert = hp->n_expert,
        .n_used = hp->n_expert_used,
        .n_ff_shexp = hp->n_ff_shexp,
        .router_type = mw->gate_inp.type,
        .router = mw->gate_inp.data,
        .gate_type = mw->gate_exps.type,
        .up_type = mw->up_exps.type,
        .down_type = mw->down_exps.type,
        .gate_exps = mw->gate_exps.data,
        .up_exps = mw->up_exps.data,
        .down_exps = mw->down_exps.data,
        .gate_stride = quant_row_bytes(mw->gate_exps.type, H) * F,
        .up_stride = quant_row_bytes(mw->up_exps.type, H) * F,
        .down_stride = quant_row_bytes(mw->down_exps.type, F) * H,
        .sh_gate_type = mw->gate_shexp.type,
        .sh_up_type = mw->up_shexp.type,
        .sh_down_type = mw->down_shexp.type,
        .sh_inp_type = mw->gate_inp_shexp.type,
        .sh_gate = mw->gate_shexp.data,
        .sh_up = mw->up_shexp.data,
        .sh_down = mw->down_shexp.data,
        .sh_inp = mw->gate_inp_shexp.data,
        .layer = layer,
    };
}

void cpu_moe_forward_scalar(float *out, const float *x, size_t n, const cpu_moe_weights *w,
                            const uint8_t *allowed, void *scratch) {
    moe_run(out, x, n, w, allowed, NULL, NULL, NULL, NULL, NULL, scratch, moe_batch_scalar, cpu_swiglu_scalar, NULL,
            NULL);
}

void cpu_swiglu_scalar(float *h, const float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) h[i] = cpu_silu(gate[i]) * up[i];
}

void cpu_swiglu(float *h, const float *gate, const float *up, size_t n) {
    if (cpu_simd_active())
        cpu_swiglu_avx2(h, gate, up, n);
    else
        cpu_swiglu_scalar(h, gate, up, n);
}
