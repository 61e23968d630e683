/*
 * gate_header.c: is this the start of an HTTP/1.x request that MHD will
 * take without answering an error page of its own? Checked on the bytes
 * peeked so far, so a request line of garbage is refused as soon as it is
 * seen, and an oversized line or header as soon as it passes the limit.
 * What MHD would refuse with HTML (a malformed line or header, a missing
 * Host, a bad Content-Length, chunked framing errors) is refused here with
 * a status and a reason, answered as JSON by the gate. Pure: no I/O.
 */
#include <stdio.h>
#include <string.h>

#include "gate.h"

static int is_tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int refuse(char *why, size_t len, int status, const char *reason) {
    snprintf(why, len, "%s", reason);
    return status;
}

/* One header line [p, e) (no line end): name ":" value. Sets the facts the checks need. */
typedef struct header_facts {
    int host, content_length, chunked;
    unsigned long long length;
} header_facts;

static int header_line(const char *p, const char *e, header_facts *f, char *why, size_t len) {
    if (*p == ' ' || *p == '\t') return refuse(why, len, 400, "a header line is folded (obsolete line folding)");
    const char *c = p;
    while (c < e && is_tchar((unsigned char)*c))
        c++;
    if (c == p || c == e || *c != ':') return refuse(why, len, 400, "a header line has no 'name:' part");
    size_t nl = (size_t)(c - p);
    const char *v = c + 1, *ve = e;
    while (v < ve && (*v == ' ' || *v == '\t'))
        v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r'))
        ve--;
    for (const char *q = v; q < ve; q++)
        if ((unsigned char)*q < 0x20 && *q != '\t') return refuse(why, len, 400, "a header value has a control byte");
    if (nl == 4 && !strncasecmp(p, "host", 4)) {
        f->host = 1;
    } else if (nl == 14 && !strncasecmp(p, "content-length", 14)) {
        if (v == ve) return refuse(why, len, 400, "Content-Length is empty");
        unsigned long long x = 0;
        for (const char *q = v; q < ve; q++) {
            if (*q < '0' || *q > '9') return refuse(why, len, 400, "Content-Length is not a number");
            if (x > (~0ull - 9) / 10) return refuse(why, len, 413, "Content-Length is too large");
            x = 10 * x + (unsigned)(*q - '0');
        }
        if (f->content_length && f->length != x) return refuse(why, len, 400, "Content-Length is given twice");
        f->content_length = 1;
        f->length = x;
    } else if (nl == 17 && !strncasecmp(p, "transfer-encoding", 17)) {
        f->chunked = 1;
    }
    return 0;
}

int gate_check_header(const char *buf, size_t n, const gate_options *o, char *why, size_t why_len) {
    size_t i = 0;
    while (i < n && (buf[i] == '\r' || buf[i] == '\n')) /* empty lines before a request are allowed */
        i++;
    /* method */
    size_t m0 = i;
    while (i < n && is_tchar((unsigned char)buf[i]))
        i++;
    if (i - m0 > 32) return refuse(why, why_len, 400, "the request line's method is not a method");
    if (i == n) return n >= o->max_header ? refuse(why, why_len, 400, "the request line is not HTTP") : 1;
    if (buf[i] != ' ' || i == m0) return refuse(why, why_len, 400, "the request line is not HTTP (METHOD TARGET HTTP/1.x)");
    i++;
    /* target */
    size_t t0 = i;
    while (i < n && buf[i] != ' ' && buf[i] != '\r' && buf[i] != '\n') {
        if ((unsigned char)buf[i] < 0x21 || (unsigned char)buf[i] == 0x7f)
            return refuse(why, why_len, 400, "the request target has a control byte");
        if (i - t0 >= o->max_url) {
            char r[96];
            snprintf(r, sizeof r, "the request target is longer than %zu bytes", o->max_url);
            return refuse(why, why_len, 414, r);
        }
        i++;
    }
    if (i == n) return n >= o->max_header ? refuse(why, why_len, 414, "the request target is too long") : 1;
    if (buf[i] != ' ' || i == t0) return refuse(why, why_len, 400, "the request line is not HTTP (METHOD TARGET HTTP/1.x)");
    i++;
    /* version */
    size_t v0 = i;
    while (i < n && buf[i] != '\n')
        i++;
    if (i == n) return n >= o->max_header ? refuse(why, why_len, 431, "the request line is too long") : 1;
    size_t ve = i > v0 && buf[i - 1] == '\r' ? i - 1 : i;
    size_t vl = ve - v0;
    int http11 = 0;
    if (vl == 8 && !memcmp(buf + v0, "HTTP/1.1", 8))
        http11 = 1;
    else if (!(vl == 8 && !memcmp(buf + v0, "HTTP/1.0", 8)))
        return vl == 8 && !memcmp(buf + v0, "HTTP/", 5) && buf[v0 + 5] >= '0' && buf[v0 + 5] <= '9' &&
                       buf[v0 + 6] == '.' && buf[v0 + 7] >= '0' && buf[v0 + 7] <= '9'
                   ? refuse(why, why_len, 505, "only HTTP/1.0 and HTTP/1.1 are served")
                   : refuse(why, why_len, 400, "the request line is not HTTP (METHOD TARGET HTTP/1.x)");
    i++;
    /* header lines, up to the empty line */
    header_facts f = {0};
    size_t fields = 0;
    for (;;) {
        size_t l0 = i;
        while (i < n && buf[i] != '\n')
            i++;
        if (i == n) {
            if (n < o->max_header) return 1;
            char r[96];
            snprintf(r, sizeof r, "the request header is larger than %zu bytes", o->max_header);
            return refuse(why, why_len, 431, r);
        }
        size_t le = i > l0 && buf[i - 1] == '\r' ? i - 1 : i;
        i++;
        if (le == l0) break; /* the end of the header */
        if (o->max_fields && ++fields > o->max_fields) {
            char r[96];
            snprintf(r, sizeof r, "the request has more than %zu header lines", o->max_fields);
            return refuse(why, why_len, 431, r);
        }
        int rc = header_line(buf + l0, buf + le, &f, why, why_len);
        if (rc) return rc;
    }
    if (i > o->max_header) {
        char r[96];
        snprintf(r, sizeof r, "the request header is larger than %zu bytes", o->max_header);
        return refuse(why, why_len, 431, r);
    }
    if (http11 && !f.host) return refuse(why, why_len, 400, "an HTTP/1.1 request needs a Host header");
    if (f.chunked) return refuse(why, why_len, 411, "chunked request bodies are not taken: send Content-Length");
    return 0;
}
