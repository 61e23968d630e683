/*
 * backend_cuda_report.c: whether a model can run on the CUDA backend here,
 * and the text of `clover info --device`: each device, its memory, and what
 * the model needs there (weights, KV per token, GDN state and scratch per
 * session), with the answer to "does it fit".
 */
#include <stdarg.h>
#include <stdio.h>

#include "base/error.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_device.h"

int cuda_backend_usable(const clover_model *m, clover_error *err) {
    char why[256] = "";
    int n = cuda_device_count(why, sizeof why);
    if (n <= 0)
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s", n < 0 ? why : "no CUDA device found");
    return cuda_model_check(m, err);
}

typedef struct out_buf {
    char *buf;
    size_t n, len;
} out_buf;

static void put(out_buf *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *dst = o->buf && o->len < o->n ? o->buf + o->len : NULL;
    size_t room = dst ? o->n - o->len : 0;
    int w = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (w > 0) o->len += (size_t)w;
}

size_t cuda_backend_report(const clover_model *m, size_t max_context, char *buf, size_t n) {
    out_buf o = {buf, n, 0};
    if (buf && n) buf[0] = '\0';
    char why[256] = "";
    int count = cuda_device_count(why, sizeof why);
    put(&o, "backend     cuda (built in, sm_90a)\n");
    if (count <= 0) {
        put(&o, "devices     none: %s\n", count < 0 ? why : "the runtime reports 0 devices");
        put(&o, "sessions    run on the CPU\n");
        return o.len;
    }
    for (int i = 0; i < count; i++) {
        cuda_device_info info;
        if (cuda_device_query(i, &info, why, sizeof why)) {
            put(&o, "device %d    %s\n", i, why);
            continue;
        }
        put(&o, "device %d    %s, compute capability %d.%d, %d SMs, %.2f GB free of %.2f GB%s\n", i, info.name,
            info.cc_major, info.cc_minor, info.sm_count, (double)info.free_bytes * 1e-9,
            (double)info.total_bytes * 1e-9, i == 0 ? " (the CUDA backend's device)" : "");
    }
    put(&o, "sessions    --device cuda: commit, scoring, autoregressive decoding, block diffusion (preview, coreset and "
            "pick on the device); auto: CUDA when the model fits, else the CPU\n");
    if (!m) return o.len;
    const model_hparams *hp = &m->hp;
    size_t w = cuda_model_bytes(m), kv = cuda_session_kv_bytes_per_token(hp, m),
           st = cuda_session_fixed_state_bytes(hp, m);
    size_t ctx = max_context ? max_context : hp->n_ctx_train;
    put(&o, "model needs weights %.2f GB; per session %.2f GB of GDN state + %zu bytes of KV a token (%.2f GB at "
            "%zu tokens) + scratch\n",
        (double)w * 1e-9, (double)st * 1e-9, kv, (double)kv * (double)ctx * 1e-9, ctx);
    clover_error err = {0};
    if (cuda_model_check(m, &err)) {
        put(&o, "cuda        cannot run this model: %s\n", err.message);
        return o.len;
    }
    cuda_device_info info;
    if (cuda_device_query(0, &info, why, sizeof why) == 0) {
        double need = (double)w + (double)st + (double)kv * (double)ctx;
        double room = (double)info.free_bytes;
        put(&o, "fits        %s: weights + one session of %zu tokens = %.2f GB, %.2f GB free%s\n",
            need < room ? "yes" : "no", ctx, need * 1e-9, room * 1e-9,
            m->has_record ? "; a Clover model's block diffusion runs on the CPU (preview is not on CUDA yet)" : "");
    }
    return o.len;
}
