/*
 * test_cuda_gdn.c: the CUDA Gated DeltaNet operators (src/cuda/cuda_gdn.h)
 * against the CPU's scalar oracles (cpu_gdn_conv_scalar, cpu_gdn_qk_norm_scalar,
 * cpu_gdn_gates, cpu_gdn_recurrent_scalar, cpu_gdn_chunked_scalar,
 * cpu_rms_norm_gated_scalar) on seeded random inputs (never zeros): nonzero
 * rings and initial states, odd shapes (dk 17, dv 40 = a full and a partial
 * value-column slice, K = 3), both value-head orders, several sequences per
 * pass (one of them sitting out), decode rows (1 and 5) and prompts (150 rows
 * = two full chunks and a short one; 101 rows at the real size 16/32 x 128).
 * Outputs are poisoned with NaN first and must be fully written and finite.
 *
 * Bounds (normalised L2 error, f32 on both sides):
 *  - conv: 1e-6. The same K-tap sum in the same order; only expf in SiLU
 *    differs (CUDA's expf is within 2 ulp). The ring must match bit for bit.
 *  - recurrence + fused norms/gates: 5e-6 on y and S after <= 5 rows. The
 *    column sums over dk = 128 are reordered (~sqrt(128) * 6e-8 = 7e-7
 *    relative per read); five rows compound that a few times; the gated
 *    norm adds a 128-term sum. Measured on the H200: <= 2.6e-7 (bench/device-runs/cuda-attention-gdn-notes.md);
 *    5e-6 keeps a factor of ~20.
 *  - chunked: 1e-5 on o and S after 150 rows (measured <= 4.2e-7). Every step is the CPU's
 *    arithmetic with reordered dot products of length <= 128 (forward
 *    substitution keeps the CPU's order); the state passes through three
 *    chunks and the 64x64 unit-triangular solve amplifies rounding by its
 *    condition (beta k k^T with unit-norm k: a few units). Any real slip
 *    (a wrong decay exponent, a wrong key head, a missed chunk boundary)
 *    gives 1e-2 or more.
 *    The chunked cases run again with the form's dot products in 4 partial
 *    sums (cuda_gdn_chunk_ilp_set): the same bound.
 *  - chunked, tiled (cuda_gdn_chunk_tile_set, the default) against NP = 1:
 *    o and the states bit-identical (the same operations per element).
 *  - batch independence: a sequence's outputs and state are bit-identical
 *    whether it runs alone or with other sequences.
 * Without a CUDA device the test prints SKIP and exits 77 after the
 * host-side argument checks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/gdn.h"
#include "cpu/norm.h"
#include "cuda/cuda_gdn.h"
#include "cuda_mixer_test.h"

enum { MAX_SEQ = 3 };

typedef struct gdn_case {
    const char *name;
    cuda_gdn_dims d;
    int n_seq;
    int n[MAX_SEQ];
    int chunked;
    uint64_t seed;
} gdn_case;

typedef struct gdn_data {
    int n_rows, row0[MAX_SEQ], max_rows;
    float *mixed, *z, *b, *a, *conv_w, *ssm_a, *dt_bias, *norm_w;
    float *ring0[MAX_SEQ], *state0[MAX_SEQ];
    /* CPU results */
    float *ref_qkv, *ref_o, *ref_y, *ref_ring[MAX_SEQ], *ref_state[MAX_SEQ];
} gdn_data;

static cpu_gdn_dims cpu_dims(const cuda_gdn_dims *d) {
    return (cpu_gdn_dims){.n_k_heads = (size_t)d->n_k_heads, .n_v_heads = (size_t)d->n_v_heads,
                          .k_dim = (size_t)d->k_dim, .v_dim = (size_t)d->v_dim, .conv_k = (size_t)d->conv_k,
                          .eps = d->eps, .order = d->tiled ? CPU_GDN_TILED : CPU_GDN_GROUPED};
}

static void data_make(gdn_data *g, const gdn_case *c) {
    const cuda_gdn_dims *d = &c->d;
    const cpu_gdn_dims cd = cpu_dims(d);
    const size_t C = (size_t)cuda_gdn_conv_dim(d), nv = (size_t)d->n_v_heads, dv = (size_t)d->v_dim;
    const size_t K = (size_t)d->conv_k, S = nv * (size_t)d->k_dim * dv;
    rng_state r;
    rng_seed(&r, c->seed);
    g->n_rows = 0;
    g->max_rows = 0;
    for (int s = 0; s < c->n_seq; s++) {
        g->row0[s] = g->n_rows;
        g->n_rows += c->n[s];
        g->max_rows = c->n[s] > g->max_rows ? c->n[s] : g->max_rows;
    }
    const size_t R = (size_t)g->n_rows;
    g->mixed = malloc(R * C * sizeof(float));
    g->z = malloc(R * nv * dv * sizeof(float));
    g->b = malloc(R * nv * sizeof(float));
    g->a = malloc(R * nv * sizeof(float));
    g->conv_w = malloc(C * K * sizeof(float));
    g->ssm_a = malloc(nv * sizeof(float));
    g->dt_bias = malloc(nv * sizeof(float));
    g->norm_w = malloc(dv * sizeof(float));
    fill_normal(g->mixed, R * C, &r, 0.0f, 1.0f);
    fill_normal(g->z, R * nv * dv, &r, 0.0f, 1.0f);
    fill_normal(g->b, R * nv, &r, 0.0f, 1.0f);
    fill_normal(g->a, R * nv, &r, 0.0f, 1.0f);
    fill_normal(g->conv_w, C * K, &r, 0.0f, 0.5f);
    for (size_t h = 0; h < nv; h++) g->ssm_a[h] = -expf(0.5f * rng_normal(&r)); /* -exp(A_log) */
    fill_normal(g->dt_bias, nv, &r, 0.0f, 0.5f);
    fill_normal(g->norm_w, dv, &r, 1.0f, 0.2f);
    g->ref_qkv = malloc(R * C * sizeof(float));
    g->ref_o = malloc(R * nv * dv * sizeof(float));
    g->ref_y = malloc(R * nv * dv * sizeof(float));
    float *beta = malloc((R ? R : 1) * nv * sizeof(float)), *gg = malloc((R ? R : 1) * nv * sizeof(float));
    float *scr = malloc(cpu_gdn_chunked_scratch_floats(&cd) * sizeof(float));
    for (int s = 0; s < c->n_seq; s++) {
        g->ring0[s] = malloc((K - 1 + 1) * C * sizeof(float));
        g->state0[s] = malloc(S * sizeof(float));
        fill_normal(g->ring0[s], (K - 1) * C, &r, 0.0f, 1.0f);
        fill_normal(g->state0[s], S, &r, 0.0f, 0.1f);
        g->ref_ring[s] = malloc((K - 1 + 1) * C * sizeof(float));
        g->ref_state[s] = malloc(S * sizeof(float));
        memcpy(g->ref_ring[s], g->ring0[s], (K - 1) * C * sizeof(float));
        memcpy(g->ref_state[s], g->state0[s], S * sizeof(float));
        const size_t o = (size_t)g->row0[s], n = (size_t)c->n[s];
        if (n == 0) continue;
        float *qkv = g->ref_qkv + o * C;
        cpu_gdn_conv_scalar(qkv, g->mixed + o * C, g->ref_ring[s], g->conv_w, C, K, n);
        float *qn = malloc(n * C * sizeof(float));
        memcpy(qn, qkv, n * C * sizeof(float));
        cpu_gdn_qk_norm_scalar(qn, &cd, n);
        cpu_gdn_gates(beta, gg, g->b + o * nv, g->a + o * nv, g->ssm_a, g->dt_bias, nv, n);
        if (c->chunked)
            cpu_gdn_chunked_scalar(g->ref_o + o * nv * dv, g->ref_state[s], qn, gg, beta, &cd, n, 0, nv, scr);
        else
            cpu_gdn_recurrent_scalar(g->ref_o + o * nv * dv, g->ref_state[s], qn, gg, beta, &cd, n, 0, nv);
        cpu_rms_norm_gated_scalar(g->ref_y + o * nv * dv, g->ref_o + o * nv * dv, g->z + o * nv * dv, g->norm_w,
                                  n * nv, dv, d->eps);
        free(qn);
    }
    free(beta), free(gg), free(scr);
}

static void data_free(gdn_data *g, int n_seq) {
    free(g->mixed), free(g->z), free(g->b), free(g->a), free(g->conv_w), free(g->ssm_a), free(g->dt_bias);
    free(g->norm_w), free(g->ref_qkv), free(g->ref_o), free(g->ref_y);
    for (int s = 0; s < n_seq; s++) free(g->ring0[s]), free(g->state0[s]), free(g->ref_ring[s]), free(g->ref_state[s]);
}

typedef struct dev_result {
    float *qkv, *o, *y, *ring[MAX_SEQ], *state[MAX_SEQ];
    int rc[3];
} dev_result;

/* The device pass over the sequences in `only`: the steps one by one (conv,
 * then the form; chunked adds the gated norm), so each is checked on its own;
 * `mix` runs cuda_gdn_mix instead. */
static void dev_run(dev_result *res, const gdn_case *c, const gdn_data *g, unsigned only, int mix) {
    const cuda_gdn_dims *d = &c->d;
    const size_t C = (size_t)cuda_gdn_conv_dim(d), nv = (size_t)d->n_v_heads, dv = (size_t)d->v_dim;
    const size_t K = (size_t)d->conv_k, S = nv * (size_t)d->k_dim * dv, R = (size_t)g->n_rows;
    float *mixed = dev_upload_f(g->mixed, R * C), *z = dev_upload_f(g->z, R * nv * dv);
    float *b = dev_upload_f(g->b, R * nv), *a = dev_upload_f(g->a, R * nv);
    cuda_gdn_weights w = {dev_upload_f(g->conv_w, C * K), dev_upload_f(g->ssm_a, nv), dev_upload_f(g->dt_bias, nv),
                          dev_upload_f(g->norm_w, dv)};
    float *qkv = dev_poisoned(R * C), *o = dev_poisoned(R * nv * dv), *y = dev_poisoned(R * nv * dv);
    float *ring[MAX_SEQ], *state[MAX_SEQ];
    cuda_gdn_seq hs[MAX_SEQ];
    int ns = 0, max_rows = 0;
    for (int s = 0; s < c->n_seq; s++) {
        ring[s] = dev_upload_f(g->ring0[s], (K - 1 + 1) * C);
        state[s] = dev_upload_f(g->state0[s], S);
        if (!(only >> s & 1)) continue;
        hs[ns++] = (cuda_gdn_seq){.ring = ring[s], .state = state[s], .row0 = g->row0[s], .n = c->n[s]};
        max_rows = c->n[s] > max_rows ? c->n[s] : max_rows;
    }
    cuda_gdn_seq *ds = dev_upload(hs, sizeof(cuda_gdn_seq) * (size_t)(ns ? ns : 1));
    memset(res->rc, 0, sizeof res->rc);
    float *wsp = NULL;
    if (mix) {
        size_t wb = cuda_gdn_mix_workspace_bytes(d, g->n_rows);
        wsp = dev_poisoned(wb / sizeof(float));
        res->rc[0] = cuda_gdn_mix(y, mixed, z, b, a, &w, ds, ns, g->n_rows, max_rows, c->chunked, d, wsp, NULL);
    } else {
        res->rc[0] = cuda_gdn_conv(qkv, mixed, w.conv_w, ds, ns, max_rows, d, NULL);
        if (c->chunked) {
            res->rc[1] = cuda_gdn_chunked(o, qkv, b, a, &w, ds, ns, d, NULL);
            res->rc[2] = cuda_gdn_gated_norm(y, o, z, w.norm_w, g->n_rows * (int)nv, (int)dv, d->eps, NULL);
        } else {
            res->rc[1] = cuda_gdn_recurrent(y, qkv, z, b, a, &w, ds, ns, d, NULL);
        }
    }
    CUDA_OK(cudaDeviceSynchronize());
    res->qkv = malloc(R * C * sizeof(float) + 4);
    res->o = malloc(R * nv * dv * sizeof(float) + 4);
    res->y = malloc(R * nv * dv * sizeof(float) + 4);
    dev_download(res->qkv, qkv, R * C * sizeof(float));
    dev_download(res->o, o, R * nv * dv * sizeof(float));
    dev_download(res->y, y, R * nv * dv * sizeof(float));
    for (int s = 0; s < c->n_seq; s++) {
        res->ring[s] = malloc((K - 1 + 1) * C * sizeof(float));
        res->state[s] = malloc(S * sizeof(float));
        dev_download(res->ring[s], ring[s], (K - 1) * C * sizeof(float));
        dev_download(res->state[s], state[s], S * sizeof(float));
        cudaFree(ring[s]), cudaFree(state[s]);
    }
    cudaFree(mixed), cudaFree(z), cudaFree(b), cudaFree(a), cudaFree(qkv), cudaFree(o), cudaFree(y), cudaFree(ds);
    cudaFree((void *)w.conv_w), cudaFree((void *)w.ssm_a), cudaFree((void *)w.dt_bias), cudaFree((void *)w.norm_w);
    cudaFree(wsp);
}

static void dev_result_free(dev_result *r, int n_seq) {
    free(r->qkv), free(r->o), free(r->y);
    for (int s = 0; s < n_seq; s++) free(r->ring[s]), free(r->state[s]);
}

static void run_case(const gdn_case *c) {
    const cuda_gdn_dims *d = &c->d;
    const size_t C = (size_t)cuda_gdn_conv_dim(d), nv = (size_t)d->n_v_heads, dv = (size_t)d->v_dim;
    const size_t K = (size_t)d->conv_k, S = nv * (size_t)d->k_dim * dv;
    gdn_data g;
    data_make(&g, c);
    const size_t R = (size_t)g.n_rows;
    const unsigned all = (1u << c->n_seq) - 1;
    const double bound = c->chunked ? 1e-5 : 5e-6;
    dev_result r;
    dev_run(&r, c, &g, all, 0);
    CHECK_MSG(r.rc[0] == 0 && r.rc[1] == 0 && r.rc[2] == 0, "%s: %s / %s / %s", c->name, cuda_gdn_strerror(r.rc[0]),
              cuda_gdn_strerror(r.rc[1]), cuda_gdn_strerror(r.rc[2]));
    double e_conv = rel_l2(r.qkv, g.ref_qkv, R * C);
    CHECK_MSG(e_conv < 1e-6, "%s: conv rel %g", c->name, e_conv);
    double e_o = c->chunked ? rel_l2(r.o, g.ref_o, R * nv * dv) : 0.0;
    CHECK_MSG(e_o < bound, "%s: chunked o rel %g", c->name, e_o);
    size_t bad = count_nonfinite(r.y, R * nv * dv);
    double e_y = rel_l2(r.y, g.ref_y, R * nv * dv);
    CHECK_MSG(bad == 0, "%s: %zu outputs not written or not finite", c->name, bad);
    CHECK_MSG(e_y < bound, "%s: y rel %g", c->name, e_y);
    double e_s = 0.0;
    for (int s = 0; s < c->n_seq; s++) {
        CHECK_MSG(memcmp(r.ring[s], g.ref_ring[s], (K - 1) * C * sizeof(float)) == 0, "%s seq %d: ring differs",
                  c->name, s);
        double e = rel_l2(r.state[s], g.ref_state[s], S);
        e_s = e > e_s ? e : e_s;
    }
    CHECK_MSG(e_s < bound, "%s: state rel %g", c->name, e_s);
    NOTE("%-34s rows %3zu: conv %.2e  o %.2e  y %.2e  S %.2e", c->name, R, e_conv, e_o, e_y, e_s);
    /* cuda_gdn_mix gives the same as the steps one by one, bit for bit */
    dev_result m;
    dev_run(&m, c, &g, all, 1);
    CHECK_MSG(m.rc[0] == 0, "%s: mix %s", c->name, cuda_gdn_strerror(m.rc[0]));
    CHECK_MSG(memcmp(m.y, r.y, R * nv * dv * sizeof(float)) == 0, "%s: cuda_gdn_mix differs from the steps", c->name);
    dev_result_free(&m, c->n_seq);
    /* batch independence */
    if (c->n_seq > 1) {
        for (int s = 0; s < c->n_seq; s++) {
            dev_result one;
            dev_run(&one, c, &g, 1u << s, 0);
            size_t o = (size_t)g.row0[s] * nv * dv, cnt = (size_t)c->n[s] * nv * dv;
            CHECK_MSG(memcmp(one.y + o, r.y + o, cnt * sizeof(float)) == 0 &&
                          memcmp(one.state[s], r.state[s], S * sizeof(float)) == 0,
                      "%s seq %d: differs when it runs alone", c->name, s);
            dev_result_free(&one, c->n_seq);
        }
    }
    dev_result_free(&r, c->n_seq);
    data_free(&g, c->n_seq);
}

static const gdn_case CASES[] = {
    {"odd dk17 dv40 K3 tiled, decode", {3, 6, 17, 40, 3, 1e-6f, 1}, 3, {1, 5, 0}, 0, 21},
    {"odd dk17 dv40 K3 grouped, decode", {3, 6, 17, 40, 3, 1e-6f, 0}, 2, {5, 1}, 0, 22},
    {"odd dk17 dv40 K3 tiled, chunk 150", {3, 6, 17, 40, 3, 1e-6f, 1}, 2, {150, 2}, 1, 23},
    {"grouped dk32 dv64 K4, chunk 70", {2, 4, 32, 64, 4, 1e-6f, 0}, 1, {70}, 1, 24},
    {"real 16/32x128, decode 2 seqs", {16, 32, 128, 128, 4, 1e-6f, 1}, 2, {1, 1}, 0, 25},
    {"dk128 dv128 grouped, 3 seqs x 1-4 rows", {2, 4, 128, 128, 4, 1e-6f, 0}, 3, {1, 4, 2}, 0, 31},
    {"dk32 dv64 tiled, decode 3 rows", {2, 4, 32, 64, 4, 1e-6f, 1}, 2, {3, 1}, 0, 32},
    {"dk64 dv32 grouped, decode", {1, 3, 64, 32, 4, 1e-6f, 0}, 1, {2}, 0, 33},
    {"dk40 dv256 grouped, decode", {1, 2, 40, 256, 4, 1e-6f, 0}, 2, {1, 2}, 0, 34},
    {"real 16/32x128, chunk 101", {16, 32, 128, 128, 4, 1e-6f, 1}, 1, {101}, 1, 26},
};

static void operators_match_cpu(void) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) run_case(&CASES[i]);
}

/* The chunked cases again with the form's dot products in 4 partial sums (cuda_gdn_chunk_ilp_set(1)): the same
 * bound against the CPU's scalar form (only the reassociation differs), sequences alone = together. */
static void chunked_ilp_matches_cpu(void) {
    cuda_gdn_chunk_ilp_set(1);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        if (CASES[i].chunked) run_case(&CASES[i]);
    cuda_gdn_chunk_ilp_set(-1);
}

/* The tiled chunked form (cuda_gdn_chunk_tile_set(1), the default) equals the NP = 1 form bit for bit: o and the
 * final states, over partial and full chunks (1 to 150 rows, several sequences a pass) at the real size and an odd
 * one; run_case holds it to the CPU bound as well. */
static void chunked_tile_matches_np1(void) {
    static const cuda_gdn_dims dims[] = {{16, 32, 128, 128, 4, 1e-6f, 1}, {3, 6, 17, 40, 3, 1e-6f, 0}};
    static const int rows[][MAX_SEQ] = {{1, 33, 64}, {5, 150, 0}, {31, 32, 65}};
    cuda_gdn_chunk_ilp_set(0);
    for (int di = 0; di < 2; di++)
        for (int ri = 0; ri < 3; ri++) {
            char name[64];
            snprintf(name, sizeof name, "tile dk%d dv%d, chunk %d+%d+%d", dims[di].k_dim, dims[di].v_dim,
                     rows[ri][0], rows[ri][1], rows[ri][2]);
            gdn_case c = {name, dims[di], rows[ri][2] ? 3 : 2, {0}, 1, (uint64_t)(40 + 3 * di + ri)};
            memcpy(c.n, rows[ri], sizeof c.n);
            const size_t nv = (size_t)c.d.n_v_heads, dv = (size_t)c.d.v_dim;
            const size_t S = nv * (size_t)c.d.k_dim * dv;
            cuda_gdn_chunk_tile_set(1);
            run_case(&c);
            gdn_data g;
            data_make(&g, &c);
            dev_result t, p;
            dev_run(&t, &c, &g, (1u << c.n_seq) - 1, 0);
            cuda_gdn_chunk_tile_set(0);
            dev_run(&p, &c, &g, (1u << c.n_seq) - 1, 0);
            CHECK_MSG(t.rc[1] == 0 && p.rc[1] == 0, "%s: %s / %s", name, cuda_gdn_strerror(t.rc[1]),
                      cuda_gdn_strerror(p.rc[1]));
            CHECK_MSG(memcmp(t.o, p.o, (size_t)g.n_rows * nv * dv * sizeof(float)) == 0, "%s: o differs from NP 1",
                      name);
            for (int s = 0; s < c.n_seq; s++)
                CHECK_MSG(memcmp(t.state[s], p.state[s], S * sizeof(float)) == 0, "%s seq %d: state differs from NP 1",
                          name, s);
            dev_result_free(&t, c.n_seq);
            dev_result_free(&p, c.n_seq);
            data_free(&g, c.n_seq);
        }
    cuda_gdn_chunk_tile_set(-1);
    cuda_gdn_chunk_ilp_set(-1);
}

/* PAIR (cuda_gdn_rec_pair_set(1): two sequences a block, the second's state through shared memory) equals one
 * sequence a block bit for bit: y and every state, an odd count of sequences (the last block's one), sequences of
 * several rows and of none (first or second of a pair), at the real 128 x 128 heads (PAIR's only dims: odd ones keep
 * one a block, checked here to stay right when PAIR is asked); run_case holds the paired form to the CPU bound and
 * each sequence alone as well. */
static void rec_pair_matches_single(void) {
    static const gdn_case cases[] = {
        {"pair real 16/32x128, 3 seqs", {16, 32, 128, 128, 4, 1e-6f, 1}, 3, {1, 1, 1}, 0, 51},
        {"pair dk128 dv128 grouped, 3 x 2/0/3 rows", {2, 4, 128, 128, 4, 1e-6f, 0}, 3, {2, 0, 3}, 0, 52},
        {"pair real 16/32x128, 3 x 0/4/1 rows", {16, 32, 128, 128, 4, 1e-6f, 1}, 3, {0, 4, 1}, 0, 53},
        {"pair asked, odd dk17 dv40 (one a block)", {3, 6, 17, 40, 3, 1e-6f, 1}, 3, {0, 4, 1}, 0, 54},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gdn_case *c = &cases[i];
        const size_t nv = (size_t)c->d.n_v_heads, dv = (size_t)c->d.v_dim, S = nv * (size_t)c->d.k_dim * dv;
        cuda_gdn_rec_pair_set(1);
        run_case(c);
        gdn_data g;
        data_make(&g, c);
        dev_result pr, one;
        dev_run(&pr, c, &g, (1u << c->n_seq) - 1, 0);
        cuda_gdn_rec_pair_set(0);
        dev_run(&one, c, &g, (1u << c->n_seq) - 1, 0);
        CHECK_MSG(pr.rc[1] == 0 && one.rc[1] == 0, "%s: %s / %s", c->name, cuda_gdn_strerror(pr.rc[1]),
                  cuda_gdn_strerror(one.rc[1]));
        CHECK_MSG(memcmp(pr.y, one.y, (size_t)g.n_rows * nv * dv * sizeof(float)) == 0, "%s: y differs from G 1",
                  c->name);
        for (int s = 0; s < c->n_seq; s++)
            CHECK_MSG(memcmp(pr.state[s], one.state[s], S * sizeof(float)) == 0, "%s seq %d: state differs from G 1",
                      c->name, s);
        dev_result_free(&pr, c->n_seq);
        dev_result_free(&one, c->n_seq);
        data_free(&g, c->n_seq);
    }
    cuda_gdn_rec_pair_set(-1);
}

static void bad_dims_refused(void) {
    char why[200];
    cuda_gdn_dims d = {3, 7, 17, 40, 3, 1e-6f, 1};
    CHECK(cuda_gdn_dims_check(&d, why, sizeof why) == CUDA_GDN_EINVAL && strstr(why, "multiple") != NULL);
    d = (cuda_gdn_dims){16, 32, 256, 128, 4, 1e-6f, 1};
    CHECK(cuda_gdn_dims_check(&d, why, sizeof why) == CUDA_GDN_EINVAL && strstr(why, "key dim") != NULL);
    d = (cuda_gdn_dims){16, 32, 128, 128, 4, 1e-6f, 2};
    CHECK(cuda_gdn_dims_check(&d, why, sizeof why) == CUDA_GDN_EINVAL && strstr(why, "order") != NULL);
    d = (cuda_gdn_dims){16, 32, 128, 128, 4, 1e-6f, 1};
    CHECK(cuda_gdn_dims_check(&d, why, sizeof why) == 0);
    CHECK(cuda_gdn_conv(NULL, NULL, NULL, NULL, -1, 1, &d, NULL) == CUDA_GDN_EINVAL);
    CHECK(cuda_gdn_mix(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 4, 4, 1, &d, NULL, NULL) == CUDA_GDN_EINVAL);
}

int main(void) {
    RUN(bad_dims_refused);
    cuda_test_require_device();
    CUDA_OK((cudaError_t)cuda_gdn_init());
    RUN(operators_match_cpu);
    RUN(chunked_ilp_matches_cpu);
    RUN(chunked_tile_matches_np1);
    RUN(rec_pair_matches_single);
    return TEST_EXIT();
}
