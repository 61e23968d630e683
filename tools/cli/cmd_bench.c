/*
 * cmd_bench.c: `clover bench`: how fast a model's passes run on a device,
 * each beside its floor, measured in the same run. The floor is what the
 * pass must read from memory divided by the memory's read bandwidth: a
 * decode step can go no faster than streaming the weights it touches once.
 *
 * Kept simple, and said so in the output:
 *  - bandwidth: a threaded read-only sum over 256 MiB (CPU only: on a GPU
 *    the floor is not measured here; bench/bench_cuda_* measure it);
 *  - bytes a pass reads: every tensor but the embedding table (one row per
 *    token) and the routed experts, plus the routed experts' bytes times the
 *    share of experts that R rows touch when routing is uniform,
 *    1 - (1 - k/E)^R (trained routers are skewed, so fewer: the floor is
 *    an upper bound on what must be read, which is fine for a floor);
 *  - the passes: prompt (one request with max_tokens 0), decode (--ar
 *    tokens), and on a Clover model block diffusion's preview (one pass over
 *    a block) and commit (a resolved block).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "base/timer.h"
#include "clover.h"
#include "cli_args.h"
#include "cli_opts.h"
#include "commands.h"
#include "default_model.h"
#include "gguf/gguf.h"

static const cli_opt bench_opts[] = {
    {"--model", "-m", CLI_STR, 0, 0, "FILE", "GGUF model (default: the model built into this binary)"},
    {"--device", NULL, CLI_STR, 0, 0, "D", "auto (default), cpu or cuda"},
    {"--gpu-mem", NULL, CLI_STR, 0, 0, "N", "at most N GiB of GPU memory, the routed experts cached there (--device cuda)"},
    {"--threads", "-t", CLI_UINT, 0, 4096, "N", "CPU threads (default: every CPU)"},
    {"--prompt-tokens", "-pp", CLI_UINT, 1, 65536, "N", "the prompt pass's length (default 512)"},
    {"--decode-tokens", "-tg", CLI_UINT, 1, 65536, "N", "tokens decoded (default 32)"},
    {"--blocks", NULL, CLI_UINT, 1, 4096, "N", "block diffusion: blocks resolved (default 2)"},
    {"--batch-size", "-b", CLI_UINT, 1, 4096, "N", "rows per pass (prompt chunk; default 512 on the CPU and under --gpu-mem, 64 on a GPU)"},
};
static const cli_opt_table bench_tables[] = {{bench_opts, sizeof bench_opts / sizeof bench_opts[0]}};

static void bench_usage(FILE *out) {
    fprintf(out, "usage: clover bench [-m MODEL] [--device D] [options]\n"
                 "\n"
                 "Times a model's passes on a device: the prompt, decoding (token by token), and on a\n"
                 "Clover model block diffusion's preview and commit, each in ms per pass and tokens per\n"
                 "second, beside its floor: the bytes the pass reads over the memory read bandwidth\n"
                 "measured in the same run (CPU). Prompt ids are synthetic (1, 2, 3, ...).\n"
                 "\n"
                 "options:\n");
    cli_opts_print(out, &bench_tables[0]);
    fprintf(out, "  -h, --help                  this text\n");
}

typedef struct sum_job {
    const uint64_t *buf;
    size_t n, per;
    uint64_t out[256];
} sum_job;

static void sum_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    sum_job *j = ctx;
    size_t a = task * j->per, b = a + j->per < j->n ? a + j->per : j->n;
    uint64_t s = 0;
    for (size_t i = a; i < b; i++) s += j->buf[i];
    j->out[task % 256] += s;
}

/* Read-only bandwidth in bytes/s over 256 MiB with the pool's threads: best of 3. */
static double read_bandwidth(size_t threads) {
    size_t bytes = (size_t)256 << 20, n = bytes / sizeof(uint64_t);
    uint64_t *buf = malloc(bytes);
    threadpool *pool = NULL;
    if (!buf || threadpool_create(&pool, threads, NULL)) {
        free(buf);
        return 0;
    }
    for (size_t i = 0; i < n; i++) buf[i] = i;
    size_t tasks = threadpool_size(pool) * 4;
    if (tasks > 256) tasks = 256;
    sum_job j = {.buf = buf, .n = n, .per = (n + tasks - 1) / tasks};
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t = timer_now();
        threadpool_run(pool, tasks, sum_task, &j);
        double bw = (double)bytes / (timer_now() - t);
        if (bw > best) best = bw;
    }
    volatile uint64_t sink = j.out[0]; /* the sums are used */
    (void)sink;
    threadpool_free(pool);
    free(buf);
    return best;
}

typedef struct weight_bytes {
    double dense, experts; /* bytes: every tensor but token_embd and the routed experts; the routed experts */
} weight_bytes;

static int count_bytes(const char *path, weight_bytes *w) {
    gguf_file *f = NULL;
    int rc;
    if (!path) path = default_model_env();
    if (path) {
        rc = gguf_open(&f, path, NULL);
    } else {
        size_t len;
        const void *b = default_model_bytes(&len);
        rc = b ? gguf_open_memory(&f, b, len, "default", NULL) : -1;
    }
    if (rc) return -1;
    memset(w, 0, sizeof *w);
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (!strcmp(t->name.str, "token_embd.weight")) continue;
        if (strstr(t->name.str, "_exps")) w->experts += (double)t->nbytes;
        else w->dense += (double)t->nbytes;
    }
    gguf_close(f);
    return 0;
}

static double pass_bytes(const weight_bytes *w, const clover_model_info *in, size_t rows) {
    double share = 1.0;
    if (in->n_expert) share = 1.0 - pow(1.0 - (double)in->n_expert_used / in->n_expert, (double)rows);
    return w->dense + w->experts * share;
}

/* --gpu-mem: the expert cache over a stage's passes (nothing without it). */
static void print_cache(const clover_op_seconds *o) {
    const uint64_t uses = o->expert_hits + o->expert_misses + o->expert_host;
    if (!uses) return;
    printf("  expert cache: hit rate %.1f%% (%llu of %llu uses), %.3f GB copied host-to-device at %.1f GB/s",
           100.0 * (double)o->expert_hits / (double)uses, (unsigned long long)o->expert_hits, (unsigned long long)uses,
           (double)o->expert_copy_bytes * 1e-9,
           o->expert_copy_s > 0 ? (double)o->expert_copy_bytes / o->expert_copy_s * 1e-9 : 0.0);
    if (o->expert_host) /* CLOVER_GPU_MEM_CPU */
        printf("; %llu computed by the CPU in %.3f s", (unsigned long long)o->expert_host, o->expert_host_s);
    printf("\n");
}

static void print_row(const char *name, size_t rows, double ms, double tokens_per_pass, double bytes, double bw) {
    printf("%-22s %6zu %10.3f %10.1f %10.1f", name, rows, ms, tokens_per_pass * 1000.0 / ms, bytes / 1e6);
    if (bw > 0) {
        double floor_ms = bytes / bw * 1000.0;
        printf(" %10.3f %8.0f%%\n", floor_ms, 100.0 * floor_ms / ms);
    } else {
        printf(" %10s %9s\n", "n/a", "n/a");
    }
}

int cmd_bench(int argc, char **argv) {
    int nrc = cli_opts_normalize("bench", bench_tables, 1, &argc, &argv);
    if (nrc > 0) bench_usage(stdout);
    if (nrc) return nrc > 0 ? 0 : 2;
    const char *model = NULL;
    int device = CLOVER_DEVICE_AUTO;
    uint64_t threads = 0, n_prompt = 512, n_decode = 32, n_blocks = 2, gpu_mem = 0, rows = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (a[0] != '-') {
            fprintf(stderr, "clover bench: unexpected argument '%s' (clover bench --help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--threads")) threads = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--prompt-tokens")) n_prompt = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--decode-tokens")) n_decode = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--blocks")) n_blocks = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--batch-size")) rows = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--gpu-mem")) {
            if (cli_parse_gib("bench", a, v, &gpu_mem)) return 2;
        }
        else if ((device = clover_device_from_name(v)) < 0) {
            fprintf(stderr, "clover bench: --device '%s' is not one of auto, cpu, cuda\n", v);
            return 2;
        }
    }
    clover_model *m = NULL;
    if (cli_load_model("bench", model, &m)) return 1;
    clover_model_info in;
    clover_model_get_info(m, &in);
    weight_bytes w;
    if (count_bytes(model, &w)) {
        fprintf(stderr, "clover bench: cannot read the tensor table of %s\n", in.source);
        clover_model_free(m);
        return 1;
    }
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = (size_t)threads;
    sp.device = device;
    sp.gpu_mem = gpu_mem;
    sp.max_rows = (size_t)rows;
    sp.no_snapshot = 1;
    sp.max_context = (size_t)(n_prompt + n_decode + (n_blocks + 1) * 64 + 64);
    if (in.n_ctx_train && sp.max_context > in.n_ctx_train) sp.max_context = in.n_ctx_train;
    clover_session *s = NULL;
    clover_error err = {0};
    int code = 1;
    int32_t *ids = malloc((size_t)n_prompt * sizeof *ids);
    if (!ids) goto done;
    for (size_t i = 0; i < n_prompt; i++) ids[i] = (int32_t)(1 + i % (in.n_vocab > 2 ? in.n_vocab - 2 : 1));
    if (clover_session_create(&s, m, &sp, &err)) {
        fprintf(stderr, "clover bench: %s\n", err.message);
        goto done;
    }
    const char *be = clover_session_backend(s);
    int on_cpu = be && !strncmp(be, "cpu", 3);
    size_t nt = threads ? (size_t)threads : threadpool_cpu_count();
    double bw = on_cpu ? read_bandwidth(nt) : 0;
    printf("model    %s: %u layers, %u experts (%u per token), %.1f MB of weights\n", in.name ? in.name : in.source,
           in.n_layer, in.n_expert, in.n_expert_used, (double)in.n_bytes / 1e6);
    printf("device   %s, %zu CPU threads\n", be ? be : "?", nt);
    if (on_cpu)
        printf("memory   %.2f GB/s read (a 256 MiB read-only sum, %zu threads, best of 3, this run)\n", bw / 1e9, nt);
    else
        printf("memory   not measured on this device: no floor column (bench/bench_cuda_* measure it)\n");
    printf("floor    bytes a pass reads / that bandwidth; bytes = every tensor but the embedding table\n"
           "         + the routed experts that the pass's rows touch under uniform routing\n\n");
    printf("%-22s %6s %10s %10s %10s %10s %9s\n", "pass", "rows", "ms/pass", "tok/s", "MB read", "floor ms",
           "% floor");

    clover_generate_params p;
    clover_generate_result r;
    clover_generate_params_init(&p);
    p.max_tokens = 0; /* the prompt only */
    if (clover_generate(s, ids, (size_t)n_prompt, &p, &r, &err)) goto fail;
    size_t chunk = n_prompt < 512 ? (size_t)n_prompt : 512;
    double chunks = ceil((double)n_prompt / (double)chunk);
    char name[48];
    snprintf(name, sizeof name, "prompt (%llu tokens)", (unsigned long long)n_prompt);
    print_row(name, chunk, r.stats.prompt_s * 1000.0 / chunks, (double)n_prompt / chunks,
              pass_bytes(&w, &in, chunk), bw);
    print_cache(&r.stats.commit_ops);
    clover_generate_result_free(&r);

    clover_session_reset(s);
    clover_generate_params_init(&p);
    p.mode = CLOVER_MODE_AUTOREGRESSIVE;
    p.max_tokens = (size_t)n_decode;
    p.ignore_eos = 1;
    if (clover_generate(s, ids, 16 < n_prompt ? 16 : (size_t)n_prompt, &p, &r, &err)) goto fail;
    if (r.stats.passes) print_row("decode", 1, r.stats.commit_s * 1000.0 / (double)r.stats.passes, 1.0,
                                  pass_bytes(&w, &in, 1), bw);
    print_cache(&r.stats.commit_ops); /* its 16-token prompt too */
    clover_generate_result_free(&r);

    if (in.record) {
        size_t B = in.record->block_size;
        clover_session_reset(s);
        clover_generate_params_init(&p);
        p.max_tokens = (size_t)n_blocks * B;
        p.ignore_eos = 1;
        if (clover_generate(s, ids, 16 < n_prompt ? 16 : (size_t)n_prompt, &p, &r, &err)) goto fail;
        if (r.stats.passes)
            print_row("preview (one pass)", B, r.stats.preview_s * 1000.0 / (double)r.stats.passes,
                      (double)r.stats.blocks * B / (double)r.stats.passes, pass_bytes(&w, &in, B), bw);
        print_cache(&r.stats.preview_ops);
        if (r.stats.blocks > 1) /* the last block is not committed (the answer ends in it) */
            print_row("commit (a block)", B, r.stats.commit_s * 1000.0 / (double)(r.stats.blocks - 1), (double)B,
                      pass_bytes(&w, &in, B), bw);
        print_cache(&r.stats.commit_ops); /* with the 16-token prompt */
        printf("\nblock diffusion: %.1f passes per block, %.1f tok/s end to end (preview + pick + commit)\n",
               (double)r.stats.passes / (double)(r.stats.blocks ? r.stats.blocks : 1), r.stats.denoise_tok_s);
        clover_generate_result_free(&r);
    }
    code = 0;
    goto done;
fail:
    fprintf(stderr, "clover bench: %s\n", err.message);
done:
    free(ids);
    clover_session_free(s);
    clover_model_free(m);
    return code;
}
