/*
 * ep_moe.c: the expert-parallel MoE of ep_moe.h over a transport group. In
 * the simulation every rank's buffers are host memory and the driver runs
 * the ranks' expert products one rank after another on the caller's pool;
 * on GPUs each rank's products run on its own device (docs/MULTI_GPU.md).
 *
 * Messages (4-byte words): dispatch record = row, expert count, k expert ids
 * (-1 padded), then the row's H floats; combine record = row, expert, then
 * the expert's H output floats (unweighted: the home applies the routing
 * weight, in one rank's expression, so the sums round the same).
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "cpu/act.h"
#include "parallel/ep_moe.h"
#include "quant/matmul.h"

enum { EP_GROUP = 8 /* experts per matmul_batch, as moe.c */ };

typedef struct ep_buf {
    void *p;
    size_t cap;
} ep_buf;

struct ep_moe {
    par_transport *t;
    ep_moe_stats last;
    ep_buf send1[PAR_MAX_RANKS], recv1[PAR_MAX_RANKS], send2[PAR_MAX_RANKS], recv2[PAR_MAX_RANKS];
    ep_buf logits, probs, idx, wts;            /* the routing of all rows */
    ep_buf xe, ge, ue, ye, slot_rec, rec_slot;  /* one rank's expert work */
    ep_buf gs, us, ys, sg;                     /* the shared expert */
    size_t counts1[PAR_MAX_RANKS * PAR_MAX_RANKS], counts2[PAR_MAX_RANKS * PAR_MAX_RANKS];
};

size_t ep_expert_first(size_t r, size_t n_expert, size_t n_ranks) { return r * n_expert / n_ranks; }
size_t ep_expert_owner(size_t e, size_t n_expert, size_t n_ranks) { return ((e + 1) * n_ranks - 1) / n_expert; }

void ep_ranks_visited(uint8_t *visit, const uint8_t *allowed, size_t n_expert, size_t n_ranks) {
    memset(visit, 0, n_ranks);
    for (size_t e = 0; e < n_expert; e++)
        if (!allowed || allowed[e]) visit[ep_expert_owner(e, n_expert, n_ranks)] = 1;
}

static void *ep_grow(ep_buf *b, size_t bytes) {
    if (bytes == 0) bytes = 64;
    if (b->cap < bytes) {
        mem_free(b->p);
        b->cap = 0;
        b->p = mem_alloc(bytes + bytes / 2);
        if (b->p) b->cap = bytes + bytes / 2;
    }
    return b->p;
}

int ep_moe_create(par_transport *t, ep_moe **out, clover_error *err) {
    ep_moe *ep = mem_calloc(1, sizeof *ep);
    if (!ep) return error_set(err, CLOVER_E_NOMEM, "parallel: out of memory for the expert-parallel MoE");
    ep->t = t;
    *out = ep;
    return CLOVER_OK;
}

void ep_moe_free(ep_moe *ep) {
    if (!ep) return;
    for (size_t r = 0; r < PAR_MAX_RANKS; r++) {
        mem_free(ep->send1[r].p);
        mem_free(ep->recv1[r].p);
        mem_free(ep->send2[r].p);
        mem_free(ep->recv2[r].p);
    }
    ep_buf *bufs[] = {&ep->logits, &ep->probs, &ep->idx, &ep->wts, &ep->xe, &ep->ge, &ep->ue,
                      &ep->ye,     &ep->slot_rec, &ep->rec_slot, &ep->gs, &ep->us, &ep->ys, &ep->sg};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) mem_free(bufs[i]->p);
    mem_free(ep);
}

const ep_moe_stats *ep_moe_last(const ep_moe *ep) { return &ep->last; }

static matmul_item ep_item(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows,
                           float *y) {
    return (matmul_item){.type = type, .w = w, .n_out = n_out, .n_in = n_in, .x = x, .n_rows = n_rows, .y = y};
}

static size_t ep_home(size_t row, size_t n, size_t n_ranks) { return ((row + 1) * n_ranks - 1) / n; }

/* Rank d's side: its experts over the dispatch records it received, then its combine records. */
static int ep_rank_experts(ep_moe *ep, size_t d, const cpu_moe_weights *w, threadpool *pool, clover_error *err) {
    const size_t N = par_n_ranks(ep->t), E = w->n_expert, k = w->n_used, H = w->n_embd, F = w->n_ff;
    const size_t rec1 = (2 + k) * 4 + H * 4, rec2 = 8 + H * 4;
    size_t nr = 0;
    for (size_t s = 0; s < N; s++) nr += ep->counts1[s * N + d] / rec1;
    for (size_t s = 0; s < N; s++) ep->counts2[d * N + s] = 0;
    ep->last.rows_in[d] = nr;
    if (nr == 0) return CLOVER_OK;
    const char *in = ep->recv1[d].p;
    const size_t e0 = ep_expert_first(d, E, N), e1 = ep_expert_first(d + 1, E, N), ne = e1 - e0;
    /* slots: (expert, record) pairs, expert-major, records ascending (= rows ascending) */
    size_t slots = 0;
    for (size_t i = 0; i < nr; i++) slots += (size_t)((const int32_t *)(in + i * rec1))[1];
    int32_t *first = ep_grow(&ep->slot_rec, (ne + 1 + slots) * sizeof(int32_t));
    int32_t *rec_slot = ep_grow(&ep->rec_slot, nr * k * sizeof(int32_t));
    float *xe = ep_grow(&ep->xe, slots * H * sizeof(float)), *ge = ep_grow(&ep->ge, slots * F * sizeof(float));
    float *ue = ep_grow(&ep->ue, slots * F * sizeof(float)), *ye = ep_grow(&ep->ye, slots * H * sizeof(float));
    if (!first || !rec_slot || !xe || !ge || !ue || !ye)
        return error_set(err, CLOVER_E_NOMEM, "parallel: rank %zu: out of memory for %zu expert rows", d, slots);
    int32_t *slot_rec = first + ne + 1;
    for (size_t j = 0; j <= ne; j++) first[j] = 0;
    for (size_t i = 0; i < nr; i++) {
        const int32_t *h = (const int32_t *)(in + i * rec1);
        for (int32_t j = 0; j < h[1]; j++) first[h[2 + j] - (int32_t)e0 + 1]++;
    }
    for (size_t j = 0; j < ne; j++) first[j + 1] += first[j];
    for (size_t i = 0; i < nr * k; i++) rec_slot[i] = -1;
    {
        /* place records expert by expert; first[] is restored after */
        for (size_t i = 0; i < nr; i++) {
            const int32_t *h = (const int32_t *)(in + i * rec1);
            for (int32_t j = 0; j < h[1]; j++) {
                int32_t slot = first[h[2 + j] - (int32_t)e0]++;
                slot_rec[slot] = (int32_t)i;
                rec_slot[i * k + (size_t)j] = slot;
                memcpy(xe + (size_t)slot * H, in + i * rec1 + (2 + k) * 4, H * sizeof(float));
            }
        }
        for (size_t j = ne; j > 0; j--) first[j] = first[j - 1];
        first[0] = 0;
    }
    /* the products, EP_GROUP experts a batch: gate and up, SwiGLU, down (moe.c's sequence) */
    matmul_item items[2 * EP_GROUP];
    for (size_t g0 = 0; g0 < ne;) {
        size_t ni = 0, gs = 0, g = g0;
        size_t lo = (size_t)first[g0], hi = lo;
        for (; g < ne && gs < EP_GROUP; g++) {
            const size_t a = (size_t)first[g], m = (size_t)first[g + 1] - a, e = e0 + g;
            if (m == 0) continue;
            items[ni++] = ep_item(w->gate_type, (const char *)w->gate_exps + e * w->gate_stride, F, H, xe + a * H, m,
                                  ge + a * F);
            items[ni++] = ep_item(w->up_type, (const char *)w->up_exps + e * w->up_stride, F, H, xe + a * H, m,
                                  ue + a * F);
            hi = a + m;
            gs++;
        }
        if (ni) {
            matmul_batch(pool, items, ni);
            cpu_swiglu(ge + lo * F, ge + lo * F, ue + lo * F, (hi - lo) * F);
            ni = 0;
            for (size_t gg = g0; gg < g; gg++) {
                const size_t a = (size_t)first[gg], m = (size_t)first[gg + 1] - a, e = e0 + gg;
                if (m == 0) continue;
                items[ni++] = ep_item(w->down_type, (const char *)w->down_exps + e * w->down_stride, H, F,
                                      ge + a * F, m, ye + a * H);
            }
            matmul_batch(pool, items, ni);
        }
        g0 = g;
    }
    /* combine records, to each source in turn: its records in order, each one's experts ascending */
    size_t total = 0;
    for (size_t i = 0; i < nr; i++) total += (size_t)((const int32_t *)(in + i * rec1))[1];
    char *o = ep_grow(&ep->send2[d], total * rec2);
    if (!o) return error_set(err, CLOVER_E_NOMEM, "parallel: rank %zu: out of memory for the combine", d);
    size_t i = 0;
    for (size_t s = 0; s < N; s++) {
        const size_t ns = ep->counts1[s * N + d] / rec1;
        for (size_t c = 0; c < ns; c++, i++) {
            const int32_t *h = (const int32_t *)(in + i * rec1);
            int32_t order[64], m = h[1];
            for (int32_t j = 0; j < m; j++) order[j] = j;
            for (int32_t a = 1; a < m; a++) /* insertion sort of at most k ids: ascending expert */
                for (int32_t b = a; b > 0 && h[2 + order[b]] < h[2 + order[b - 1]]; b--) {
                    int32_t tmp = order[b];
                    order[b] = order[b - 1];
                    order[b - 1] = tmp;
                }
            for (int32_t j = 0; j < m; j++) {
                int32_t hdr[2] = {h[0], h[2 + order[j]]};
                memcpy(o, hdr, 8);
                memcpy(o + 8, ye + (size_t)rec_slot[i * k + (size_t)order[j]] * H, H * sizeof(float));
                o += rec2;
                ep->counts2[d * N + s] += rec2;
            }
        }
    }
    return CLOVER_OK;
}

int ep_moe_forward(ep_moe *ep, float *out, const float *x, size_t n, const cpu_moe_weights *w,
                   const uint8_t *allowed, threadpool *pool, clover_error *err) {
    const size_t N = par_n_ranks(ep->t), E = w->n_expert, k = w->n_used, H = w->n_embd, Fs = w->n_ff_shexp;
    const size_t rec1 = (2 + k) * 4 + H * 4, rec2 = 8 + H * 4;
    memset(&ep->last, 0, sizeof ep->last);
    if (n == 0) return CLOVER_OK;
    if (k > 64) return error_set(err, CLOVER_E_UNSUPPORTED, "parallel: %zu experts per token (at most 64)", k);
    float *logits = ep_grow(&ep->logits, n * E * sizeof(float)), *probs = ep_grow(&ep->probs, E * sizeof(float));
    int32_t *idx = ep_grow(&ep->idx, n * k * sizeof(int32_t));
    float *wts = ep_grow(&ep->wts, n * k * sizeof(float));
    if (!logits || !probs || !idx || !wts)
        return error_set(err, CLOVER_E_NOMEM, "parallel: out of memory routing %zu rows", n);

    /* the router and the routing: replicated, as one rank computes them */
    const matmul_item router = ep_item(w->router_type, w->router, E, H, x, n, logits);
    matmul_batch(pool, &router, 1);
    for (size_t r = 0; r < n; r++) {
        size_t m = cpu_moe_route(idx + r * k, wts + r * k, logits + r * E, E, k, allowed, probs);
        for (size_t i = m; i < k; i++) idx[r * k + i] = -1;
    }

    /* dispatch: home s -> rank d, the rows of s with an expert on d, ascending */
    memset(ep->counts1, 0, sizeof ep->counts1);
    for (size_t r = 0; r < n; r++) {
        uint8_t to[PAR_MAX_RANKS] = {0};
        for (size_t i = 0; i < k; i++)
            if (idx[r * k + i] >= 0) to[ep_expert_owner((size_t)idx[r * k + i], E, N)] = 1;
        for (size_t d = 0; d < N; d++) ep->counts1[ep_home(r, n, N) * N + d] += to[d] ? rec1 : 0;
    }
    const void *send[PAR_MAX_RANKS];
    void *recv[PAR_MAX_RANKS];
    for (size_t s = 0; s < N; s++) {
        size_t out_b = 0, in_b = 0;
        for (size_t d = 0; d < N; d++) {
            out_b += ep->counts1[s * N + d];
            in_b += ep->counts1[d * N + s];
        }
        char *sb = ep_grow(&ep->send1[s], out_b);
        recv[s] = ep_grow(&ep->recv1[s], in_b);
        send[s] = sb;
        if (!sb || !recv[s]) return error_set(err, CLOVER_E_NOMEM, "parallel: rank %zu: out of memory", s);
        for (size_t d = 0; d < N; d++) {
            for (size_t r = 0; r < n; r++) {
                if (ep_home(r, n, N) != s) continue;
                int32_t hdr[2 + 64];
                int32_t m = 0;
                for (size_t i = 0; i < k; i++) {
                    int32_t e = idx[r * k + i];
                    if (e >= 0 && ep_expert_owner((size_t)e, E, N) == d) hdr[2 + m++] = e;
                }
                if (m == 0) continue;
                hdr[0] = (int32_t)r;
                hdr[1] = m;
                for (size_t i = (size_t)m; i < k; i++) hdr[2 + i] = -1;
                memcpy(sb, hdr, (2 + k) * 4);
                memcpy(sb + (2 + k) * 4, x + r * H, H * sizeof(float));
                sb += rec1;
            }
        }
        ep->last.dispatch_bytes += out_b;
    }
    int rc = par_alltoallv(ep->t, send, recv, ep->counts1, err);
    if (rc) return rc;

    /* every rank's experts (here one rank after another), then the combine */
    int32_t status[PAR_MAX_RANKS], agreed[PAR_MAX_RANKS];
    const int32_t *st_in[PAR_MAX_RANKS];
    int32_t *st_out[PAR_MAX_RANKS];
    clover_error rank_err = {0};
    int first_rc = 0;
    for (size_t d = 0; d < N; d++) {
        clover_error e = {0};
        int r = ep_rank_experts(ep, d, w, pool, &e);
        status[d] = r ? 1 : 0;
        if (r && !first_rc) {
            first_rc = r;
            rank_err = e;
        }
        st_in[d] = &status[d];
        st_out[d] = &agreed[d];
    }
    for (size_t d = 0; d < N; d++) {
        size_t in_b = 0;
        for (size_t s = 0; s < N; s++) in_b += ep->counts2[s * N + d];
        send[d] = ep->send2[d].p;
        recv[d] = ep_grow(&ep->recv2[d], in_b);
        if (!recv[d]) return error_set(err, CLOVER_E_NOMEM, "parallel: rank %zu: out of memory", d);
        for (size_t s = 0; s < N; s++) ep->last.combine_bytes += ep->counts2[d * N + s];
    }
    if (!first_rc && (rc = par_alltoallv(ep->t, send, recv, ep->counts2, err))) return rc;
    /* every rank learns whether any failed (the one that did holds the message) */
    if ((rc = par_allreduce_max_i32(ep->t, st_in, st_out, err))) return rc;
    if (agreed[0]) {
        *err = rank_err;
        return first_rc ? first_rc : CLOVER_E_INTERNAL;
    }

    /* the homes: weighted sums in ascending expert id (sources in rank order hold ascending ranges) */
    memset(out, 0, n * H * sizeof *out);
    for (size_t s = 0; s < N; s++) {
        size_t in_b = 0;
        for (size_t d = 0; d < N; d++) in_b += ep->counts2[d * N + s];
        const char *p = recv[s];
        for (size_t off = 0; off < in_b; off += rec2) {
            int32_t hdr[2];
            memcpy(hdr, p + off, 8);
            const size_t r = (size_t)hdr[0];
            float wt = 0.0f;
            for (size_t i = 0; i < k; i++)
                if (idx[r * k + i] == hdr[1]) wt = wts[r * k + i];
            float *o = out + r * H;
            const float *y = (const float *)(p + off + 8);
            for (size_t c = 0; c < H; c++) o[c] += y[c] * wt;
        }
    }
    if (Fs == 0) return CLOVER_OK;

    /* the shared expert over all rows, as one rank runs it */
    float *gs = ep_grow(&ep->gs, n * Fs * sizeof(float)), *us = ep_grow(&ep->us, n * Fs * sizeof(float));
    float *ys = ep_grow(&ep->ys, n * H * sizeof(float)), *sg = ep_grow(&ep->sg, n * sizeof(float));
    if (!gs || !us || !ys || !sg) return error_set(err, CLOVER_E_NOMEM, "parallel: out of memory (shared expert)");
    matmul_item items[3] = {ep_item(w->sh_gate_type, w->sh_gate, Fs, H, x, n, gs),
                            ep_item(w->sh_up_type, w->sh_up, Fs, H, x, n, us),
                            ep_item(w->sh_inp_type, w->sh_inp, 1, H, x, n, sg)};
    matmul_batch(pool, items, 3);
    cpu_swiglu(gs, gs, us, n * Fs);
    items[0] = ep_item(w->sh_down_type, w->sh_down, H, Fs, gs, n, ys);
    matmul_batch(pool, items, 1);
    for (size_t r = 0; r < n; r++) {
        float gate = cpu_sigmoid(sg[r]);
        float *o = out + r * H;
        const float *y = ys + r * H;
        for (size_t c = 0; c < H; c++) o[c] = o[c] + gate * y[c];
    }
    return CLOVER_OK;
}
