/*
 * test_parallel.c: the transport group and the expert-parallel MoE
 * (src/parallel/). The simulated all-to-all against hand-placed bytes; the
 * planted faults (a rank that errs, a rank that goes silent: the deadline
 * fires, the group stays broken, closing does not hang); --devices parsing;
 * the NCCL kind where NCCL cannot run (a one-line error, no crash); and
 * ep_moe_forward over 1..5 simulated ranks equal bit for bit to the one-rank
 * cpu_moe_forward, on random f32 and q8_0 MoE blocks, with and without a
 * coreset, including expert counts the ranks do not divide, and a coreset
 * whose experts all sit on rank 0 sending nothing to the others.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "cpu/moe.h"
#include "parallel/ep_moe.h"
#include "parallel/transport.h"
#include "quant/quant.h"
#include "test.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static par_transport *open_sim(size_t n, par_fault fault, int rank, unsigned after, unsigned timeout_ms) {
    par_config cfg = {.kind = PAR_KIND_SIM, .n_ranks = n, .timeout_ms = timeout_ms, .fault = fault,
                      .fail_rank = rank, .fail_after = after};
    par_transport *t = NULL;
    clover_error err = {0};
    int rc = par_open(&cfg, &t, &err);
    CHECK_MSG(rc == 0 && t, "par_open: %s", err.message);
    return t;
}

/* byte j of the segment s -> d: a value naming s, d and j */
static uint8_t pattern(size_t s, size_t d, size_t j) { return (uint8_t)(s * 37 + d * 11 + j * 3 + 1); }

static void test_alltoallv(void) {
    for (size_t n = 1; n <= 5; n++) {
        par_transport *t = open_sim(n, PAR_FAULT_NONE, -1, 0, 0);
        if (!t) return;
        size_t counts[25];
        for (size_t s = 0; s < n; s++)
            for (size_t d = 0; d < n; d++) counts[s * n + d] = (s + 2 * d) % 3 == 0 ? 0 : (s * 7 + d * 5) % 13 + 1;
        uint8_t *send[5], *recv[5];
        for (size_t s = 0; s < n; s++) {
            size_t out = 0, in = 0;
            for (size_t d = 0; d < n; d++) {
                out += counts[s * n + d];
                in += counts[d * n + s];
            }
            send[s] = malloc(out + 1);
            recv[s] = malloc(in + 1);
            memset(recv[s], 0xee, in + 1);
            size_t o = 0;
            for (size_t d = 0; d < n; d++)
                for (size_t j = 0; j < counts[s * n + d]; j++) send[s][o++] = pattern(s, d, j);
        }
        clover_error err = {0};
        CHECK_MSG(par_alltoallv(t, (const void *const *)send, (void *const *)recv, counts, &err) == 0, "%s",
                  err.message);
        /* rank d holds the segments from s = 0..n-1 in order, and nothing past them */
        for (size_t d = 0; d < n; d++) {
            size_t o = 0;
            for (size_t s = 0; s < n; s++)
                for (size_t j = 0; j < counts[s * n + d]; j++, o++)
                    CHECK_MSG(recv[d][o] == pattern(s, d, j), "n=%zu: rank %zu byte %zu (from %zu)", n, d, o, s);
            CHECK(recv[d][o] == 0xee);
        }
        int32_t v[5], m[5];
        const int32_t *in[5];
        int32_t *out[5];
        for (size_t r = 0; r < n; r++) {
            v[r] = (int32_t)((r * 5 + 3) % 7) - 3;
            in[r] = &v[r];
            out[r] = &m[r];
        }
        int32_t want = v[0];
        for (size_t r = 1; r < n; r++) want = v[r] > want ? v[r] : want;
        CHECK(par_allreduce_max_i32(t, in, out, &err) == 0);
        for (size_t r = 0; r < n; r++) CHECK_EQ_INT(m[r], want);
        for (size_t s = 0; s < n; s++) {
            free(send[s]);
            free(recv[s]);
        }
        par_close(t);
    }
}

static int one_collective(par_transport *t, clover_error *err) {
    const size_t n = par_n_ranks(t);
    int32_t v[PAR_MAX_RANKS], m[PAR_MAX_RANKS];
    const int32_t *in[PAR_MAX_RANKS];
    int32_t *out[PAR_MAX_RANKS];
    for (size_t r = 0; r < n; r++) {
        v[r] = (int32_t)r;
        in[r] = &v[r];
        out[r] = &m[r];
    }
    return par_allreduce_max_i32(t, in, out, err);
}

static void test_fault_error(void) {
    par_transport *t = open_sim(3, PAR_FAULT_ERROR, 1, 2, 1000);
    if (!t) return;
    clover_error err = {0};
    CHECK(one_collective(t, &err) == 0);
    CHECK(one_collective(t, &err) == 0);
    CHECK(one_collective(t, &err) != 0);
    CHECK_MSG(strstr(err.message, "rank 1 of 3 failed") != NULL, "message: %s", err.message);
    CHECK(strchr(err.message, '\n') == NULL);
    clover_error again = {0};
    double t0 = now_s();
    CHECK(one_collective(t, &again) != 0); /* broken: at once, the same message */
    CHECK(now_s() - t0 < 0.5);
    CHECK(!strcmp(again.message, err.message));
    par_close(t);
}

static void test_fault_stall(void) {
    par_transport *t = open_sim(4, PAR_FAULT_STALL, 2, 1, 300);
    if (!t) return;
    clover_error err = {0};
    CHECK(one_collective(t, &err) == 0);
    double t0 = now_s();
    int rc = one_collective(t, &err);
    double dt = now_s() - t0;
    CHECK(rc != 0);
    CHECK_MSG(dt >= 0.29 && dt < 10.0, "the deadline fired after %.3f s (300 ms asked)", dt);
    CHECK_MSG(strstr(err.message, "rank 2 of 4 did not finish") && strstr(err.message, "300 ms"), "message: %s",
              err.message);
    t0 = now_s();
    par_close(t); /* releases the silent rank: returns */
    CHECK(now_s() - t0 < 5.0);
}

static void test_config_errors(void) {
    par_transport *t = NULL;
    clover_error err = {0};
    par_config bad = {.kind = PAR_KIND_SIM, .n_ranks = 0};
    CHECK(par_open(&bad, &t, &err) == CLOVER_E_INVALID && !t);
    CHECK(strstr(err.message, "0 ranks") != NULL);
    par_config bad2 = {.kind = PAR_KIND_SIM, .n_ranks = 2, .fault = PAR_FAULT_ERROR, .fail_rank = 2};
    CHECK(par_open(&bad2, &t, &err) == CLOVER_E_INVALID && !t);
}

static void test_parse_devices(void) {
    int dev[8];
    clover_error err = {0};
    CHECK_EQ_INT(par_parse_devices("0,1", 2, dev, 8, &err), 2);
    CHECK(dev[0] == 0 && dev[1] == 1);
    CHECK_EQ_INT(par_parse_devices("3,1,2", -1, dev, 8, &err), 3);
    CHECK(dev[0] == 3 && dev[1] == 1 && dev[2] == 2);
    CHECK(par_parse_devices("0,1", 1, dev, 8, &err) == CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "device 1 does not exist (this host has 1 CUDA device)") != NULL, "%s",
              err.message);
    CHECK(par_parse_devices("0,1", 0, dev, 8, &err) < 0);
    CHECK(strstr(err.message, "has 0 CUDA devices") != NULL);
    const char *bad[] = {"", "a", "0,,1", "0,", "-1", "1,1", "0 1", "0,1x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.message[0] = 0;
        CHECK_MSG(par_parse_devices(bad[i], 8, dev, 8, &err) == CLOVER_E_INVALID, "'%s' was accepted", bad[i]);
        CHECK(err.message[0] && strstr(err.message, "--devices") && !strchr(err.message, '\n'));
    }
    CHECK(par_parse_devices("0,1,2", 8, dev, 2, &err) == CLOVER_E_INVALID);
}

/* NCCL where it cannot run here: no CUDA build (CI), a library that is not there, or no GPU: one line, no hang */
static void test_nccl_unavailable(void) {
    setenv("CLOVER_NCCL_LIB", "libnccl-absent-for-clover-test.so.2", 1);
    int dev[2] = {0, 1};
    par_config cfg = {.kind = PAR_KIND_NCCL, .n_ranks = 2, .devices = dev, .timeout_ms = 1000};
    par_transport *t = NULL;
    clover_error err = {0};
    CHECK(par_open(&cfg, &t, &err) != 0 && !t);
    CHECK_MSG(strstr(err.message, "libnccl-absent-for-clover-test.so.2") || strstr(err.message, "no CUDA backend"),
              "message: %s", err.message);
    CHECK(strstr(err.message, "--devices") && !strchr(err.message, '\n'));
    unsetenv("CLOVER_NCCL_LIB");
}

/* ---- the MoE ---- */
typedef struct moe_case {
    cpu_moe_weights w;
    void *mem[8];
} moe_case;

static const void *random_matrix(moe_case *mc, int slot, uint32_t type, size_t rows, size_t cols, float scale,
                                 rng_state *r) {
    float *f = malloc(rows * cols * sizeof *f);
    for (size_t i = 0; i < rows * cols; i++) f[i] = scale * (2.0f * rng_uniform(r) - 1.0f);
    size_t rb = quant_row_bytes(type, cols);
    char *q = malloc(rows * rb);
    for (size_t i = 0; i < rows; i++) quant_quantize_row(type, f + i * cols, q + i * rb, cols);
    free(f);
    mc->mem[slot] = q;
    return q;
}

static void moe_case_make(moe_case *mc, uint32_t type, size_t H, size_t F, size_t E, size_t k, size_t Fs,
                          uint64_t seed) {
    memset(mc, 0, sizeof *mc);
    rng_state r;
    rng_seed(&r, seed);
    cpu_moe_weights *w = &mc->w;
    *w = (cpu_moe_weights){.n_embd = H, .n_ff = F, .n_expert = E, .n_used = k, .n_ff_shexp = Fs};
    w->router_type = QUANT_F32;
    w->router = random_matrix(mc, 0, QUANT_F32, E, H, 1.0f, &r);
    w->gate_type = w->up_type = w->down_type = type;
    w->gate_exps = random_matrix(mc, 1, type, E * F, H, 0.3f, &r);
    w->up_exps = random_matrix(mc, 2, type, E * F, H, 0.3f, &r);
    w->down_exps = random_matrix(mc, 3, type, E * H, F, 0.3f, &r);
    w->gate_stride = F * quant_row_bytes(type, H);
    w->up_stride = F * quant_row_bytes(type, H);
    w->down_stride = H * quant_row_bytes(type, F);
    if (Fs) {
        w->sh_gate_type = w->sh_up_type = w->sh_down_type = type;
        w->sh_inp_type = QUANT_F32;
        w->sh_gate = random_matrix(mc, 4, type, Fs, H, 0.3f, &r);
        w->sh_up = random_matrix(mc, 5, type, Fs, H, 0.3f, &r);
        w->sh_down = random_matrix(mc, 6, type, H, Fs, 0.3f, &r);
        w->sh_inp = random_matrix(mc, 7, QUANT_F32, 1, H, 0.3f, &r);
    }
    clover_error err = {0};
    CHECK_MSG(cpu_moe_weights_check(w, &err) == 0, "%s", err.message);
}

static void moe_case_free(moe_case *mc) {
    for (int i = 0; i < 8; i++) free(mc->mem[i]);
}

static void check_equal_to_one_rank(const moe_case *mc, size_t n, const uint8_t *allowed, size_t n_ranks,
                                    threadpool *pool, const char *what) {
    const cpu_moe_weights *w = &mc->w;
    const size_t H = w->n_embd;
    rng_state r;
    rng_seed(&r, 1000 + n);
    float *x = malloc(n * H * sizeof *x), *ref = malloc(n * H * sizeof *ref), *got = malloc(n * H * sizeof *got);
    for (size_t i = 0; i < n * H; i++) x[i] = 2.0f * rng_uniform(&r) - 1.0f;
    void *scratch = mem_alloc(cpu_moe_scratch_bytes(w, n));
    cpu_moe_forward(ref, x, n, w, allowed, pool, scratch);
    par_transport *t = open_sim(n_ranks, PAR_FAULT_NONE, -1, 0, 0);
    ep_moe *ep = NULL;
    clover_error err = {0};
    if (t && ep_moe_create(t, &ep, &err) == 0) {
        memset(got, 0x7f, n * H * sizeof *got);
        int rc = ep_moe_forward(ep, got, x, n, w, allowed, pool, &err);
        CHECK_MSG(rc == 0, "%s: %s", what, err.message);
        size_t bad = 0;
        for (size_t i = 0; i < n * H; i++) bad += memcmp(&got[i], &ref[i], sizeof(float)) != 0;
        CHECK_MSG(bad == 0, "%s, %zu rows, %zu ranks: %zu of %zu values differ from one rank", what, n, n_ranks, bad,
                  n * H);
        /* every row reaches each rank at most once; the rows received are what routing says */
        const ep_moe_stats *st = ep_moe_last(ep);
        uint64_t rows = 0;
        for (size_t d = 0; d < n_ranks; d++) {
            CHECK(st->rows_in[d] <= n);
            rows += st->rows_in[d];
        }
        CHECK(rows >= (n_ranks == 1 ? n : 1) && rows <= n * (w->n_used < n_ranks ? w->n_used : n_ranks));
    }
    ep_moe_free(ep);
    par_close(t);
    mem_free(scratch);
    free(x);
    free(ref);
    free(got);
}

static void test_ep_equals_one_rank(void) {
    threadpool *pool = NULL;
    clover_error err = {0};
    CHECK(threadpool_create(&pool, 2, &err) == 0);
    const uint32_t types[2] = {QUANT_F32, QUANT_Q8_0};
    const size_t rows[] = {1, 2, 3, 7, 33};
    for (int ti = 0; ti < 2; ti++) {
        for (int shape = 0; shape < 2; shape++) {
            moe_case mc;
            /* 8 experts top-2 with a shared expert; 10 experts top-3 without (ranks do not divide 10 by 3 or 4) */
            if (shape == 0)
                moe_case_make(&mc, types[ti], 64, 32, 8, 2, 32, 7);
            else
                moe_case_make(&mc, types[ti], 64, 64, 10, 3, 0, 8);
            for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
                for (size_t N = 1; N <= 5; N++) {
                    check_equal_to_one_rank(&mc, rows[ri], NULL, N, pool, quant_type_name(types[ti]));
                    uint8_t allowed[16];
                    for (size_t e = 0; e < mc.w.n_expert; e++) allowed[e] = (uint8_t)(e % 3 != 1);
                    check_equal_to_one_rank(&mc, rows[ri], allowed, N, pool, "coreset");
                }
            moe_case_free(&mc);
        }
    }
    threadpool_free(pool);
}

static void test_coreset_decides_ranks(void) {
    moe_case mc;
    moe_case_make(&mc, QUANT_F32, 64, 32, 8, 2, 32, 9);
    const size_t n = 32, H = 64, N = 4;
    uint8_t allowed[8] = {1, 1, 0, 0, 0, 0, 0, 0}; /* rank 0's experts (0 and 1 of 8 over 4 ranks) */
    uint8_t visit[4];
    ep_ranks_visited(visit, allowed, 8, N);
    CHECK(visit[0] == 1 && visit[1] == 0 && visit[2] == 0 && visit[3] == 0);
    allowed[5] = 1;
    ep_ranks_visited(visit, allowed, 8, N);
    CHECK(visit[0] == 1 && visit[1] == 0 && visit[2] == 1 && visit[3] == 0);
    allowed[5] = 0;
    CHECK_EQ_INT(ep_expert_first(1, 10, 3), 3);
    CHECK_EQ_INT(ep_expert_first(2, 10, 3), 6);
    for (size_t e = 0; e < 10; e++) {
        size_t r = ep_expert_owner(e, 10, 3);
        CHECK(ep_expert_first(r, 10, 3) <= e && e < ep_expert_first(r + 1, 10, 3));
    }
    float *x = calloc(n * H, sizeof *x), *y = malloc(n * H * sizeof *y);
    for (size_t i = 0; i < n * H; i++) x[i] = (float)((i * 7919) % 101) / 50.0f - 1.0f;
    par_transport *t = open_sim(N, PAR_FAULT_NONE, -1, 0, 0);
    ep_moe *ep = NULL;
    clover_error err = {0};
    if (t && ep_moe_create(t, &ep, &err) == 0) {
        CHECK(ep_moe_forward(ep, y, x, n, &mc.w, allowed, NULL, &err) == 0);
        const ep_moe_stats *st = ep_moe_last(ep);
        CHECK_EQ_INT(st->rows_in[0], n); /* top-2 inside {0, 1}: every row, once */
        CHECK_EQ_INT(st->rows_in[1] + st->rows_in[2] + st->rows_in[3], 0);
        /* the two all-to-alls: 32 rows of (2 + k) words + H floats out, 64 expert rows of 2 words + H back */
        CHECK_EQ_INT(st->dispatch_bytes, n * ((2 + 2) * 4 + H * 4));
        CHECK_EQ_INT(st->combine_bytes, n * 2 * (8 + H * 4));
    }
    ep_moe_free(ep);
    par_close(t);
    free(x);
    free(y);
    moe_case_free(&mc);
}

static void test_ep_rank_failure(void) {
    moe_case mc;
    moe_case_make(&mc, QUANT_F32, 64, 32, 8, 2, 32, 10);
    const size_t n = 4, H = 64;
    float *x = calloc(n * H, sizeof *x), *y = malloc(n * H * sizeof *y);
    for (size_t i = 0; i < n * H; i++) x[i] = (float)(i % 17) / 8.0f - 1.0f;
    for (int stall = 0; stall < 2; stall++) {
        par_transport *t = open_sim(3, stall ? PAR_FAULT_STALL : PAR_FAULT_ERROR, 2, 4, 250);
        ep_moe *ep = NULL;
        clover_error err = {0};
        if (!t || ep_moe_create(t, &ep, &err)) continue;
        int rc = 0, passes = 0;
        double t0 = now_s();
        while (!rc && passes < 5) { /* 3 collectives a pass: the 5th fails, in pass 2 */
            rc = ep_moe_forward(ep, y, x, n, &mc.w, NULL, NULL, &err);
            passes++;
        }
        CHECK_EQ_INT(passes, 2);
        CHECK(rc != 0 && strstr(err.message, "rank 2 of 3"));
        CHECK(now_s() - t0 < 10.0);
        ep_moe_free(ep);
        par_close(t);
    }
    free(x);
    free(y);
    moe_case_free(&mc);
}

int main(void) {
    RUN(test_alltoallv);
    RUN(test_fault_error);
    RUN(test_fault_stall);
    RUN(test_config_errors);
    RUN(test_parse_devices);
    RUN(test_nccl_unavailable);
    RUN(test_ep_equals_one_rank);
    RUN(test_coreset_decides_ranks);
    RUN(test_ep_rank_failure);
    return TEST_EXIT();
}
