/*
 * server.h: `clover serve`: an OpenAI-compatible HTTP server over one model
 * (POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
 * GET /health, GET /metrics). A library user like the CLI: it reaches the
 * model only through include/clover.h.
 */
#ifndef CLOVER_SERVER_SERVER_H
#define CLOVER_SERVER_SERVER_H

#include <stddef.h>

#include "clover.h"

typedef struct server_options {
    const char *host;    /* address to bind; NULL: 127.0.0.1 */
    unsigned port;       /* 0: any free port (server_port tells which) */
    const char *model_id; /* the name clients use; NULL: "clover" */
    size_t queue;        /* requests that may wait for the model; 0: 256 */
    size_t max_body;     /* request body cap in bytes; 0: 8 MiB */
    unsigned timeout_s;  /* a client idle this long while sending or reading is dropped; 0: 30 */
    size_t n_threads;    /* engine CPU threads; 0: every CPU */
    int device;          /* clover_device of the sessions (auto, cpu, cuda) */
    uint64_t gpu_mem;    /* --gpu-mem N GiB in bytes (0: off): clover_session_params.gpu_mem */
    size_t n_sessions;   /* sessions kept for prefix reuse; 0: 4 */
    size_t max_batch;    /* requests generating at once, stepped in one batched pass; 0: 8 */
    size_t context;      /* tokens per session (prompt + answer); 0: the model's training context */
    size_t snapshot_mib; /* with snapshot_set: the largest prompt snapshot kept, MiB (0: none) */
    int snapshot_set;    /* 0: the engine's default (1 GiB) */

    /* connections */
    unsigned deadline_s;    /* the header must arrive this soon after the connect, the body by then plus its length at 128 KiB/s; 0: 10 */
    size_t per_address;     /* connections one client address may hold while over half of max_connections are in use; 0: 64 */
    size_t max_connections; /* connections in all; 0: 4096 (bounded by the descriptor limit) */
    size_t http_threads;    /* MHD's event-loop threads; 0: 4 */
    unsigned grace_s;       /* shutdown: how long running requests may go on; 0: 30 (grace_set: 0 is 0) */
    int grace_set;

    /* access */
    const char *const *api_keys; /* [n_api_keys]: Authorization: Bearer KEY is required (not on /health) */
    size_t n_api_keys;
    const char *tls_key_pem, *tls_cert_pem; /* both: HTTPS (PEM text, borrowed until server_start returns) */

    /* requests */
    size_t max_n; /* the largest n (choices per request); more gets 400; 0: 8 */
    /* A test hook: answers scripted in advance, whatever the model
     * generates (the engine still runs, its emitted ids replaced one for
     * one): the text holds answers separated by the byte 0x1E, given to the
     * requests in the order they arrive (cycling). Tests use it to drive
     * the tool call parser end to end. NULL: off (always, outside tests). */
    const char *test_script;

    int no_webui; /* --no-webui: no chat page at GET / (tools/server/webui) */
} server_options;

typedef struct server server;

/* Starts listening and the scheduler. The model must outlive the server.
 * Returns 0, or -1 with one line in err. */
int server_start(server **out, const clover_model *m, const server_options *o, char *err, size_t err_len);
unsigned server_port(const server *s);
/* The backend the model runs on ("cpu", "cuda") and why it was chosen (one line). */
const char *server_device(const server *s, const char **why);
/* Stops accepting, answers the queued requests 503, lets the running ones
 * go on for the grace period (then cuts them: finish "length", cut
 * "shutdown"), joins every thread and frees the server. */
void server_stop(server *s);

#endif
