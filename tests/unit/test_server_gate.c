/*
 * test_server_gate.c: the gate's header check (tools/server/gate_header.c)
 * on hand-written requests. Every prefix of an acceptable request must read
 * "more bytes needed" (1) and the whole of it "acceptable" (0), so a request
 * arriving a byte at a time is never refused early; each malformed or
 * oversized head must get its own status, at the latest once its limit is
 * passed, whatever follows.
 */
#include <string.h>

#include "gate.h"
#include "test.h"

static const gate_options OPTS = {.max_header = 256, .max_url = 64, .deadline_s = 1};

static int check(const char *s, size_t n) {
    char why[160];
    return gate_check_header(s, n, &OPTS, why, sizeof why);
}

static void test_prefixes_of_good_requests(void) {
    static const char *const good[] = {
        "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST /v1/completions HTTP/1.1\r\nHost: a:1\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n",
        "GET / HTTP/1.0\r\n\r\n",                        /* 1.0 needs no Host */
        "\r\nGET /metrics HTTP/1.1\nHost: x\n\n",         /* a leading empty line, bare LF line ends */
        "GET /x HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        size_t n = strlen(good[i]);
        for (size_t k = 0; k < n; k++)
            CHECK_MSG(check(good[i], k) == 1, "request %zu, prefix %zu: %d", i, k, check(good[i], k));
        CHECK_MSG(check(good[i], n) == 0, "request %zu whole: %d", i, check(good[i], n));
    }
}

static void test_bad_heads(void) {
    static const struct {
        const char *head;
        int status;
    } bad[] = {
        {"\x16\x03\x01", 400},                                   /* TLS to a plain port: refused at once */
        {"GET\t/ HTTP/1.1\r\n", 400},
        {"GET  / HTTP/1.1\r\n", 400},
        {"GET / HTTP/1.1 extra\r\n", 400},
        {"GET / FTP/1.1\r\n", 400},
        {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
        {"GET / HTTP/1.1\r\n\r\n", 400},                          /* no Host */
        {"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost x\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 123456789012345678901234\r\n\r\n", 413},
        {"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 411},
        {"GET / HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n", 400},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(check(bad[i].head, strlen(bad[i].head)) == bad[i].status, "case %zu: %d, expected %d", i,
                  check(bad[i].head, strlen(bad[i].head)), bad[i].status);
}

static void test_limits(void) {
    char buf[1024];
    /* a target past max_url: 414 as soon as it is seen, before the line ends */
    strcpy(buf, "GET /");
    memset(buf + 5, 'a', 70);
    CHECK_EQ_INT(check(buf, 5 + 70), 414);
    CHECK_EQ_INT(check(buf, 5 + 63), 1);
    /* a header past max_header: 431 once that many bytes are in */
    size_t n = (size_t)snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(buf + n, 'b', 400);
    CHECK_EQ_INT(check(buf, 255), 1);
    CHECK_EQ_INT(check(buf, 256), 431);
    CHECK_EQ_INT(check(buf, n + 400), 431);
    /* a complete header that is too large is refused too */
    memcpy(buf + n + 300, "\r\n\r\n", 4);
    CHECK_EQ_INT(check(buf, n + 304), 431);
}

/* More header lines than max_fields: 431 at the line past the limit, whatever their size. */
static void test_field_count(void) {
    static const gate_options o = {.max_header = 1024, .max_url = 64, .max_fields = 3, .deadline_s = 1};
    char why[160];
    const char *three = "GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\n\r\n";
    const char *four = "GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\n";
    CHECK_EQ_INT(gate_check_header(three, strlen(three), &o, why, sizeof why), 0);
    CHECK_EQ_INT(gate_check_header(four, strlen(four), &o, why, sizeof why), 431);
    CHECK(strstr(why, "3 header lines") != NULL);
}

int main(void) {
    RUN(test_prefixes_of_good_requests);
    RUN(test_bad_heads);
    RUN(test_limits);
    RUN(test_field_count);
    return TEST_EXIT();
}
