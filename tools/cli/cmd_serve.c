/*
 * cmd_serve.c: `clover serve`: loads the model and runs the
 * OpenAI-compatible HTTP server (tools/server) until SIGINT or SIGTERM.
 * The signals are blocked in every thread and taken by the main thread with
 * sigwait, so shutting down is ordinary code (no work in a signal handler).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "clover.h"
#include "cli_args.h"
#include "commands.h"
#include "server.h"

static void serve_usage(FILE *out) {
    fprintf(out, "usage: clover serve [-m MODEL] [options]\n"
                 "\n"
                 "Serves the model over HTTP with OpenAI's API: POST /v1/chat/completions,\n"
                 "POST /v1/completions, GET /v1/models, GET /health, GET /metrics (Prometheus).\n"
                 "Up to --max-batch requests generate at once (one batched pass per step);\n"
                 "the others wait in a bounded queue.\n"
                 "\n"
                 "options:\n"
                 "  -m, --model FILE     GGUF model (default: the model built into this binary)\n"
                 "  --host ADDR          address to listen on (default 127.0.0.1)\n"
                 "  --port N             port (default 8080; 0: any free port, printed at start)\n"
                 "  --model-name NAME    the model's name in the API (default: the file's name\n"
                 "                       without .gguf, or clover-tiny for the built-in model)\n"
                 "  --queue N            requests that may wait for the model; more get 429 (default 64)\n"
                 "  --max-body BYTES     largest request body; larger gets 413 (default 8388608)\n"
                 "  --timeout SECONDS    drop a client idle this long while sending or reading (default 30)\n"
                 "  --threads N          CPU threads of the model (default: every CPU)\n"
                 "  --device D           auto (default: CUDA for a model without the Clover record\n"
                 "                       when a GPU fits it, else the CPU), cpu or cuda (no block\n"
                 "                       diffusion on cuda yet)\n"
                 "  --sessions N         sessions kept for prefix reuse (default 4)\n"
                 "  --max-batch N        requests generating at once (default 8)\n"
                 "  --ctx N              tokens per conversation, prompt + answer (default: the model's)\n"
                 "  --snapshot-mib N     largest prompt snapshot a session keeps for reuse across\n"
                 "                       chat turns, in MiB (default 1024; 0: keep none)\n"
                 "  -h, --help           this text\n"
                 "\n"
                 "Exit codes: 0 stopped by SIGINT / SIGTERM, 1 could not start, 2 usage.\n");
}

typedef struct serve_args {
    const char *model;
    char name[128];
    server_options o;
} serve_args;

/* 0 ok, 1 --help shown, -1 usage error (already reported). */
static int serve_parse(int argc, char **argv, serve_args *a) {
    a->o.port = 8080;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "-h") || !strcmp(k, "--help")) {
            serve_usage(stdout);
            return 1;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (k[0] != '-') {
            fprintf(stderr, "clover serve: unexpected argument '%s' (clover serve --help)\n", k);
            return -1;
        }
        if (!v) {
            fprintf(stderr, "clover serve: %s needs a value (clover serve --help)\n", k);
            return -1;
        }
        i++;
        uint64_t x = 0;
        int rc = 0;
        if (!strcmp(k, "-m") || !strcmp(k, "--model")) {
            a->model = v;
        } else if (!strcmp(k, "--host")) {
            a->o.host = v;
        } else if (!strcmp(k, "--model-name")) {
            snprintf(a->name, sizeof a->name, "%s", v);
        } else if (!strcmp(k, "--port")) {
            rc = cli_parse_u64("serve", k, v, 65535, &x);
            a->o.port = (unsigned)x;
        } else if (!strcmp(k, "--queue") || !strcmp(k, "--sessions") || !strcmp(k, "--max-batch")) {
            rc = cli_parse_u64("serve", k, v, !strcmp(k, "--max-batch") ? 256 : 1u << 20, &x);
            if (!rc && x == 0) {
                fprintf(stderr, "clover serve: %s must be at least 1\n", k);
                rc = -1;
            }
            *(k[2] == 'q' ? &a->o.queue : k[2] == 's' ? &a->o.n_sessions : &a->o.max_batch) = (size_t)x;
        } else if (!strcmp(k, "--max-body")) {
            rc = cli_parse_u64("serve", k, v, (uint64_t)1 << 40, &x);
            if (!rc && x < 64) {
                fprintf(stderr, "clover serve: --max-body must be at least 64 bytes\n");
                rc = -1;
            }
            a->o.max_body = (size_t)x;
        } else if (!strcmp(k, "--timeout")) {
            rc = cli_parse_u64("serve", k, v, 86400, &x);
            if (!rc && x == 0) {
                fprintf(stderr, "clover serve: --timeout must be at least 1 second\n");
                rc = -1;
            }
            a->o.timeout_s = (unsigned)x;
        } else if (!strcmp(k, "--threads")) {
            rc = cli_parse_u64("serve", k, v, 4096, &x);
            a->o.n_threads = (size_t)x;
        } else if (!strcmp(k, "--device")) {
            int d = clover_device_from_name(v);
            if (d < 0) {
                fprintf(stderr, "clover serve: --device '%s' is not one of auto, cpu, cuda\n", v);
                rc = -1;
            }
            a->o.device = d;
        } else if (!strcmp(k, "--ctx")) {
            rc = cli_parse_u64("serve", k, v, (uint64_t)1 << 32, &x);
            if (!rc && x < 2) {
                fprintf(stderr, "clover serve: --ctx must be at least 2 tokens\n");
                rc = -1;
            }
            a->o.context = (size_t)x;
        } else if (!strcmp(k, "--snapshot-mib")) {
            rc = cli_parse_u64("serve", k, v, (uint64_t)1 << 24, &x);
            a->o.snapshot_mib = (size_t)x;
            a->o.snapshot_set = 1;
        } else {
            fprintf(stderr, "clover serve: unknown option '%s' (clover serve --help)\n", k);
            return -1;
        }
        if (rc) return -1;
    }
    return 0;
}

/* The file's name without directories and ".gguf". */
static void name_from_path(const char *path, char *out, size_t cap) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".gguf")) n -= 5;
    snprintf(out, cap, "%.*s", (int)n, base);
}

int cmd_serve(int argc, char **argv) {
    serve_args a;
    memset(&a, 0, sizeof a);
    int prc = serve_parse(argc, argv, &a);
    if (prc) return prc > 0 ? 0 : 2;
    if (!a.name[0]) {
        if (a.model)
            name_from_path(a.model, a.name, sizeof a.name);
        else
            snprintf(a.name, sizeof a.name, "clover-tiny");
    }
    a.o.model_id = a.name;

    /* Before any thread exists: every thread inherits the blocked signals. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    clover_model *m = NULL;
    if (cli_load_model("serve", a.model, &m)) return 1;
    server *s = NULL;
    char err[512];
    if (server_start(&s, m, &a.o, err, sizeof err)) {
        fprintf(stderr, "clover serve: %s\n", err);
        clover_model_free(m);
        return 1;
    }
    fprintf(stderr, "clover serve: listening on http://%s:%u (model %s)\n", a.o.host ? a.o.host : "127.0.0.1",
            server_port(s), a.name);
    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "clover serve: %s received, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    server_stop(s);
    clover_model_free(m);
    return 0;
}
