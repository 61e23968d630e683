/*
 * gate.h: the server's front door. It owns the listening socket and holds
 * each new connection until its whole request header is in, then hands the
 * socket to libmicrohttpd (MHD_add_connection). Why a door in front of MHD:
 * MHD restarts its timeout on every byte (a client that trickles a byte a
 * second keeps a connection forever), answers a malformed or oversized
 * header with HTML pages, and counts a stalled connection against its own
 * limits. The gate instead gives the header a deadline from the accept that
 * no trickle extends, limits connections per client address, and answers a
 * bad header itself with an OpenAI-shaped JSON error. One thread with one
 * epoll set watches every held connection, so thousands of stalled clients
 * cost a socket each and no thread.
 *
 * Limits: the total is sized in thousands (one socket and a few hundred
 * bytes each). The per-address share applies only under pressure (over
 * half the total in use): one address is every client behind a reverse
 * proxy, or every local application, and must not be refused while there
 * is room. Every refusal is answered, JSON with Retry-After (503 when the
 * total is reached, 429 for an address over its share under pressure),
 * and lingers like any other refused connection so the answer arrives.
 *
 * The header is read with MSG_PEEK: its bytes stay in the socket for MHD to
 * parse again, so the gate needs no buffer of its own and hands MHD a
 * socket as if it had just been accepted. Epoll is edge-triggered for held
 * sockets (peeked bytes stay readable; only new bytes wake the gate).
 *
 * Under TLS the header is encrypted: the gate then only applies the
 * per-address and total limits and hands the socket over at once.
 */
#ifndef CLOVER_SERVER_GATE_H
#define CLOVER_SERVER_GATE_H

#include <stddef.h>
#include <sys/socket.h>

struct MHD_Daemon;

typedef struct gate_options {
    int listen_fd;         /* bound and listening; the gate closes it */
    size_t per_address;    /* under pressure, connections one client address may hold; 0: no limit */
    size_t max_connections;/* connections in all (held + handed over); pressure is half of it */
    double deadline_s;     /* the whole header must arrive this soon after the accept */
    size_t max_header;     /* bytes of request line + headers; more gets 431 (414 for the line) */
    size_t max_url;        /* bytes of the request target; more gets 414 */
    size_t max_fields;     /* header lines; more gets 431 (MHD keeps each in its pool); 0: no limit */
    int tls;               /* the bytes are encrypted: no header checks */
} gate_options;

typedef struct gate gate;

/* Starts the gate's thread. Returns 0, or -1 with one line in err. */
int gate_start(gate **out, struct MHD_Daemon *daemon, const gate_options *o, char *err, size_t err_len);

/* Stops accepting: closes the listening socket and every held connection. */
void gate_close(gate *g);
/* Closes if needed, joins the thread, frees. */
void gate_free(gate *g);

/* A handed-over connection ended (MHD's notify callback): frees its address's slot. */
void gate_release(gate *g, const struct sockaddr *addr);

/* When the connection on socket fd was accepted (monotonic seconds), for the body's deadline; 0 unknown. */
double gate_accepted_at(const gate *g, int fd);

/* Writes a whole JSON error response on socket fd, Retry-After on a 429 or 503 (best effort, not blocking). */
void gate_send_error(int fd, int status, const char *type, const char *code, const char *message);

/* Pure, for tests and the fuzzer: classifies the first n peeked bytes of a
 * request. Returns 0 when the header is complete and acceptable, 1 when more
 * bytes are needed, or an HTTP status (400, 411, 413, 414, 431, 505) with a
 * one-line reason in why. */
int gate_check_header(const char *buf, size_t n, const gate_options *o, char *why, size_t why_len);

#endif
