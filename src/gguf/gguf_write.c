/*
 * gguf_write.c: the GGUF writer. Metadata and tensor infos are collected in
 * memory (small), then gguf_writer_begin writes the header and tables and
 * the caller streams the tensor bytes in declaration order; the writer
 * tracks which tensor the next byte belongs to and inserts the alignment
 * padding itself, so a 20 GB model never sits in memory. Like llama.cpp,
 * every tensor (the last included) is padded to the alignment. The bytes go
 * to a temporary next to the target (base/safe_output.h), renamed into place
 * by gguf_writer_finish; a writer freed before that removes the temporary,
 * so the target is never left half written.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/safe_output.h"
#include "gguf/gguf_internal.h"
#include "quant/quant.h"

enum writer_state { WRITER_COLLECTING, WRITER_STREAMING, WRITER_FINISHED, WRITER_FAILED };

typedef struct writer_tensor {
    gguf_string name;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint32_t type;
    uint64_t nbytes;
    uint64_t offset; /* in the data section */
} writer_tensor;

struct gguf_writer {
    gguf_kv *kvs; /* [n_kv] */
    size_t n_kv, cap_kv;
    gguf_index kv_index;
    writer_tensor *tensors; /* [n_tensors] */
    size_t n_tensors, cap_tensors;
    gguf_index tensor_index;
    uint32_t alignment;
    enum writer_state state;
    FILE *fp;
    char *path;          /* the target, as the caller named it (for messages) */
    safe_output out;     /* the temporary being written */
    bool out_open;
    gguf_writer_verify_fn verify;
    void *verify_user;
    uint64_t pos;         /* bytes written to the file */
    uint64_t data_start;  /* where the data section begins */
    size_t cur;           /* tensor receiving the next byte */
    uint64_t cur_written; /* bytes of it written so far */
};

gguf_writer *gguf_writer_create(void) {
    gguf_writer *w = mem_calloc(1, sizeof *w);
    if (w) w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    if (w->fp) {
        fclose(w->fp);
        w->out.fd = -1; /* fclose closed it */
    }
    if (w->out_open) safe_output_abort(&w->out); /* unfinished: the temporary goes */
    for (size_t i = 0; i < w->n_kv; i++) {
        mem_free(w->kvs[i].key.str);
        gguf_value_free(&w->kvs[i].value);
    }
    for (size_t i = 0; i < w->n_tensors; i++) mem_free(w->tensors[i].name.str);
    mem_free(w->kvs);
    mem_free(w->tensors);
    gguf_index_free(&w->kv_index);
    gguf_index_free(&w->tensor_index);
    mem_free(w->path);
    mem_free(w);
}

static int grow(void **items, size_t *cap, size_t n, size_t size) {
    if (n < *cap) return CLOVER_OK;
    size_t want = *cap ? *cap * 2 : 16, bytes;
    if (!mem_mul_ok(want, size, &bytes)) return CLOVER_E_NOMEM;
    void *grown = mem_alloc(bytes);
    if (!grown) return CLOVER_E_NOMEM;
    if (n) memcpy(grown, *items, n * size);
    mem_free(*items);
    *items = grown;
    *cap = want;
    return CLOVER_OK;
}

static int copy_name(gguf_string *out, const char *s) {
    size_t n = strlen(s);
    out->str = mem_alloc(n + 1);
    if (!out->str) return CLOVER_E_NOMEM;
    memcpy(out->str, s, n + 1);
    out->len = n;
    return CLOVER_OK;
}

static int check_collecting(const gguf_writer *w, const char *what, clover_error *err) {
    if (!w) return error_set(err, CLOVER_E_INVALID, "%s: writer is NULL", what);
    if (w->state != WRITER_COLLECTING)
        return error_set(err, CLOVER_E_INVALID, "%s: the writer has already begun writing %s", what, w->path ? w->path : "");
    return CLOVER_OK;
}

/* Stores a copy of v under key, replacing an earlier value of the key. */
int gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v, clover_error *err) {
    int rc = check_collecting(w, "gguf_writer_set_value", err);
    if (rc < 0) return rc;
    if (!key || !*key) return error_set(err, CLOVER_E_INVALID, "gguf writer: empty metadata key");
    if (!v) return error_set(err, CLOVER_E_INVALID, "gguf writer: key %s: value is NULL", key);
    bool is_alignment = strcmp(key, "general.alignment") == 0;
    if (is_alignment) {
        if (v->type != GGUF_VT_U32)
            return error_set(err, CLOVER_E_INVALID, "gguf writer: general.alignment must be u32, not %s", gguf_value_type_name(v->type));
        if (v->v.u32 == 0 || (v->v.u32 & (v->v.u32 - 1)) != 0)
            return error_set(err, CLOVER_E_INVALID, "gguf writer: general.alignment %u is not a power of two", v->v.u32);
    }
    gguf_value copy;
    if ((rc = gguf_value_copy(&copy, v, err)) < 0) {
        if (err) error_prefix(err, "gguf writer: key %s", key);
        return rc;
    }
    size_t at = gguf_index_find(&w->kv_index, key, strlen(key));
    if (at != SIZE_MAX) {
        gguf_value_free(&w->kvs[at].value);
        w->kvs[at].value = copy;
    } else {
        gguf_kv kv = {{NULL, 0}, copy};
        if (grow((void **)&w->kvs, &w->cap_kv, w->n_kv, sizeof *w->kvs) < 0 || copy_name(&kv.key, key) < 0 ||
            gguf_index_insert(&w->kv_index, kv.key.str, kv.key.len, w->n_kv, NULL) < 0) {
            mem_free(kv.key.str);
            gguf_value_free(&copy);
            return error_set(err, CLOVER_E_NOMEM, "gguf writer: out of memory adding key %s", key);
        }
        w->kvs[w->n_kv++] = kv;
    }
    if (is_alignment) w->alignment = v->v.u32;
    return CLOVER_OK;
}

#define WRITER_SETTER(fn, vt, member, ctype)                                                        \
    int fn(gguf_writer *w, const char *key, ctype x, clover_error *err) {                          \
        gguf_value v = {.type = vt};                                                                \
        v.v.member = x;                                                                             \
        return gguf_writer_set_value(w, key, &v, err);                                              \
    }
WRITER_SETTER(gguf_writer_set_u8, GGUF_VT_U8, u8, uint8_t)
WRITER_SETTER(gguf_writer_set_i8, GGUF_VT_I8, i8, int8_t)
WRITER_SETTER(gguf_writer_set_u16, GGUF_VT_U16, u16, uint16_t)
WRITER_SETTER(gguf_writer_set_i16, GGUF_VT_I16, i16, int16_t)
WRITER_SETTER(gguf_writer_set_u32, GGUF_VT_U32, u32, uint32_t)
WRITER_SETTER(gguf_writer_set_i32, GGUF_VT_I32, i32, int32_t)
WRITER_SETTER(gguf_writer_set_u64, GGUF_VT_U64, u64, uint64_t)
WRITER_SETTER(gguf_writer_set_i64, GGUF_VT_I64, i64, int64_t)
WRITER_SETTER(gguf_writer_set_f32, GGUF_VT_F32, f32, float)
WRITER_SETTER(gguf_writer_set_f64, GGUF_VT_F64, f64, double)
WRITER_SETTER(gguf_writer_set_bool, GGUF_VT_BOOL, b, bool)
#undef WRITER_SETTER

int gguf_writer_set_string(gguf_writer *w, const char *key, const char *s, clover_error *err) {
    if (!s) return error_set(err, CLOVER_E_INVALID, "gguf writer: key %s: string is NULL", key ? key : "(null)");
    gguf_value v = {.type = GGUF_VT_STRING};
    v.v.str = (gguf_string){(char *)s, strlen(s)};
    return gguf_writer_set_value(w, key, &v, err);
}

int gguf_writer_set_array(gguf_writer *w, const char *key, uint32_t elem_type, const void *elems, uint64_t len,
                          clover_error *err) {
    if (elem_type == GGUF_VT_STRING || elem_type == GGUF_VT_ARRAY || elem_type >= GGUF_VT_COUNT)
        return error_set(err, CLOVER_E_INVALID, "gguf writer: key %s: gguf_writer_set_array takes scalar elements, not %s",
                         key ? key : "(null)", gguf_value_type_name(elem_type));
    gguf_value v = {.type = GGUF_VT_ARRAY};
    v.v.arr.type = elem_type;
    v.v.arr.len = len;
    v.v.arr.data = (void *)elems;
    return gguf_writer_set_value(w, key, &v, err);
}

int gguf_writer_set_string_array(gguf_writer *w, const char *key, const char *const *strs, uint64_t len,
                                 clover_error *err) {
    int rc = check_collecting(w, "gguf_writer_set_string_array", err);
    if (rc < 0) return rc;
    if (len && !strs) return error_set(err, CLOVER_E_INVALID, "gguf writer: key %s: strings are NULL", key ? key : "(null)");
    gguf_string *view = NULL; /* [len], borrowing the caller's strings */
    if (len) {
        view = len <= SIZE_MAX ? mem_calloc((size_t)len, sizeof *view) : NULL;
        if (!view) return error_set(err, CLOVER_E_NOMEM, "gguf writer: out of memory for %" PRIu64 " strings", len);
    }
    for (uint64_t i = 0; i < len; i++) {
        if (!strs[i]) {
            mem_free(view);
            return error_set(err, CLOVER_E_INVALID, "gguf writer: key %s: string %" PRIu64 " is NULL", key ? key : "(null)", i);
        }
        view[i] = (gguf_string){(char *)strs[i], strlen(strs[i])};
    }
    gguf_value v = {.type = GGUF_VT_ARRAY};
    v.v.arr.type = GGUF_VT_STRING;
    v.v.arr.len = len;
    v.v.arr.data = view;
    rc = gguf_writer_set_value(w, key, &v, err);
    mem_free(view);
    return rc;
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                           clover_error *err) {
    int rc = check_collecting(w, "gguf_writer_add_tensor", err);
    if (rc < 0) return rc;
    if (!name || !*name) return error_set(err, CLOVER_E_INVALID, "gguf writer: empty tensor name");
    if (n_dims > GGUF_MAX_DIMS || (n_dims && !ne))
        return error_set(err, CLOVER_E_INVALID, "gguf writer: tensor %s: n_dims %u (expected 0..%d with dimensions)", name, n_dims,
                         GGUF_MAX_DIMS);
    if (!quant_type_known(type))
        return error_set(err, CLOVER_E_INVALID, "gguf writer: tensor %s: type code %u is not a ggml type", name, type);
    if (gguf_index_find(&w->tensor_index, name, strlen(name)) != SIZE_MAX)
        return error_set(err, CLOVER_E_INVALID, "gguf writer: tensor %s declared twice", name);
    writer_tensor t = {.n_dims = n_dims, .type = type};
    uint64_t elems = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] > INT64_MAX || __builtin_mul_overflow(elems, t.ne[d], &elems) || elems > INT64_MAX)
            return error_set(err, CLOVER_E_INVALID, "gguf writer: tensor %s: the element count overflows at ne[%u]", name, d);
    }
    uint64_t blk = quant_block_elems(type), blk_bytes = quant_block_bytes(type);
    if (!blk || t.ne[0] % blk != 0)
        return error_set(err, CLOVER_E_INVALID, "gguf writer: tensor %s: ne[0] = %" PRIu64 " is not a multiple of the %s block (%" PRIu64 ")",
                         name, t.ne[0], quant_type_name(type), blk);
    if (elems && __builtin_mul_overflow(t.ne[0] / blk * blk_bytes, elems / t.ne[0], &t.nbytes))
        return error_set(err, CLOVER_E_INVALID, "gguf writer: tensor %s: the byte size overflows", name);
    if (grow((void **)&w->tensors, &w->cap_tensors, w->n_tensors, sizeof *w->tensors) < 0 || copy_name(&t.name, name) < 0 ||
        gguf_index_insert(&w->tensor_index, t.name.str, t.name.len, w->n_tensors, NULL) < 0) {
        mem_free(t.name.str);
        return error_set(err, CLOVER_E_NOMEM, "gguf writer: out of memory adding tensor %s", name);
    }
    w->tensors[w->n_tensors++] = t;
    return CLOVER_OK;
}

/* ---- streaming ---- */

static int write_bytes(gguf_writer *w, const void *p, size_t n, clover_error *err) {
    if (n && fwrite(p, 1, n, w->fp) != n) {
        w->state = WRITER_FAILED;
        return error_set(err, CLOVER_E_IO, "%s: write failed: %s", w->path, strerror(errno));
    }
    w->pos += n;
    return CLOVER_OK;
}

static int write_zeros(gguf_writer *w, uint64_t n, clover_error *err) {
    static const uint8_t zeros[4096];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        int rc = write_bytes(w, zeros, k, err);
        if (rc < 0) return rc;
        n -= k;
    }
    return CLOVER_OK;
}

static int write_u32(gguf_writer *w, uint32_t x, clover_error *err) { return write_bytes(w, &x, 4, err); }
static int write_u64(gguf_writer *w, uint64_t x, clover_error *err) { return write_bytes(w, &x, 8, err); }

static int write_string(gguf_writer *w, const gguf_string *s, clover_error *err) {
    int rc = write_u64(w, s->len, err);
    return rc < 0 ? rc : write_bytes(w, s->str, (size_t)s->len, err);
}

static int write_value(gguf_writer *w, const gguf_value *v, clover_error *err) {
    int rc = write_u32(w, v->type, err);
    if (rc < 0) return rc;
    if (v->type == GGUF_VT_STRING) return write_string(w, &v->v.str, err);
    if (v->type == GGUF_VT_BOOL) {
        uint8_t b = v->v.b ? 1 : 0;
        return write_bytes(w, &b, 1, err);
    }
    if (v->type != GGUF_VT_ARRAY) return write_bytes(w, &v->v, gguf_value_type_size(v->type), err);
    if ((rc = write_u32(w, v->v.arr.type, err)) < 0 || (rc = write_u64(w, v->v.arr.len, err)) < 0) return rc;
    if (v->v.arr.type == GGUF_VT_STRING) {
        const gguf_string *s = v->v.arr.data; /* [len] */
        for (uint64_t i = 0; i < v->v.arr.len && rc == CLOVER_OK; i++) rc = write_string(w, &s[i], err);
        return rc;
    }
    return write_bytes(w, v->v.arr.data, (size_t)v->v.arr.len * gguf_value_type_size(v->v.arr.type), err);
}

static uint64_t align_up(uint64_t x, uint32_t a) { return (x + a - 1) / a * a; }

/* Moves past every tensor whose bytes are complete, padding each. */
static int advance(gguf_writer *w, clover_error *err) {
    while (w->cur < w->n_tensors && w->cur_written == w->tensors[w->cur].nbytes) {
        const writer_tensor *t = &w->tensors[w->cur];
        int rc = write_zeros(w, align_up(t->nbytes, w->alignment) - t->nbytes, err);
        if (rc < 0) return rc;
        w->cur++;
        w->cur_written = 0;
    }
    return CLOVER_OK;
}

int gguf_writer_begin(gguf_writer *w, const char *path, clover_error *err) {
    int rc = check_collecting(w, "gguf_writer_begin", err);
    if (rc < 0) return rc;
    if (!path) return error_set(err, CLOVER_E_INVALID, "gguf_writer_begin: path is NULL");
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        writer_tensor *t = &w->tensors[i];
        t->offset = offset;
        uint64_t padded = align_up(t->nbytes, w->alignment);
        if (padded < t->nbytes || __builtin_add_overflow(offset, padded, &offset))
            return error_set(err, CLOVER_E_INVALID, "gguf writer: the data section overflows at tensor %s", t->name.str);
    }
    w->path = mem_alloc(strlen(path) + 1);
    if (!w->path) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", path);
    memcpy(w->path, path, strlen(path) + 1);
    if ((rc = safe_output_open(&w->out, path, err)) < 0) {
        mem_free(w->path);
        w->path = NULL;
        return rc;
    }
    w->out_open = true;
    w->fp = fdopen(w->out.fd, "wb");
    if (!w->fp) {
        rc = error_set(err, CLOVER_E_IO, "%s: cannot create: %s", path, strerror(errno));
        safe_output_abort(&w->out);
        w->out_open = false;
        return rc;
    }
    w->state = WRITER_STREAMING;
    setvbuf(w->fp, NULL, _IOFBF, 1 << 20);
    if ((rc = write_u32(w, GGUF_MAGIC, err)) < 0 || (rc = write_u32(w, GGUF_VERSION, err)) < 0 ||
        (rc = write_u64(w, w->n_tensors, err)) < 0 || (rc = write_u64(w, w->n_kv, err)) < 0)
        return rc;
    for (size_t i = 0; i < w->n_kv; i++) {
        if ((rc = write_string(w, &w->kvs[i].key, err)) < 0 || (rc = write_value(w, &w->kvs[i].value, err)) < 0) return rc;
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        if ((rc = write_string(w, &t->name, err)) < 0 || (rc = write_u32(w, t->n_dims, err)) < 0) return rc;
        for (uint32_t d = 0; d < t->n_dims; d++)
            if ((rc = write_u64(w, t->ne[d], err)) < 0) return rc;
        if ((rc = write_u32(w, t->type, err)) < 0 || (rc = write_u64(w, t->offset, err)) < 0) return rc;
    }
    if ((rc = write_zeros(w, align_up(w->pos, w->alignment) - w->pos, err)) < 0) return rc;
    w->data_start = w->pos;
    return advance(w, err);
}

int gguf_writer_write(gguf_writer *w, const void *data, size_t n, clover_error *err) {
    if (!w) return error_set(err, CLOVER_E_INVALID, "gguf_writer_write: writer is NULL");
    if (w->state != WRITER_STREAMING)
        return error_set(err, CLOVER_E_INVALID, "gguf_writer_write: %s", w->state == WRITER_COLLECTING ? "gguf_writer_begin was not called"
                                                                          : w->state == WRITER_FAILED   ? "an earlier write failed"
                                                                                                        : "the file is finished");
    if (n && !data) return error_set(err, CLOVER_E_INVALID, "gguf_writer_write: data is NULL");
    const uint8_t *p = data; /* [n] */
    while (n) {
        if (w->cur == w->n_tensors)
            return error_set(err, CLOVER_E_INVALID, "%s: %zu bytes of tensor data beyond the declared tensors", w->path, n);
        const writer_tensor *t = &w->tensors[w->cur];
        uint64_t left = t->nbytes - w->cur_written;
        size_t k = n < left ? n : (size_t)left;
        int rc = write_bytes(w, p, k, err);
        if (rc < 0) return rc;
        w->cur_written += k;
        p += k;
        n -= k;
        if ((rc = advance(w, err)) < 0) return rc;
    }
    return CLOVER_OK;
}

void gguf_writer_set_verify(gguf_writer *w, gguf_writer_verify_fn fn, void *user) {
    if (!w) return;
    w->verify = fn;
    w->verify_user = user;
}

static int check_streaming(const gguf_writer *w, const char *fn, clover_error *err) {
    if (!w) return error_set(err, CLOVER_E_INVALID, "%s: writer is NULL", fn);
    if (w->state != WRITER_STREAMING)
        return error_set(err, CLOVER_E_INVALID, "%s: %s", fn, w->state == WRITER_COLLECTING ? "gguf_writer_begin was not called"
                                                           : w->state == WRITER_FAILED   ? "an earlier write failed"
                                                                                         : "already finished");
    return CLOVER_OK;
}

/* Flushes, fsyncs and closes the stream, verifies the temporary, renames it. */
static int finish_file(gguf_writer *w, clover_error *err) {
    FILE *fp = w->fp;
    w->fp = NULL;
    w->state = WRITER_FAILED; /* until the rename is done */
    int bad = fflush(fp) != 0 || ferror(fp);
    int e = errno;
    if (!bad && w->out.tmp && fsync(fileno(fp)) != 0) {
        bad = 1;
        e = errno;
    }
    int closed = fclose(fp);
    w->out.fd = -1; /* fclose closed it */
    if (bad) return error_set(err, CLOVER_E_IO, "%s: write failed: %s", w->path, strerror(e));
    if (closed != 0) return error_set(err, CLOVER_E_IO, "%s: close failed: %s", w->path, strerror(errno));
    int rc;
    if (w->verify && (rc = w->verify(safe_output_writing_path(&w->out), w->verify_user, err)) != CLOVER_OK) return rc;
    w->out_open = false;
    if ((rc = safe_output_commit(&w->out, err)) != CLOVER_OK) return rc;
    w->state = WRITER_FINISHED;
    return CLOVER_OK;
}

int gguf_writer_finish(gguf_writer *w, clover_error *err) {
    int rc = check_streaming(w, "gguf_writer_finish", err);
    if (rc < 0) return rc;
    if (w->cur < w->n_tensors) {
        const writer_tensor *t = &w->tensors[w->cur];
        return error_set(err, CLOVER_E_INVALID, "%s: tensor %s has %" PRIu64 " of its %" PRIu64 " bytes (and %zu tensors after it are missing)",
                         w->path, t->name.str, w->cur_written, t->nbytes, w->n_tensors - w->cur - 1);
    }
    return finish_file(w, err);
}

int gguf_writer_finish_sparse(gguf_writer *w, clover_error *err) {
    int rc = check_streaming(w, "gguf_writer_finish_sparse", err);
    if (rc < 0) return rc;
    if (w->pos != w->data_start)
        return error_set(err, CLOVER_E_INVALID, "gguf_writer_finish_sparse: tensor data was already written");
    uint64_t data = 0; /* the data section: every tensor padded (begin checked it does not overflow) */
    if (w->n_tensors) {
        const writer_tensor *t = &w->tensors[w->n_tensors - 1];
        data = t->offset + align_up(t->nbytes, w->alignment);
    }
    if (fflush(w->fp) != 0) {
        w->state = WRITER_FAILED;
        return error_set(err, CLOVER_E_IO, "%s: write failed: %s", w->path, strerror(errno));
    }
    uint64_t total = w->data_start + data;
    if (ftruncate(fileno(w->fp), (off_t)total) != 0) {
        w->state = WRITER_FAILED;
        return error_set(err, CLOVER_E_IO, "%s: cannot extend the sparse file to %" PRIu64 " bytes: %s", w->path, total,
                         strerror(errno));
    }
    w->cur = w->n_tensors;
    w->cur_written = 0;
    return finish_file(w, err);
}
