/*
 * body_watch.h: the request body's deadline, kept by a thread of its own.
 *
 * Why: libmicrohttpd calls the server only when body bytes arrive, so a
 * body that stalls would never be answered (MHD's idle timeout closes the
 * socket without a word). The watch holds every connection whose body is
 * on its way; at the deadline it answers the client a JSON 408 on the
 * socket itself (nothing else writes to it while the body is read) and
 * shuts the socket, so MHD sees the end and lets the request go.
 *
 * Each watched request owns an atomic state: the MHD thread moves it from
 * READING to DONE when the body is complete, the watch from READING to CUT
 * at the deadline; whoever moves it first wins, so a request is never both
 * answered and cut.
 */
#ifndef CLOVER_SERVER_BODY_WATCH_H
#define CLOVER_SERVER_BODY_WATCH_H

#include <stdatomic.h>

enum { BODY_NONE = 0, BODY_READING, BODY_DONE, BODY_CUT };

typedef struct body_watch body_watch;

int body_watch_start(body_watch **out);
void body_watch_free(body_watch *w);

/* Watches socket fd until body_watch_remove(state); state must be BODY_READING and outlive the watch.
 * tls: the socket carries TLS, so the 408 cannot be written: it is only shut. Returns 0, or -1 (out of memory). */
int body_watch_add(body_watch *w, atomic_int *state, int fd, double deadline, int tls);
/* Ends the watch of state (a no-op when it is not watched). */
void body_watch_remove(body_watch *w, atomic_int *state);

#endif
