/*
 * gguf_file.c: opening a GGUF file (a read-only private mapping, so tensor
 * data is paged in on demand and shared with the page cache) or a caller's
 * buffer, and the read-side accessors (a split model's other shards are
 * gguf_split.c's). Parsing lives in gguf_parse.c; this
 * file owns the lifetime: whatever was built before a failure is freed here.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/safe_output.h"
#include "gguf/gguf_internal.h"

static char *copy_cstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = mem_alloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n_kv; i++) {
        mem_free(f->kvs[i].key.str);
        gguf_value_free(&f->kvs[i].value);
    }
    for (size_t i = 0; i < f->n_tensors; i++) mem_free(f->tensors[i].name.str);
    mem_free(f->kvs);
    mem_free(f->tensors);
    gguf_index_free(&f->kv_index);
    gguf_index_free(&f->tensor_index);
    for (size_t i = 0; i < f->n_shards; i++) gguf_close(f->shards[i]);
    mem_free(f->shards);
    if (f->map) {
        munmap(f->map, f->map_len);
        safe_output_forget_input(f->map_dev, f->map_ino);
    }
    mem_free(f->name);
    mem_free(f);
}

static int file_new(gguf_file **out, const char *name, clover_error *err) {
    gguf_file *f = mem_calloc(1, sizeof *f);
    if (f) f->name = copy_cstr(name);
    if (!f || !f->name) {
        mem_free(f);
        return error_set(err, CLOVER_E_NOMEM, "%s: out of memory opening the file", name);
    }
    *out = f;
    return CLOVER_OK;
}

/* Parses f; on failure prefixes the file name, frees f and clears *out. */
static int file_parse(gguf_file **out, gguf_file *f, clover_error *err) {
    int rc = gguf_parse(f, err);
    if (rc < 0) {
        if (err) error_prefix(err, "%s", f->name);
        gguf_close(f);
        return rc;
    }
    *out = f;
    return CLOVER_OK;
}

int gguf_open_memory(gguf_file **out, const void *buf, size_t len, const char *name, clover_error *err) {
    if (!out) return error_set(err, CLOVER_E_INVALID, "gguf_open_memory: out is NULL");
    *out = NULL;
    if (!name) name = "<memory>";
    if (!buf && len) return error_set(err, CLOVER_E_INVALID, "%s: buffer is NULL", name);
    gguf_file *f = NULL;
    int rc = file_new(&f, name, err);
    if (rc < 0) return rc;
    static const uint8_t empty[1];
    f->base = buf ? buf : empty;
    f->size = len;
    return file_parse(out, f, err);
}

int gguf_open(gguf_file **out, const char *path, clover_error *err) {
    int rc = gguf_open_one(out, path, err);
    if (rc < 0) return rc;
    if ((rc = gguf_split_attach(*out, path, err)) < 0) {
        gguf_close(*out);
        *out = NULL;
    }
    return rc;
}

int gguf_open_one(gguf_file **out, const char *path, clover_error *err) {
    if (!out) return error_set(err, CLOVER_E_INVALID, "gguf_open: out is NULL");
    *out = NULL;
    if (!path) return error_set(err, CLOVER_E_INVALID, "gguf_open: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return error_set(err, CLOVER_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return error_set(err, CLOVER_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return error_set(err, CLOVER_E_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return error_set(err, CLOVER_E_FORMAT, "%s: empty file (expected a GGUF header)", path);
    }
    if ((unsigned long long)st.st_size > SIZE_MAX) {
        close(fd);
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: too large to map on this system", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return error_set(err, CLOVER_E_IO, "%s: cannot map %zu bytes: %s", path, size, strerror(e));
    gguf_file *f = NULL;
    int rc = file_new(&f, path, err);
    if (rc < 0) {
        munmap(map, size);
        return rc;
    }
    f->map = map;
    f->map_len = size;
    f->map_dev = (unsigned long long)st.st_dev;
    f->map_ino = (unsigned long long)st.st_ino;
    safe_output_note_input(f->map_dev, f->map_ino); /* no writer may replace it while it is read */
    f->base = map;
    f->size = size;
    return file_parse(out, f, err);
}

uint32_t gguf_version(const gguf_file *f) { return f->version; }
uint32_t gguf_alignment(const gguf_file *f) { return f->alignment; }
uint64_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
uint64_t gguf_file_size(const gguf_file *f) { return f->size; }
const char *gguf_name(const gguf_file *f) { return f->name; }

size_t gguf_kv_count(const gguf_file *f) { return f->n_kv; }
const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i) { return i < f->n_kv ? &f->kvs[i] : NULL; }

const gguf_kv *gguf_kv_find(const gguf_file *f, const char *key) {
    if (!key) return NULL;
    size_t i = gguf_index_find(&f->kv_index, key, strlen(key));
    return i == SIZE_MAX ? NULL : &f->kvs[i];
}

size_t gguf_tensor_count(const gguf_file *f) { return f->n_tensors; }
const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i) { return i < f->n_tensors ? &f->tensors[i] : NULL; }

const gguf_tensor *gguf_tensor_find(const gguf_file *f, const char *name) {
    if (!name) return NULL;
    size_t i = gguf_index_find(&f->tensor_index, name, strlen(name));
    return i == SIZE_MAX ? NULL : &f->tensors[i];
}
