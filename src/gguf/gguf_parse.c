/*
 * gguf_parse.c: turns the bytes of a GGUF v3 file into a gguf_file, trusting
 * nothing. Every read goes through a cursor that knows how many bytes
 * remain, every count is checked against those bytes before anything is
 * allocated for it, and tables grow as entries are actually parsed, so a
 * header that lies about its counts fails on the bytes, not on memory.
 * Errors name the entry (kv or tensor, by number and name) and the file
 * offset; the innermost reader says what it wanted, callers add context.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "gguf/gguf_internal.h"
#include "quant/quant.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

/* Smallest encodings, used to bound counts before allocating: a kv is a
 * string length, a type and at least one value byte; a tensor info is a
 * name length, n_dims, a type and an offset. */
enum { KV_MIN_BYTES = 8 + 4 + 1, TENSOR_MIN_BYTES = 8 + 4 + 4 + 8, TABLE_RESERVE_MAX = 1024 };

typedef struct cursor {
    const uint8_t *p; /* [size] */
    size_t size;
    size_t pos;
    clover_error *err;
} cursor;

/* Adds "context: " in front of an error already set; keeps its status. */
static int with_context(clover_error *err, int rc, const char *fmt, ...) CLOVER_PRINTF(3, 4);
static int with_context(clover_error *err, int rc, const char *fmt, ...) {
    if (err) {
        char ctx[384];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx, sizeof ctx, fmt, ap);
        va_end(ap);
        error_prefix(err, "%s", ctx);
    }
    return rc;
}

/* A name fit for a one-line message: control bytes escaped, long names cut. */
enum { PRINTABLE_MAX = 100 };
static const char *printable(const gguf_string *s, char out[PRINTABLE_MAX]) {
    size_t o = 0;
    for (uint64_t i = 0; i < s->len; i++) {
        uint8_t ch = (uint8_t)s->str[i];
        if (o + 8 >= PRINTABLE_MAX) {
            memcpy(out + o, "...", 4);
            return out;
        }
        if (ch < 0x20 || ch == 0x7f || ch == '\\' || ch == '\'')
            o += (size_t)snprintf(out + o, PRINTABLE_MAX - o, "\\x%02x", ch);
        else
            out[o++] = (char)ch;
    }
    out[o] = '\0';
    return out;
}

static size_t cursor_left(const cursor *c) { return c->size - c->pos; }

static int cursor_need(cursor *c, uint64_t n, const char *what) {
    if (n > cursor_left(c))
        return error_set(c->err, CLOVER_E_FORMAT, "truncated: %s at offset %zu needs %" PRIu64 " bytes, %zu left", what,
                         c->pos, n, cursor_left(c));
    return CLOVER_OK;
}

static int read_u32(cursor *c, uint32_t *out, const char *what) {
    int rc = cursor_need(c, 4, what);
    if (rc < 0) return rc;
    memcpy(out, c->p + c->pos, 4);
    c->pos += 4;
    return CLOVER_OK;
}

static int read_u64(cursor *c, uint64_t *out, const char *what) {
    int rc = cursor_need(c, 8, what);
    if (rc < 0) return rc;
    memcpy(out, c->p + c->pos, 8);
    c->pos += 8;
    return CLOVER_OK;
}

/* A u64 length, then that many bytes, copied out NUL-terminated. */
static int read_string(cursor *c, gguf_string *out, const char *what) {
    uint64_t len;
    size_t at = c->pos;
    int rc = read_u64(c, &len, what);
    if (rc < 0) return rc;
    if (len > cursor_left(c))
        return error_set(c->err, CLOVER_E_FORMAT, "%s at offset %zu has length %" PRIu64 ", past the end of the file (%zu bytes left)",
                         what, at, len, cursor_left(c));
    out->str = mem_alloc((size_t)len + 1);
    if (!out->str) return error_set(c->err, CLOVER_E_NOMEM, "out of memory for %s of %" PRIu64 " bytes", what, len);
    memcpy(out->str, c->p + c->pos, (size_t)len);
    out->str[len] = '\0';
    out->len = len;
    c->pos += (size_t)len;
    return CLOVER_OK;
}

/* An array of n strings into one block: a first walk checks every length
 * against the bytes left and sums them, the second copies. */
static int read_string_array(cursor *c, gguf_value *v, uint64_t n) {
    size_t pos = c->pos;
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len;
        if (c->size - pos < 8)
            return error_set(c->err, CLOVER_E_FORMAT, "truncated: length of string %" PRIu64 " of %" PRIu64 " at offset %zu needs 8 bytes, %zu left",
                             i, n, pos, c->size - pos);
        memcpy(&len, c->p + pos, 8);
        pos += 8;
        if (len > c->size - pos)
            return error_set(c->err, CLOVER_E_FORMAT, "string %" PRIu64 " of %" PRIu64 " at offset %zu has length %" PRIu64 ", past the end of the file (%zu bytes left)",
                             i, n, pos - 8, len, c->size - pos);
        pos += (size_t)len;
        total += len; /* bounded by the file size */
    }
    char *chars;
    gguf_string *strs = gguf_strings_alloc(n, total, &chars);
    if (!strs) return error_set(c->err, CLOVER_E_NOMEM, "out of memory for an array of %" PRIu64 " strings", n);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len;
        memcpy(&len, c->p + c->pos, 8);
        c->pos += 8;
        memcpy(chars, c->p + c->pos, (size_t)len);
        chars[len] = '\0';
        strs[i].str = chars;
        strs[i].len = len;
        chars += len + 1;
        c->pos += (size_t)len;
    }
    v->v.arr.data = strs;
    return CLOVER_OK;
}

static int check_bools(cursor *c, const uint8_t *b, size_t n, size_t at) {
    for (size_t i = 0; i < n; i++)
        if (b[i] > 1)
            return error_set(c->err, CLOVER_E_FORMAT, "bool at offset %zu is %u (expected 0 or 1)", at + i, b[i]);
    return CLOVER_OK;
}

static int read_array(cursor *c, gguf_value *v) {
    uint32_t et;
    uint64_t n;
    size_t at = c->pos;
    int rc = read_u32(c, &et, "array element type");
    if (rc < 0) return rc;
    if (et == GGUF_VT_ARRAY)
        return error_set(c->err, CLOVER_E_UNSUPPORTED, "array of arrays at offset %zu is not supported", at);
    if (et >= GGUF_VT_COUNT)
        return error_set(c->err, CLOVER_E_FORMAT, "array element type %u at offset %zu is not a GGUF value type (0..%d)", et, at,
                         GGUF_VT_COUNT - 1);
    at = c->pos;
    if ((rc = read_u64(c, &n, "array length")) < 0) return rc;
    size_t elem = et == GGUF_VT_STRING ? 8 : gguf_value_type_size(et); /* strings: the smallest encoding */
    if (n > cursor_left(c) / elem)
        return error_set(c->err, CLOVER_E_FORMAT, "array length %" PRIu64 " (%s) at offset %zu cannot fit in the %zu bytes left", n,
                         gguf_value_type_name(et), at, cursor_left(c));
    v->type = GGUF_VT_ARRAY;
    v->v.arr.type = et;
    v->v.arr.len = n;
    v->v.arr.data = NULL;
    if (n == 0) return CLOVER_OK;
    if (et == GGUF_VT_STRING) return read_string_array(c, v, n);
    size_t bytes = (size_t)n * elem;
    if (et == GGUF_VT_BOOL && (rc = check_bools(c, c->p + c->pos, bytes, c->pos)) < 0) return rc;
    v->v.arr.data = mem_alloc(bytes);
    if (!v->v.arr.data) return error_set(c->err, CLOVER_E_NOMEM, "out of memory for an array of %zu bytes", bytes);
    memcpy(v->v.arr.data, c->p + c->pos, bytes);
    c->pos += bytes;
    return CLOVER_OK;
}

static int read_value(cursor *c, uint32_t type, gguf_value *v) {
    if (type == GGUF_VT_STRING) {
        v->type = GGUF_VT_STRING;
        return read_string(c, &v->v.str, "string value");
    }
    if (type == GGUF_VT_ARRAY) return read_array(c, v);
    size_t n = gguf_value_type_size(type);
    int rc = cursor_need(c, n, "value");
    if (rc < 0) return rc;
    if (type == GGUF_VT_BOOL && (rc = check_bools(c, c->p + c->pos, 1, c->pos)) < 0) return rc;
    v->type = type;
    if (type == GGUF_VT_BOOL)
        v->v.b = c->p[c->pos] != 0;
    else
        memcpy(&v->v, c->p + c->pos, n); /* every scalar member starts at the union's start */
    c->pos += n;
    return CLOVER_OK;
}

/* Room for one more entry in a table that grows as entries are parsed. */
static int table_reserve(void **items, size_t *cap, size_t n, size_t size, uint64_t declared) {
    if (n < *cap) return CLOVER_OK;
    size_t want = *cap ? *cap * 2 : (declared < TABLE_RESERVE_MAX ? (size_t)declared : TABLE_RESERVE_MAX);
    if (want <= n) want = n + 1;
    size_t bytes;
    if (!mem_mul_ok(want, size, &bytes)) return CLOVER_E_NOMEM;
    void *grown = mem_alloc(bytes);
    if (!grown) return CLOVER_E_NOMEM;
    if (n) memcpy(grown, *items, n * size);
    mem_free(*items);
    *items = grown;
    *cap = want;
    return CLOVER_OK;
}

static int parse_kv(gguf_file *f, cursor *c, uint64_t i, uint64_t n_kv) {
    int rc = table_reserve((void **)&f->kvs, &f->cap_kv, f->n_kv, sizeof *f->kvs, n_kv);
    if (rc < 0) return error_set(c->err, rc, "out of memory for %" PRIu64 " kvs", n_kv);
    gguf_kv *kv = &f->kvs[f->n_kv];
    memset(kv, 0, sizeof *kv);
    size_t at = c->pos;
    if ((rc = read_string(c, &kv->key, "key")) < 0) return with_context(c->err, rc, "kv %" PRIu64, i);
    f->n_kv++; /* owned from here on: gguf_close frees it */
    char key[PRINTABLE_MAX];
    printable(&kv->key, key);
    size_t dup;
    rc = gguf_index_insert(&f->kv_index, kv->key.str, kv->key.len, f->n_kv - 1, &dup);
    if (rc < 0) return error_set(c->err, rc, "out of memory indexing kv %" PRIu64, i);
    if (rc == 1)
        return error_set(c->err, CLOVER_E_FORMAT, "kv %" PRIu64 " at offset %zu: duplicate key '%s' (first defined by kv %zu)", i, at,
                         key, dup);
    uint32_t type;
    at = c->pos;
    if ((rc = read_u32(c, &type, "value type")) < 0) return with_context(c->err, rc, "kv %" PRIu64 " '%s'", i, key);
    if (type >= GGUF_VT_COUNT)
        return error_set(c->err, CLOVER_E_FORMAT, "kv %" PRIu64 " '%s': value type %u at offset %zu is not a GGUF value type (0..%d)", i,
                         key, type, at, GGUF_VT_COUNT - 1);
    if ((rc = read_value(c, type, &kv->value)) < 0) return with_context(c->err, rc, "kv %" PRIu64 " '%s'", i, key);
    return CLOVER_OK;
}

static int check_alignment(gguf_file *f, clover_error *err) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    size_t i = gguf_index_find(&f->kv_index, "general.alignment", 17);
    if (i == SIZE_MAX) return CLOVER_OK;
    const gguf_value *v = &f->kvs[i].value;
    if (v->type != GGUF_VT_U32)
        return error_set(err, CLOVER_E_FORMAT, "general.alignment has type %s (expected u32)", gguf_value_type_name(v->type));
    uint32_t a = v->v.u32;
    if (a == 0 || (a & (a - 1)) != 0)
        return error_set(err, CLOVER_E_FORMAT, "general.alignment is %u (expected a power of two)", a);
    f->alignment = a;
    return CLOVER_OK;
}

/* Shape, type and byte size of one tensor info (offsets are checked once the
 * data section is known). */
static int parse_tensor_info(gguf_file *f, cursor *c, uint64_t i, uint64_t n_tensors) {
    int rc = table_reserve((void **)&f->tensors, &f->cap_tensors, f->n_tensors, sizeof *f->tensors, n_tensors);
    if (rc < 0) return error_set(c->err, rc, "out of memory for %" PRIu64 " tensors", n_tensors);
    gguf_tensor *t = &f->tensors[f->n_tensors];
    memset(t, 0, sizeof *t);
    size_t at = c->pos;
    if ((rc = read_string(c, &t->name, "name")) < 0) return with_context(c->err, rc, "tensor %" PRIu64, i);
    f->n_tensors++;
    char name[PRINTABLE_MAX];
    printable(&t->name, name);
    size_t dup;
    rc = gguf_index_insert(&f->tensor_index, t->name.str, t->name.len, f->n_tensors - 1, &dup);
    if (rc < 0) return error_set(c->err, rc, "out of memory indexing tensor %" PRIu64, i);
    if (rc == 1)
        return error_set(c->err, CLOVER_E_FORMAT, "tensor %" PRIu64 " at offset %zu: duplicate name '%s' (first used by tensor %zu)", i,
                         at, name, dup);
    at = c->pos;
    if ((rc = read_u32(c, &t->n_dims, "n_dims")) < 0) return with_context(c->err, rc, "tensor %" PRIu64 " '%s'", i, name);
    if (t->n_dims > GGUF_MAX_DIMS)
        return error_set(c->err, CLOVER_E_FORMAT, "tensor '%s': n_dims %u at offset %zu (expected at most %d)", name, t->n_dims, at,
                         GGUF_MAX_DIMS);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        at = c->pos;
        if ((rc = read_u64(c, &t->ne[d], "dimension")) < 0) return with_context(c->err, rc, "tensor %" PRIu64 " '%s'", i, name);
        if (t->ne[d] > INT64_MAX)
            return error_set(c->err, CLOVER_E_FORMAT, "tensor '%s': ne[%u] = %" PRIu64 " at offset %zu (expected at most 2^63-1)", name, d,
                             t->ne[d], at);
        if (__builtin_mul_overflow(elems, t->ne[d], &elems) || elems > INT64_MAX)
            return error_set(c->err, CLOVER_E_FORMAT, "tensor '%s': the element count overflows at ne[%u] = %" PRIu64 " (offset %zu)", name,
                             d, t->ne[d], at);
    }
    at = c->pos;
    if ((rc = read_u32(c, &t->type, "type")) < 0) return with_context(c->err, rc, "tensor %" PRIu64 " '%s'", i, name);
    if (!quant_type_known(t->type))
        return error_set(c->err, CLOVER_E_FORMAT, "tensor '%s': type code %u at offset %zu is not a ggml type", name, t->type, at);
    if ((rc = read_u64(c, &t->offset, "data offset")) < 0) return with_context(c->err, rc, "tensor %" PRIu64 " '%s'", i, name);
    uint64_t blk = quant_block_elems(t->type), blk_bytes = quant_block_bytes(t->type);
    if (blk == 0 || blk_bytes == 0)
        return error_set(c->err, CLOVER_E_INTERNAL, "tensor '%s': type %s has no block geometry", name, quant_type_name(t->type));
    if (t->ne[0] % blk != 0)
        return error_set(c->err, CLOVER_E_FORMAT, "tensor '%s': ne[0] = %" PRIu64 " is not a multiple of the %s block (%" PRIu64 ")", name,
                         t->ne[0], quant_type_name(t->type), blk);
    t->nbytes = 0;
    if (elems == 0) return CLOVER_OK;
    uint64_t row, rows = elems / t->ne[0];
    if (__builtin_mul_overflow(t->ne[0] / blk, blk_bytes, &row) || __builtin_mul_overflow(row, rows, &t->nbytes))
        return error_set(c->err, CLOVER_E_FORMAT, "tensor '%s': the byte size of %" PRIu64 " %s elements overflows", name, elems,
                         quant_type_name(t->type));
    return CLOVER_OK;
}

typedef struct span {
    uint64_t start, end;
    size_t tensor;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* Offsets aligned, inside the data section, no two tensors sharing a byte. */
static int check_tensor_data(gguf_file *f, clover_error *err) {
    char name[PRINTABLE_MAX], name2[PRINTABLE_MAX];
    uint64_t data_size = f->size > f->data_offset ? f->size - f->data_offset : 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset % f->alignment != 0)
            return error_set(err, CLOVER_E_FORMAT, "tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %u",
                             printable(&t->name, name), t->offset, f->alignment);
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return error_set(err, CLOVER_E_FORMAT,
                             "tensor '%s': data [%" PRIu64 ", +%" PRIu64 ") runs past the end of the data section (%" PRIu64 " bytes at file offset %" PRIu64 ")",
                             printable(&t->name, name), t->offset, t->nbytes, data_size, f->data_offset);
        /* a zero-byte tensor may sit at the very end (data_size 0 when the file has no data section) */
        uint64_t at = f->data_offset + t->offset;
        t->data = f->base + (at < f->size ? at : f->size);
    }
    if (f->n_tensors < 2) return CLOVER_OK;
    span *spans = mem_calloc(f->n_tensors, sizeof *spans);
    if (!spans) return error_set(err, CLOVER_E_NOMEM, "out of memory checking %zu tensors for overlap", f->n_tensors);
    size_t n = 0;
    for (size_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].nbytes) spans[n++] = (span){f->tensors[i].offset, f->tensors[i].offset + f->tensors[i].nbytes, i};
    qsort(spans, n, sizeof *spans, span_cmp);
    int rc = CLOVER_OK;
    for (size_t i = 1; i < n && rc == CLOVER_OK; i++) {
        if (spans[i].start < spans[i - 1].end) {
            const gguf_tensor *a = &f->tensors[spans[i - 1].tensor], *b = &f->tensors[spans[i].tensor];
            rc = error_set(err, CLOVER_E_FORMAT,
                           "tensors '%s' [%" PRIu64 ", %" PRIu64 ") and '%s' [%" PRIu64 ", %" PRIu64 ") overlap in the data section",
                           printable(&a->name, name), spans[i - 1].start, spans[i - 1].end, printable(&b->name, name2), spans[i].start,
                           spans[i].end);
        }
    }
    mem_free(spans);
    return rc;
}

static int parse_header(gguf_file *f, cursor *c, uint64_t *n_tensors, uint64_t *n_kv) {
    uint32_t magic;
    int rc = read_u32(c, &magic, "magic");
    if (rc < 0) return rc;
    if (magic != GGUF_MAGIC) {
        const uint8_t *m = c->p;
        return error_set(c->err, CLOVER_E_FORMAT, "not a GGUF file: magic %02x %02x %02x %02x at offset 0 (expected \"GGUF\")", m[0], m[1],
                         m[2], m[3]);
    }
    if ((rc = read_u32(c, &f->version, "version")) < 0) return rc;
    if (f->version != GGUF_VERSION) {
        if (f->version == 1 || f->version == 2)
            return error_set(c->err, CLOVER_E_UNSUPPORTED, "GGUF version %u is not supported (expected %u)", f->version, GGUF_VERSION);
        if (f->version == __builtin_bswap32(GGUF_VERSION))
            return error_set(c->err, CLOVER_E_UNSUPPORTED, "GGUF version field 0x%08x is a big-endian file (expected little-endian version %u)",
                             f->version, GGUF_VERSION);
        return error_set(c->err, CLOVER_E_FORMAT, "GGUF version %u at offset 4 (expected %u)", f->version, GGUF_VERSION);
    }
    if ((rc = read_u64(c, n_tensors, "tensor count")) < 0) return rc;
    if ((rc = read_u64(c, n_kv, "kv count")) < 0) return rc;
    uint64_t left = cursor_left(c);
    if (*n_kv > left / KV_MIN_BYTES)
        return error_set(c->err, CLOVER_E_FORMAT, "kv count %" PRIu64 " at offset 16 cannot fit in the %" PRIu64 " bytes left", *n_kv, left);
    left -= *n_kv * KV_MIN_BYTES;
    if (*n_tensors > left / TENSOR_MIN_BYTES)
        return error_set(c->err, CLOVER_E_FORMAT,
                         "tensor count %" PRIu64 " at offset 8 cannot fit in the %zu bytes left (with %" PRIu64 " kvs)", *n_tensors,
                         cursor_left(c), *n_kv);
    return CLOVER_OK;
}

int gguf_parse(gguf_file *f, clover_error *err) {
    cursor c = {f->base, f->size, 0, err};
    uint64_t n_tensors = 0, n_kv = 0;
    int rc = parse_header(f, &c, &n_tensors, &n_kv);
    for (uint64_t i = 0; rc == CLOVER_OK && i < n_kv; i++) rc = parse_kv(f, &c, i, n_kv);
    if (rc == CLOVER_OK) rc = check_alignment(f, err);
    for (uint64_t i = 0; rc == CLOVER_OK && i < n_tensors; i++) rc = parse_tensor_info(f, &c, i, n_tensors);
    if (rc < 0) return rc;
    f->data_offset = ((uint64_t)c.pos + f->alignment - 1) / f->alignment * f->alignment;
    return check_tensor_data(f, err);
}
