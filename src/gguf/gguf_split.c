/*
 * gguf_split.c: split models, as llama.cpp's gguf-split writes them and big
 * models are published: NAME-00001-of-0000N.gguf .. NAME-0000N-of-0000N.gguf,
 * every shard a complete GGUF whose split.no (u16, 0-based), split.count
 * (u16) and split.tensors.count (i32, the whole model's) say where it
 * belongs; the metadata lives in the first, each shard holds its own
 * tensors. Opening the first shard opens them all: each stays mapped on its
 * own and its tensors join the first file's table, so a model reads the
 * same whether it came in one file or many.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "gguf/gguf_internal.h"

/* An unsigned split.* key of any integer type (gguf-split writes u16 / i32). */
static int split_key(const gguf_file *f, const char *key, bool required, uint64_t *out, clover_error *err) {
    const gguf_kv *kv = gguf_kv_find(f, key);
    if (!kv) {
        if (required) return error_set(err, CLOVER_E_FORMAT, "%s: split model without %s", f->name, key);
        *out = 0;
        return 0;
    }
    const gguf_value *v = &kv->value;
    int64_t x;
    switch (v->type) {
    case GGUF_VT_U8: x = v->v.u8; break;
    case GGUF_VT_U16: x = v->v.u16; break;
    case GGUF_VT_I16: x = v->v.i16; break;
    case GGUF_VT_U32: x = v->v.u32; break;
    case GGUF_VT_I32: x = v->v.i32; break;
    case GGUF_VT_U64: x = v->v.u64 > INT64_MAX ? -1 : (int64_t)v->v.u64; break;
    case GGUF_VT_I64: x = v->v.i64; break;
    default:
        return error_set(err, CLOVER_E_FORMAT, "%s: %s has type %s (expected an integer)", f->name, key,
                         gguf_value_type_name(v->type));
    }
    if (x < 0 || x > 99999) return error_set(err, CLOVER_E_FORMAT, "%s: %s = %" PRId64 " is out of range", f->name, key, x);
    *out = (uint64_t)x;
    return 1;
}

/* Splits ".../NAME-00001-of-00003.gguf" into its prefix length; 0 when path is not so named. */
static size_t split_prefix(const char *path, uint64_t count) {
    char tail[64];
    snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", 1, (int)count);
    size_t n = strlen(path), t = strlen(tail);
    return n > t && !strcmp(path + n - t, tail) ? n - t : 0;
}

/* Moves shard's tensors into f (names change owner; data stays in shard's mapping). */
static int adopt_tensors(gguf_file *f, gguf_file *shard, clover_error *err) {
    size_t n = f->n_tensors + shard->n_tensors;
    if (n > f->cap_tensors) {
        gguf_tensor *t = mem_calloc(n, sizeof *t);
        if (!t) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory for %zu tensors", f->name, n);
        if (f->n_tensors) memcpy(t, f->tensors, f->n_tensors * sizeof *t);
        mem_free(f->tensors);
        f->tensors = t;
        f->cap_tensors = n;
        /* the index keeps pointers to the name bytes, not to the table: still valid */
    }
    for (size_t i = 0; i < shard->n_tensors; i++) {
        gguf_tensor *t = &shard->tensors[i];
        size_t dup;
        int rc = gguf_index_insert(&f->tensor_index, t->name.str, t->name.len, f->n_tensors, &dup);
        if (rc < 0) return error_set(err, rc, "%s: out of memory indexing tensors", f->name);
        if (rc == 1)
            return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s' is also in %s", shard->name, t->name.str,
                             dup < f->n_tensors ? f->name : "another shard");
        f->tensors[f->n_tensors++] = *t;
        t->name.str = NULL; /* f owns it now */
    }
    shard->n_tensors = 0;
    return 0;
}

int gguf_split_attach(gguf_file *f, const char *path, clover_error *err) {
    uint64_t count, no, total;
    int rc = split_key(f, "split.count", false, &count, err);
    if (rc <= 0 || count <= 1) return rc < 0 ? rc : CLOVER_OK;
    if ((rc = split_key(f, "split.no", true, &no, err)) < 0) return rc;
    if (no != 0)
        return error_set(err, CLOVER_E_INVALID,
                         "%s is shard %" PRIu64 " of %" PRIu64 " of a split model: open the first (-00001-of-%05d.gguf)",
                         path, no + 1, count, (int)count);
    if ((rc = split_key(f, "split.tensors.count", true, &total, err)) < 0) return rc;
    size_t pre = split_prefix(path, count);
    if (!pre)
        return error_set(err, CLOVER_E_FORMAT,
                         "%s: the first shard of a %" PRIu64 "-file split model must be named NAME-00001-of-%05d.gguf "
                         "(to find the others)",
                         path, count, (int)count);
    f->shards = mem_calloc((size_t)count - 1, sizeof *f->shards);
    if (!f->shards) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", path);
    size_t plen = strlen(path) + 1;
    char *name = mem_alloc(plen);
    if (!name) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", path);
    rc = CLOVER_OK;
    for (uint64_t i = 1; i < count && rc == CLOVER_OK; i++) {
        snprintf(name, plen, "%.*s-%05d-of-%05d.gguf", (int)pre, path, (int)i + 1, (int)count);
        gguf_file *s = NULL;
        if ((rc = gguf_open_one(&s, name, err)) < 0) {
            error_prefix(err, "split model %s, shard %" PRIu64 " of %" PRIu64, path, i + 1, count);
            break;
        }
        f->shards[f->n_shards++] = s;
        uint64_t sno, scount;
        if ((rc = split_key(s, "split.no", true, &sno, err)) < 0 || (rc = split_key(s, "split.count", true, &scount, err)) < 0)
            break;
        rc = CLOVER_OK;
        if (sno != i || scount != count) {
            rc = error_set(err, CLOVER_E_FORMAT, "%s: split.no %" PRIu64 " / split.count %" PRIu64 ", expected %" PRIu64 " / %" PRIu64,
                           name, sno, scount, i, count);
            break;
        }
        rc = adopt_tensors(f, s, err);
    }
    mem_free(name);
    if (rc == CLOVER_OK && f->n_tensors != total)
        rc = error_set(err, CLOVER_E_FORMAT, "%s: the shards hold %zu tensors, split.tensors.count says %" PRIu64, path,
                       f->n_tensors, total);
    return rc;
}
