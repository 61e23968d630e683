/*
 * bench_batch.c: aggregate generation speed of N concurrent requests on one
 * engine (clover_engine + clover_batch_step, the server's continuous
 * batching path), beside one request alone, for block diffusion and
 * autoregressive decoding.
 *
 * For each N in 1 2 4 8 16 (or --n LIST), N requests with distinct prompts
 * (same length) run to max_tokens together; the figure is the tokens all of
 * them generated divided by the wall time from the first step to the last
 * (prompts included), and its ratio to N = 1's; "decode tok/s" counts only
 * the tokens after every request has its first token, over the time from
 * then to the end (the steady state of continuous batching, prompts
 * excluded), and the floor applies to it. The floor to beat is the
 * issue's: autoregressive decode of 8 requests should read the dense
 * weights once instead of 8 times, so >= 2.5x the aggregate of one request
 * at N = 8 where decode is bandwidth-bound (the 35B-A3B file); previews are
 * compute-bound, so batching can only save the weight reads there. The
 * process's CPU share (CPU time / wall) and the load average are printed:
 * the machine may be shared.
 *
 * The step split (issue 25): per clover_batch_step, the milliseconds in the
 * backend's calls (the first request's prompt, preview, commit and
 * backend pick seconds: with equal prompts and lengths every request is in
 * every call, and a call's whole time is each of its sequences') less the
 * picks (its pick seconds: on CUDA the device time of the pick launches,
 * from events; "pass"), the picks ("pick"),
 * and the host's share (the step's wall time minus the backend's: planning,
 * absorbing, emitting, the engine's bookkeeping).
 *
 *   bench_batch MODEL [--threads T] [--prompt P] [--gen G] [--n 1,2,4,8,16] [--mode diffusion|ar|both]
 *               [--device auto|cpu|cuda]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/timer.h"
#include "clover.h"

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static double loadavg(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

/* When every request of a run has its first token (the decode window). */
typedef struct window {
    size_t n, started, emitted, at_all;
    double t_all;
} window;
typedef struct req_user {
    window *w;
    int started;
} req_user;

static int on_token(void *user, int32_t id, float conf) {
    (void)id, (void)conf;
    req_user *u = user;
    u->w->emitted++;
    if (!u->started) {
        u->started = 1;
        if (++u->w->started == u->w->n) u->w->t_all = timer_now(), u->w->at_all = u->w->emitted;
    }
    return 0;
}

/* N requests together; returns aggregate tokens/s (0 on failure), *decode
 * the tokens/s of the decode window, *sp the step split. */
static int device = CLOVER_DEVICE_AUTO;

typedef struct step_split {
    size_t steps;
    double pass_ms, pick_ms, host_ms; /* per step */
} step_split;

static double run(const clover_model *m, size_t threads, size_t n, size_t prompt, size_t gen, clover_mode mode,
                  double *share, double *decode, step_split *split) {
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = threads;
    sp.no_snapshot = 1;
    sp.device = device;
    sp.max_context = prompt + gen + 256; /* a device session takes its whole KV at creation: only what is used */
    clover_error err = {0};
    clover_engine *e = NULL;
    if (clover_engine_create(&e, m, &sp, &err)) {
        fprintf(stderr, "bench_batch: %s\n", err.message);
        return 0;
    }
    static int said;
    if (!said++) printf("engine on the %s backend (%s)\n", clover_engine_backend(e), clover_engine_device_reason(e));
    clover_model_info info;
    clover_model_get_info(m, &info);
    clover_session **ss = calloc(n, sizeof *ss);
    clover_request **rq = calloc(n, sizeof *rq);
    int32_t *ids = malloc(prompt * sizeof *ids);
    clover_generate_params p;
    clover_generate_params_init(&p);
    p.mode = mode;
    p.max_tokens = gen;
    p.ignore_eos = 1;
    window win = {.n = n};
    req_user *users = calloc(n, sizeof *users);
    p.on_token = on_token;
    double t0 = timer_now(), c0 = cpu_seconds(), tokens = 0;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        for (size_t k = 0; k < prompt; k++) ids[k] = (int32_t)((k * 31 + i * 7 + 1) % (info.n_vocab - 16));
        users[i].w = &win;
        p.user = &users[i];
        ok = !clover_engine_session_create(&ss[i], e, &sp, &err) &&
             !clover_request_create(&rq[i], ss[i], ids, prompt, &p, &err);
    }
    const double t_steps = timer_now();
    size_t steps = 0;
    while (ok && (steps++, clover_batch_step(rq, n) > 0)) {}
    const double t_end = timer_now(), wall = t_end - t0, step_wall = t_end - t_steps;
    *split = (step_split){.steps = steps};
    *decode = win.started == n && t_end > win.t_all ? (double)(win.emitted - win.at_all) / (t_end - win.t_all) : 0;
    for (size_t i = 0; i < n; i++) {
        clover_generate_result r;
        if (rq[i] && clover_request_result(rq[i], &r, &err) == 0) {
            tokens += (double)r.n_generated;
            if (i == 0 && steps) {
                /* autoregressive: a decode call's whole time is in commit_s, its picks beside it in pick_s;
                 * diffusion: preview_s leaves the picks out (generate_diffusion.c) */
                const double be = r.stats.prompt_s + r.stats.preview_s + r.stats.commit_s +
                                  (mode == CLOVER_MODE_AUTOREGRESSIVE ? 0.0 : r.stats.pick_s);
                split->pick_ms = 1e3 * r.stats.pick_s / (double)steps;
                split->pass_ms = 1e3 * (be - r.stats.pick_s) / (double)steps;
                split->host_ms = 1e3 * (step_wall - be) / (double)steps;
            }
            clover_generate_result_free(&r);
        } else {
            ok = 0;
        }
        clover_request_free(rq[i]);
        clover_session_free(ss[i]);
    }
    if (!ok) fprintf(stderr, "bench_batch: %s\n", err.message);
    *share = (cpu_seconds() - c0) / wall;
    clover_engine_free(e);
    free(ss), free(rq), free(ids), free(users);
    return ok ? tokens / wall : 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_batch MODEL [--threads T] [--prompt P] [--gen G] [--n 1,2,4,8,16] "
                        "[--mode diffusion|ar|both] [--device auto|cpu|cuda]\n");
        return 2;
    }
    size_t threads = 0, prompt = 64, gen = 64, ns[16] = {1, 2, 4, 8, 16}, nn = 5;
    const char *mode = "both";
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--prompt")) prompt = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--gen")) gen = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--mode")) mode = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) {
            if ((device = clover_device_from_name(argv[i + 1])) < 0) {
                fprintf(stderr, "bench_batch: --device %s is not one of auto, cpu, cuda\n", argv[i + 1]);
                return 2;
            }
        }
        else if (!strcmp(argv[i], "--n")) {
            nn = 0;
            for (char *s = argv[i + 1]; *s && nn < 16; s += *s == ',') ns[nn++] = strtoul(s, &s, 10);
        } else {
            fprintf(stderr, "bench_batch: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    clover_model *m = NULL;
    clover_error err = {0};
    if (clover_model_load(&m, argv[1], &err)) {
        fprintf(stderr, "bench_batch: %s\n", err.message);
        return 1;
    }
    clover_model_info info;
    clover_model_get_info(m, &info);
    printf("bench_batch %s: prompt %zu, gen %zu per request, threads %zu (0: all)\n", argv[1], prompt, gen, threads);
    for (int k = 0; k < 2; k++) {
        clover_mode md = k == 0 ? CLOVER_MODE_DIFFUSION : CLOVER_MODE_AUTOREGRESSIVE;
        if ((k == 0 && (!info.record || !strcmp(mode, "ar"))) || (k == 1 && !strcmp(mode, "diffusion"))) continue;
        printf("%-14s %4s %12s %8s %13s %8s %8s %8s %6s %8s %8s %8s\n", k == 0 ? "diffusion" : "autoregressive", "N",
               "agg tok/s", "vs N=1", "decode tok/s", "vs N=1", "cores", "load", "steps", "pass ms", "pick ms",
               "host ms");
        double one = 0, one_d = 0;
        for (size_t i = 0; i < nn; i++) {
            step_split sp = {0};
            double share = 0, d = 0, v = run(m, threads, ns[i], prompt, gen, md, &share, &d, &sp);
            if (ns[i] == 1 || one == 0) one = v, one_d = d;
            printf("%-14s %4zu %12.1f %7.2fx %13.1f %7.2fx %8.2f %8.2f %6zu %8.3f %8.3f %8.3f%s\n", "", ns[i], v,
                   one > 0 ? v / one : 0, d, one_d > 0 ? d / one_d : 0, share, loadavg(), sp.steps, sp.pass_ms,
                   sp.pick_ms, sp.host_ms,
                   md == CLOVER_MODE_AUTOREGRESSIVE && ns[i] == 8 ? "   (floor: decode >= 2.50x)" : "");
            fflush(stdout);
        }
    }
    clover_model_free(m);
    return 0;
}
