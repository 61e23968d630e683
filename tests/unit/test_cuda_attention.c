/*
 * test_cuda_attention.c: the CUDA attention operators (src/cuda/cuda_attention.h)
 * against the CPU's scalar oracles (cpu_attn_prepare, cpu_attn_forward_scalar)
 * on seeded random inputs (never zeros), odd shapes (head_dim 33/40/24, group
 * 1, 3, 8 and 40 > 32 query heads per block, rot 0), several sequences per
 * pass at different positions, decode rows (1..8) over long caches (many
 * flash-decoding splits, some empty for a row) and chunks (45..130 rows),
 * causal and not. Every case runs in both forms of the forward: the decode
 * form (rows of sequences with n == 1; the default) and the tile form alone
 * (cuda_attn_decode_set(0)); the decode cases cover the 35B-A3B dims over
 * caches of 1, 31, 32, 33, 512 and 4097 keys (one split, splits of 16 with a
 * partial last one, 65 splits), head dims 33 and 130 (no 16-byte loads), 36
 * and 64 (lanes past hd idle), groups 1, 3, 8, 12 and 40 (several head
 * ranges, the last one partial), and a decode row batched with a chunk (both
 * kernels in one pass, one combine). The few form (sequences of 2..64 rows, attention_few.cu;
 * CLOVER_CUDA_ATTN_FEW, on by default) runs every case and FEW_CASES (rows 2, 3, 5, 7, 9, 16, 31,
 * 32, 33, 40, 64 over 2, 33, 544, 3000 and 4097 keys; the 35B-A3B's 16/2/256 and odd geometries: group
 * 3 with hd 40 and 33 (scalar loads), group 40 (5 query groups a row, a partial block), group 1, hd 130;
 * a 64-row preview beside a 65-row chunk (the tile form) and a decode row), and the rows of the other
 * forms must keep their bits when it is on. The tile form runs FEW_CASES too. Device outputs and the cache
 * rows past the old end are
 * poisoned with NaN first: written rows must be finite, rows past pos + n must
 * still be NaN (nothing written out of place).
 *
 * Bounds (normalised L2 error, all f32 on both sides):
 *  - q and k after prepare: 1e-6. Same operations in the same order except
 *    the sum of squares of the RMSNorm (<= 256 terms, reordered: ~sqrt(256) *
 *    2^-24 = 1e-6 relative on rsqrt's argument, halved by the sqrt); cos/sin
 *    are the double values rounded on both. v must be copied bit for bit.
 *  - the attention output: 5e-6. The logits are 256-term dots reordered
 *    (typically sqrt(256) * 6e-8 = 1e-6 relative; the logits here are O(1),
 *    which moves the probabilities by ~1e-6 relative); the weighted sum runs
 *    over <= 4096 keys in another order and with the online rescaling
 *    (typically sqrt(4096) * 6e-8 = 4e-6 of the largest term, far less of
 *    the L2 norm). Measured on the H200: <= 4.8e-7 (bench/device-runs/cuda-attention-gdn-notes.md), so
 *    5e-6 keeps a factor of 10, and it is ~1000x below any real slip (a
 *    wrong mask row, KV head or scale each gives 1e-2 or more).
 *  - batch independence: a sequence's rows are bit-identical whether it runs
 *    alone or with other sequences in the pass (causal and not).
 *  - the split merge's two kernels (1024 threads a (row, head), or head_dim:
 *    cuda_attn_comb_rows_set) give the same bits on every case.
 * Without a CUDA device the test prints SKIP and exits 77 after the host-side
 * argument checks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/rope.h"
#include "cuda/cuda_attention.h"
#include "cuda_mixer_test.h"

enum { MAX_SEQ = 4, CACHE_SLACK = 3 };

typedef struct seq_case {
    int pos, n;
} seq_case;

typedef struct attn_case {
    const char *name;
    cuda_attn_dims d;
    int n_seq;
    seq_case s[MAX_SEQ];
    uint64_t seed;
} attn_case;

/* the data of one case on the host: inputs, the CPU's results */
typedef struct attn_data {
    int n_rows, row0[MAX_SEQ], cap[MAX_SEQ];
    float *qg, *k, *v, *q_norm, *k_norm, *inv_freq;
    float *kc0[MAX_SEQ], *vc0[MAX_SEQ]; /* caches before the pass: rows < pos random, the rest NaN */
    float *ref_q, *ref_gate, *ref_kc[MAX_SEQ], *ref_vc[MAX_SEQ], *ref_out[2]; /* [causal] */
} attn_data;

static void data_make(attn_data *a, const attn_case *c) {
    const cuda_attn_dims *d = &c->d;
    const size_t nh = (size_t)d->n_head, nkv = (size_t)d->n_head_kv, hd = (size_t)d->head_dim;
    rng_state r;
    rng_seed(&r, c->seed);
    a->n_rows = 0;
    for (int s = 0; s < c->n_seq; s++) {
        a->row0[s] = a->n_rows;
        a->n_rows += c->s[s].n;
        a->cap[s] = c->s[s].pos + c->s[s].n + CACHE_SLACK;
    }
    const size_t R = (size_t)a->n_rows;
    a->qg = malloc(R * nh * 2 * hd * sizeof(float));
    a->k = malloc(R * nkv * hd * sizeof(float));
    a->v = malloc(R * nkv * hd * sizeof(float));
    a->q_norm = malloc(hd * sizeof(float));
    a->k_norm = malloc(hd * sizeof(float));
    a->inv_freq = malloc((d->rot / 2 + 1) * sizeof(float));
    fill_normal(a->qg, R * nh * 2 * hd, &r, 0.0f, 1.0f);
    fill_normal(a->k, R * nkv * hd, &r, 0.0f, 1.0f);
    fill_normal(a->v, R * nkv * hd, &r, 0.0f, 1.0f);
    fill_normal(a->q_norm, hd, &r, 1.0f, 0.2f);
    fill_normal(a->k_norm, hd, &r, 1.0f, 0.2f);
    if (d->rot) rope_inv_freq(a->inv_freq, (size_t)d->rot, 1e7f);
    for (int s = 0; s < c->n_seq; s++) {
        size_t rows = (size_t)a->cap[s] * nkv * hd, old = (size_t)c->s[s].pos * nkv * hd;
        a->kc0[s] = host_nan(rows);
        a->vc0[s] = host_nan(rows);
        /* committed keys as prepare leaves them: unit-scale values (normed rows have rms ~ |w|) */
        fill_normal(a->kc0[s], old, &r, 0.0f, 1.0f);
        fill_normal(a->vc0[s], old, &r, 0.0f, 1.0f);
    }
    /* the CPU oracle, sequence by sequence */
    cpu_attn_dims cd = {.n_head = nh, .n_head_kv = nkv, .head_dim = hd, .rot = (size_t)d->rot, .eps = d->eps};
    a->ref_q = malloc(R * nh * hd * sizeof(float));
    a->ref_gate = malloc(R * nh * hd * sizeof(float));
    a->ref_out[0] = malloc(R * nh * hd * sizeof(float));
    a->ref_out[1] = malloc(R * nh * hd * sizeof(float));
    float *cs = malloc((d->rot + 2) * sizeof(float));
    size_t max_cap = 0;
    for (int s = 0; s < c->n_seq; s++) max_cap = (size_t)a->cap[s] > max_cap ? (size_t)a->cap[s] : max_cap;
    float *scratch = malloc(cpu_attn_scratch_floats(&cd, max_cap) * sizeof(float));
    for (int s = 0; s < c->n_seq; s++) {
        size_t rows = (size_t)a->cap[s] * nkv * hd, o = (size_t)a->row0[s];
        a->ref_kc[s] = malloc(rows * sizeof(float));
        a->ref_vc[s] = malloc(rows * sizeof(float));
        memcpy(a->ref_kc[s], a->kc0[s], rows * sizeof(float));
        memcpy(a->ref_vc[s], a->vc0[s], rows * sizeof(float));
        if (c->s[s].n == 0) continue;
        cpu_attn_prepare(a->ref_q + o * nh * hd, a->ref_gate + o * nh * hd, a->ref_kc[s], a->ref_vc[s],
                         a->qg + o * nh * 2 * hd, a->k + o * nkv * hd, a->v + o * nkv * hd, a->q_norm, a->k_norm,
                         a->inv_freq, &cd, c->s[s].pos, (size_t)c->s[s].n, cs);
        for (int causal = 0; causal < 2; causal++)
            cpu_attn_forward_scalar(a->ref_out[causal] + o * nh * hd, a->ref_q + o * nh * hd,
                                    a->ref_gate + o * nh * hd, a->ref_kc[s], a->ref_vc[s], &cd, c->s[s].pos,
                                    (size_t)c->s[s].n, causal != 0, 0, nh, scratch);
    }
    free(cs);
    free(scratch);
}

static void data_free(attn_data *a, int n_seq) {
    free(a->qg), free(a->k), free(a->v), free(a->q_norm), free(a->k_norm), free(a->inv_freq);
    free(a->ref_q), free(a->ref_gate), free(a->ref_out[0]), free(a->ref_out[1]);
    for (int s = 0; s < n_seq; s++) free(a->kc0[s]), free(a->vc0[s]), free(a->ref_kc[s]), free(a->ref_vc[s]);
}

/* Runs prepare + forward on the device for the sequences in `only` (mask) of
 * the case; returns the pass's qg, out and caches on the host (rows of the
 * left-out sequences are untouched inputs / NaN). */
typedef struct dev_result {
    float *qg, *out, *kc[MAX_SEQ], *vc[MAX_SEQ];
    int rc_prepare, rc_forward;
} dev_result;

/* slack: max_rows and max_kv passed larger than the pass needs, as the
 * backend passes its largest chunk and its context size on every decode row
 * (more split and row-tile blocks, which must find nothing to do). */
static void dev_run(dev_result *res, const attn_case *c, const attn_data *a, unsigned only, int causal, int slack) {
    const cuda_attn_dims *d = &c->d;
    const size_t nh = (size_t)d->n_head, nkv = (size_t)d->n_head_kv, hd = (size_t)d->head_dim;
    const size_t R = (size_t)a->n_rows;
    float *qg = dev_upload_f(a->qg, R * nh * 2 * hd), *k = dev_upload_f(a->k, R * nkv * hd);
    float *v = dev_upload_f(a->v, R * nkv * hd), *qn = dev_upload_f(a->q_norm, hd), *kn = dev_upload_f(a->k_norm, hd);
    float *invf = dev_upload_f(a->inv_freq, (size_t)d->rot / 2 + 1);
    float *out = dev_poisoned(R * nh * hd);
    cuda_attn_seq hs[MAX_SEQ];
    float *kc[MAX_SEQ], *vc[MAX_SEQ];
    int ns = 0, max_rows = 0, max_kv = 0, n_rows = 0;
    for (int s = 0; s < c->n_seq; s++) {
        size_t rows = (size_t)a->cap[s] * nkv * hd;
        kc[s] = dev_upload_f(a->kc0[s], rows);
        vc[s] = dev_upload_f(a->vc0[s], rows);
        if (!(only >> s & 1)) continue;
        hs[ns++] = (cuda_attn_seq){.k_cache = kc[s], .v_cache = vc[s], .pos = c->s[s].pos, .row0 = a->row0[s],
                                   .n = c->s[s].n};
        max_rows = c->s[s].n > max_rows ? c->s[s].n : max_rows;
        max_kv = c->s[s].pos + c->s[s].n > max_kv ? c->s[s].pos + c->s[s].n : max_kv;
        n_rows = a->row0[s] + c->s[s].n > n_rows ? a->row0[s] + c->s[s].n : n_rows;
    }
    if (slack) max_rows += 509, max_kv += 8000;
    cuda_attn_seq *ds = dev_upload(hs, sizeof(cuda_attn_seq) * (size_t)(ns ? ns : 1));
    size_t wb = cuda_attn_workspace_bytes(d, n_rows, max_rows, max_kv);
    float *ws = wb ? dev_poisoned(wb / sizeof(float)) : NULL;
    res->rc_prepare = cuda_attn_prepare(qg, k, v, qn, kn, invf, ds, ns, max_rows, d, NULL);
    res->rc_forward = cuda_attn_forward(out, qg, ds, ns, n_rows, max_rows, max_kv, causal, d, ws, NULL);
    CUDA_OK(cudaDeviceSynchronize());
    res->qg = malloc(R * nh * 2 * hd * sizeof(float));
    res->out = malloc(R * nh * hd * sizeof(float));
    dev_download(res->qg, qg, R * nh * 2 * hd * sizeof(float));
    dev_download(res->out, out, R * nh * hd * sizeof(float));
    for (int s = 0; s < c->n_seq; s++) {
        size_t rows = (size_t)a->cap[s] * nkv * hd;
        res->kc[s] = malloc(rows * sizeof(float));
        res->vc[s] = malloc(rows * sizeof(float));
        dev_download(res->kc[s], kc[s], rows * sizeof(float));
        dev_download(res->vc[s], vc[s], rows * sizeof(float));
        cudaFree(kc[s]), cudaFree(vc[s]);
    }
    cudaFree(qg), cudaFree(k), cudaFree(v), cudaFree(qn), cudaFree(kn), cudaFree(invf), cudaFree(out);
    cudaFree(ds), cudaFree(ws);
}

static void dev_result_free(dev_result *r, int n_seq) {
    free(r->qg), free(r->out);
    for (int s = 0; s < n_seq; s++) free(r->kc[s]), free(r->vc[s]);
}

static void run_case(const attn_case *c) {
    const cuda_attn_dims *d = &c->d;
    const size_t nh = (size_t)d->n_head, nkv = (size_t)d->n_head_kv, hd = (size_t)d->head_dim;
    attn_data a;
    data_make(&a, c);
    const size_t R = (size_t)a.n_rows;
    const unsigned all = (1u << c->n_seq) - 1;
    for (int causal = 0; causal < 2; causal++) {
        dev_result g;
        dev_run(&g, c, &a, all, causal, 0);
        CHECK_MSG(g.rc_prepare == 0 && g.rc_forward == 0, "%s: prepare %s, forward %s", c->name,
                  cuda_attn_strerror(g.rc_prepare), cuda_attn_strerror(g.rc_forward));
        /* q (in place) and the untouched gate */
        float *gq = malloc(R * nh * hd * sizeof(float));
        int gate_same = 1;
        for (size_t rh = 0; rh < R * nh; rh++) {
            memcpy(gq + rh * hd, g.qg + rh * 2 * hd, hd * sizeof(float));
            gate_same &= memcmp(g.qg + rh * 2 * hd + hd, a.qg + rh * 2 * hd + hd, hd * sizeof(float)) == 0;
        }
        double eq = rel_l2(gq, a.ref_q, R * nh * hd);
        CHECK_MSG(eq < 1e-6, "%s: q after prepare: rel %g", c->name, eq);
        CHECK_MSG(gate_same, "%s: prepare changed the gate half of qg", c->name);
        double ek = 0.0;
        for (int s = 0; s < c->n_seq; s++) {
            size_t used = (size_t)(c->s[s].pos + c->s[s].n) * nkv * hd, rows = (size_t)a.cap[s] * nkv * hd;
            double e = rel_l2(g.kc[s], a.ref_kc[s], used);
            ek = e > ek ? e : ek;
            CHECK_MSG(memcmp(g.vc[s], a.ref_vc[s], used * sizeof(float)) == 0, "%s seq %d: v rows differ", c->name,
                      s);
            CHECK_MSG(all_nan(g.kc[s] + used, rows - used) && all_nan(g.vc[s] + used, rows - used),
                      "%s seq %d: cache rows past pos + n were written", c->name, s);
        }
        CHECK_MSG(ek < 1e-6, "%s: k cache: rel %g", c->name, ek);
        size_t bad = count_nonfinite(g.out, R * nh * hd);
        double eo = rel_l2(g.out, a.ref_out[causal], R * nh * hd);
        CHECK_MSG(bad == 0, "%s: %zu output values not written or not finite", c->name, bad);
        CHECK_MSG(eo < 5e-6, "%s (%s): output rel %g", c->name, causal ? "causal" : "full", eo);
        NOTE("%-40s %-4s%-4s %-6s rows %3zu: q %.2e  k %.2e  out %.2e", c->name, cuda_attn_decode_on() ? "dec" : "tile",
             cuda_attn_few_on() ? "+few" : "", causal ? "causal" : "full", R, eq, ek, eo);
        /* batch independence: each sequence alone gives its rows bit for bit */
        if (c->n_seq > 1) {
            for (int s = 0; s < c->n_seq; s++) {
                dev_result one;
                dev_run(&one, c, &a, 1u << s, causal, 0);
                size_t o = (size_t)a.row0[s] * nh * hd, cnt = (size_t)c->s[s].n * nh * hd;
                CHECK_MSG(memcmp(one.out + o, g.out + o, cnt * sizeof(float)) == 0,
                          "%s seq %d: rows differ when it runs alone", c->name, s);
                dev_result_free(&one, c->n_seq);
            }
        }
        /* the backend's oversized max_rows / max_kv: the same bits */
        dev_result big;
        dev_run(&big, c, &a, all, causal, 1);
        CHECK_MSG(big.rc_prepare == 0 && big.rc_forward == 0, "%s (slack): prepare %s, forward %s", c->name,
                  cuda_attn_strerror(big.rc_prepare), cuda_attn_strerror(big.rc_forward));
        CHECK_MSG(memcmp(big.out, g.out, R * nh * hd * sizeof(float)) == 0,
                  "%s (%s): output differs with max_rows / max_kv larger than the pass", c->name,
                  causal ? "causal" : "full");
        dev_result_free(&big, c->n_seq);
        /* the merge with a block of head_dim threads (cuda_attn_comb_rows_set; stacked previews): the same bits */
        dev_result cr;
        cuda_attn_comb_rows_set(1);
        dev_run(&cr, c, &a, all, causal, 0);
        cuda_attn_comb_rows_set(-1);
        CHECK_MSG(cr.rc_forward == 0 && memcmp(cr.out, g.out, R * nh * hd * sizeof(float)) == 0,
                  "%s (%s): the head_dim-thread merge differs from the 1024-thread one", c->name,
                  causal ? "causal" : "full");
        dev_result_free(&cr, c->n_seq);
        /* the few form on: the sequences it does not take (1 row, more than it takes) keep their bits */
        const int few = cuda_attn_few_on();
        if (few) {
            dev_result off;
            cuda_attn_few_set(0);
            dev_run(&off, c, &a, all, causal, 0);
            cuda_attn_few_set(few);
            for (int s = 0; s < c->n_seq; s++) {
                if (c->s[s].n >= 2 && c->s[s].n <= few) continue;
                size_t o = (size_t)a.row0[s] * nh * hd, cnt = (size_t)c->s[s].n * nh * hd;
                CHECK_MSG(off.rc_forward == 0 && memcmp(off.out + o, g.out + o, cnt * sizeof(float)) == 0,
                          "%s (%s) seq %d (%d rows): its bits change with the few form on", c->name,
                          causal ? "causal" : "full", s, c->s[s].n);
            }
            dev_result_free(&off, c->n_seq);
        }
        free(gq);
        dev_result_free(&g, c->n_seq);
    }
    data_free(&a, c->n_seq);
}

static const attn_case CASES[] = {
    {"odd hd40 g3 rot12, 3 seqs", {6, 2, 40, 12, 1e-6f}, 3, {{5, 3}, {0, 4}, {37, 1}}, 11},
    {"group 1 hd33 rot0, 45 rows", {4, 4, 33, 0, 1e-6f}, 1, {{100, 45}}, 12},
    {"group 40 hd24 (2 head ranges)", {40, 1, 24, 8, 1e-6f}, 2, {{70, 2}, {3, 0}}, 13},
    {"hd64 g4, decode 3 over 2500", {8, 2, 64, 16, 1e-6f}, 2, {{2500, 3}, {31, 1}}, 14},
    {"real 16/2/256, decode", {16, 2, 256, 64, 1e-6f}, 3, {{4095, 1}, {300, 1}, {17, 8}}, 15},
    {"real 16/2/256, chunk 130", {16, 2, 256, 64, 1e-6f}, 1, {{100, 130}}, 16},
    /* one decode row over 1, 28, 1000 and 4096 keys (1 split; 1 split of 32; 32 splits, the last partial;
     * 128 splits), the 35B's dims and an odd head dim */
    {"real 16/2/256, kv 1/28/1000/4096", {16, 2, 256, 64, 1e-6f}, 4, {{0, 1}, {27, 1}, {999, 1}, {4095, 1}}, 17},
    {"hd40 g3, kv 1/28/1000/4096", {6, 2, 40, 12, 1e-6f}, 4, {{4095, 1}, {999, 1}, {27, 1}, {0, 1}}, 18},
    /* the decode form's edges: 1 key; 31/32/33 around its 16-key steps; 512 (33 splits of 16); 4097 (65 of 64) */
    {"dec 16/2/256, kv 1/31/32/33", {16, 2, 256, 64, 1e-6f}, 4, {{0, 1}, {30, 1}, {31, 1}, {32, 1}}, 19},
    {"dec 16/2/256, kv 512/4097+chunk", {16, 2, 256, 64, 1e-6f}, 3, {{511, 1}, {4096, 1}, {40, 7}}, 20},
    {"dec hd33 g3 (scalar loads)", {6, 2, 33, 12, 1e-6f}, 3, {{0, 1}, {200, 1}, {1000, 1}}, 21},
    {"dec hd36 g1", {4, 4, 36, 8, 1e-6f}, 2, {{17, 1}, {600, 1}}, 22},
    {"dec hd130 g8", {16, 2, 130, 16, 1e-6f}, 2, {{64, 1}, {3000, 1}}, 23},
    {"dec hd64 g12 (2 head ranges)", {12, 1, 64, 16, 1e-6f}, 2, {{100, 1}, {2047, 1}}, 24},
    {"dec hd24 g40 (5 head ranges)", {40, 1, 24, 8, 1e-6f}, 3, {{70, 1}, {0, 1}, {15, 1}}, 25},
};

/* the few form's (sequences of 2..64 rows): previews (not causal) and commit chunks (causal) of the 35B-A3B
 * over 2..4097 keys, odd geometries, a 64-row sequence beside a 65-row one (tile form) and a decode row */
static const attn_case FEW_CASES[] = {
    {"few 16/2/256, preview 32 after 512", {16, 2, 256, 64, 1e-6f}, 1, {{512, 32}}, 31},
    {"few 16/2/256, rows 2/7/16, kv 2/33/544", {16, 2, 256, 64, 1e-6f}, 3, {{0, 2}, {26, 7}, {528, 16}}, 32},
    {"few 16/2/256, rows 31/33 over 4097", {16, 2, 256, 64, 1e-6f}, 2, {{4066, 31}, {4064, 33}}, 33},
    {"few 16/2/256, 64 + 65 rows + decode", {16, 2, 256, 64, 1e-6f}, 3, {{480, 64}, {0, 65}, {543, 1}}, 34},
    {"few hd40 g3, rows 2/7/31/64", {6, 2, 40, 12, 1e-6f}, 4, {{0, 2}, {26, 7}, {513, 31}, {100, 64}}, 35},
    {"few hd33 g3 (scalar loads), rows 3/32", {6, 2, 33, 12, 1e-6f}, 2, {{40, 3}, {512, 32}}, 36},
    {"few hd24 g40 (5 groups a row), rows 2/9", {40, 1, 24, 8, 1e-6f}, 2, {{70, 2}, {0, 9}}, 37},
    {"few hd130 g8, 16 rows over 3000 + 1", {16, 2, 130, 16, 1e-6f}, 2, {{2984, 16}, {64, 1}}, 38},
    {"few hd64 g1, rows 5/40", {4, 4, 64, 16, 1e-6f}, 2, {{1000, 5}, {7, 40}}, 39},
};

#define N_CASES (sizeof CASES / sizeof CASES[0])
#define N_FEW_CASES (sizeof FEW_CASES / sizeof FEW_CASES[0])

/* the decode form on, the few form as the environment says (CLOVER_CUDA_ATTN_FEW; on by default) */
static void operators_match_cpu(void) {
    cuda_attn_decode_set(1);
    cuda_attn_few_set(-1);
    for (size_t i = 0; i < N_CASES; i++) run_case(&CASES[i]);
}

/* the same with the decode and few forms off: every row takes the tile form (CLOVER_CUDA_ATTN_DECODE=0), the
 * few form's cases too */
static void tile_form_matches_cpu(void) {
    cuda_attn_decode_set(0);
    cuda_attn_few_set(0);
    for (size_t i = 0; i < N_CASES; i++) run_case(&CASES[i]);
    for (size_t i = 0; i < N_FEW_CASES; i++) run_case(&FEW_CASES[i]);
    cuda_attn_decode_set(1);
    cuda_attn_few_set(-1);
}

/* the few form on (sequences of 2..64 rows), with the decode form on (every case) and off (its own cases: its
 * merge then meets no decode row) */
static void few_form_matches_cpu(void) {
    cuda_attn_few_set(1);
    cuda_attn_decode_set(1);
    for (size_t i = 0; i < N_CASES; i++) run_case(&CASES[i]);
    for (size_t i = 0; i < N_FEW_CASES; i++) run_case(&FEW_CASES[i]);
    cuda_attn_decode_set(0);
    for (size_t i = 0; i < N_FEW_CASES; i++) run_case(&FEW_CASES[i]);
    cuda_attn_decode_set(1);
    cuda_attn_few_set(-1);
}

/* Host-side checks: bad dims are refused with a message naming the field, and no launch happens. */
static void bad_dims_refused(void) {
    char why[200];
    cuda_attn_dims d = {6, 4, 40, 12, 1e-6f};
    CHECK(cuda_attn_dims_check(&d, why, sizeof why) == CUDA_ATTN_EINVAL && strstr(why, "multiple") != NULL);
    d = (cuda_attn_dims){4, 2, 512, 12, 1e-6f};
    CHECK(cuda_attn_dims_check(&d, why, sizeof why) == CUDA_ATTN_EINVAL && strstr(why, "head_dim") != NULL);
    d = (cuda_attn_dims){4, 2, 64, 13, 1e-6f};
    CHECK(cuda_attn_dims_check(&d, why, sizeof why) == CUDA_ATTN_EINVAL && strstr(why, "rotary") != NULL);
    d = (cuda_attn_dims){16, 2, 256, 64, 1e-6f};
    CHECK(cuda_attn_dims_check(&d, why, sizeof why) == 0);
    CHECK(cuda_attn_prepare(NULL, NULL, NULL, NULL, NULL, NULL, NULL, -1, 1, &d, NULL) == CUDA_ATTN_EINVAL);
    /* the plan: a single decode row over 4096 keys takes many splits, a long chunk few; in the
     * tile form splits are multiples of 32 keys */
    cuda_attn_decode_set(0);
    cuda_attn_plan_t p1 = cuda_attn_plan(&d, 1, 4096), p512 = cuda_attn_plan(&d, 512, 4096);
    CHECK(!cuda_attn_decode_on());
    CHECK(p1.n_splits >= 32 && p1.split_len % 32 == 0 && p1.n_splits * p1.split_len >= 4096);
    CHECK(p512.n_splits <= 2 && p512.n_splits * p512.split_len >= 4096);
    /* the decode form: ~132 blocks (66 splits a KV head) of 16-key multiples; chunks as before */
    cuda_attn_decode_set(1);
    cuda_attn_plan_t q513 = cuda_attn_plan(&d, 1, 513), q4097 = cuda_attn_plan(&d, 1, 4097);
    cuda_attn_plan_t q1 = cuda_attn_plan(&d, 1, 1), q512 = cuda_attn_plan(&d, 512, 4096);
    CHECK(cuda_attn_decode_on());
    CHECK(q513.n_splits == 33 && q513.split_len == 16);
    CHECK(q4097.n_splits == 65 && q4097.split_len == 64);
    CHECK(q1.n_splits == 1);
    CHECK(q512.n_splits == p512.n_splits && q512.split_len == p512.split_len);
    /* the workspace holds either form's partials: 128 splits (tile) at 262144, 33 (decode) at 513 */
    CHECK(cuda_attn_workspace_bytes(&d, 1, 1, 262144) == sizeof(float) * 16 * 128 * 258);
    CHECK(cuda_attn_workspace_bytes(&d, 1, 1, 513) == sizeof(float) * 16 * 33 * 258);
    CHECK(cuda_attn_workspace_bytes(&d, 1, 1, 16) == 0);
    /* the few form: 2..64 rows (2 query groups a block by default: 8 / 2 = 4 key lanes, a block step of 8 keys);
     * 32 rows over 544 keys = G 32 groups, 16 query sets x 4 splits of 136 keys a KV head (132 / (2 x 16) = 4;
     * 128 blocks); 2 rows over 4097: 65 splits of 64 (one query set, 132 / 2 = 66 splits of ceil(4097 / 66) = 63
     * keys rounded up to the step); 64 rows over 64 keys: 32 query sets, 132 / (2 x 32) = 2 splits of 32 raised to
     * the least split (64 keys by default): 1 split of 64; 32 rows over 96 keys: 4 splits of 24 raised to 64: 2 of
     * 64; decode rows and 65 rows keep their plans; the workspace does not change (for groups of <= 8 heads it
     * never needs more splits) */
    cuda_attn_few_set(0);
    cuda_attn_plan_t t65 = cuda_attn_plan(&d, 65, 4096), t1 = cuda_attn_plan(&d, 1, 513);
    cuda_attn_few_set(1);
    CHECK(cuda_attn_few_on() == 64);
    cuda_attn_plan_t f32 = cuda_attn_plan(&d, 32, 544), f2 = cuda_attn_plan(&d, 2, 4097);
    cuda_attn_plan_t f1 = cuda_attn_plan(&d, 1, 513), f65 = cuda_attn_plan(&d, 65, 4096);
    cuda_attn_plan_t f64 = cuda_attn_plan(&d, 64, 64), f96 = cuda_attn_plan(&d, 32, 96);
    if (!getenv("CLOVER_CUDA_ATTN_FEW_NG") && !getenv("CLOVER_CUDA_ATTN_FEW_TARGET") &&
        !getenv("CLOVER_CUDA_ATTN_FEW_MIN_SPLIT")) {
        CHECK_MSG(f32.n_splits == 4 && f32.split_len == 136, "few plan 32 x 544: %d x %d", f32.n_splits,
                  f32.split_len);
        CHECK_MSG(f2.n_splits == 65 && f2.split_len == 64, "few plan 2 x 4097: %d x %d", f2.n_splits, f2.split_len);
        CHECK_MSG(f64.n_splits == 1 && f64.split_len == 64, "few plan 64 x 64: %d x %d", f64.n_splits,
                  f64.split_len);
        CHECK_MSG(f96.n_splits == 2 && f96.split_len == 64, "few plan 32 x 96: %d x %d", f96.n_splits,
                  f96.split_len);
    }
    CHECK(f32.n_splits * f32.split_len >= 544 && f2.n_splits * f2.split_len >= 4097);
    CHECK(f1.n_splits == t1.n_splits && f1.split_len == t1.split_len);
    CHECK(f65.n_splits == t65.n_splits && f65.split_len == t65.split_len);
    CHECK(cuda_attn_workspace_bytes(&d, 1, 1, 262144) == sizeof(float) * 16 * 128 * 258);
    CHECK(cuda_attn_workspace_bytes(&d, 1, 1, 513) == sizeof(float) * 16 * 33 * 258);
    cuda_attn_few_set(7);
    CHECK(cuda_attn_few_on() == 7);
    cuda_attn_few_set(0);
    CHECK(cuda_attn_few_on() == 0);
    cuda_attn_few_set(-1);
}

int main(void) {
    RUN(bad_dims_refused);
    cuda_test_require_device();
    CUDA_OK((cudaError_t)cuda_attn_init());
    RUN(operators_match_cpu);
    RUN(tile_form_matches_cpu);
    RUN(few_form_matches_cpu);
    return TEST_EXIT();
}
