/*
 * test.h: the minimal harness of the C tests. A test file defines functions
 * and runs them from main with RUN(); CHECK* record failures (with file,
 * line and the values seen) without stopping, and TEST_EXIT() prints a
 * summary line and returns the exit status.
 *
 * The exit status cannot be green by accident:
 *  - every failed CHECK counts, inside a RUN() case or outside one (a
 *    fixture that does not open in main fails the binary, it is not
 *    silently skipped);
 *  - a binary that ran no case fails;
 *  - TEST_SKIP(reason...) prints "SKIP: <reason>" on stdout and exits 77,
 *    which ctest reports as skipped (SKIP_RETURN_CODE 77 in
 *    tests/CMakeLists.txt), never as passed. A skip after a failed check is
 *    a failure. Under CI=true scripts/test.sh fails a skip whose reason is
 *    not in tests/skip_allowlist.txt (machine facts only).
 *
 * CLOVER_TEST_ONLY=case1,case2 runs only the RUN() cases of those names (the
 * device scripts run compute-sanitizer over a few cases of a long binary);
 * the others are not run and not counted, so a list that names no case of
 * the binary still fails it (no case ran).
 */
#ifndef CLOVER_TEST_H
#define CLOVER_TEST_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures_total; /* every failed check, wherever it happened */
static int test_failures_in_cases; /* the part of it inside RUN() cases */
static int test_cases_run, test_cases_failed;

#define TEST_FAILED_() (test_failures_total++)

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            TEST_FAILED_();                                                           \
        }                                                                             \
    } while (0)

#define CHECK_MSG(cond, ...)                                                          \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
            TEST_FAILED_();                                                           \
        }                                                                             \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                                     \
    do {                                                                                                       \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                                  \
        if (va_ != vb_) {                                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld vs %lld)\n", __FILE__, __LINE__, #a, #b, va_, \
                    vb_);                                                                                      \
            TEST_FAILED_();                                                                                    \
        }                                                                                                      \
    } while (0)

/* |a-b| <= tol, NaN never passes. */
#define CHECK_NEAR(a, b, tol)                                                                                 \
    do {                                                                                                      \
        double va_ = (double)(a), vb_ = (double)(b), t_ = (double)(tol);                                      \
        if (!(fabs(va_ - vb_) <= t_)) {                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s ~ %s (%.9g vs %.9g, tol %.3g)\n", __FILE__, __LINE__, #a, \
                    #b, va_, vb_, t_);                                                                        \
            TEST_FAILED_();                                                                                   \
        }                                                                                                     \
    } while (0)

/* Whether case `name` runs: CLOVER_TEST_ONLY unset, or name one of its comma-separated entries. */
static inline int test_selected_(const char *name) {
    const char *only = getenv("CLOVER_TEST_ONLY");
    if (!only || !*only) return 1;
    const size_t n = strlen(name);
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

/* A case's failures are the checks that failed while it ran. */
#define RUN(fn)                                                                         \
    do {                                                                                \
        if (!test_selected_(#fn)) break;                                                \
        int before_ = test_failures_total;                                              \
        fn();                                                                           \
        test_cases_run++;                                                               \
        if (test_failures_total != before_) {                                           \
            test_cases_failed++;                                                        \
            test_failures_in_cases += test_failures_total - before_;                    \
            fprintf(stderr, "FAIL %s (%d checks)\n", #fn, test_failures_total - before_); \
        } else {                                                                        \
            printf("ok   %s\n", #fn);                                                   \
        }                                                                               \
    } while (0)

static inline int test_exit_status(void) {
    printf("%d passed, %d failed\n", test_cases_run - test_cases_failed, test_cases_failed);
    if (test_failures_total > test_failures_in_cases)
        fprintf(stderr, "FAIL: %d checks failed outside any case\n", test_failures_total - test_failures_in_cases);
    if (test_cases_run == 0) fprintf(stderr, "FAIL: no test case ran\n");
    return test_failures_total || test_cases_failed || test_cases_run == 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}

#define TEST_EXIT() test_exit_status()

/* Ends the binary as skipped (exit 77, see the top of this file): stdout
 * gets "SKIP: <reason>". Only for machine facts (no GPU, a missing
 * instruction set, a file system that cannot hold a file): a missing
 * fixture or command is a failed CHECK, never a skip. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2), noreturn))
#endif
static inline void test_skip(const char *fmt, ...) {
    va_list ap;
    fflush(stderr);
    printf("SKIP: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (test_failures_total) {
        fprintf(stderr, "FAIL: skipping after %d failed checks\n", test_failures_total);
        exit(EXIT_FAILURE);
    }
    exit(77);
}

#define TEST_SKIP(...) test_skip(__VA_ARGS__)

/* A file path under the source tree (CLOVER_SOURCE_DIR, set by ctest). Its
 * absence is a failed check that says so, and the answer is NULL. */
static inline const char *test_source_path(const char *rel, char *buf, size_t n) {
    const char *root = getenv("CLOVER_SOURCE_DIR");
    CHECK_MSG(root && *root, "CLOVER_SOURCE_DIR is not set: cannot find %s (run the test through ctest)", rel);
    if (!root || !*root) return NULL;
    snprintf(buf, n, "%s/%s", root, rel);
    return buf;
}

#endif
