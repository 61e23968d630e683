/*
 * test_cuda_preview.c: block diffusion on the CUDA backend (issue 14), on
 * the tiny Clover fixture converted to F32 (so the backend runs FP32
 * products and differs from the references by summation order only):
 *  - the coreset and the routing inside it against the CPU's on random
 *    router logits at the 35B-A3B's shape (256 experts, k 8); a stacked
 *    preview's coresets and routing in two launches against the calls per
 *    sequence, bit for bit, the coreset's cluster form on and off; the
 *    coreset and the routing in one launch (CLOVER_CUDA_CORESET_ROUTE,
 *    lone and stacked) against the two launches, bit for bit;
 *  - the GDN block operator against gdn_block_scalar at the 35B-A3B's GDN
 *    shape (16 key / 32 value heads of 128, K 4), 32 and 13 rows; a
 *    stacked preview's operators in two launches against one call a
 *    sequence, bit for bit;
 *  - the three golden preview cases, one sequence per call (backend_seq.h): logits and the
 *    residual stream (CLOVER_CUDA_PREVIEW_HIDDEN) within the fixtures'
 *    bound 1e-4 of tools/reference, logits against the CPU backend's same
 *    preview within the same bound, each layer's coreset equal to the
 *    reference's, the exported state hashed before and after (a preview
 *    changes nothing), and the commit after a preview bit-for-bit the
 *    commit without one;
 *  - the device pick against backend/pick.c (the oracle) over the same
 *    preview's raw logits: greedy and sampled, forbidden ids, counts,
 *    frequency / presence / repetition, the length and </think> ramps:
 *    identical ids, confidences within 2e-6 (float64 sums in another order);
 *  - two sequences in one preview call equal each alone, bit for bit; the
 *    preview trunk replayed from its captured graph equals the eager pass;
 *  - coreset_forms / gdn_block_forms (issue 24): the coreset kernel (its
 *    one-block and cluster forms) and the two-launch GDN block operator
 *    against the forms they replace, bit for bit, over rows 0..64, odd
 *    sizes, ties and infinities, and against the CPU oracles
 *    (CLOVER_TEST_SMALL: a few of those cases, for the sanitizers);
 *  - gdn_head_once (issues 24, 25): the head-once form of the GDN heads
 *    (CLOVER_CUDA_GDN_HEAD_ONCE) against the tile form, bit for bit, lone
 *    and stacked, every group count, and its AUTO (stacked passes only);
 *    the states untouched;
 *  - resolve vs the CPU backend's resolve: the same block, passes and the
 *    pass that fixed each row;
 *  - every generation case of the fixture (greedy and sampled, eleven or
 *    more) through the public API with device CUDA against the reference:
 *    tokens, finish, passes per block exactly, confidences within 1e-5.
 * Without a CUDA device: "SKIP: no CUDA device (...)" and exit 77.
 */
#include <math.h>
#include <stdlib.h>

#include "backend/pick.h"
#include "cpu/gdn_block.h"
#include "cpu/moe.h"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_preview.h"
#include "cuda/cuda_backend.h"
#include "cuda_test.h"
#include "golden_generate.h"

/* The fixtures' bound on logits and hidden states (SPEC 1.1: max|x - ref| <= 1e-4 max(1, max|ref|)). */
#define BOUND_LOGITS 1e-4

static fixture fx;
static test_model tm;

static tseq *cuda_seq(size_t max_rows) {
    backend_config cfg = {.max_rows = max_rows, .max_context = 512};
    tseq *s = NULL;
    clover_error err = {0};
    int rc = seq_create(&backend_cuda, tm.model, &cfg, &s, &err);
    CHECK_MSG(rc == 0, "cuda session: %s", err.message);
    return s;
}

/* cuda_moe_coreset and cuda_moe_route_allowed against cpu_moe_coreset / cpu_moe_route on seeded random
 * router logits at the 35B-A3B's shape (256 experts, k 8): kept sets equal, routed ids equal, weights within
 * 1e-6 (the softmax sum is a tree on the device); 32 rows (staged in shared memory) and 400 (not). */
static void coreset_kernel(void) {
    const size_t E = 256, k = 8, rows_of[2] = {32, 400};
    const float tops[3] = {0.5f, 0.9f, 1.0f};
    for (int ri = 0; ri < 2; ri++) {
        const size_t n = rows_of[ri];
        float *lg = malloc(n * E * sizeof(float));
        cuda_test_fill(lg, n * E, 100 + ri, 2.0f);
        for (size_t i = 0; i < E; i++) lg[3 * E + i] = lg[2 * E + i]; /* two equal rows */
        float *d_lg = cuda_test_upload(lg, n * E * sizeof(float));
        void *work = NULL, *d_allowed = NULL, *d_cnt = NULL, *d_idx = NULL, *d_w = NULL;
        char why[CUDA_WHY];
        CHECK(cuda_alloc(&work, cuda_moe_coreset_work_bytes(n, k), why) == 0);
        CHECK(cuda_alloc(&d_allowed, E, why) == 0 && cuda_alloc(&d_cnt, 4, why) == 0);
        CHECK(cuda_alloc(&d_idx, n * k * 4, why) == 0 && cuda_alloc(&d_w, n * k * 4, why) == 0);
        for (int ti = 0; ti < 3; ti++) {
            uint8_t want[256], got[256];
            double totals[256];
            int32_t order[256];
            cpu_moe_coreset(want, lg, n, E, k, tops[ti], totals, order);
            CHECK(cuda_memset(d_cnt, 0, 4, NULL, why) == 0);
            CHECK(cuda_moe_coreset(d_allowed, d_cnt, d_lg, n, E, k, tops[ti], work, NULL) == 0);
            CHECK(cuda_moe_route_allowed(d_idx, d_w, d_lg, d_allowed, n, E, k, NULL) == 0);
            uint32_t cnt = 0;
            cuda_test_download(got, d_allowed, E);
            cuda_test_download(&cnt, d_cnt, 4);
            size_t kept = 0, bad = 0;
            for (size_t e = 0; e < E; e++) kept += want[e], bad += want[e] != got[e];
            CHECK_MSG(bad == 0, "rows %zu top-p %.2f: %zu experts differ from the CPU's coreset", n, (double)tops[ti], bad);
            CHECK_EQ_INT(cnt, kept);
            int32_t *idx = malloc(n * k * 4), cidx[16];
            float *w = malloc(n * k * 4), cw[16], probs[256];
            cuda_test_download(idx, d_idx, n * k * 4);
            cuda_test_download(w, d_w, n * k * 4);
            double worst = 0;
            size_t bad_ids = 0;
            for (size_t r = 0; r < n; r++) {
                size_t m = cpu_moe_route(cidx, cw, lg + r * E, E, k, want, probs);
                for (size_t j = 0; j < m; j++) {
                    bad_ids += idx[r * k + j] != cidx[j];
                    double d = fabs((double)w[r * k + j] - (double)cw[j]);
                    if (!(d <= worst)) worst = d;
                }
                for (size_t j = m; j < k; j++) bad_ids += w[r * k + j] != 0.0f || want[idx[r * k + j]];
            }
            CHECK_MSG(bad_ids == 0 && worst <= 1e-6, "rows %zu top-p %.2f: %zu routed ids differ, weights %.3g", n,
                      (double)tops[ti], bad_ids, worst);
            printf("     coreset %3zu rows, top-p %.2f: %3zu of %zu experts kept, equal to the CPU's; routing ids equal, "
                   "weights within %.2g\n", n, (double)tops[ti], kept, E, worst);
            free(idx), free(w);
        }
        cuda_free(work), cuda_free(d_allowed), cuda_free(d_cnt), cuda_free(d_idx), cuda_free(d_w), cuda_free(d_lg);
        free(lg);
    }
}

/* cuda_moe_coreset_route (the coreset's cluster form with the routing inside it in the same launch) against the two
 * calls it replaces (cuda_moe_coreset, cuda_moe_route_allowed) and against itself switched off
 * (cuda_coreset_route_set(0)) or left without its cluster form (cuda_coreset_cluster_set(0)), bit for bit: the flags,
 * the kept count, every row's ids and weights, each form into buffers poisoned its own way (a slot one form leaves
 * unwritten differs). E 256 / 64 / 200, k 8 / 4, 1..100 rows (rounds past 32), top-p 0.5 / 0.9 / 1 / 0, the
 * routing's fast form on and off; logits random, on a 0.5 grid with -inf (ties), and with a NaN, a +inf and an
 * all -inf row. The fused launches' count must move by one a call where it is on and not at all elsewhere: the
 * comparison is of the fused kernel's outputs, not of its fallback's. */
static void coreset_route_fused(void) {
    enum { NF = 4 };
    const size_t Es[3] = {256, 64, 200}, ks[2] = {8, 4}, ns[6] = {1, 5, 32, 33, 64, 100}, nmax = 100;
    const float tops[4] = {0.5f, 0.9f, 1.0f, 0.0f};
    const char *what[NF] = {"the two calls", "switched off", "fused", "cluster form off"};
    const int small = getenv("CLOVER_TEST_SMALL") != NULL; /* under compute-sanitizer: a few cases */
    size_t cases = 0;
    cuda_preview_set_forms(1, -1); /* the current coreset kernels (CLOVER_CUDA_CORESET=0 would take neither) */
    for (int ei = 0; ei < 3; ei++)
        for (int dist = 0; dist < 3; dist++) {
            const size_t E = Es[ei];
            float *lg = malloc(nmax * E * sizeof(float));
            cuda_test_fill(lg, nmax * E, 900 + 10 * ei + dist, 2.0f);
            if (dist == 1) /* a 0.5 grid (ties inside rows and between totals), -inf logits */
                for (size_t i = 0; i < nmax * E; i++) lg[i] = i % 7 == 3 ? -INFINITY : roundf(lg[i] * 2.0f) * 0.5f;
            if (dist == 2) { /* NaN and +inf logits (a NaN coreset total, a NaN routing row), an all -inf row */
                lg[2 * E + 5] = NAN;
                lg[35 * E + E - 1] = INFINITY;
                for (size_t e = 0; e < E; e++) lg[4 * E + e] = -INFINITY;
            }
            float *d_lg = cuda_test_upload(lg, nmax * E * sizeof(float));
            void *work = NULL, *d_cnt = NULL, *d_idx = NULL, *d_w = NULL;
            uint8_t *d_al = NULL;
            char why[CUDA_WHY];
            CHECK(cuda_alloc(&work, cuda_moe_coreset_work_bytes(nmax, 8), why) == 0);
            CHECK(cuda_alloc((void **)&d_al, E, why) == 0 && cuda_alloc(&d_cnt, 4, why) == 0);
            CHECK(cuda_alloc(&d_idx, nmax * 8 * 4, why) == 0 && cuda_alloc(&d_w, nmax * 8 * 4, why) == 0);
            uint8_t *fl[NF];
            int32_t *idx[NF];
            float *w[NF];
            for (int f = 0; f < NF; f++) fl[f] = malloc(E), idx[f] = malloc(nmax * 8 * 4), w[f] = malloc(nmax * 8 * 4);
            for (int ki = 0; ki < 2; ki++)
                for (int ni = 0; ni < 6; ni++)
                    for (int ti = 0; ti < 4; ti++)
                        for (int fast = 1; fast >= 0; fast--) {
                            if (small && (ti != 1 || fast == 0 || (ni != 1 && ni != 3))) continue;
                            const size_t k = ks[ki], n = ns[ni];
                            uint32_t cnt[NF];
                            cuda_route_fast_set(fast);
                            for (int f = 0; f < NF; f++) {
                                cuda_coreset_cluster_set(f != 3);
                                cuda_coreset_route_set(f != 1);
                                CHECK(cuda_memset(d_al, 0xA0 + f, E, NULL, why) == 0 &&
                                      cuda_memset(d_cnt, 0, 4, NULL, why) == 0);
                                CHECK(cuda_memset(d_idx, 0x11 * (f + 1), n * k * 4, NULL, why) == 0 &&
                                      cuda_memset(d_w, 0x11 * (f + 1), n * k * 4, NULL, why) == 0);
                                const unsigned long long before = cuda_coreset_route_launches();
                                if (f == 0) {
                                    CHECK_MSG(cuda_moe_coreset(d_al, d_cnt, d_lg, n, E, k, tops[ti], work, NULL) == 0,
                                              "%s", cuda_preview_last_error());
                                    CHECK_MSG(cuda_moe_route_allowed(d_idx, d_w, d_lg, d_al, n, E, k, NULL) == 0,
                                              "%s", cuda_ops_last_error());
                                } else {
                                    CHECK_MSG(cuda_moe_coreset_route(d_al, d_cnt, d_idx, d_w, d_lg, n, E, k, tops[ti],
                                                                     work, NULL) == 0,
                                              "%s", cuda_preview_last_error());
                                }
                                const unsigned long long took = cuda_coreset_route_launches() - before;
                                CHECK_MSG(took == (unsigned long long)(f == 2), "E %zu k %zu n %zu: %s: %llu fused "
                                          "launches", E, k, n, what[f], took);
                                cuda_test_download(fl[f], d_al, E);
                                cuda_test_download(&cnt[f], d_cnt, 4);
                                cuda_test_download(idx[f], d_idx, n * k * 4);
                                cuda_test_download(w[f], d_w, n * k * 4);
                            }
                            for (int f = 1; f < NF; f++)
                                CHECK_MSG(memcmp(fl[0], fl[f], E) == 0 && cnt[0] == cnt[f] &&
                                              memcmp(idx[0], idx[f], n * k * 4) == 0 &&
                                              memcmp(w[0], w[f], n * k * 4) == 0,
                                          "E %zu k %zu n %zu dist %d top-p %.2f fast %d: %s: flags %s, kept %u vs %u, "
                                          "ids %s, weights %s the two calls'", E, k, n, dist, (double)tops[ti], fast,
                                          what[f], memcmp(fl[0], fl[f], E) ? "differ" : "equal", cnt[f], cnt[0],
                                          memcmp(idx[0], idx[f], n * k * 4) ? "differ" : "equal",
                                          memcmp(w[0], w[f], n * k * 4) ? "differ from" : "equal to");
                            cases++;
                        }
            cuda_route_fast_set(-1);
            cuda_coreset_cluster_set(-1);
            cuda_coreset_route_set(-1);
            for (int f = 0; f < NF; f++) free(fl[f]), free(idx[f]), free(w[f]);
            cuda_free(work), cuda_free(d_al), cuda_free(d_cnt), cuda_free(d_idx), cuda_free(d_w), cuda_free(d_lg);
            free(lg);
        }
    cuda_preview_set_forms(-1, -1);
    printf("     coreset + routing in one launch vs the two calls (and switched off, and the cluster form off): %zu "
           "cases bit for bit, the fused kernel ran in each\n", cases);
}

/* cuda_moe_coreset_route_multi (a stacked preview's coresets and routing in one launch or two) against the
 * per-sequence calls it replaces, bit for bit: seven sequences of 32, 7, 1, 70, 13, 5 and 33 rows side by side (two
 * past a 32-row round), two without a coreset (routed freely), top-p 0.9 / 0.5 / 1.0 / 0.7, two equal rows, a NaN
 * row in a sequence routed freely and a +inf logit in a coreset's; the flags of each coreset sequence, the kept count,
 * every row's ids and weights. A sequence without a coreset must leave its flags as they were. Variants: the
 * per-sequence calls with the coreset's cluster form off (the reference) and on, the stacked call with it off (the
 * one-block kernels), on with the fused tail off (two launches) and on (one launch: moe_coreset_cluster.cu's
 * k_coreset_route_multi, its launch counted), and per sequence through cuda_moe_coreset_route (fused). */
static void coreset_route_multi_case(size_t E, size_t k) {
    enum { NS = 7, NV = 6 };
    const size_t L = 3;
    const int32_t ns[NS] = {32, 7, 1, 70, 13, 5, 33}, cs[NS] = {1, 1, 0, 1, 1, 0, 1};
    const float tp[NS] = {0.9f, 0.5f, 0.9f, 1.0f, 0.9f, 0.7f, 0.9f};
    const char *what[NV] = {"", "per sequence, cluster on", "stacked, cluster off", "stacked, cluster on, two launches",
                            "stacked, fused", "per sequence, fused"};
    cuda_route_seqs m = {.n_seq = NS};
    size_t n = 0;
    for (int i = 0; i < NS; i++) {
        m.seq[i] = (cuda_route_seq){.row0 = (int32_t)n, .n = ns[i], .coreset = cs[i], .top_p = tp[i]};
        n += (size_t)ns[i];
    }
    float *lg = malloc(n * E * sizeof(float));
    cuda_test_fill(lg, n * E, 300 + E + k, 2.0f);
    for (size_t i = 0; i < E; i++) lg[41 * E + i] = lg[40 * E + i]; /* two equal rows */
    lg[(size_t)m.seq[2].row0 * E + 3] = NAN;                         /* the free sequence's one row */
    lg[((size_t)m.seq[4].row0 + 2) * E + E / 2] = INFINITY;          /* a coreset's row */
    float *d_lg = cuda_test_upload(lg, n * E * sizeof(float));
    const size_t stride = L * E, il = 1, fbytes = NS * stride;
    uint8_t *poison = malloc(fbytes);
    memset(poison, 7, fbytes);
    void *work = NULL, *d_cnt[NV], *d_idx[NV], *d_w[NV];
    uint8_t *d_fl[NV];
    char why[CUDA_WHY];
    CHECK(cuda_alloc(&work, cuda_moe_coreset_work_bytes(70, k), why) == 0);
    for (int v = 0; v < NV; v++) {
        d_fl[v] = cuda_test_upload(poison, fbytes);
        d_cnt[v] = d_idx[v] = d_w[v] = NULL;
        CHECK(cuda_alloc(&d_cnt[v], 4, why) == 0 && cuda_memset(d_cnt[v], 0, 4, NULL, why) == 0);
        CHECK(cuda_alloc(&d_idx[v], n * k * 4, why) == 0 && cuda_alloc(&d_w[v], n * k * 4, why) == 0);
        CHECK(cuda_memset(d_idx[v], 0x10 + v, n * k * 4, NULL, why) == 0 &&
              cuda_memset(d_w[v], 0x10 + v, n * k * 4, NULL, why) == 0);
    }
    cuda_preview_set_forms(1, -1); /* the current coreset kernels (CLOVER_CUDA_CORESET=0: no stacked form) */
    for (int v = 0; v < NV; v++) {
        cuda_coreset_cluster_set(v == 1 || v >= 3);
        cuda_coreset_route_set(v >= 4);
        const unsigned long long before = cuda_coreset_route_launches();
        if (v >= 2 && v <= 4) {
            const int rc = cuda_moe_coreset_route_multi(d_fl[v] + il * E, stride, d_cnt[v], d_idx[v], d_w[v], d_lg, &m,
                                                        n, E, k, NULL);
            CHECK_MSG(rc == 0, "cuda_moe_coreset_route_multi: rc %d (%s)", rc, cuda_preview_last_error());
        } else {
            for (int i = 0; i < NS; i++) { /* the per-sequence calls (backend_cuda_pass.c's loop) */
                const cuda_route_seq *q = &m.seq[i];
                int32_t *ri = (int32_t *)d_idx[v] + (size_t)q->row0 * k;
                float *wi = (float *)d_w[v] + (size_t)q->row0 * k;
                const float *li = (const float *)d_lg + (size_t)q->row0 * E;
                uint8_t *al = d_fl[v] + i * stride + il * E;
                if (q->coreset && v == 5) {
                    CHECK_MSG(cuda_moe_coreset_route(al, d_cnt[v], ri, wi, li, (size_t)q->n, E, k, q->top_p, work,
                                                     NULL) == 0,
                              "%s", cuda_preview_last_error());
                } else if (q->coreset) {
                    CHECK(cuda_moe_coreset(al, d_cnt[v], li, (size_t)q->n, E, k, q->top_p, work, NULL) == 0);
                    CHECK(cuda_moe_route_allowed(ri, wi, li, al, (size_t)q->n, E, k, NULL) == 0);
                } else {
                    CHECK(cuda_moe_route(ri, wi, li, (size_t)q->n, E, k, NULL) == 0);
                }
            }
        }
        const unsigned long long took = cuda_coreset_route_launches() - before, want = v == 4 ? 1 : v == 5 ? 5 : 0;
        CHECK_MSG(took == want, "E %zu k %zu: %s: %llu fused launches, %llu expected", E, k, v ? what[v] : "reference",
                  took, want);
    }
    cuda_preview_set_forms(-1, -1);
    cuda_coreset_cluster_set(-1);
    cuda_coreset_route_set(-1);
    uint8_t *fl[NV];
    int32_t *idx[NV];
    float *w[NV];
    uint32_t cnt[NV];
    for (int v = 0; v < NV; v++) {
        fl[v] = malloc(fbytes), idx[v] = malloc(n * k * 4), w[v] = malloc(n * k * 4);
        cuda_test_download(fl[v], d_fl[v], fbytes);
        cuda_test_download(idx[v], d_idx[v], n * k * 4);
        cuda_test_download(w[v], d_w[v], n * k * 4);
        cuda_test_download(&cnt[v], d_cnt[v], 4);
    }
    size_t kept = 0;
    for (int i = 0; i < NS; i++)
        for (size_t e = 0; e < E; e++) kept += cs[i] && fl[0][i * stride + il * E + e];
    for (int v = 1; v < NV; v++) {
        size_t untouched = 0;
        for (int i = 0; i < NS; i++)
            for (size_t e = 0; e < E; e++) untouched += !cs[i] && fl[v][i * stride + il * E + e] == 7;
        CHECK_MSG(memcmp(fl[0], fl[v], fbytes) == 0, "E %zu k %zu: %s: the flags differ from the per-sequence calls'",
                  E, k, what[v]);
        CHECK_MSG(untouched == 2 * E, "E %zu k %zu: %s: %zu of %zu flags of the sequences without a coreset kept", E, k,
                  what[v], untouched, 2 * E);
        CHECK_MSG(cnt[0] == cnt[v], "E %zu k %zu: %s: kept count %u, per sequence %u", E, k, what[v], cnt[v], cnt[0]);
        CHECK_MSG(memcmp(idx[0], idx[v], n * k * 4) == 0, "E %zu k %zu: %s: routed ids differ from the per-sequence "
                  "calls'", E, k, what[v]);
        CHECK_MSG(memcmp(w[0], w[v], n * k * 4) == 0, "E %zu k %zu: %s: routing weights differ from the per-sequence "
                  "calls' bits", E, k, what[v]);
    }
    printf("     E %3zu k %zu: coresets and routing of %d sequences (%zu rows) in one launch, two, and per sequence: "
           "%u experts kept (%zu flags set), flags, ids and weights equal to the per-sequence calls\n", E, k, NS, n,
           cnt[0], kept);
    for (int v = 0; v < NV; v++) {
        cuda_free(d_fl[v]), cuda_free(d_cnt[v]), cuda_free(d_idx[v]), cuda_free(d_w[v]);
        free(fl[v]), free(idx[v]), free(w[v]);
    }
    cuda_free(work), cuda_free(d_lg);
    free(lg), free(poison);
}

static void coreset_route_multi(void) {
    const size_t Es[3] = {256, 64, 200}, ks[2] = {8, 4};
    for (int ei = 0; ei < 3; ei++)
        for (int ki = 0; ki < 2; ki++) coreset_route_multi_case(Es[ei], ks[ki]);
}

/* cuda_gdn_block_multi (a stacked preview's GDN block operators in two launches) against cuda_gdn_block a
 * sequence, bit for bit, at the 35B-A3B's GDN shape: five sequences of 32, 13, 1, 32 and 7 rows side by side, each
 * its own ring, state and ln_ratio. */
static void gdn_block_multi(void) {
    enum { NS = 5 };
    const size_t nk = 16, nv = 32, dk = 128, dv = 128, K = 4, cd = 2 * nk * dk + nv * dv, zw = nv * dv;
    const cuda_gdn_dims d = {(int)nk, (int)nv, (int)dk, (int)dv, (int)K, 1e-6f, 1};
    const int32_t bs[NS] = {32, 13, 1, 32, 7};
    float *cw = malloc(cd * K * 4), *cr = malloc(cd * (K - 1) * 4), *vec = malloc(6 * nv * 4), *nw = malloc(dv * 4);
    cuda_test_fill(cw, cd * K, 401, 0.5f);
    cuda_test_fill(cr, cd * (K - 1), 402, 0.5f);
    cuda_test_fill(vec, 6 * nv, 403, 1.0f);
    cuda_test_fill(nw, dv, 404, 1.0f);
    for (size_t h = 0; h < nv; h++) vec[h] = -expf(vec[h]);
    float *d_cw = cuda_test_upload(cw, cd * K * 4), *d_cr = cuda_test_upload(cr, cd * (K - 1) * 4);
    float *d_vec = cuda_test_upload(vec, 6 * nv * 4), *d_nw = cuda_test_upload(nw, dv * 4);
    const cuda_gdn_block_weights dw = {d_cw, d_cr, d_vec, d_vec + nv, d_nw, d_vec + 2 * nv, d_vec + 3 * nv,
                                       d_vec + 4 * nv};
    cuda_gdn_block_seqs m = {.n_seq = NS};
    float *d_ring[NS], *d_state[NS];
    size_t n = 0;
    for (int i = 0; i < NS; i++) {
        float *ring = malloc((K - 1) * cd * 4), *state = malloc(nv * dk * dv * 4);
        cuda_test_fill(ring, (K - 1) * cd, 410 + i, 1.0f);
        cuda_test_fill(state, nv * dk * dv, 420 + i, 0.1f);
        d_ring[i] = cuda_test_upload(ring, (K - 1) * cd * 4);
        d_state[i] = cuda_test_upload(state, nv * dk * dv * 4);
        free(ring), free(state);
        m.seq[i] = (cuda_gdn_block_seq){.ring = d_ring[i], .state = d_state[i], .row0 = (int32_t)n, .b = bs[i],
                                        .ln_ratio = logf((float)bs[i] / 32.0f)};
        n += (size_t)bs[i];
    }
    float *mixed = malloc(n * cd * 4), *z = malloc(n * zw * 4), *a = malloc(n * nv * 4);
    cuda_test_fill(mixed, n * cd, 430, 1.0f);
    cuda_test_fill(z, n * zw, 431, 1.0f);
    cuda_test_fill(a, n * nv, 432, 1.0f);
    float *d_mixed = cuda_test_upload(mixed, n * cd * 4), *d_z = cuda_test_upload(z, n * zw * 4);
    float *d_a = cuda_test_upload(a, n * nv * 4);
    float *d_y[2] = {cuda_test_poisoned(n * zw), cuda_test_poisoned(n * zw)};
    float *d_work = cuda_test_poisoned(cuda_gdn_block_work_floats(&d, (int)n));
    for (int i = 0; i < NS; i++) { /* the per-sequence calls (backend_cuda_pass.c's loop) */
        const size_t r0 = (size_t)m.seq[i].row0;
        CHECK_MSG(cuda_gdn_block(d_y[0] + r0 * zw, d_mixed + r0 * cd, d_z + r0 * zw, d_a + r0 * nv, d_ring[i],
                                 d_state[i], &dw, &d, bs[i], m.seq[i].ln_ratio, d_work, NULL) == 0,
                  "%s", cuda_preview_last_error());
    }
    const int rc = cuda_gdn_block_multi(d_y[1], d_mixed, d_z, d_a, &dw, &d, &m, d_work, NULL);
    CHECK_MSG(rc == 0, "cuda_gdn_block_multi: rc %d (%s)", rc, cuda_preview_last_error());
    float *y[2] = {malloc(n * zw * 4), malloc(n * zw * 4)};
    cuda_test_download(y[0], d_y[0], n * zw * 4);
    cuda_test_download(y[1], d_y[1], n * zw * 4);
    size_t bad = 0, diff = 0;
    for (size_t i = 0; i < n * zw; i++) bad += !isfinite(y[1][i]), diff += memcmp(&y[0][i], &y[1][i], 4) != 0;
    CHECK_MSG(bad == 0 && diff == 0, "%zu rows: %zu outputs not finite, %zu differ from the per-sequence calls' bits",
              n, bad, diff);
    printf("     gdn block operators of %d sequences (%zu rows) in two launches: equal to the per-sequence calls\n",
           NS, n);
    for (int i = 0; i < NS; i++) cuda_free(d_ring[i]), cuda_free(d_state[i]);
    cuda_free(d_cw), cuda_free(d_cr), cuda_free(d_vec), cuda_free(d_nw), cuda_free(d_mixed), cuda_free(d_z);
    cuda_free(d_a), cuda_free(d_y[0]), cuda_free(d_y[1]), cuda_free(d_work);
    free(cw), free(cr), free(vec), free(nw), free(mixed), free(z), free(a), free(y[0]), free(y[1]);
}

static void golden_previews(void) {
    const model_hparams *hp = &tm.model->hp;
    const size_t V = hp->n_vocab, H = hp->n_embd, L = hp->n_layer, E = hp->n_expert;
    const float top_p = tm.model->record.coreset_top_p;
    json_t *cases = json_object_get(fx.manifest, "preview"), *c;
    size_t ci;
    CHECK(json_array_size(cases) == 3);
    setenv("CLOVER_CUDA_PREVIEW_HIDDEN", "1", 1);
    json_array_foreach(cases, ci, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        size_t np, b;
        int32_t *prefix = fixture_ids(json_object_get(c, "prefix_ids"), &np);
        int32_t *block = fixture_ids(json_object_get(c, "block_ids"), &b);
        float *ref_logits = fixture_f32(&fx, json_object_get(c, "logits"), NULL);
        float *ref_hidden = fixture_f32(&fx, json_object_get(c, "hidden_states"), NULL);
        float *logits = malloc(b * V * sizeof(float)), *cpu_logits = malloc(b * V * sizeof(float));
        float *hidden = malloc((L + 1) * b * H * sizeof(float));
        uint8_t *kept = malloc(L * E);
        tseq *s = cuda_seq(8), *fresh = cuda_seq(8), *cs = test_session(tm.model, 8, 0);
        clover_error err = {0};
        if (!s || !fresh || !cs || !ref_logits || !ref_hidden) goto next;
        CHECK(seq_commit(s, prefix, np, NULL, NULL, &err) == 0);
        CHECK(seq_commit(fresh, prefix, np, NULL, NULL, &err) == 0);
        CHECK(seq_commit(cs, prefix, np, NULL, NULL, &err) == 0);
        size_t bytes = seq_state_bytes(s);
        unsigned char *before = malloc(bytes), *after = malloc(bytes);
        CHECK(seq_state_export(s, before, bytes, &err) == 0);
        backend_preview_opts opts = {
            .record_block_size = (uint32_t)json_integer_value(json_object_get(c, "record_block_size")),
            .coreset = json_is_true(json_object_get(c, "coreset")),
            .coreset_top_p = top_p};
        backend_pass_stats st = {0}, cst = {0};
        for (size_t i = 0; i < b * V; i++) logits[i] = NAN;
        int rc = seq_preview(s, block, b, &opts, logits, &st, &err);
        CHECK_MSG(rc == 0, "%s: preview: %s", name, err.message);
        rc = seq_preview_debug(s, hidden, kept, &err);
        CHECK_MSG(rc == 0, "%s: preview_debug: %s", name, err.message);
        CHECK(seq_preview(cs, block, b, &opts, cpu_logits, &cst, &err) == 0);
        CHECK_EQ_INT(seq_length(s), np);
        CHECK(seq_state_export(s, after, bytes, &err) == 0);
        CHECK_MSG(test_hash(after, bytes) == test_hash(before, bytes) && !memcmp(before, after, bytes),
                  "%s: the preview changed the committed state", name);
        free(before), free(after);

        double el = rel_err(logits, ref_logits, b * V), ec = rel_err(logits, cpu_logits, b * V), worst = 0;
        size_t worst_l = 0;
        for (size_t l = 0; l <= L; l++) {
            double e = rel_err(hidden + l * b * H, ref_hidden + l * b * H, b * H);
            if (!(e <= worst)) worst = e, worst_l = l;
        }
        printf("     %s (b %zu, B %u, coreset %d): logits vs reference %.3g, vs CPU %.3g, hidden worst %.3g (slot %zu)\n",
               name, b, opts.record_block_size, opts.coreset, el, ec, worst, worst_l);
        CHECK_MSG(el <= BOUND_LOGITS, "%s: logits rel err %.3g vs the reference", name, el);
        CHECK_MSG(ec <= BOUND_LOGITS, "%s: logits rel err %.3g vs the CPU backend", name, ec);
        CHECK_MSG(worst <= BOUND_LOGITS, "%s: hidden rel err %.3g at slot %zu", name, worst, worst_l);
        if (opts.coreset) {
            json_t *cl = json_object_get(c, "coreset_layers");
            uint64_t want_kept = 0;
            for (size_t l = 0; l < L; l++) {
                json_t *jk = json_object_get(json_array_get(cl, l), "kept"), *e;
                uint8_t want[1024] = {0};
                size_t i;
                json_array_foreach(jk, i, e) want[json_integer_value(e)] = 1;
                want_kept += json_array_size(jk);
                for (size_t x = 0; x < E; x++)
                    CHECK_MSG(kept[l * E + x] == want[x], "%s: layer %zu expert %zu kept %d, reference %d", name, l, x,
                              kept[l * E + x], want[x]);
            }
            CHECK_EQ_INT(st.coreset_layers, L);
            CHECK_EQ_INT(st.coreset_kept, want_kept);
            CHECK_EQ_INT(cst.coreset_kept, want_kept);
        } else {
            for (size_t x = 0; x < L * E; x++) CHECK(kept[x] == 1);
        }
        /* the commit after the preview is the commit without it, bit for bit */
        float *l1 = malloc(b * V * sizeof(float)), *l2 = malloc(b * V * sizeof(float));
        backend_commit_seq o1 = {.all_logits = l1}, o2 = {.all_logits = l2};
        CHECK(seq_commit(s, block, b, &o1, NULL, &err) == 0);
        CHECK(seq_commit(fresh, block, b, &o2, NULL, &err) == 0);
        CHECK_MSG(!memcmp(l1, l2, b * V * sizeof(float)), "%s: the commit after a preview differs", name);
        free(l1), free(l2);
    next:
        if (s) seq_free(s);
        if (fresh) seq_free(fresh);
        if (cs) seq_free(cs);
        free(prefix), free(block), free(ref_logits), free(ref_hidden), free(logits), free(cpu_logits), free(hidden);
        free(kept);
    }
    unsetenv("CLOVER_CUDA_PREVIEW_HIDDEN");
}

/* The v2 table on one backend, with the host pick context the oracle needs. */
typedef struct v2 {
    backend *be;
    backend_session *s[2];
} v2;

static int v2_open(v2 *t, size_t max_rows) {
    memset(t, 0, sizeof *t);
    backend_config cfg = {.max_rows = max_rows, .max_context = 512};
    clover_error err = {0};
    int rc = backend_cuda.create(tm.model, &cfg, &t->be, &err);
    CHECK_MSG(rc == 0, "create: %s", err.message);
    for (int i = 0; i < 2 && !rc; i++) rc = backend_cuda.session_create(t->be, &t->s[i], &err);
    CHECK_MSG(rc == 0, "session: %s", err.message);
    return rc;
}

static void v2_close(v2 *t) {
    for (int i = 0; i < 2; i++)
        if (t->s[i]) backend_cuda.session_free(t->s[i]);
    if (t->be) backend_cuda.destroy(t->be);
}

static void device_pick_vs_oracle(void) {
    const size_t V = tm.model->hp.n_vocab, b = 8;
    v2 t;
    if (v2_open(&t, b)) goto out;
    const int32_t prompt[6] = {3, 17, 29, 4, 11, 23};
    clover_error err = {0};
    backend_commit_seq cq = {.s = t.s[0], .ids = prompt, .n = 6};
    CHECK(backend_commit1(&backend_cuda, t.be, &cq, NULL, &err) == 0);
    const int32_t mask = tm.model->record.mask_token_id;
    int32_t block[8] = {mask, 40, mask, mask, 7, mask, mask, mask};
    uint8_t pending[8] = {1, 0, 1, 1, 0, 1, 1, 1};
    float *raw = malloc(b * V * sizeof(float)), *raw2 = malloc(b * V * sizeof(float)), *work = malloc(b * V * 4);
    backend_preview_opts opts = {.record_block_size = tm.model->record.block_size, .coreset = true,
                                 .coreset_top_p = tm.model->record.coreset_top_p};
    backend_preview_seq pq = {.s = t.s[0], .block = block, .b = b, .opts = opts, .logits = raw};
    CHECK(backend_preview1(&backend_cuda, t.be, &pq, NULL, &err) == 0);
    pq.logits = raw2;
    CHECK(backend_preview1(&backend_cuda, t.be, &pq, NULL, &err) == 0);
    CHECK_MSG(!memcmp(raw, raw2, b * V * sizeof(float)), "two previews of the same block differ");

    const int32_t forbid[3] = {mask, 5, 9}, cids[4] = {12, 40, 7, 3}, stops[2] = {400, 402};
    const uint32_t counts[4] = {2, 1, 3, 1};
    backend_penalties pen = {.p = {.presence_penalty = 0.3f, .frequency_penalty = 0.25f, .repetition_penalty = 1.2f,
                                   .length_penalty = 1.5f, .length_penalty_start = 2, .length_penalty_window = 4,
                                   .think_end_bias = 2.0f, .think_end_start = 0, .think_end_window = 3},
                             .think_end_id = 33, .count_ids = cids, .counts = counts, .n_counts = 4,
                             .response_len = 1, .stop_ids = stops, .n_stop_ids = 2};
    if ((size_t)stops[1] >= V) pen.n_stop_ids = 0;
    struct { float t; int32_t k; float p; bool pen; } modes[] = {
        {0.0f, 0, 1.0f, false}, {0.0f, 0, 1.0f, true}, {0.8f, 0, 1.0f, true}, {1.3f, 20, 0.9f, true}, {0.7f, 3, 0.5f, false}};
    uint32_t seed = 7;
    for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
        backend_pick pk = {.temperature = modes[mi].t, .top_k = modes[mi].k, .top_p = modes[mi].p, .forbid = forbid,
                           .n_forbid = 3, .pen = modes[mi].pen ? &pen : NULL};
        float u[8];
        rng_state r;
        rng_seed(&r, seed++);
        for (size_t i = 0; i < b; i++) u[i] = rng_uniform(&r);
        const bool greedy = modes[mi].t < 1e-6f;
        int32_t id[8], hid[8];
        float cf[8], hcf[8];
        for (size_t i = 0; i < b; i++) id[i] = hid[i] = -7, cf[i] = hcf[i] = NAN;
        backend_preview_seq q = {.s = t.s[0], .block = block, .b = b, .opts = opts, .pending = pending, .pick = &pk,
                                 .u = greedy ? NULL : u, .pick_out = {.id = id, .conf = cf}};
        int rc = backend_preview1(&backend_cuda, t.be, &q, NULL, &err);
        CHECK_MSG(rc == 0, "mode %zu: preview: %s", mi, err.message);
        /* the oracle over the same raw logits */
        memcpy(work, raw, b * V * sizeof(float));
        uint32_t *cnt = calloc(V, sizeof *cnt);
        host_pick_ctx pc = {.n_vocab = V, .counts = cnt, .n_samp = 1};
        size_t idx[8], n = 0;
        float uu[8];
        for (size_t i = 0; i < b; i++)
            if (pending[i]) idx[n] = i, uu[n++] = u[i];
        backend_pick_out ho = {.id = hid, .conf = hcf};
        CHECK(host_pick_check(&pc, &pk, &err) == 0);
        CHECK(host_pick_rows(&pc, &pk, work, idx, n, greedy ? NULL : uu, block, b, &ho, NULL, &err) == 0);
        host_pick_ctx_free(&pc);
        free(cnt);
        double worst = 0;
        for (size_t i = 0; i < b; i++) {
            if (!pending[i]) {
                CHECK_MSG(id[i] == -7, "mode %zu row %zu: a fixed row was picked", mi, i);
                continue;
            }
            CHECK_MSG(id[i] == hid[i], "mode %zu row %zu: device id %d, oracle %d", mi, i, id[i], hid[i]);
            double d = fabs((double)cf[i] - (double)hcf[i]);
            if (!(d <= worst)) worst = d;
        }
        CHECK_MSG(worst <= 2e-6, "mode %zu: confidence off by %.3g", mi, worst);
        printf("     device pick mode %zu (T %.1f, top-k %d, top-p %.2f, penalties %d): ids equal, conf diff %.2g\n", mi,
               (double)modes[mi].t, modes[mi].k, (double)modes[mi].p, modes[mi].pen, worst);
    }
    free(raw), free(raw2), free(work);
out:
    v2_close(&t);
}

static void batched_equals_alone(void) {
    const size_t V = tm.model->hp.n_vocab, b = 4;
    v2 t;
    if (v2_open(&t, 8)) goto out;
    v2 u;
    if (v2_open(&u, 8)) {
        v2_close(&u);
        goto out;
    }
    const int32_t pa[5] = {1, 2, 3, 4, 5}, pb[3] = {9, 8, 7}, mask = tm.model->record.mask_token_id;
    int32_t ba[4] = {mask, mask, 6, mask}, bb[4] = {mask, 2, mask, mask};
    clover_error err = {0};
    backend_commit_seq c[2] = {{.s = t.s[0], .ids = pa, .n = 5}, {.s = t.s[1], .ids = pb, .n = 3}};
    CHECK(backend_cuda.commit(t.be, c, 2, NULL) == 0);
    backend_commit_seq c1 = {.s = u.s[0], .ids = pa, .n = 5}, c2 = {.s = u.s[1], .ids = pb, .n = 3};
    CHECK(backend_commit1(&backend_cuda, u.be, &c1, NULL, &err) == 0);
    CHECK(backend_commit1(&backend_cuda, u.be, &c2, NULL, &err) == 0);
    float *la = malloc(b * V * 4), *lb = malloc(b * V * 4), *ra = malloc(b * V * 4), *rb = malloc(b * V * 4);
    backend_preview_opts opts = {.record_block_size = tm.model->record.block_size, .coreset = true,
                                 .coreset_top_p = tm.model->record.coreset_top_p};
    backend_preview_seq q[2] = {{.s = t.s[0], .block = ba, .b = b, .opts = opts, .logits = la},
                                {.s = t.s[1], .block = bb, .b = b, .opts = opts, .logits = lb}};
    CHECK(backend_cuda.preview(t.be, q, 2, NULL) == 0);
    backend_preview_seq qa = {.s = u.s[0], .block = ba, .b = b, .opts = opts, .logits = ra};
    backend_preview_seq qb = {.s = u.s[1], .block = bb, .b = b, .opts = opts, .logits = rb};
    CHECK(backend_preview1(&backend_cuda, u.be, &qa, NULL, &err) == 0);
    CHECK(backend_preview1(&backend_cuda, u.be, &qb, NULL, &err) == 0);
    CHECK(!memcmp(la, ra, b * V * 4) && !memcmp(lb, rb, b * V * 4));
    /* a bad sequence fails alone */
    int32_t bad[4] = {mask, (int32_t)V, mask, mask};
    q[1].block = bad;
    CHECK_EQ_INT(backend_cuda.preview(t.be, q, 2, NULL), CLOVER_E_INVALID);
    CHECK_EQ_INT(q[0].rc, 0);
    CHECK_EQ_INT(q[1].rc, CLOVER_E_INVALID);
    CHECK(!memcmp(la, ra, b * V * 4));
    free(la), free(lb), free(ra), free(rb);
    v2_close(&u);
out:
    v2_close(&t);
}

/* The preview trunk replayed as a graph (a block shape's first pass captures it) equals the eager pass
 * (CLOVER_CUDA_NO_GRAPH), bit for bit, across positions, block sizes and pending sets. */
static void graph_equals_eager(void) {
    const size_t V = tm.model->hp.n_vocab;
    v2 t;
    if (v2_open(&t, 8)) goto out;
    backend_session *eager = NULL;
    clover_error err = {0};
    setenv("CLOVER_CUDA_NO_GRAPH", "1", 1);
    CHECK(backend_cuda.session_create(t.be, &eager, &err) == 0);
    unsetenv("CLOVER_CUDA_NO_GRAPH");
    if (!eager) goto out;
    const int32_t mask = tm.model->record.mask_token_id, more[2] = {13, 14};
    const int32_t prompt[4] = {21, 22, 23, 24};
    backend_commit_seq c[2] = {{.s = t.s[0], .ids = prompt, .n = 4}, {.s = eager, .ids = prompt, .n = 4}};
    CHECK(backend_cuda.commit(t.be, c, 2, NULL) == 0);
    float *lg = malloc(8 * V * 4), *le = malloc(8 * V * 4);
    const int32_t fb[1] = {mask};
    backend_pick pk = {.temperature = 0.0f, .forbid = fb, .n_forbid = 1};
    size_t same = 0, runs = 0;
    for (int round = 0; round < 3; round++) {
        for (size_t b = 4; b <= 8; b += 4)
            for (int coreset = 0; coreset < 2; coreset++) {
                int32_t block[8];
                uint8_t pending[8];
                for (size_t i = 0; i < b; i++) block[i] = i % 3 ? mask : (int32_t)(30 + i), pending[i] = i % 3 != 0;
                backend_preview_opts o = {.record_block_size = tm.model->record.block_size, .coreset = coreset != 0,
                                          .coreset_top_p = tm.model->record.coreset_top_p};
                int32_t ig[8], ie[8];
                float cg[8], ce[8];
                backend_preview_seq q[2] = {
                    {.s = t.s[0], .block = block, .b = b, .opts = o, .logits = lg},
                    {.s = eager, .block = block, .b = b, .opts = o, .logits = le}};
                CHECK(backend_cuda.preview(t.be, q, 2, NULL) == 0);
                same += !memcmp(lg, le, b * V * 4);
                backend_preview_seq p2[2] = {
                    {.s = t.s[0], .block = block, .b = b, .opts = o, .pending = pending, .pick = &pk,
                     .pick_out = {.id = ig, .conf = cg}},
                    {.s = eager, .block = block, .b = b, .opts = o, .pending = pending, .pick = &pk,
                     .pick_out = {.id = ie, .conf = ce}}};
                CHECK(backend_cuda.preview(t.be, p2, 2, NULL) == 0);
                for (size_t i = 0; i < b; i++)
                    if (pending[i]) CHECK(ig[i] == ie[i] && cg[i] == ce[i]);
                runs++;
            }
        backend_commit_seq m[2] = {{.s = t.s[0], .ids = more, .n = 2}, {.s = eager, .ids = more, .n = 2}};
        CHECK(backend_cuda.commit(t.be, m, 2, NULL) == 0); /* a new position for the graphs' replays */
    }
    CHECK_EQ_INT(same, runs);
    printf("     %zu previews replayed from graphs equal the eager ones bit for bit\n", runs);
    free(lg), free(le);
    backend_cuda.session_free(eager);
out:
    v2_close(&t);
}

static void resolve_vs_cpu(void) {
    const size_t b = 8;
    v2 t;
    backend *cb = NULL;
    backend_session *cs = NULL;
    if (v2_open(&t, b)) goto out;
    backend_config cfg = {.n_threads = 1, .max_rows = b, .max_context = 512};
    clover_error err = {0};
    CHECK(backend_cpu.create(tm.model, &cfg, &cb, &err) == 0);
    CHECK(backend_cpu.session_create(cb, &cs, &err) == 0);
    const int32_t prompt[7] = {5, 6, 7, 8, 9, 10, 11}, mask = tm.model->record.mask_token_id;
    backend_commit_seq c = {.s = t.s[0], .ids = prompt, .n = 7}, cc = {.s = cs, .ids = prompt, .n = 7};
    CHECK(backend_commit1(&backend_cuda, t.be, &c, NULL, &err) == 0);
    CHECK(backend_commit1(&backend_cpu, cb, &cc, NULL, &err) == 0);
    const int32_t forbid[1] = {mask};
    for (int sampled = 0; sampled < 2; sampled++) {
        backend_pick pk = {.temperature = sampled ? 0.9f : 0.0f, .top_k = sampled ? 40 : 0, .top_p = 1.0f,
                           .forbid = forbid, .n_forbid = 1};
        int32_t gb[8], cbk[8];
        float gc[8], ccf[8];
        uint8_t gf[8], cf[8];
        uint64_t grng = 42, crng = 42;
        for (size_t i = 0; i < b; i++) gb[i] = cbk[i] = mask;
        backend_resolve_seq g = {.s = t.s[0], .block = gb, .conf = gc, .b = b,
                                 .opts = {.record_block_size = tm.model->record.block_size, .coreset = true,
                                          .coreset_top_p = tm.model->record.coreset_top_p},
                                 .pick = &pk, .threshold = sampled ? 0.6f : 1.0f, .rng = &grng, .fixed_at = gf};
        backend_resolve_seq r = g;
        r.s = cs, r.block = cbk, r.conf = ccf, r.rng = &crng, r.fixed_at = cf;
        CHECK(backend_cuda.resolve(t.be, &g, 1, NULL, NULL) == 0);
        CHECK(backend_cpu.resolve(cb, &r, 1, NULL, NULL) == 0);
        CHECK_MSG(g.rc == 0 && r.rc == 0, "resolve: %s / %s", g.err.message, r.err.message);
        CHECK_EQ_INT(g.passes, r.passes);
        if (!sampled) CHECK_EQ_INT(g.passes, b); /* threshold 1: one row a pass */
        CHECK(grng == crng);
        for (size_t i = 0; i < b; i++) {
            CHECK_MSG(gb[i] == cbk[i] && gf[i] == cf[i], "sampled %d row %zu: cuda %d (pass %d), cpu %d (pass %d)",
                      sampled, i, gb[i], gf[i], cbk[i], cf[i]);
            CHECK(fabsf(gc[i] - ccf[i]) <= 1e-5f);
        }
        printf("     resolve (%s): %zu passes, block equal to the CPU's\n", sampled ? "sampled" : "greedy", g.passes);
        volatile int cancel = 1;
        CHECK(backend_cuda.resolve(t.be, &g, 1, &cancel, NULL) == 0);
        CHECK(g.cancelled && g.passes == 0);
    }
out:
    if (cs) backend_cpu.session_free(cs);
    if (cb) backend_cpu.destroy(cb);
    v2_close(&t);
}

static void generate_cases(void) {
    json_t *cases = json_object_get(fx.manifest, "generate"), *c;
    size_t i;
    CHECK(json_array_size(cases) >= 11);
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.device = CLOVER_DEVICE_CUDA;
    sp.max_context = 1024;
    clover_session *s = NULL;
    clover_error err = {0};
    int rc = clover_session_create(&s, tm.model, &sp, &err);
    CHECK_MSG(rc == 0, "cuda session: %s", err.message);
    if (rc) return;
    CHECK(!strcmp(clover_session_backend(s), "cuda"));
    size_t n = 0;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        golden_request g;
        golden_request_init(&g, tm.model, json_object_get(c, "prompt_ids"), json_object_get(c, "options"),
                            json_object_get(c, "record_overrides"));
        clover_session_reset(s);
        clover_generate_result r;
        rc = clover_generate(s, g.prompt, g.n_prompt, &g.p, &r, &err);
        CHECK_MSG(rc == 0, "%s: %s", name, err.message);
        if (!rc) {
            CHECK_EQ_INT(r.mode, CLOVER_MODE_DIFFUSION);
            golden_compare(name, &r, json_object_get(c, "expected"));
            clover_generate_result_free(&r);
            n++;
        }
        golden_request_free(&g);
    }
    printf("     %zu generation cases through --device cuda\n", n);
    clover_session_free(s);
}

/* cuda_gdn_block against gdn_block_scalar at the 35B-A3B's GDN shape (the fixtures' heads are 16 wide; this
 * is the shape the preview runs, 2 row groups a thread in the read-out), seeded random inputs, 32 rows and
 * 13 (a partial row tile): max |gpu - cpu| <= 1e-4 max(1, max |cpu|), the fixtures' bound (the device
 * differs by expf and contraction only), every output written. */
static void gdn_block_35b(void) {
    const size_t nk = 16, nv = 32, dk = 128, dv = 128, K = 4, cd = 2 * nk * dk + nv * dv, rows_of[2] = {32, 13};
    const cpu_gdn_dims cd_cpu = {nk, nv, dk, dv, K, 1e-6f, CPU_GDN_TILED};
    const cuda_gdn_dims cd_gpu = {(int)nk, (int)nv, (int)dk, (int)dv, (int)K, 1e-6f, 1};
    float *cw = malloc(cd * K * sizeof(float)), *cr = malloc(cd * (K - 1) * sizeof(float)), *vec = malloc(6 * nv * sizeof(float));
    float *nw = malloc(dv * sizeof(float)), *ring = malloc((K - 1) * cd * sizeof(float));
    float *state = malloc(nv * dk * dv * sizeof(float));
    cuda_test_fill(cw, cd * K, 301, 0.5f);
    cuda_test_fill(cr, cd * (K - 1), 302, 0.5f);
    cuda_test_fill(vec, 6 * nv, 303, 1.0f);
    cuda_test_fill(nw, dv, 304, 1.0f);
    cuda_test_fill(ring, (K - 1) * cd, 305, 1.0f);
    cuda_test_fill(state, nv * dk * dv, 306, 0.1f);
    for (size_t h = 0; h < nv; h++) vec[h] = -expf(vec[h]); /* ssm_a = -exp(A_log) */
    const gdn_block_weights w = {cw, cr, vec, vec + nv, nw, vec + 2 * nv, vec + 3 * nv, vec + 4 * nv};
    float *d_cw = cuda_test_upload(cw, cd * K * sizeof(float)), *d_cr = cuda_test_upload(cr, cd * (K - 1) * sizeof(float));
    float *d_vec = cuda_test_upload(vec, 6 * nv * sizeof(float)), *d_nw = cuda_test_upload(nw, dv * sizeof(float));
    float *d_ring = cuda_test_upload(ring, (K - 1) * cd * sizeof(float));
    float *d_state = cuda_test_upload(state, nv * dk * dv * sizeof(float));
    const cuda_gdn_block_weights dw = {d_cw, d_cr, d_vec, d_vec + nv, d_nw, d_vec + 2 * nv, d_vec + 3 * nv, d_vec + 4 * nv};
    for (int ri = 0; ri < 2; ri++) {
        const size_t b = rows_of[ri];
        float *mixed = malloc(b * cd * sizeof(float)), *z = malloc(b * nv * dv * sizeof(float)), *a = malloc(b * nv * sizeof(float));
        cuda_test_fill(mixed, b * cd, 310 + ri, 1.0f);
        cuda_test_fill(z, b * nv * dv, 320 + ri, 1.0f);
        cuda_test_fill(a, b * nv, 330 + ri, 1.0f);
        const float ln_ratio = logf((float)b / 32.0f);
        float *ref = malloc(b * nv * dv * sizeof(float)), *got = malloc(b * nv * dv * sizeof(float));
        float *scratch = malloc(gdn_block_scratch_floats(&cd_cpu, b, 1) * sizeof(float));
        gdn_block_scalar(ref, mixed, z, a, ring, state, &w, &cd_cpu, b, ln_ratio, scratch);
        float *d_mixed = cuda_test_upload(mixed, b * cd * sizeof(float)), *d_z = cuda_test_upload(z, b * nv * dv * sizeof(float));
        float *d_a = cuda_test_upload(a, b * nv * sizeof(float)), *d_y = cuda_test_poisoned(b * nv * dv);
        float *d_work = cuda_test_poisoned(cuda_gdn_block_work_floats(&cd_gpu, (int)b));
        CHECK_MSG(cuda_gdn_block(d_y, d_mixed, d_z, d_a, d_ring, d_state, &dw, &cd_gpu, (int)b, ln_ratio, d_work, NULL) == 0,
                  "%s", cuda_preview_last_error());
        cuda_test_download(got, d_y, b * nv * dv * sizeof(float));
        double worst = 0, mx = 1;
        size_t bad = 0;
        for (size_t i = 0; i < b * nv * dv; i++) {
            if (!isfinite(got[i])) bad++;
            const double d = fabs((double)got[i] - (double)ref[i]);
            if (!(d <= worst)) worst = d;
            if (fabs((double)ref[i]) > mx) mx = fabs((double)ref[i]);
        }
        CHECK_MSG(bad == 0, "gdn block %zu rows: %zu outputs not finite", b, bad);
        CHECK_MSG(worst <= BOUND_LOGITS * mx, "gdn block %zu rows: max error %.3g > %.3g", b, worst, BOUND_LOGITS * mx);
        printf("     gdn block operator, 35B-A3B heads, %zu rows: max error %.3g (bound %.3g)\n", b, worst, BOUND_LOGITS * mx);
        cuda_free(d_mixed), cuda_free(d_z), cuda_free(d_a), cuda_free(d_y), cuda_free(d_work);
        free(mixed), free(z), free(a), free(ref), free(got), free(scratch);
    }
    cuda_free(d_cw), cuda_free(d_cr), cuda_free(d_vec), cuda_free(d_nw), cuda_free(d_ring), cuda_free(d_state);
    free(cw), free(cr), free(vec), free(nw), free(ring), free(state);
}

/* The coreset kernel of moe_coreset_warp.cu against the previous one (cuda_preview_set_forms 1 vs 0) and the
 * CPU's: kept flags and counts bit for bit equal to the previous kernel's over rows 0..64 (one and several
 * rounds of the 32 row warps), odd expert counts (37, 100) up to 1024, k 1..16, top-p 0 / 0.5 / 0.9 / 1, and
 * logits with ties (values on a 0.5 grid: equal logits in a row, equal totals across experts), -inf, +-0 and
 * equal rows, read at an odd row offset; and, for the plain random logits at top-p < 1, equal to cpu_moe_coreset's set.
 * Its cluster form (cuda_coreset_cluster_set: 8 blocks, the rows over 8 SMs, the totals through distributed shared
 * memory) against its one-block form on the same calls, bit for bit. */
static void coreset_forms(void) {
    const size_t Es[4] = {256, 37, 100, 1024}, ks[4] = {8, 1, 3, 16}, ns[9] = {0, 1, 2, 7, 31, 32, 33, 50, 64};
    const float tops[4] = {0.5f, 0.9f, 1.0f, 0.0f};
    const int small = getenv("CLOVER_TEST_SMALL") != NULL; /* under compute-sanitizer: a few cases */
    size_t cases = 0, vs_cpu = 0;
    for (int ei = 0; ei < (small ? 2 : 4); ei++)
        for (int dist = 0; dist < 3; dist++) {
            const size_t E = Es[ei], k = ks[(ei + dist) % 4] > E ? E : ks[(ei + dist) % 4], nmax = 64, off = 3;
            float *lg = malloc((nmax + off) * E * sizeof(float));
            cuda_test_fill(lg, (nmax + off) * E, 700 + 10 * ei + dist, 2.0f);
            if (dist >= 1) /* a 0.5 grid: ties inside rows and between experts' totals */
                for (size_t i = 0; i < (nmax + off) * E; i++) lg[i] = roundf(lg[i] * 2.0f) * 0.5f;
            if (dist == 2) { /* -inf, -0 and +0 logits, equal rows */
                for (size_t i = 0; i < (nmax + off) * E; i += 7) lg[i] = -INFINITY;
                for (size_t i = 3; i < (nmax + off) * E; i += 11) lg[i] = (i & 1) ? -0.0f : 0.0f;
                for (size_t r = off + 4; r < nmax + off; r += 5) memcpy(lg + r * E, lg + (off + 1) * E, E * sizeof(float));
            }
            float *d_all = cuda_test_upload(lg, (nmax + off) * E * sizeof(float));
            const float *d_lg = d_all + off * E;
            void *work = NULL, *d_allowed = NULL, *d_cnt = NULL;
            char why[CUDA_WHY];
            CHECK(cuda_alloc(&work, cuda_moe_coreset_work_bytes(nmax, k), why) == 0);
            CHECK(cuda_alloc(&d_allowed, E, why) == 0 && cuda_alloc(&d_cnt, 4, why) == 0);
            uint8_t *got[3] = {malloc(E), malloc(E), malloc(E)}, *want = malloc(E);
            double *totals = malloc(E * sizeof(double));
            int32_t *order = malloc(E * sizeof(int32_t));
            for (int ni = 0; ni < 9; ni++)
                for (int ti = 0; ti < 4; ti++) {
                    if (small && (ti != 1 || (ni != 1 && ni != 6))) continue;
                    const size_t n = ns[ni];
                    uint32_t cnt[3] = {0, 0, 0};
                    for (int form = 0; form < 3; form++) { /* the old kernel, the one-block warp form, the cluster */
                        cuda_preview_set_forms(form > 0, -1);
                        cuda_coreset_cluster_set(form == 2);
                        CHECK(cuda_memset(d_allowed, 0xAB, E, NULL, why) == 0 && cuda_memset(d_cnt, 0, 4, NULL, why) == 0);
                        CHECK_MSG(cuda_moe_coreset(d_allowed, d_cnt, d_lg, n, E, k, tops[ti], work, NULL) == 0, "%s",
                                  cuda_preview_last_error());
                        cuda_test_download(got[form], d_allowed, E);
                        cuda_test_download(&cnt[form], d_cnt, 4);
                    }
                    size_t diff = 0, kept = 0, dcl = 0;
                    for (size_t e = 0; e < E; e++)
                        diff += got[0][e] != got[1][e], kept += got[1][e] == 1, dcl += got[2][e] != got[1][e];
                    CHECK_MSG(dcl == 0 && cnt[2] == cnt[1], "E %zu k %zu n %zu dist %d top-p %.2f: the cluster form: "
                              "%zu flags differ from the one-block form's, kept %u vs %u", E, k, n, dist,
                              (double)tops[ti], dcl, cnt[2], cnt[1]);
                    CHECK_MSG(diff == 0 && cnt[0] == cnt[1] && kept == cnt[1],
                              "E %zu k %zu n %zu dist %d top-p %.2f: %zu flags differ from the previous kernel's, "
                              "kept %u vs %u (%zu set)", E, k, n, dist, (double)tops[ti], diff, cnt[1], cnt[0], kept);
                    /* (at top-p 1 the walk ends where the mass meets 1 within an ulp: the device exp's last bit can
                     * move it; no rows: nothing for the CPU's set to be compared on) */
                    if (dist == 0 && tops[ti] < 1.0f && n > 0) {
                        cpu_moe_coreset(want, lg + off * E, n, E, k, tops[ti], totals, order);
                        size_t bad = 0;
                        for (size_t e = 0; e < E; e++) bad += want[e] != got[1][e];
                        CHECK_MSG(bad == 0, "E %zu k %zu n %zu top-p %.2f: %zu flags differ from the CPU's", E, k, n,
                                  (double)tops[ti], bad);
                        vs_cpu++;
                    }
                    cases++;
                }
            cuda_preview_set_forms(-1, -1);
            cuda_coreset_cluster_set(-1);
            cuda_free(work), cuda_free(d_allowed), cuda_free(d_cnt), cuda_free(d_all);
            free(got[0]), free(got[1]), free(got[2]), free(want), free(totals), free(order), free(lg);
        }
    printf("     coreset kernel vs the previous one, its cluster form vs its one-block form: %zu cases bit for bit "
           "(%zu also equal to the CPU's set)\n", cases, vs_cpu);
}

/* One cuda_gdn_block call on host data, in the form asked (1 the two-launch form, 0 the previous four), the
 * outputs of rows [0, b) downloaded into y (NaN-poisoned device buffers: every output must be written). */
typedef struct gdn_case {
    cuda_gdn_dims d;
    const float *d_cw, *d_cr, *d_vec, *d_nw, *d_ring, *d_state;
} gdn_case;

static void gdn_block_run(float *y, const gdn_case *g, int form, const float *mixed, const float *z, const float *a,
                          size_t b, float ln_ratio) {
    const size_t cd = (size_t)cuda_gdn_conv_dim(&g->d), zw = (size_t)g->d.n_v_heads * g->d.v_dim, nv = g->d.n_v_heads;
    const cuda_gdn_block_weights dw = {g->d_cw, g->d_cr, g->d_vec, g->d_vec + nv, g->d_nw, g->d_vec + 2 * nv,
                                       g->d_vec + 3 * nv, g->d_vec + 4 * nv};
    float *d_mixed = cuda_test_upload(mixed, b * cd * sizeof(float)), *d_z = cuda_test_upload(z, b * zw * sizeof(float));
    float *d_a = cuda_test_upload(a, b * nv * sizeof(float)), *d_y = cuda_test_poisoned(b * zw);
    float *d_work = cuda_test_poisoned(cuda_gdn_block_work_floats(&g->d, (int)b));
    cuda_preview_set_forms(-1, form);
    CHECK_MSG(cuda_gdn_block(d_y, d_mixed, d_z, d_a, g->d_ring, g->d_state, &dw, &g->d, (int)b, ln_ratio, d_work, NULL) == 0,
              "%s", cuda_preview_last_error());
    cuda_preview_set_forms(-1, -1);
    cuda_test_download(y, d_y, b * zw * sizeof(float));
    cuda_free(d_mixed), cuda_free(d_z), cuda_free(d_a), cuda_free(d_y), cuda_free(d_work);
}

/* The two-launch GDN block operator (gdn_block_fused.cu) against the previous four launches, bit for bit, and
 * against gdn_block_scalar within the fixtures' bound: the 35B-A3B heads (16 key / 32 value of 128, K 4) at
 * rows 1..64 (partial row tiles, odd counts), and smaller odd geometries (dv 16 / 32 / 64: 16, 8, 4 row groups
 * a read-out thread; grouped and tiled head orders; K 2 and 3); every output written and finite. */
static void gdn_block_forms(void) {
    typedef struct {
        int nk, nv, dk, dv, K, tiled;
    } geo;
    const geo geos[4] = {{16, 32, 128, 128, 4, 1}, {2, 6, 16, 16, 3, 0}, {3, 3, 32, 64, 2, 1}, {1, 4, 64, 32, 4, 0}};
    const size_t bs[10] = {1, 2, 3, 5, 8, 13, 31, 32, 33, 64};
    const int small = getenv("CLOVER_TEST_SMALL") != NULL; /* under compute-sanitizer: a few cases */
    size_t cases = 0;
    double worst_rel = 0;
    for (int gi = 0; gi < (small ? 2 : 4); gi++) {
        const geo G = geos[gi];
        const size_t nk = G.nk, nv = G.nv, dk = G.dk, dv = G.dv, K = G.K, cd = 2 * nk * dk + nv * dv, bmax = 64;
        const cpu_gdn_dims cd_cpu = {nk, nv, dk, dv, K, 1e-6f, G.tiled ? CPU_GDN_TILED : CPU_GDN_GROUPED};
        float *cw = malloc(cd * K * sizeof(float)), *cr = malloc(cd * (K > 1 ? K - 1 : 1) * sizeof(float));
        float *vec = malloc(6 * nv * sizeof(float)), *nw = malloc(dv * sizeof(float));
        float *ring = malloc((K > 1 ? K - 1 : 1) * cd * sizeof(float)), *state = malloc(nv * dk * dv * sizeof(float));
        cuda_test_fill(cw, cd * K, 401 + gi, 0.5f);
        cuda_test_fill(cr, cd * (K > 1 ? K - 1 : 1), 411 + gi, 0.5f);
        cuda_test_fill(vec, 6 * nv, 421 + gi, 1.0f);
        cuda_test_fill(nw, dv, 431 + gi, 1.0f);
        cuda_test_fill(ring, (K > 1 ? K - 1 : 1) * cd, 441 + gi, 1.0f);
        cuda_test_fill(state, nv * dk * dv, 451 + gi, 0.1f);
        for (size_t h = 0; h < nv; h++) vec[h] = -expf(vec[h]);
        const gdn_block_weights w = {cw, cr, vec, vec + nv, nw, vec + 2 * nv, vec + 3 * nv, vec + 4 * nv};
        gdn_case g = {{G.nk, G.nv, G.dk, G.dv, G.K, 1e-6f, G.tiled}, NULL, NULL, NULL, NULL, NULL, NULL};
        g.d_cw = cuda_test_upload(cw, cd * K * sizeof(float));
        g.d_cr = cuda_test_upload(cr, cd * (K > 1 ? K - 1 : 1) * sizeof(float));
        g.d_vec = cuda_test_upload(vec, 6 * nv * sizeof(float));
        g.d_nw = cuda_test_upload(nw, dv * sizeof(float));
        g.d_ring = cuda_test_upload(ring, (K > 1 ? K - 1 : 1) * cd * sizeof(float));
        g.d_state = cuda_test_upload(state, nv * dk * dv * sizeof(float));
        float *mixed = malloc(bmax * cd * sizeof(float)), *z = malloc(bmax * nv * dv * sizeof(float));
        float *a = malloc(bmax * nv * sizeof(float));
        cuda_test_fill(mixed, bmax * cd, 461 + gi, 1.0f);
        cuda_test_fill(z, bmax * nv * dv, 471 + gi, 1.0f);
        cuda_test_fill(a, bmax * nv, 481 + gi, 1.0f);
        float *y0 = malloc(bmax * nv * dv * sizeof(float)), *y1 = malloc(bmax * nv * dv * sizeof(float));
        float *ref = malloc(bmax * nv * dv * sizeof(float));
        float *scratch = malloc(gdn_block_scratch_floats(&cd_cpu, bmax, 1) * sizeof(float));
        for (int bi = 0; bi < 10; bi++) {
            if (small && bi != 0 && bi != 5 && bi != 8) continue;
            const size_t b = bs[bi], n = b * nv * dv;
            const float ln_ratio = logf((float)b / 32.0f);
            gdn_block_run(y0, &g, 0, mixed, z, a, b, ln_ratio);
            gdn_block_run(y1, &g, 1, mixed, z, a, b, ln_ratio);
            gdn_block_scalar(ref, mixed, z, a, ring, state, &w, &cd_cpu, b, ln_ratio, scratch);
            size_t diff = 0, bad = 0;
            double worst = 0, mx = 1;
            for (size_t i = 0; i < n; i++) {
                bad += !isfinite(y1[i]);
                diff += memcmp(&y0[i], &y1[i], sizeof(float)) != 0;
                const double dd = fabs((double)y1[i] - (double)ref[i]);
                if (!(dd <= worst)) worst = dd;
                if (fabs((double)ref[i]) > mx) mx = fabs((double)ref[i]);
            }
            CHECK_MSG(bad == 0 && diff == 0, "geometry %d, %zu rows: %zu outputs not finite, %zu differ from the "
                      "four-launch form's bits", gi, b, bad, diff);
            CHECK_MSG(worst <= BOUND_LOGITS * mx, "geometry %d, %zu rows: max error vs the oracle %.3g > %.3g", gi, b,
                      worst, BOUND_LOGITS * mx);
            if (worst / mx > worst_rel) worst_rel = worst / mx;
            cases++;
        }
        cuda_free((void *)g.d_cw), cuda_free((void *)g.d_cr), cuda_free((void *)g.d_vec), cuda_free((void *)g.d_nw);
        cuda_free((void *)g.d_ring), cuda_free((void *)g.d_state);
        free(cw), free(cr), free(vec), free(nw), free(ring), free(state), free(mixed), free(z), free(a);
        free(y0), free(y1), free(ref), free(scratch);
    }
    printf("     gdn block operator, two launches vs four: %zu cases bit for bit; vs the oracle within %.3g of "
           "max(1, max|ref|)\n", cases, worst_rel);
}

/* The head-once form of the block operator's heads (CLOVER_CUDA_GDN_HEAD_ONCE, gdn_block_fused.cu: a block a
 * (sequence, value head) over all its row tiles) against the tile form it replaces, bit for bit: lone blocks of 1..64
 * rows and a stacked preview of eight sequences of 1..32 rows, each its own ring, state and ln_ratio, at the
 * 35B-A3B's heads (16 key / 32 value of 128, K 4) and two small odd geometries the fused path takes (dv 16: 16
 * read-out row groups, grouped heads, K 3; dv 64 over dk 32, K 2), with the groups a block by shape and forced to 1,
 * 2 and 4 (a group walking several tiles; idle groups). Every output written (NaN-poisoned), the rings and states
 * untouched (a preview reads them only), every switched-on call counted as a head-once launch (the form ran), and
 * the lone outputs against gdn_block_scalar within the fixtures' bound. The tile form's 4-row tiles
 * (cuda_gdn_head_rt_set) against its 8-row tiles on the same calls, bit for bit. */
static void gdn_head_once(void) {
    typedef struct {
        int nk, nv, dk, dv, K, tiled;
    } geo;
    enum { NS = 8, NB = 11, NG = 4 };
    const geo geos[3] = {{16, 32, 128, 128, 4, 1}, {2, 6, 16, 16, 3, 0}, {3, 3, 32, 64, 2, 1}};
    const int32_t ms[NS] = {32, 13, 1, 32, 7, 24, 9, 17};
    const size_t lone[NB] = {1, 2, 5, 8, 9, 13, 17, 24, 31, 32, 64};
    const int groups[NG] = {0, 1, 2, 4};
    const int small = getenv("CLOVER_TEST_SMALL") != NULL; /* under compute-sanitizer: a few cases */
    cuda_preview_set_forms(-1, 1);                          /* the fused form, whatever CLOVER_CUDA_GDN_BLOCK says */
    size_t cases = 0, launches = 0, rt_cases = 0, auto_cases = 0;
    double worst_rel = 0;
    const unsigned long long launched0 = cuda_gdn_head_once_launches();
    for (int gi = 0; gi < (small ? 2 : 3); gi++) {
        const geo G = geos[gi];
        const size_t nk = G.nk, nv = G.nv, dk = G.dk, dv = G.dv, K = G.K, cd = 2 * nk * dk + nv * dv, zw = nv * dv;
        const size_t nr = 135, rb = (K - 1) * cd, sb = nv * dk * dv; /* rows: the stacked ones, >= the lone 64 */
        const cpu_gdn_dims cd_cpu = {nk, nv, dk, dv, K, 1e-6f, G.tiled ? CPU_GDN_TILED : CPU_GDN_GROUPED};
        const cuda_gdn_dims d = {G.nk, G.nv, G.dk, G.dv, G.K, 1e-6f, G.tiled};
        float *cw = malloc(cd * K * 4), *cr = malloc(cd * (K - 1) * 4), *vec = malloc(6 * nv * 4), *nw = malloc(dv * 4);
        cuda_test_fill(cw, cd * K, 501 + gi, 0.5f);
        cuda_test_fill(cr, cd * (K - 1), 511 + gi, 0.5f);
        cuda_test_fill(vec, 6 * nv, 521 + gi, 1.0f);
        cuda_test_fill(nw, dv, 531 + gi, 1.0f);
        for (size_t h = 0; h < nv; h++) vec[h] = -expf(vec[h]);
        const gdn_block_weights w = {cw, cr, vec, vec + nv, nw, vec + 2 * nv, vec + 3 * nv, vec + 4 * nv};
        float *d_cw = cuda_test_upload(cw, cd * K * 4), *d_cr = cuda_test_upload(cr, cd * (K - 1) * 4);
        float *d_vec = cuda_test_upload(vec, 6 * nv * 4), *d_nw = cuda_test_upload(nw, dv * 4);
        const cuda_gdn_block_weights dw = {d_cw, d_cr, d_vec, d_vec + nv, d_nw, d_vec + 2 * nv, d_vec + 3 * nv,
                                           d_vec + 4 * nv};
        float *ring = malloc(NS * rb * 4), *state = malloc(NS * sb * 4), *back = malloc(NS * sb * 4);
        cuda_test_fill(ring, NS * rb, 541 + gi, 1.0f);
        cuda_test_fill(state, NS * sb, 551 + gi, 0.1f);
        float *d_ring = cuda_test_upload(ring, NS * rb * 4), *d_state = cuda_test_upload(state, NS * sb * 4);
        cuda_gdn_block_seqs m = {.n_seq = NS};
        for (int i = 0, r0 = 0; i < NS; r0 += ms[i], i++)
            m.seq[i] = (cuda_gdn_block_seq){.ring = d_ring + i * rb, .state = d_state + i * sb, .row0 = r0,
                                            .b = ms[i], .ln_ratio = logf((float)ms[i] / 32.0f)};
        float *mixed = malloc(nr * cd * 4), *z = malloc(nr * zw * 4), *a = malloc(nr * nv * 4);
        cuda_test_fill(mixed, nr * cd, 561 + gi, 1.0f);
        cuda_test_fill(z, nr * zw, 571 + gi, 1.0f);
        cuda_test_fill(a, nr * nv, 581 + gi, 1.0f);
        float *d_mixed = cuda_test_upload(mixed, nr * cd * 4), *d_z = cuda_test_upload(z, nr * zw * 4);
        float *d_a = cuda_test_upload(a, nr * nv * 4), *d_y = cuda_test_poisoned(nr * zw);
        float *d_work = cuda_test_poisoned(cuda_gdn_block_work_floats(&d, (int)nr));
        float *y0 = malloc(nr * zw * 4), *y1 = malloc(nr * zw * 4), *ref = malloc(64 * zw * 4);
        float *scratch = malloc(gdn_block_scratch_floats(&cd_cpu, 64, 1) * 4);
        char why[CUDA_WHY];
        /* one call, the form asked (0 tile, 1 head-once with `gs` groups), the n outputs into y; b 0: the stack */
#define HEAD_ONCE_RUN(y, on, gs, b, n)                                                                              \
    do {                                                                                                            \
        cuda_gdn_head_once_set(on);                                                                                 \
        cuda_gdn_head_once_groups_set(gs);                                                                          \
        CHECK(cuda_fill_nan(d_y, nr * zw, why) == 0);                                                               \
        const int rc_ = (b) ? cuda_gdn_block(d_y, d_mixed, d_z, d_a, d_ring, d_state, &dw, &d, (int)(b),             \
                                             logf((float)(b) / 32.0f), d_work, NULL)                                \
                            : cuda_gdn_block_multi(d_y, d_mixed, d_z, d_a, &dw, &d, &m, d_work, NULL);              \
        CHECK_MSG(rc_ == 0, "geometry %d, %zu rows, head-once %d/%d: rc %d (%s)", gi, (size_t)(b), on, gs, rc_,      \
                  cuda_preview_last_error());                                                                       \
        cuda_test_download(y, d_y, (n) * zw * 4);                                                                   \
        launches += (on) == 1 || ((on) == 2 && !(b)); /* AUTO (2): the stack of NS sequences only */               \
    } while (0)
        for (int bi = 0; bi <= NB; bi++) { /* bi == NB: the stacked preview */
            if (small && bi != 0 && bi != 5 && bi != 9 && bi != NB) continue;
            const size_t b = bi < NB ? lone[bi] : 0, n = b ? b : nr;
            cuda_gdn_head_rt_set(8);
            HEAD_ONCE_RUN(y0, 0, 0, b, n);
            cuda_gdn_head_rt_set(4); /* the tile form's 4-row tiles: the 8-row tiles' bits */
            HEAD_ONCE_RUN(y1, 0, 0, b, n);
            cuda_gdn_head_rt_set(0);
            {
                size_t diff = 0, bad = 0;
                for (size_t i = 0; i < n * zw; i++) bad += !isfinite(y1[i]), diff += memcmp(&y0[i], &y1[i], 4) != 0;
                CHECK_MSG(bad == 0 && diff == 0, "geometry %d, %s %zu rows, 4-row tiles: %zu outputs not finite, %zu "
                          "differ from the 8-row tiles' bits", gi, b ? "lone" : "stacked", n, bad, diff);
                rt_cases++;
            }
            for (int k = 0; k < NG; k++) {
                if (small && k != 0) continue;
                HEAD_ONCE_RUN(y1, 1, groups[k], b, n);
                size_t diff = 0, bad = 0;
                for (size_t i = 0; i < n * zw; i++) bad += !isfinite(y1[i]), diff += memcmp(&y0[i], &y1[i], 4) != 0;
                CHECK_MSG(bad == 0 && diff == 0, "geometry %d, %s %zu rows, groups %d: %zu outputs not finite, %zu "
                          "differ from the tile form's bits", gi, b ? "lone" : "stacked", n, groups[k], bad, diff);
                cases++;
            }
            { /* AUTO: head-once in the stack of NS >= 2 sequences, the tile form alone; the same bits either way */
                const unsigned long long before = cuda_gdn_head_once_launches();
                HEAD_ONCE_RUN(y1, 2, 0, b, n);
                const unsigned long long took = cuda_gdn_head_once_launches() - before;
                CHECK_MSG(took == (b ? 0u : 1u), "geometry %d, %s %zu rows, AUTO: %llu head-once launches, expected %d",
                          gi, b ? "lone" : "stacked", n, took, b ? 0 : 1);
                size_t diff = 0;
                for (size_t i = 0; i < n * zw; i++) diff += memcmp(&y0[i], &y1[i], 4) != 0;
                CHECK_MSG(diff == 0, "geometry %d, %s %zu rows, AUTO: %zu outputs differ from the tile form's bits", gi,
                          b ? "lone" : "stacked", n, diff);
                auto_cases++;
            }
            if (!b) continue;
            gdn_block_scalar(ref, mixed, z, a, ring, state, &w, &cd_cpu, b, logf((float)b / 32.0f), scratch);
            double worst = 0, mx = 1;
            for (size_t i = 0; i < b * zw; i++) {
                const double dd = fabs((double)y1[i] - (double)ref[i]);
                if (!(dd <= worst)) worst = dd;
                if (fabs((double)ref[i]) > mx) mx = fabs((double)ref[i]);
            }
            CHECK_MSG(worst <= BOUND_LOGITS * mx, "geometry %d, %zu rows: max error vs the oracle %.3g > %.3g", gi, b,
                      worst, BOUND_LOGITS * mx);
            if (worst / mx > worst_rel) worst_rel = worst / mx;
        }
#undef HEAD_ONCE_RUN
        cuda_test_download(back, d_state, NS * sb * 4);
        CHECK_MSG(memcmp(back, state, NS * sb * 4) == 0, "geometry %d: a preview changed a committed state", gi);
        cuda_test_download(back, d_ring, NS * rb * 4);
        CHECK_MSG(memcmp(back, ring, NS * rb * 4) == 0, "geometry %d: a preview changed a committed ring", gi);
        cuda_free(d_cw), cuda_free(d_cr), cuda_free(d_vec), cuda_free(d_nw), cuda_free(d_ring), cuda_free(d_state);
        cuda_free(d_mixed), cuda_free(d_z), cuda_free(d_a), cuda_free(d_y), cuda_free(d_work);
        free(cw), free(cr), free(vec), free(nw), free(ring), free(state), free(back), free(mixed), free(z), free(a);
        free(y0), free(y1), free(ref), free(scratch);
    }
    const unsigned long long ran = cuda_gdn_head_once_launches() - launched0;
    CHECK_MSG(ran == launches, "%llu head-once launches for %zu switched-on calls", ran, launches);
    cuda_gdn_head_once_set(-1);
    cuda_gdn_head_once_groups_set(-1);
    cuda_gdn_head_rt_set(-1);
    cuda_preview_set_forms(-1, -1);
    printf("     gdn heads, head-once vs tiles: %zu cases bit for bit (%llu launches), AUTO %zu cases (stacked only), "
           "4-row vs 8-row tiles: %zu cases bit for bit, states untouched; vs the oracle within %.3g of max(1, "
           "max|ref|)\n", cases, ran, auto_cases, rt_cases, worst_rel);
}

int main(void) {
    cuda_test_require_device();
    if (fixture_open(&fx, "tiny_clover")) return TEST_EXIT();
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) {
        RUN(coreset_kernel);
        RUN(coreset_route_multi);
        RUN(coreset_route_fused);
        RUN(gdn_block_35b);
        RUN(gdn_block_multi);
        RUN(coreset_forms);
        RUN(gdn_block_forms);
        RUN(gdn_head_once);
        RUN(golden_previews);
        RUN(device_pick_vs_oracle);
        RUN(batched_equals_alone);
        RUN(graph_equals_eager);
        RUN(resolve_vs_cpu);
        RUN(generate_cases);
    }
    test_model_free(&tm);
    fixture_close(&fx);
    return TEST_EXIT();
}
