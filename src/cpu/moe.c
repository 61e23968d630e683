/*
 * moe.c: the MoE block over n rows. Route every row, bucket the (row, weight)
 * pairs by expert with a counting sort (so the experts are visited in
 * ascending id, HF's accumulation order), and run each used expert once on
 * the gathered rows; then the gated shared expert. The fast and the oracle
 * forms share this driver and differ only in the matmul and SwiGLU they call.
 */
#include <string.h>

#include "base/error.h"
#include "cpu/act.h"
#include "cpu/cpu_simd.h"
#include "cpu/moe.h"
#include "quant/matmul.h"
#include "quant/quant.h"

typedef void (*moe_matmul_fn)(threadpool *pool, uint32_t type, const void *w, size_t n_out, size_t n_in,
                              const float *x, size_t n_rows, float *y);
typedef void (*moe_swiglu_fn)(float *h, const float *gate, const float *up, size_t n);

static void moe_matmul_scalar(threadpool *pool, uint32_t type, const void *w, size_t n_out, size_t n_in,
                              const float *x, size_t n_rows, float *y) {
    (void)pool;
    matmul_scalar(type, w, n_out, n_in, x, n_rows, y);
}

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

/* The scratch, carved in this order (each part rounded to 64 bytes). */
typedef struct moe_scratch {
    float *logits;   /* [n][E] */
    float *probs;    /* [E] */
    int32_t *idx;    /* [n][k] */
    float *wts;      /* [n][k] */
    int32_t *count;  /* [E + 1]: rows per expert, then offsets */
    int32_t *rows;   /* [n*k]: row of each (expert, slot), bucketed by expert */
    float *rw;       /* [n*k]: its routing weight */
    float *xe;       /* [n][H]: the gathered rows of one expert */
    float *ge;       /* [n][F'] gate, then h (F' = max(F, Fs)) */
    float *ue;       /* [n][F'] up */
    float *ye;       /* [n][H] expert output */
    float *sg;       /* [n] shared-expert gate logits */
} moe_scratch;

static size_t moe_round(size_t bytes) { return (bytes + 63) / 64 * 64; }

static size_t moe_layout(const cpu_moe_weights *w, size_t n, char *base, moe_scratch *s) {
    size_t E = w->n_expert, k = w->n_used, H = w->n_embd;
    size_t F = w->n_ff > w->n_ff_shexp ? w->n_ff : w->n_ff_shexp;
    size_t sizes[12] = {n * E * 4, E * 4, n * k * 4, n * k * 4, (E + 1) * 4, n * k * 4, n * k * 4,
                        n * H * 4, n * F * 4, n * F * 4, n * H * 4, n * 4};
    void **slots[12] = {(void **)&s->logits, (void **)&s->probs, (void **)&s->idx, (void **)&s->wts,
                        (void **)&s->count, (void **)&s->rows, (void **)&s->rw, (void **)&s->xe,
                        (void **)&s->ge, (void **)&s->ue, (void **)&s->ye, (void **)&s->sg};
    size_t off = 0;
    for (int i = 0; i < 12; i++) {
        if (base) *slots[i] = base + off;
        off += moe_round(sizes[i]);
    }
    return off;
}

size_t cpu_moe_scratch_bytes(const cpu_moe_weights *w, size_t n) {
    moe_scratch unused;
    return moe_layout(w, n, NULL, &unused);
}

static void moe_run(float *out, const float *x, size_t n, const cpu_moe_weights *w, const uint8_t *allowed,
                    threadpool *pool, void *scratch, moe_matmul_fn mm, moe_swiglu_fn swiglu) {
    const size_t E = w->n_expert, k = w->n_used, H = w->n_embd, F = w->n_ff, Fs = w->n_ff_shexp;
    moe_scratch s;
    moe_layout(w, n, scratch, &s);

    /* route */
    mm(pool, w->router_type, w->router, E, H, x, n, s.logits);
    for (size_t e = 0; e <= E; e++) s.count[e] = 0;
    for (size_t r = 0; r < n; r++) {
        size_t m = cpu_moe_route(s.idx + r * k, s.wts + r * k, s.logits + r * E, E, k, allowed, s.probs);
        for (size_t i = m; i < k; i++) s.idx[r * k + i] = -1;
        for (size_t i = 0; i < m; i++) s.count[s.idx[r * k + i] + 1]++;
    }
    /* bucket by expert: count[e] becomes the first slot of expert e */
    for (size_t e = 0; e < E; e++) s.count[e + 1] += s.count[e];
    for (size_t r = 0; r < n; r++) {
        for (size_t i = 0; i < k; i++) {
            int32_t e = s.idx[r * k + i];
            if (e < 0) continue;
            int32_t slot = s.count[e]++;
            s.rows[slot] = (int32_t)r;
            s.rw[slot] = s.wts[r * k + i];
        }
    }
    /* count[e] now ends expert e's run; it starts at count[e - 1] (0 for e = 0) */
    memset(out, 0, n * H * sizeof *out);
    int32_t start = 0;
    for (size_t e = 0; e < E; e++) {
        int32_t end = s.count[e];
        size_t m = (size_t)(end - start);
        if (m == 0) continue;
        for (size_t i = 0; i < m; i++) memcpy(s.xe + i * H, x + (size_t)s.rows[start + i] * H, H * sizeof *x);
        mm(pool, w->gate_type, (const char *)w->gate_exps + e * w->gate_stride, F, H, s.xe, m, s.ge);
        mm(pool, w->up_type, (const char *)w->up_exps + e * w->up_stride, F, H, s.xe, m, s.ue);
        swiglu(s.ge, s.ge, s.ue, m * F);
        mm(pool, w->down_type, (const char *)w->down_exps + e * w->down_stride, H, F, s.ge, m, s.ye);
        for (size_t i = 0; i < m; i++) {
            float *o = out + (size_t)s.rows[start + i] * H;
            const float *y = s.ye + i * H;
            float wt = s.rw[start + i];
            for (size_t c = 0; c < H; c++) o[c] += y[c] * wt;
        }
        start = end;
    }
    if (Fs == 0) return;
    /* shared expert, gated by sigmoid(x . sh_inp) */
    mm(pool, w->sh_gate_type, w->sh_gate, Fs, H, x, n, s.ge);
    mm(pool, w->sh_up_type, w->sh_up, Fs, H, x, n, s.ue);
    swiglu(s.ge, s.ge, s.ue, n * Fs);
    mm(pool, w->sh_down_type, w->sh_down, H, Fs, s.ge, n, s.ye);
    mm(pool, w->sh_inp_type, w->sh_inp, 1, H, x, n, s.sg);
    for (size_t r = 0; r < n; r++) {
        float gate = cpu_sigmoid(s.sg[r]);
        float *o = out + r * H;
        const float *y = s.ye + r * H;
        for (size_t c = 0; c < H; c++) o[c] = o[c] + gate * y[c];
    }
}

void cpu_moe_forward(float *out, const float *x, size_t n, const cpu_moe_weights *w, const uint8_t *allowed,
                     threadpool *pool, void *scratch) {
    moe_run(out, x, n, w, allowed, pool, scratch, matmul, cpu_swiglu);
}

void cpu_moe_forward_scalar(float *out, const float *x, size_t n, const cpu_moe_weights *w,
                            const uint8_t *allowed, void *scratch) {
    moe_run(out, x, n, w, allowed, NULL, scratch, moe_matmul_scalar, cpu_swiglu_scalar);
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
