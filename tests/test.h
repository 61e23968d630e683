/*
 * test.h: the minimal harness of the C tests. A test file defines functions
 * and runs them from main with RUN(); CHECK* record failures (with file,
 * line and the values seen) without stopping, and TEST_EXIT() prints a
 * summary line and returns non-zero if anything failed.
 */
#ifndef CLOVER_TEST_H
#define CLOVER_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int test_failures_total;
static int test_failures_in_case;
static int test_cases_run, test_cases_failed;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            test_failures_in_case++;                                                  \
        }                                                                             \
    } while (0)

#define CHECK_MSG(cond, ...)                                                          \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
            test_failures_in_case++;                                                  \
        }                                                                             \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                                     \
    do {                                                                                                       \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                                  \
        if (va_ != vb_) {                                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld vs %lld)\n", __FILE__, __LINE__, #a, #b, va_, \
                    vb_);                                                                                      \
            test_failures_in_case++;                                                                           \
        }                                                                                                      \
    } while (0)

/* |a-b| <= tol, NaN never passes. */
#define CHECK_NEAR(a, b, tol)                                                                                 \
    do {                                                                                                      \
        double va_ = (double)(a), vb_ = (double)(b), t_ = (double)(tol);                                      \
        if (!(fabs(va_ - vb_) <= t_)) {                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s ~ %s (%.9g vs %.9g, tol %.3g)\n", __FILE__, __LINE__, #a, \
                    #b, va_, vb_, t_);                                                                        \
            test_failures_in_case++;                                                                          \
        }                                                                                                     \
    } while (0)

#define RUN(fn)                                                           \
    do {                                                                  \
        test_failures_in_case = 0;                                        \
        fn();                                                             \
        test_cases_run++;                                                 \
        if (test_failures_in_case) {                                      \
            test_cases_failed++;                                          \
            test_failures_total += test_failures_in_case;                 \
            fprintf(stderr, "FAIL %s (%d checks)\n", #fn, test_failures_in_case); \
        } else {                                                          \
            printf("ok   %s\n", #fn);                                     \
        }                                                                 \
    } while (0)

#define TEST_EXIT()                                                                           \
    (printf("%d passed, %d failed\n", test_cases_run - test_cases_failed, test_cases_failed), \
     test_cases_failed ? EXIT_FAILURE : EXIT_SUCCESS)

/* A file path under the source tree (CLOVER_SOURCE_DIR set by ctest), or NULL. */
static inline const char *test_source_path(const char *rel, char *buf, size_t n) {
    const char *root = getenv("CLOVER_SOURCE_DIR");
    if (!root) return NULL;
    snprintf(buf, n, "%s/%s", root, rel);
    return buf;
}

#endif
