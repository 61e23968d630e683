/*
 * requantize.c: GGUF -> GGUF at another type (requantize.h). The recipe
 * follows the tensor's name, as llama-quantize's does: the same roles the
 * converter gives (convert_policy.c) recognised from llama.cpp's qwen35moe
 * names. A tensor whose new type is its old one is copied byte for byte.
 */
#include "convert/requantize.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/safe_output.h"
#include "base/threadpool.h"
#include "convert/convert_internal.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

enum { CHUNK_BYTES = 8 << 20, TASKS_PER_THREAD = 4 };

int requant_type_from_name(const char *name) {
    static const char *const names[] = {"q8_0", "q6_k", "q5_k_m", "q4_k_m"};
    return convert_name_index(name, names, 4);
}

const char *requant_type_name(requant_type t) {
    switch (t) {
    case REQUANT_Q8_0: return "q8_0";
    case REQUANT_Q6_K: return "q6_k";
    case REQUANT_Q5_K_M: return "q5_k_m";
    case REQUANT_Q4_K_M: return "q4_k_m";
    }
    return "?";
}

static uint32_t file_type(requant_type t) {
    switch (t) {
    case REQUANT_Q8_0: return 7;    /* LLAMA_FTYPE_MOSTLY_Q8_0 */
    case REQUANT_Q6_K: return 18;   /* MOSTLY_Q6_K */
    case REQUANT_Q5_K_M: return 17; /* MOSTLY_Q5_K_M */
    case REQUANT_Q4_K_M: return 15; /* MOSTLY_Q4_K_M */
    }
    return 0;
}

static conv_role role_of(const char *name, uint32_t n_dims) {
    if (n_dims < 2 || strstr(name, "ssm_conv1d")) return CONV_ROLE_SMALL;
    if (strstr(name, "ffn_gate_inp")) return CONV_ROLE_ROUTER;
    if (strstr(name, "_exps")) return CONV_ROLE_EXPERTS;
    if (!strcmp(name, "token_embd.weight")) return CONV_ROLE_EMBED;
    if (!strcmp(name, "output.weight")) return CONV_ROLE_HEAD;
    return CONV_ROLE_MATRIX;
}

static uint32_t fit(uint32_t type, uint64_t ne0) {
    if (quant_row_bytes(type, (size_t)ne0)) return type;
    if (quant_row_bytes(QUANT_Q8_0, (size_t)ne0)) return QUANT_Q8_0;
    return QUANT_F16;
}

uint32_t requant_pick_type(requant_type t, const char *name, uint32_t n_dims, uint64_t ne0) {
    conv_role role = role_of(name, n_dims);
    if (role == CONV_ROLE_SMALL || role == CONV_ROLE_ROUTER) return QUANT_F32;
    switch (t) {
    case REQUANT_Q8_0: return fit(QUANT_Q8_0, ne0);
    case REQUANT_Q6_K: return fit(QUANT_Q6_K, ne0);
    case REQUANT_Q5_K_M:
        return fit(role == CONV_ROLE_EXPERTS ? QUANT_Q5_K : role == CONV_ROLE_HEAD ? QUANT_Q6_K : QUANT_Q8_0, ne0);
    case REQUANT_Q4_K_M: return convert_pick_type(CONVERT_Q4_K_M, role, ne0);
    }
    return QUANT_F32;
}

static bool is_float_type(uint32_t t) { return t == QUANT_F32 || t == QUANT_F16 || t == QUANT_BF16; }

typedef struct rq_ctx {
    const gguf_tensor *t;
    uint32_t out_type;
    size_t in_row, out_row;
    uint64_t first_row, n_rows, rows_per_task;
    uint8_t *chunk;
    float **row; /* [threads][ne0_max] */
} rq_ctx;

static void rq_task(void *arg, size_t task, size_t thread) {
    rq_ctx *c = arg;
    uint64_t lo = task * c->rows_per_task, hi = lo + c->rows_per_task;
    if (hi > c->n_rows) hi = c->n_rows;
    const size_t ne0 = (size_t)c->t->ne[0];
    const uint8_t *src = (const uint8_t *)c->t->data;
    for (uint64_t i = lo; i < hi; i++) {
        const uint8_t *s = src + (c->first_row + i) * c->in_row;
        uint8_t *d = c->chunk + i * c->out_row;
        if (c->out_type == c->t->type) {
            memcpy(d, s, c->in_row);
            continue;
        }
        quant_dequantize_row(c->t->type, s, c->row[thread], ne0);
        quant_quantize_row(c->out_type, c->row[thread], d, ne0);
    }
}

static int copy_metadata(gguf_writer *w, const gguf_file *f, requant_type type, clover_error *err) {
    int rc;
    for (size_t i = 0; i < gguf_kv_count(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        const char *k = kv->key.str;
        if (!strncmp(k, "split.", 6) || !strcmp(k, "general.file_type")) continue;
        if ((rc = gguf_writer_set_value(w, k, &kv->value, err))) return rc;
    }
    return gguf_writer_set_u32(w, "general.file_type", file_type(type), err);
}

static int write_tensors(gguf_writer *w, const gguf_file *f, const uint32_t *types, const requant_options *opt,
                         uint64_t total, clover_error *err) {
    size_t n = gguf_tensor_count(f);
    uint64_t ne0_max = 1, out_row_max = 1;
    for (size_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (t->ne[0] > ne0_max) ne0_max = t->ne[0];
        size_t rb = quant_row_bytes(types[i], (size_t)t->ne[0]);
        if (rb > out_row_max) out_row_max = rb;
    }
    threadpool *pool = NULL;
    int rc = threadpool_create(&pool, opt->n_threads, err);
    if (rc) return rc;
    size_t nt = threadpool_size(pool);
    size_t cap = out_row_max > CHUNK_BYTES ? (size_t)out_row_max : CHUNK_BYTES;
    rq_ctx c = {0};
    c.chunk = mem_alloc(cap);
    c.row = mem_calloc(nt, sizeof *c.row);
    bool ok = c.chunk && c.row;
    for (size_t i = 0; ok && i < nt; i++) ok = (c.row[i] = mem_calloc((size_t)ne0_max, sizeof(float))) != NULL;
    if (!ok) {
        rc = error_set(err, CLOVER_E_NOMEM, "out of memory for the quantisation buffers");
        goto done;
    }
    uint64_t done_bytes = 0;
    if (opt->progress && n) opt->progress(opt->progress_user, gguf_tensor_at(f, 0)->name.str, 0, n, 0, total);
    for (size_t ti = 0; ti < n && !rc; ti++) {
        const gguf_tensor *t = gguf_tensor_at(f, ti);
        c.t = t;
        c.out_type = types[ti];
        c.in_row = quant_row_bytes(t->type, (size_t)t->ne[0]);
        c.out_row = quant_row_bytes(c.out_type, (size_t)t->ne[0]);
        uint64_t rows = t->ne[0] ? t->nbytes / c.in_row : 0, per = cap / c.out_row;
        for (uint64_t r = 0; r < rows && !rc; r += per) {
            c.first_row = r;
            c.n_rows = rows - r < per ? rows - r : per;
            size_t want = nt * TASKS_PER_THREAD;
            c.rows_per_task = (c.n_rows + want - 1) / want;
            threadpool_run(pool, (size_t)((c.n_rows + c.rows_per_task - 1) / c.rows_per_task), rq_task, &c);
            size_t bytes = (size_t)(c.n_rows * c.out_row);
            rc = gguf_writer_write(w, c.chunk, bytes, err);
            done_bytes += bytes;
            if (!rc && opt->progress) opt->progress(opt->progress_user, t->name.str, ti, n, done_bytes, total);
        }
    }
done:
    for (size_t i = 0; c.row && i < nt; i++) mem_free(c.row[i]);
    mem_free(c.row);
    mem_free(c.chunk);
    threadpool_free(pool);
    return rc;
}

/* The other shards of a split set (llama.cpp's NAME-00001-of-0000N.gguf)
 * are inputs too: an output onto one of them is refused like one onto the
 * first. */
static int check_shards(const char *out, const char *in, clover_error *err) {
    const char *m = strstr(in, "-00001-of-");
    unsigned n = 0;
    if (!m || strlen(m) != 20 || strcmp(m + 15, ".gguf") != 0 || sscanf(m + 10, "%5u", &n) != 1 || n < 2)
        return CLOVER_OK; /* "-00001-of-" 5 digits ".gguf": 20 characters */
    size_t len = strlen(in);
    char *path = mem_alloc(len + 1);
    if (!path) return error_set(err, CLOVER_E_NOMEM, "quantize: out of memory");
    int rc = CLOVER_OK;
    for (unsigned k = 2; k <= n && rc == CLOVER_OK; k++) {
        memcpy(path, in, len + 1);
        char digits[6];
        snprintf(digits, sizeof digits, "%05u", k);
        memcpy(path + (m - in) + 1, digits, 5);
        const char *inputs[] = {path};
        rc = safe_output_check_inputs(out, inputs, 1, err);
    }
    mem_free(path);
    return rc;
}

int requant_run(const requant_options *opt, requant_report *report, clover_error *err) {
    clover_error local;
    if (!err) err = &local;
    if (report) memset(report, 0, sizeof *report);
    if (!opt || !opt->input_path || !opt->output_path)
        return error_set(err, CLOVER_E_INVALID, "quantize: an input and an output path are required");
    if ((unsigned)opt->type > REQUANT_Q4_K_M)
        return error_set(err, CLOVER_E_INVALID, "quantize: unknown type %d", (int)opt->type);
    gguf_file *f = NULL;
    gguf_writer *w = NULL;
    uint32_t *types = NULL;
    const char *inputs[] = {opt->input_path};
    int rc = safe_output_check_inputs(opt->output_path, inputs, 1, err);
    if (!rc) rc = check_shards(opt->output_path, opt->input_path, err);
    if (rc) return rc;
    if ((rc = gguf_open(&f, opt->input_path, err))) return rc;
    size_t n = gguf_tensor_count(f), n_quant = 0;
    uint64_t total = 0, in_bytes = 0;
    types = mem_calloc(n ? n : 1, sizeof *types);
    w = gguf_writer_create();
    if (!types || !w) {
        rc = error_set(err, CLOVER_E_NOMEM, "quantize: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (!quant_type_supported(t->type)) {
            rc = error_set(err, CLOVER_E_UNSUPPORTED, "%s: tensor %s has type %s, which clover cannot read",
                           opt->input_path, t->name.str, quant_type_name(t->type));
            goto done;
        }
        if (!is_float_type(t->type) && !opt->allow_requantize) {
            rc = error_set(err, CLOVER_E_INVALID,
                           "%s: tensor %s is already quantised (%s); requantising loses precision: pass "
                           "--allow-requantize to do it anyway",
                           opt->input_path, t->name.str, quant_type_name(t->type));
            goto done;
        }
        types[i] = requant_pick_type(opt->type, t->name.str, t->n_dims, t->ne[0]);
        n_quant += !is_float_type(types[i]);
        uint64_t rows = t->ne[0] ? t->nbytes / quant_row_bytes(t->type, (size_t)t->ne[0]) : 0;
        total += rows * quant_row_bytes(types[i], (size_t)t->ne[0]);
        in_bytes += t->nbytes;
        if ((rc = gguf_writer_add_tensor(w, t->name.str, t->n_dims, t->ne, types[i], err))) goto done;
    }
    gguf_writer_set_verify(w, convert_verify_loads, NULL);
    if ((rc = copy_metadata(w, f, opt->type, err)) || (rc = gguf_writer_begin(w, opt->output_path, err)) ||
        (rc = write_tensors(w, f, types, opt, total, err)) || (rc = gguf_writer_finish(w, err)))
        goto done;
    if (report) {
        report->n_tensors = n;
        report->n_quantised = n_quant;
        report->in_bytes = in_bytes;
        report->out_bytes = total;
    }
done:
    gguf_writer_free(w);
    mem_free(types);
    gguf_close(f);
    return rc;
}
