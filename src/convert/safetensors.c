/*
 * safetensors.c: mapping and validating a safetensors file.
 *
 * Validation happens once, in st_parse, over the header bytes and the size
 * of what follows them; after it every st_tensor's [data, data + nbytes)
 * is known to lie inside the buffer, so readers never check again. Entries
 * are kept sorted by name (lookups are binary searches over a 2,000-tensor
 * shard) and checked for overlap in offset order.
 */
#include "convert/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/safe_output.h"
#include "convert/json_util.h"
#include "quant/quant.h"

struct st_file {
    char *name;
    const uint8_t *buf; /* the whole file */
    size_t len;
    bool mapped;        /* buf is our mmap */
    unsigned long long dev, ino; /* the mapped file, noted in safe_output while mapped */
    st_tensor *tensors; /* [count], sorted by name */
    size_t count;
    char *names;        /* the tensors' names, one block */
};

static const struct {
    const char *name;
    unsigned bits;
} st_dtypes[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 8},         [ST_U8] = {"U8", 8},         [ST_I8] = {"I8", 8},
    [ST_F8_E5M2] = {"F8_E5M2", 8},   [ST_F8_E4M3] = {"F8_E4M3", 8}, [ST_F8_E8M0] = {"F8_E8M0", 8},
    [ST_I16] = {"I16", 16},          [ST_U16] = {"U16", 16},      [ST_F16] = {"F16", 16},
    [ST_BF16] = {"BF16", 16},        [ST_I32] = {"I32", 32},      [ST_U32] = {"U32", 32},
    [ST_F32] = {"F32", 32},          [ST_I64] = {"I64", 64},      [ST_U64] = {"U64", 64},
    [ST_F64] = {"F64", 64},          [ST_C64] = {"C64", 64},      [ST_F4] = {"F4", 4},
    [ST_F6_E2M3] = {"F6_E2M3", 6},   [ST_F6_E3M2] = {"F6_E3M2", 6},
};

const char *st_dtype_name(st_dtype dt) { return (unsigned)dt < ST_DTYPE_COUNT ? st_dtypes[dt].name : "?"; }

unsigned st_dtype_bits(st_dtype dt) { return (unsigned)dt < ST_DTYPE_COUNT ? st_dtypes[dt].bits : 0; }

int st_dtype_from_name(const char *name) {
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (!strcmp(name, st_dtypes[i].name)) return i;
    return -1;
}

bool st_dtype_is_float(st_dtype dt) { return dt == ST_F32 || dt == ST_F16 || dt == ST_BF16; }

/* ---- header parsing ---- */

/* A JSON integer in [0, 2^63) into *out. */
static bool json_to_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v)) return false;
    json_int_t i = json_integer_value(v);
    if (i < 0) return false;
    *out = (uint64_t)i;
    return true;
}

static int parse_entry(st_tensor *t, const char *fname, const char *key, json_t *val, uint64_t data_len,
                       clover_error *err) {
    if (!json_is_object(val))
        return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s': header entry is %s, expected an object", fname, key,
                         json_util_kind(val));
    json_t *dtype = json_object_get(val, "dtype");
    json_t *shape = json_object_get(val, "shape");
    json_t *offs = json_object_get(val, "data_offsets");
    if (!dtype || !shape || !offs)
        return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s': header entry lacks '%s'", fname, key,
                         !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!json_is_string(dtype))
        return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s': dtype is %s, expected a string", fname, key,
                         json_util_kind(dtype));
    int dt = st_dtype_from_name(json_string_value(dtype));
    if (dt < 0)
        return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s': unknown dtype '%s'", fname, key,
                         json_string_value(dtype));
    t->dtype = (st_dtype)dt;

    if (!json_is_array(shape))
        return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s': shape is %s, expected an array", fname, key,
                         json_util_kind(shape));
    size_t nd = json_array_size(shape);
    if (nd > ST_MAX_DIMS)
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: tensor '%s': %zu dimensions (at most %d supported)", fname,
                         key, nd, ST_MAX_DIMS);
    t->n_dims = (uint32_t)nd;
    uint64_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        uint64_t d;
        if (!json_to_u64(json_array_get(shape, i), &d))
            return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s': shape[%zu] is not a non-negative integer",
                             fname, key, i);
        t->shape[i] = d;
        if (__builtin_mul_overflow(numel, d, &numel))
            return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s': element count overflows", fname, key);
    }
    t->numel = numel;

    uint64_t bits;
    if (__builtin_mul_overflow(numel, (uint64_t)st_dtype_bits(t->dtype), &bits))
        return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s': byte size overflows", fname, key);
    if (bits % 8)
        return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s': %llu elements of %s are not a whole number of bytes",
                         fname, key, (unsigned long long)numel, st_dtype_name(t->dtype));

    if (!json_is_array(offs) || json_array_size(offs) != 2)
        return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s': data_offsets is not an array of two integers",
                         fname, key);
    uint64_t begin, end;
    if (!json_to_u64(json_array_get(offs, 0), &begin) || !json_to_u64(json_array_get(offs, 1), &end))
        return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s': data_offsets are not non-negative integers", fname,
                         key);
    if (end < begin)
        return error_set(err, CLOVER_E_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
                         fname, key, (unsigned long long)begin, (unsigned long long)end);
    if (end - begin != bits / 8)
        return error_set(err, CLOVER_E_FORMAT,
                         "%s: tensor '%s': data_offsets span %llu bytes, shape and dtype %s need %llu", fname, key,
                         (unsigned long long)(end - begin), st_dtype_name(t->dtype), (unsigned long long)(bits / 8));
    if (end > data_len)
        return error_set(err, CLOVER_E_FORMAT,
                         "%s: tensor '%s': data_offsets end at %llu, past the %llu bytes of data (truncated file?)",
                         fname, key, (unsigned long long)end, (unsigned long long)data_len);
    t->offset = begin;
    t->nbytes = end - begin;
    return CLOVER_OK;
}

static int cmp_by_offset(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int cmp_by_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static int check_overlap(st_file *f, clover_error *err) {
    if (f->count < 2) return CLOVER_OK;
    const st_tensor **order = mem_calloc(f->count, sizeof *order);
    if (!order) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory for %zu tensors", f->name, f->count);
    for (size_t i = 0; i < f->count; i++) order[i] = &f->tensors[i];
    qsort(order, f->count, sizeof *order, cmp_by_offset);
    int rc = CLOVER_OK;
    for (size_t i = 1; i < f->count; i++) {
        const st_tensor *p = order[i - 1], *c = order[i];
        /* Empty tensors occupy nothing and overlap nothing. */
        if (c->nbytes && p->nbytes && c->offset < p->offset + p->nbytes) {
            rc = error_set(err, CLOVER_E_FORMAT, "%s: tensors '%s' and '%s' overlap (bytes %llu..%llu and %llu..%llu)",
                           f->name, p->name, c->name, (unsigned long long)p->offset,
                           (unsigned long long)(p->offset + p->nbytes), (unsigned long long)c->offset,
                           (unsigned long long)(c->offset + c->nbytes));
            break;
        }
    }
    mem_free(order);
    return rc;
}

static int st_parse(st_file *f, clover_error *err) {
    if (f->len < 8)
        return error_set(err, CLOVER_E_FORMAT,
                         "%s: truncated: %zu bytes, a safetensors file starts with an 8-byte header length", f->name,
                         f->len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | f->buf[i];
    if (hlen > f->len - 8)
        return error_set(err, CLOVER_E_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)",
                         f->name, (unsigned long long)hlen, f->len);
    if (hlen > ST_MAX_HEADER_BYTES)
        return error_set(err, CLOVER_E_FORMAT, "%s: header length %llu exceeds the %u-byte limit", f->name,
                         (unsigned long long)hlen, ST_MAX_HEADER_BYTES);
    if (hlen < 2)
        return error_set(err, CLOVER_E_FORMAT, "%s: header of %llu bytes cannot hold a JSON object", f->name,
                         (unsigned long long)hlen);
    uint64_t data_len = f->len - 8 - hlen;

    json_error_t jerr;
    json_t *root = json_loadb((const char *)f->buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return error_set(err, CLOVER_E_FORMAT, "%s: header is not valid JSON: %s (at byte %d)", f->name, jerr.text,
                         jerr.position);
    int rc = CLOVER_OK;
    if (!json_is_object(root)) {
        rc = error_set(err, CLOVER_E_FORMAT, "%s: header is %s, expected a JSON object", f->name, json_util_kind(root));
        goto done;
    }

    /* Count the tensors and the bytes of their names. */
    size_t n = 0, name_bytes = 0;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(val)) {
                rc = error_set(err, CLOVER_E_FORMAT, "%s: __metadata__ is %s, expected an object", f->name,
                               json_util_kind(val));
                goto done;
            }
            continue;
        }
        n++;
        name_bytes += strlen(key) + 1;
    }
    f->tensors = n ? mem_calloc(n, sizeof *f->tensors) : NULL;
    f->names = name_bytes ? mem_alloc(name_bytes) : NULL;
    if ((n && !f->tensors) || (name_bytes && !f->names)) {
        rc = error_set(err, CLOVER_E_NOMEM, "%s: out of memory for the header of %zu tensors", f->name, n);
        goto done;
    }
    char *np = f->names;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) continue;
        st_tensor *t = &f->tensors[f->count];
        rc = parse_entry(t, f->name, key, val, data_len, err);
        if (rc) goto done;
        size_t kl = strlen(key) + 1;
        memcpy(np, key, kl);
        t->name = np;
        np += kl;
        t->data = f->buf + 8 + hlen + t->offset;
        f->count++;
    }
    if (f->count > 1) qsort(f->tensors, f->count, sizeof *f->tensors, cmp_by_name);
    rc = check_overlap(f, err);
done:
    json_decref(root);
    return rc;
}

/* ---- opening ---- */

static st_file *st_new(const char *name) {
    st_file *f = mem_calloc(1, sizeof *f);
    if (!f) return NULL;
    size_t nl = strlen(name) + 1;
    f->name = mem_alloc(nl);
    if (!f->name) {
        mem_free(f);
        return NULL;
    }
    memcpy(f->name, name, nl);
    return f;
}

int st_file_open_memory(st_file **out, const void *buf, size_t len, const char *name, clover_error *err) {
    *out = NULL;
    st_file *f = st_new(name ? name : "<memory>");
    if (!f) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", name ? name : "<memory>");
    f->buf = buf;
    f->len = len;
    int rc = st_parse(f, err);
    if (rc) {
        st_file_close(f);
        return rc;
    }
    *out = f;
    return CLOVER_OK;
}

int st_file_open(st_file **out, const char *path, clover_error *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return error_set(err, CLOVER_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return error_set(err, CLOVER_E_IO, "%s: not a regular file%s%s", path, e ? ": " : "", e ? strerror(e) : "");
    }
    st_file *f = st_new(path);
    if (!f) {
        close(fd);
        return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", path);
    }
    f->len = (size_t)st.st_size;
    if (f->len > 0) {
        void *p = mmap(NULL, f->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            st_file_close(f);
            return error_set(err, CLOVER_E_IO, "%s: cannot map: %s", path, strerror(e));
        }
        f->buf = p;
        f->mapped = true;
        f->dev = (unsigned long long)st.st_dev;
        f->ino = (unsigned long long)st.st_ino;
        safe_output_note_input(f->dev, f->ino); /* no writer may replace it while it is read */
    }
    close(fd);
    int rc = st_parse(f, err);
    if (rc) {
        st_file_close(f);
        return rc;
    }
    *out = f;
    return CLOVER_OK;
}

void st_file_close(st_file *f) {
    if (!f) return;
    if (f->mapped) {
        munmap((void *)f->buf, f->len);
        safe_output_forget_input(f->dev, f->ino);
    }
    mem_free(f->tensors);
    mem_free(f->names);
    mem_free(f->name);
    mem_free(f);
}

const char *st_file_name(const st_file *f) { return f->name; }
size_t st_file_tensor_count(const st_file *f) { return f->count; }
const st_tensor *st_file_tensor_at(const st_file *f, size_t i) { return i < f->count ? &f->tensors[i] : NULL; }

const st_tensor *st_file_find(const st_file *f, const char *name) {
    size_t lo = 0, hi = f->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, f->tensors[mid].name);
        if (!c) return &f->tensors[mid];
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

void st_file_release(const st_file *f, const st_tensor *t) {
    if (!f->mapped || !t->nbytes) return;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    uintptr_t base = (uintptr_t)f->buf;
    uintptr_t lo = (uintptr_t)t->data, hi = lo + t->nbytes;
    /* Only whole pages inside the tensor: a neighbour may still be in use. */
    lo = base + ((lo - base + (uintptr_t)page - 1) / (uintptr_t)page) * (uintptr_t)page;
    hi = base + ((hi - base) / (uintptr_t)page) * (uintptr_t)page;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* ---- reading ---- */

void st_tensor_read_f32(const st_tensor *t, uint64_t first, size_t n, float *dst) {
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case ST_F32:
        memcpy(dst, p + first * 4, n * 4);
        break;
    case ST_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + (first + i) * 2, 2);
            dst[i] = quant_bf16_to_f32(h);
        }
        break;
    case ST_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + (first + i) * 2, 2);
            dst[i] = quant_f16_to_f32(h);
        }
        break;
    default:
        /* Callers check st_dtype_is_float first; a bug otherwise. */
        for (size_t i = 0; i < n; i++) dst[i] = 0.0f;
        break;
    }
}
