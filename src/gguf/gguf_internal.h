/*
 * gguf_internal.h: what the files of the GGUF module share and nobody else
 * needs: the reader's file object, a name index (so lookups and the
 * duplicate checks stay O(1) for files with tens of thousands of names, and
 * a hostile file cannot make the checks quadratic), and value ownership.
 */
#ifndef CLOVER_GGUF_INTERNAL_H
#define CLOVER_GGUF_INTERNAL_H

#include "gguf/gguf.h"

/* ---- name index: open addressing over (bytes, len) -> item number ---- */

typedef struct gguf_index_slot {
    const char *str; /* borrowed: must outlive the index (NULL: empty slot) */
    uint64_t len;
    uint64_t hash;
    size_t item;
} gguf_index_slot;

typedef struct gguf_index {
    gguf_index_slot *slots; /* [cap], cap a power of two or 0 */
    size_t cap;
    size_t count;
} gguf_index;

void gguf_index_free(gguf_index *ix);
/* The item stored under (s, len), or SIZE_MAX when absent. */
size_t gguf_index_find(const gguf_index *ix, const char *s, uint64_t len);
/* Adds (s, len) -> item. Returns CLOVER_OK, 1 when the name is already
 * present (*existing = its item, nothing added) or CLOVER_E_NOMEM. */
int gguf_index_insert(gguf_index *ix, const char *s, uint64_t len, size_t item, size_t *existing);

/* ---- values ---- */

/* Bytes of one scalar of a value type; 0 for STRING, ARRAY and unknown codes. */
size_t gguf_value_type_size(uint32_t type);
/* Allocates an array of n strings whose bytes (total, terminators excluded)
 * live in the same block, so a 248k-entry vocabulary is one allocation.
 * Returns the string table; *chars points at the byte area. NULL on overflow
 * or allocation failure. Free with mem_free. */
gguf_string *gguf_strings_alloc(uint64_t n, uint64_t total, char **chars);
/* Frees what a value owns and leaves it an empty U8. */
void gguf_value_free(gguf_value *v);
/* Deep copy. Rejects (CLOVER_E_INVALID) unknown types, arrays of arrays and
 * bool values other than 0/1. */
int gguf_value_copy(gguf_value *dst, const gguf_value *src, clover_error *err);

/* ---- the reader's file ---- */

struct gguf_file {
    char *name;
    const uint8_t *base; /* [size]: the mapping or the caller's buffer */
    size_t size;
    void *map; /* non-NULL when gguf_open mapped it */
    size_t map_len;
    unsigned long long map_dev, map_ino; /* the mapped file, noted in safe_output while mapped */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    gguf_kv *kvs; /* [n_kv] */
    size_t n_kv, cap_kv;
    gguf_tensor *tensors; /* [n_tensors] */
    size_t n_tensors, cap_tensors;
    gguf_index kv_index;
    gguf_index tensor_index;
    /* A split model (gguf-split): the other shards, opened with the first;
     * their tensors were moved into tensors[] above (names owned here, data
     * pointing into each shard's own mapping). */
    gguf_file **shards; /* [n_shards] */
    size_t n_shards;
};

/* Parses and validates f->base[0..size) into f (gguf_parse.c). Errors do not
 * yet carry the file name; the caller prefixes it. */
int gguf_parse(gguf_file *f, clover_error *err);

/* Opens one file, never its shards (gguf_file.c). */
int gguf_open_one(gguf_file **out, const char *path, clover_error *err);
/* When f (opened from path) is the first shard of a split model, opens the
 * others and adds their tensors to f (gguf_split.c); a lone file is left as
 * it is. */
int gguf_split_attach(gguf_file *f, const char *path, clover_error *err);

#endif
