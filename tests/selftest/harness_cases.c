/*
 * harness_cases.c: a test binary that misbehaves on request, for the
 * self-test of the tests (tests/selftest.sh): each mode is a way a test
 * could once report green while checking nothing, and tests/test.h must
 * turn it into the exit status named beside it.
 *   pass            one case, one true check: 0 (the control)
 *   check-outside   a check fails in main, outside any RUN(): 1
 *   no-cases        no RUN() at all: 1
 *   skip            TEST_SKIP with a reason no allow-list holds: 77
 *   skip-allowed    TEST_SKIP("no CUDA device (...)"): 77
 *   skip-after-fail a failed check, then TEST_SKIP: 1
 */
#include <string.h>

#include "test.h"

static void one_true_check(void) { CHECK(1 + 1 == 2); }

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "pass")) {
        RUN(one_true_check);
    } else if (!strcmp(mode, "check-outside")) {
        CHECK_MSG(0, "planted: a failed check outside any case");
        RUN(one_true_check);
    } else if (!strcmp(mode, "no-cases")) {
        /* nothing ran */
    } else if (!strcmp(mode, "skip")) {
        TEST_SKIP("planted: a reason that is not a machine fact");
    } else if (!strcmp(mode, "skip-allowed")) {
        TEST_SKIP("no CUDA device (planted by tests/selftest.sh)");
    } else if (!strcmp(mode, "skip-after-fail")) {
        CHECK_MSG(0, "planted: a failed check before a skip");
        TEST_SKIP("planted: skipping after a failure");
    } else {
        fprintf(stderr, "harness_cases: unknown mode '%s'\n", mode);
        return 2;
    }
    return TEST_EXIT();
}
