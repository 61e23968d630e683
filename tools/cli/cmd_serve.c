/*
 * cmd_serve.c: `clover serve`: loads the model and runs the
 * OpenAI-compatible HTTP server (tools/server) until SIGINT or SIGTERM.
 * The signals are blocked in every thread and taken by the main thread with
 * sigwait, so shutting down is ordinary code (no work in a signal handler).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clover.h"
#include "cli_args.h"
#include "cli_opts.h"
#include "commands.h"
#include "default_model.h"
#include "server.h"

static const cli_opt serve_opts[] = {
    {"--model", "-m", CLI_STR, 0, 0, "FILE", NULL},
    {"--host", NULL, CLI_STR, 0, 0, "ADDR", NULL},
    {"--port", NULL, CLI_UINT, 0, 65535, "N", NULL},
    {"--model-name", NULL, CLI_STR, 0, 0, "NAME", NULL},
    {"--queue", NULL, CLI_UINT, 1, 1 << 20, "N", NULL},
    {"--max-body", NULL, CLI_UINT, 64, 1099511627776.0, "BYTES", NULL},
    {"--timeout", NULL, CLI_UINT, 1, 86400, "SECONDS", NULL},
    {"--threads", "-t", CLI_UINT, 0, 4096, "N", NULL},
    {"--device", NULL, CLI_STR, 0, 0, "D", NULL},
    {"--gpu-mem", NULL, CLI_STR, 0, 0, "N", NULL},
    {"--sessions", NULL, CLI_UINT, 1, 1 << 20, "N", NULL},
    {"--max-batch", NULL, CLI_UINT, 1, 256, "N", NULL},
    {"--ctx-size", "-c --ctx", CLI_UINT, 2, 4294967296.0, "N", NULL},
    {"--snapshot-mib", NULL, CLI_UINT, 0, 1 << 24, "N", NULL},
    {"--request-deadline", NULL, CLI_UINT, 1, 86400, "SECONDS", NULL},
    {"--grace", NULL, CLI_UINT, 0, 86400, "SECONDS", NULL},
    {"--max-conn-per-addr", NULL, CLI_UINT, 1, 1 << 20, "N", NULL},
    {"--max-connections", NULL, CLI_UINT, 1, 1 << 20, "N", NULL},
    {"--http-threads", NULL, CLI_UINT, 1, 1024, "N", NULL},
    {"--api-key", NULL, CLI_STR, 0, 0, "KEY", NULL},
    {"--api-key-file", NULL, CLI_STR, 0, 0, "FILE", NULL},
    {"--ssl-key", NULL, CLI_STR, 0, 0, "FILE", NULL},
    {"--ssl-cert", NULL, CLI_STR, 0, 0, "FILE", NULL},
    {"--max-n", NULL, CLI_UINT, 1, 128, "N", NULL},
    {"--test-script", NULL, CLI_STR, 0, 0, "FILE", NULL},
    {"--no-webui", NULL, CLI_FLAG, 0, 0, NULL, NULL},
};

static void serve_usage(FILE *out) {
    fprintf(out, "usage: clover serve [-m MODEL] [options]\n"
                 "\n"
                 "Serves the model over HTTP with OpenAI's API: POST /v1/chat/completions,\n"
                 "POST /v1/completions, GET /v1/models, GET /health, GET /metrics (Prometheus),\n"
                 "and a chat page at GET / with a live view of the denoising passes.\n"
                 "Up to --max-batch requests generate at once (one batched pass per step);\n"
                 "the others wait in a bounded queue.\n"
                 "\n"
                 "options:\n"
                 "  -m, --model FILE     GGUF model (default: the model built into this binary)\n"
                 "  --host ADDR          address to listen on (default 127.0.0.1)\n"
                 "  --port N             port (default 8080; 0: any free port, printed at start)\n"
                 "  --model-name NAME    the model's name in the API (default: the file's name\n"
                 "                       without .gguf, the built-in model's too: clover-demo-q8_0)\n"
                 "  --queue N            requests that may wait for the model; more get 429 (default 256)\n"
                 "  --max-body BYTES     largest request body; larger gets 413 (default 8388608)\n"
                 "  --timeout SECONDS    drop a client idle this long while sending or reading (default 30)\n"
                 "  -t, --threads N      CPU threads of the model (default: every CPU)\n"
                 "  --device D           auto (default: CUDA when a GPU is there and the model fits\n"
                 "                       it, else the CPU; the choice is printed), cpu or cuda (no\n"
                 "                       usable GPU: refused at start, exit 1)\n"
                 "  --gpu-mem N          a GPU smaller than the model: at most N GiB of it, the routed\n"
                 "                       experts cached there (--device cuda; docs/OFFLOAD.md)\n"
                 "  --sessions N         sessions kept for prefix reuse (default 4)\n"
                 "  --max-batch N        requests generating at once (default 8)\n"
                 "  -c, --ctx-size N     tokens per conversation, prompt + answer (default: the model's)\n"
                 "  --snapshot-mib N     largest prompt snapshot a session keeps for reuse across\n"
                 "                       chat turns, in MiB (default 1024; 0: keep none)\n"
                 "  --request-deadline SECONDS  a request's header must arrive within this time of the\n"
                 "                       connect, its body by then plus its length at 128 KiB/s,\n"
                 "                       however they trickle in (default 10)\n"
                 "  --max-conn-per-addr N  connections one client address may hold while over half\n"
                 "                       of --max-connections are in use (default 64)\n"
                 "  --max-connections N  connections in all (default 4096)\n"
                 "  --http-threads N     threads of the HTTP event loop (default 4)\n"
                 "  --grace SECONDS      on SIGTERM / SIGINT, how long running requests may finish\n"
                 "                       before they are cut (default 30)\n"
                 "  --api-key KEY        require Authorization: Bearer KEY (not on /health)\n"
                 "  --api-key-file FILE  the same, one key per line (with --api-key: either works)\n"
                 "  --ssl-key FILE, --ssl-cert FILE  serve HTTPS with this PEM key and certificate\n"
                 "  --no-webui           no chat page at GET / (the API alone)\n"
                 "  --max-n N            the most choices one request may ask for (n; default 8)\n"
                 "  --test-script FILE   tests only: every answer is this file's text (the model still runs)\n"
                 "  -h, --help           this text\n"
                 "\n"
                 "Exit codes: 0 stopped by SIGINT / SIGTERM, 1 could not start, 2 usage.\n");
}

#define SERVE_MAX_KEYS 64

typedef struct serve_args {
    const char *model;
    char name[128];
    server_options o;
    const char *keys[SERVE_MAX_KEYS];
    size_t n_keys;
    const char *key_file, *ssl_key, *ssl_cert, *script_file;
} serve_args;

/* 0 ok, 1 --help shown, -1 usage error (already reported). */
static int serve_parse(int argc, char **argv, serve_args *a) {
    a->o.port = 8080;
    const cli_opt_table tables[] = {{serve_opts, sizeof serve_opts / sizeof serve_opts[0]}};
    int nrc = cli_opts_normalize("serve", tables, 1, &argc, &argv);
    if (nrc > 0) serve_usage(stdout);
    if (nrc) return nrc;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "-h") || !strcmp(k, "--help")) {
            serve_usage(stdout);
            return 1;
        }
        if (!strcmp(k, "--no-webui")) { /* the one option without a value */
            a->o.no_webui = 1;
            continue;
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
        } else if (!strcmp(k, "--gpu-mem")) {
            rc = cli_parse_gib("serve", k, v, &a->o.gpu_mem);
        } else if (!strcmp(k, "--device")) {
            int d = clover_device_from_name(v);
            if (d < 0) {
                fprintf(stderr, "clover serve: --device '%s' is not one of auto, cpu, cuda\n", v);
                rc = -1;
            }
            a->o.device = d;
        } else if (!strcmp(k, "--ctx-size")) {
            rc = cli_parse_u64("serve", k, v, (uint64_t)1 << 32, &x);
            if (!rc && x < 2) {
                fprintf(stderr, "clover serve: --ctx-size must be at least 2 tokens\n");
                rc = -1;
            }
            a->o.context = (size_t)x;
        } else if (!strcmp(k, "--snapshot-mib")) {
            rc = cli_parse_u64("serve", k, v, (uint64_t)1 << 24, &x);
            a->o.snapshot_mib = (size_t)x;
            a->o.snapshot_set = 1;
        } else if (!strcmp(k, "--request-deadline") || !strcmp(k, "--grace")) {
            rc = cli_parse_u64("serve", k, v, 86400, &x);
            if (!rc && x == 0 && k[2] == 'r') {
                fprintf(stderr, "clover serve: --request-deadline must be at least 1 second\n");
                rc = -1;
            }
            if (k[2] == 'r') {
                a->o.deadline_s = (unsigned)x;
            } else {
                a->o.grace_s = (unsigned)x;
                a->o.grace_set = 1;
            }
        } else if (!strcmp(k, "--max-conn-per-addr") || !strcmp(k, "--max-connections") ||
                   !strcmp(k, "--http-threads")) {
            rc = cli_parse_u64("serve", k, v, k[2] == 'h' ? 1024 : 1u << 20, &x);
            if (!rc && x == 0) {
                fprintf(stderr, "clover serve: %s must be at least 1\n", k);
                rc = -1;
            }
            *(k[2] == 'h' ? &a->o.http_threads : !strcmp(k, "--max-connections") ? &a->o.max_connections
                                                                                  : &a->o.per_address) = (size_t)x;
        } else if (!strcmp(k, "--api-key")) {
            if (!v[0] || a->n_keys == SERVE_MAX_KEYS) {
                fprintf(stderr, "clover serve: --api-key must be non-empty (at most %d keys)\n", SERVE_MAX_KEYS);
                rc = -1;
            } else {
                a->keys[a->n_keys++] = v;
            }
        } else if (!strcmp(k, "--max-n")) {
            rc = cli_parse_u64("serve", k, v, 128, &x);
            if (!rc && x == 0) {
                fprintf(stderr, "clover serve: --max-n must be at least 1\n");
                rc = -1;
            }
            a->o.max_n = (size_t)x;
        } else if (!strcmp(k, "--test-script")) {
            a->script_file = v;
        } else if (!strcmp(k, "--api-key-file")) {
            a->key_file = v;
        } else if (!strcmp(k, "--ssl-key")) {
            a->ssl_key = v;
        } else if (!strcmp(k, "--ssl-cert")) {
            a->ssl_cert = v;
        } else {
            fprintf(stderr, "clover serve: unknown option '%s' (clover serve --help)\n", k);
            return -1;
        }
        if (rc) return -1;
    }
    if (!a->ssl_key != !a->ssl_cert) {
        fprintf(stderr, "clover serve: --ssl-key and --ssl-cert go together\n");
        return -1;
    }
    return 0;
}

/* A whole small file (PEM, keys), NUL-terminated; NULL with a message on stderr. */
static char *read_small_file(const char *what, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "clover serve: %s %s: cannot open it (%s)\n", what, path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    if (buf) n = fread(buf, 1, cap + 1, f);
    int bad = !buf || ferror(f) || n > cap;
    fclose(f);
    if (bad) {
        fprintf(stderr, "clover serve: %s %s: cannot read it (or it is over 1 MiB)\n", what, path);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* Keys of --api-key-file: one per line, blank lines and '#' comments skipped. Adds to a->keys (pointing into text). */
static int split_keys(serve_args *a, char *text, const char *path) {
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
            line[--n] = '\0';
        while (*line == ' ' || *line == '\t')
            line++;
        if (!*line || *line == '#') continue;
        if (a->n_keys == SERVE_MAX_KEYS) {
            fprintf(stderr, "clover serve: --api-key-file %s: more than %d keys\n", path, SERVE_MAX_KEYS);
            return -1;
        }
        a->keys[a->n_keys++] = line;
    }
    if (!a->n_keys) {
        fprintf(stderr, "clover serve: --api-key-file %s: no key in it\n", path);
        return -1;
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
        /* the file that will be loaded: -m, else $CLOVER_DEFAULT_MODEL, else the embedded one */
        const char *src = a.model ? a.model : default_model_env();
        if (!src) src = default_model_file();
        name_from_path(src ? src : "clover", a.name, sizeof a.name);
    }
    a.o.model_id = a.name;

    /* Before any thread exists: every thread inherits the blocked signals. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    char *key_text = NULL, *tls_key = NULL, *tls_cert = NULL;
    if (a.key_file && (!(key_text = read_small_file("--api-key-file", a.key_file)) ||
                       split_keys(&a, key_text, a.key_file))) {
        free(key_text);
        return 1;
    }
    if (a.ssl_key && (!(tls_key = read_small_file("--ssl-key", a.ssl_key)) ||
                      !(tls_cert = read_small_file("--ssl-cert", a.ssl_cert)))) {
        free(key_text);
        free(tls_key);
        return 1;
    }
    char *script = NULL;
    if (a.script_file && !(script = read_small_file("--test-script", a.script_file))) {
        free(key_text);
        free(tls_key);
        free(tls_cert);
        return 1;
    }
    a.o.test_script = script;
    a.o.api_keys = a.keys;
    a.o.n_api_keys = a.n_keys;
    a.o.tls_key_pem = tls_key;
    a.o.tls_cert_pem = tls_cert;

    clover_model *m = NULL;
    server *s = NULL;
    char err[512];
    int failed = cli_load_model("serve", a.model, &m) != 0;
    if (!failed && server_start(&s, m, &a.o, err, sizeof err)) {
        fprintf(stderr, "clover serve: %s\n", err);
        failed = 1;
    }
    free(key_text); /* the server keeps copies */
    free(tls_key);
    free(tls_cert);
    free(script); /* tokenized by server_start */
    if (failed) {
        clover_model_free(m);
        return 1;
    }
    fprintf(stderr, "clover serve: listening on %s://%s:%u (model %s)\n", a.ssl_key ? "https" : "http",
            a.o.host ? a.o.host : "127.0.0.1", server_port(s), a.name);
    const char *why = NULL, *dev = server_device(s, &why);
    fprintf(stderr, "clover serve: on the %s backend (%s)\n", dev, why);
    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "clover serve: %s received, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    server_stop(s);
    clover_model_free(m);
    return 0;
}
