/*
 * test_gdn_block_avx512.c: the AVX-512 level of the GDN block operator
 * (gdn_block_avx512.c, issue 30) and what choosing it must leave alone.
 *  - against the scalar oracle (odd dims, b = 1..130: spans of 64 rows and a
 *    partial one, both head orders, K = 2..5),
 *    within test_gdn_block's bound for the AVX2 level;
 *  - its bits do not depend on the pool (NULL, 1, 2, 3, 7 threads) nor on
 *    cpu_grouped (CLOVER_CPU_GROUPED=0 runs the conv tasks on the caller);
 *  - gdn_block dispatches to it where quant_avx512_active(), and to the
 *    AVX2 level under CLOVER_NO_AVX512=1 (`--simd avx2`), in a child process
 *    (the level is decided once per process);
 *  - the AVX2 level's bits are those it had before this level existed
 *    (hashes recorded at fca4855 on the dev VM, glibc 2.x expf / log1pf);
 *  - NaN / inf inputs: no crash, and the same outputs non-finite as at the
 *    AVX2 level.
 * Where the CPU lacks AVX-512 (F, BW, VL, VNNI) it reports a skip.
 */
#include "base/threadpool.h"
#include "cpu/cpu_simd.h"
#include "cpu/gdn_block.h"
#include "cpu_ops_test.h"
#include "gdn_block_case.h"
#include "quant/simd_level.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* a block case (gdn_block_case.h) of shape sh = {nk, nv, dk, dv, K, b} */
static void case_make(block_case *c, uint64_t seed, const size_t sh[6], cpu_gdn_head_order order) {
    block_case_make(c, seed, sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], order);
}

/* FNV-1a over the bits of n floats */
static uint64_t bits_hash(const float *x, size_t n) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof *x; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The AVX2 level's bits on these shapes (nk, nv, dk, dv, K, b), recorded before the AVX-512 level existed */
static const size_t golden_shapes[][6] = {{3, 6, 13, 11, 4, 7}, {4, 8, 128, 136, 4, 33}, {16, 32, 128, 128, 4, 32},
                                          {2, 6, 8, 40, 5, 3}};
static const uint64_t golden_hashes[] = {0xe9a5e2820c52b5c8ull, 0xb383faa25bc009a8ull, 0x99a29edec6215698ull,
                                         0xca32c733a4a99a2full};

typedef void (*block_fn)(float *, const float *, const float *, const float *, const float *, const float *,
                         const gdn_block_weights *, const cpu_gdn_dims *, size_t, float, threadpool *, float *);

/* out = fn on the case, B = 32, with a scratch sized for the pool (freed here) */
static void run_fn(block_fn fn, const block_case *c, float *out, threadpool *pool) {
    float *scratch = malloc(gdn_block_scratch_floats(&c->d, c->b, threadpool_size(pool)) * sizeof *scratch);
    fn(out, c->mixed, c->z, c->a, c->ring, c->state, &c->w, &c->d, c->b, gdn_block_ln_ratio(c->b, 32), pool, scratch);
    free(scratch);
}

static const size_t shapes[][6] = {/* nk, nv, dk, dv, K, b */
                                   {3, 6, 13, 11, 4, 1},   {3, 6, 13, 11, 4, 7},   {2, 4, 16, 12, 4, 8},
                                   {1, 3, 33, 17, 2, 5},   {4, 8, 128, 128, 4, 9}, {2, 6, 8, 40, 5, 3},
                                   {4, 8, 128, 136, 4, 33}, {2, 4, 24, 48, 4, 17}, {3, 6, 16, 16, 3, 64},
                                   {16, 32, 128, 128, 4, 32}, {2, 4, 16, 20, 4, 80}, {4, 8, 64, 72, 4, 130}};

static void avx512_matches_oracle(void) {
    double worst = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int order = 0; order < 2; order++) {
            block_case c;
            case_make(&c, 1000 + si * 2 + (size_t)order, shapes[si], (cpu_gdn_head_order)order);
            float *want = malloc(c.n_out * sizeof *want), *got = malloc(c.n_out * sizeof *got);
            float *scratch = malloc(gdn_block_scratch_floats(&c.d, c.b, 1) * sizeof *scratch);
            gdn_block_scalar(want, c.mixed, c.z, c.a, c.ring, c.state, &c.w, &c.d, c.b, gdn_block_ln_ratio(c.b, 32),
                             scratch);
            run_fn(gdn_block_avx512, &c, got, NULL);
            double e = block_case_rel_err(got, want, c.n_out);
            worst = fmax(worst, e);
            /* test_gdn_block's bound for the AVX2 level: float32 sums of at most dk + b terms, then a norm */
            CHECK_MSG(e <= 5e-6, "shape %zu order %d: rel err %.3g", si, order, e);
            free(want), free(got), free(scratch);
            block_case_free(&c);
        }
    printf("     avx512 vs oracle: worst rel err %.3g\n", worst);
}

/* memcmp of the outputs across pools of 1, 2, 3, 7 threads (and none), grouped or not */
static void avx512_bits_do_not_depend_on_the_pool(void) {
    const size_t sizes[] = {1, 2, 3, 7};
    threadpool *pools[4] = {NULL, NULL, NULL, NULL};
    clover_error err;
    for (int p = 0; p < 4; p++) CHECK(threadpool_create(&pools[p], sizes[p], &err) == 0);
    int bad = 0, cases = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        block_case c;
        case_make(&c, 3000 + si, shapes[si], (cpu_gdn_head_order)(si % 2));
        float *ref = malloc(c.n_out * sizeof *ref), *got = malloc(c.n_out * sizeof *got);
        run_fn(gdn_block_avx512, &c, ref, NULL);
        for (int p = 0; p < 4; p++)
            for (int grouped = 0; grouped < 2; grouped++) {
                if (!grouped) setenv("CLOVER_CPU_GROUPED", "0", 1);
                memset(got, 0xff, c.n_out * sizeof *got);
                run_fn(gdn_block_avx512, &c, got, pools[p]);
                unsetenv("CLOVER_CPU_GROUPED");
                cases++;
                if (memcmp(ref, got, c.n_out * sizeof *got) != 0 && bad++ < 3)
                    fprintf(stderr, "  shape %zu, pool %zu, grouped %d: bits differ\n", si, sizes[p], grouped);
            }
        free(ref), free(got);
        block_case_free(&c);
    }
    CHECK_MSG(bad == 0, "%d of %d runs differ from the one-thread bits", bad, cases);
    for (int p = 0; p < 4; p++) threadpool_free(pools[p]);
}

/* gdn_block against the level's own entry: 0 when they agree bit for bit on every golden shape */
static int dispatch_agrees(block_fn level) {
    int bad = 0;
    threadpool *pool = NULL;
    clover_error err;
    if (threadpool_create(&pool, 2, &err) != 0) return 1;
    for (size_t s = 0; s < sizeof golden_shapes / sizeof *golden_shapes; s++) {
        block_case c;
        case_make(&c, 7000 + s, golden_shapes[s], (cpu_gdn_head_order)(s % 2));
        float *x = malloc(c.n_out * sizeof *x), *y = malloc(c.n_out * sizeof *y);
        run_fn(gdn_block, &c, x, pool);
        run_fn(level, &c, y, pool);
        bad += memcmp(x, y, c.n_out * sizeof *x) != 0;
        free(x), free(y);
        block_case_free(&c);
    }
    threadpool_free(pool);
    return bad;
}

/* The level is decided once per process, so `--simd avx2` is checked in this program run again under
 * CLOVER_NO_AVX512=1 with the argument below: its exit status says whether gdn_block was the AVX2 level there. */
static const char avx2_child_arg[] = "--avx2-dispatch";

static int avx2_child(void) { return !quant_avx512_active() && dispatch_agrees(gdn_block_avx2) == 0 ? 0 : 1; }

static void dispatch_follows_the_level(void) {
    CHECK(quant_avx512_active() == (getenv("CLOVER_NO_AVX512") == NULL && getenv("CLOVER_NO_SIMD") == NULL));
    if (quant_avx512_active()) CHECK_MSG(dispatch_agrees(gdn_block_avx512) == 0, "gdn_block is not the AVX-512 level");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("CLOVER_NO_AVX512", "1", 1);
        execl("/proc/self/exe", "test_gdn_block_avx512", avx2_child_arg, (char *)NULL);
        _exit(2);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "under CLOVER_NO_AVX512=1 gdn_block is not the AVX2 level (%d)",
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static void avx2_level_bits_unchanged(void) {
    if (!cpu_simd_active()) {
        printf("     (SIMD off: the hashes are the AVX2 kernels')\n");
        return;
    }
    threadpool *pool = NULL;
    clover_error err;
    CHECK(threadpool_create(&pool, 2, &err) == 0);
    for (size_t s = 0; s < sizeof golden_shapes / sizeof *golden_shapes; s++) {
        block_case c;
        case_make(&c, 7000 + s, golden_shapes[s], (cpu_gdn_head_order)(s % 2));
        float *x = malloc(c.n_out * sizeof *x);
        run_fn(gdn_block_avx2, &c, x, pool);
        uint64_t h = bits_hash(x, c.n_out);
        CHECK_MSG(h == golden_hashes[s], "shape %zu: AVX2 level hash %016llx, recorded %016llx", s,
                  (unsigned long long)h, (unsigned long long)golden_hashes[s]);
        free(x);
        block_case_free(&c);
    }
    threadpool_free(pool);
}

/* NaN and +-inf planted in each input in turn: both levels finish, with the same outputs non-finite */
static void nonfinite_inputs_like_avx2(void) {
    const size_t sh[6] = {3, 6, 24, 20, 4, 9};
    const float bad_vals[] = {NAN, INFINITY, -INFINITY};
    int mismatched = 0, runs = 0;
    size_t total_nonfinite = 0;
    for (int input = 0; input < 4; input++)
        for (size_t v = 0; v < 3; v++) {
            block_case c;
            case_make(&c, 9000 + (size_t)input * 3 + v, sh, CPU_GDN_TILED);
            float *target[] = {c.mixed, c.z, c.a, c.state};
            size_t len[] = {c.b * c.cd, c.n_out, c.b * c.d.n_v_heads, c.d.n_v_heads * c.d.k_dim * c.d.v_dim};
            target[input][len[input] / 3] = bad_vals[v];
            target[input][len[input] - 1] = bad_vals[v];
            float *x = malloc(c.n_out * sizeof *x), *y = malloc(c.n_out * sizeof *y);
            run_fn(gdn_block_avx2, &c, x, NULL);
            run_fn(gdn_block_avx512, &c, y, NULL);
            size_t diff = 0, nonfinite = 0;
            for (size_t i = 0; i < c.n_out; i++) {
                diff += !isfinite(x[i]) != !isfinite(y[i]);
                nonfinite += !isfinite(y[i]);
            }
            runs++, total_nonfinite += nonfinite;
            if (diff && mismatched++ < 3)
                fprintf(stderr, "  input %d value %zu: %zu outputs finite at one level only (%zu non-finite)\n", input,
                        v, diff, nonfinite);
            free(x), free(y);
            block_case_free(&c);
        }
    printf("     %zu non-finite outputs over %d runs, the same at both levels\n", total_nonfinite, runs);
    CHECK_MSG(mismatched == 0, "%d of %d runs differ in which outputs are finite", mismatched, runs);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], avx2_child_arg)) return avx2_child();
    if (!quant_avx512_supported())
        TEST_SKIP("the CPU lacks AVX-512 (F, BW, VL, VNNI) or the OS does not save its state");
    RUN(avx512_matches_oracle);
    RUN(avx512_bits_do_not_depend_on_the_pool);
    RUN(dispatch_follows_the_level);
    RUN(avx2_level_bits_unchanged);
    RUN(nonfinite_inputs_like_avx2);
    return TEST_EXIT();
}
