/*
 * gguf.h: GGUF v3 files, read and written (llama.cpp's container format).
 *
 * Reading: gguf_open maps the file (gguf_open_memory takes a caller's buffer,
 * for the embedded model and the fuzzer) and validates everything before any
 * of it is used: magic, version, every count and length against the bytes
 * that remain, value and tensor type codes, dimension products without
 * overflow, data offsets aligned, inside the file and not overlapping.
 * Metadata is copied out into owned, NUL-terminated form; tensor data stays
 * in the mapping (gguf_tensor.data points into it).
 *
 * Writing: a gguf_writer collects metadata and tensor infos, then streams:
 * header and tables first, then each tensor's bytes in declaration order,
 * in as many pieces as the caller likes, so a 20 GB file never needs 20 GB
 * of memory.
 */
#ifndef CLOVER_GGUF_H
#define CLOVER_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define GGUF_VERSION 3u
#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32u

typedef enum gguf_value_type {
    GGUF_VT_U8 = 0,
    GGUF_VT_I8 = 1,
    GGUF_VT_U16 = 2,
    GGUF_VT_I16 = 3,
    GGUF_VT_U32 = 4,
    GGUF_VT_I32 = 5,
    GGUF_VT_F32 = 6,
    GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8,
    GGUF_VT_ARRAY = 9,
    GGUF_VT_U64 = 10,
    GGUF_VT_I64 = 11,
    GGUF_VT_F64 = 12,
    GGUF_VT_COUNT
} gguf_value_type;

const char *gguf_value_type_name(uint32_t type);

typedef struct gguf_string {
    char *str;    /* owned, NUL-terminated (may hold embedded NULs: use len) */
    uint64_t len; /* bytes, without the terminator */
} gguf_string;

/* One metadata value. Arrays hold elements of one scalar type or strings
 * (arrays of arrays are rejected as unsupported). */
typedef struct gguf_value {
    uint32_t type; /* gguf_value_type */
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        float f32;
        bool b;
        uint64_t u64;
        int64_t i64;
        double f64;
        gguf_string str;
        struct {
            uint32_t type; /* element type */
            uint64_t len;  /* element count */
            void *data;    /* owned: len scalars packed, or len gguf_string */
        } arr;
    } v;
} gguf_value;

typedef struct gguf_kv {
    gguf_string key;
    gguf_value value;
} gguf_kv;

typedef struct gguf_tensor {
    gguf_string name;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ggml order: ne[0] is the contiguous (row) length; unused dims are 1 */
    uint32_t type;              /* ggml type code (quant.h) */
    uint64_t offset;            /* relative to the data section */
    uint64_t nbytes;            /* bytes of data */
    const void *data;           /* into the mapping */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* Maps and validates path. On failure returns a negative status, *out = NULL
 * and err names the file and the field at fault. */
int gguf_open(gguf_file **out, const char *path, clover_error *err);
/* The same over a caller's buffer, which must outlive the gguf_file. */
int gguf_open_memory(gguf_file **out, const void *buf, size_t len, const char *name, clover_error *err);
void gguf_close(gguf_file *f);

uint32_t gguf_version(const gguf_file *f);
uint32_t gguf_alignment(const gguf_file *f);
uint64_t gguf_data_offset(const gguf_file *f); /* file offset of the data section */
uint64_t gguf_file_size(const gguf_file *f);
const char *gguf_name(const gguf_file *f); /* the path or name given at open */

size_t gguf_kv_count(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i);
const gguf_kv *gguf_kv_find(const gguf_file *f, const char *key); /* NULL when absent */

size_t gguf_tensor_count(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i);
const gguf_tensor *gguf_tensor_find(const gguf_file *f, const char *name); /* NULL when absent */

/* Typed metadata getters. Absent key: CLOVER_E_FORMAT with "missing key K"
 * unless the getter is *_or (which returns the default). A value of another
 * type is converted when exact (any integer type in range for the integer
 * getters; F32/F64 for gguf_get_f32), otherwise an error naming the key, the
 * type found and the type expected. */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, clover_error *err);
int gguf_get_i32(const gguf_file *f, const char *key, int32_t *out, clover_error *err);
int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out, clover_error *err);
int gguf_get_f32(const gguf_file *f, const char *key, float *out, clover_error *err);
int gguf_get_bool(const gguf_file *f, const char *key, bool *out, clover_error *err);
int gguf_get_string(const gguf_file *f, const char *key, const gguf_string **out, clover_error *err);
int gguf_get_u32_or(const gguf_file *f, const char *key, uint32_t dflt, uint32_t *out, clover_error *err);
int gguf_get_f32_or(const gguf_file *f, const char *key, float dflt, float *out, clover_error *err);
/* An array's element type and length (and the value, for element access). */
int gguf_get_array(const gguf_file *f, const char *key, const gguf_value **out, clover_error *err);

/* ---- writing ---- */

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_create(void); /* NULL on allocation failure */
void gguf_writer_free(gguf_writer *w); /* also closes (and removes) an unfinished file */

/* alignment defaults to 32; setting general.alignment (u32, a power of two)
 * changes it. Setting a key again replaces its value and keeps its place.
 * Keys are non-empty; bool values and elements are 0 or 1. */
int gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v, clover_error *err);
int gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v, clover_error *err);
int gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v, clover_error *err);
int gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v, clover_error *err);
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v, clover_error *err);
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v, clover_error *err);
int gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v, clover_error *err);
int gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v, clover_error *err);
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v, clover_error *err);
int gguf_writer_set_f64(gguf_writer *w, const char *key, double v, clover_error *err);
int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v, clover_error *err);
int gguf_writer_set_string(gguf_writer *w, const char *key, const char *s, clover_error *err);
/* elems: len packed scalars of elem_type (not STRING/ARRAY). */
int gguf_writer_set_array(gguf_writer *w, const char *key, uint32_t elem_type, const void *elems, uint64_t len,
                          clover_error *err);
int gguf_writer_set_string_array(gguf_writer *w, const char *key, const char *const *strs, uint64_t len,
                                 clover_error *err);
/* Copies any value (from a gguf_file, say) under key. */
int gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v, clover_error *err);

/* Declares a tensor; ne in ggml order (n_dims 0..4), ne[0] a multiple of the
 * type's block. Offsets are assigned in declaration order. */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                           clover_error *err);

/* Writes header, metadata and tensor infos (nothing may be added after). The
 * bytes go to a temporary file next to path, renamed over path by
 * gguf_writer_finish (base/safe_output.h): path is never partly written. */
int gguf_writer_begin(gguf_writer *w, const char *path, clover_error *err);
/* Appends n bytes of tensor data: the declared tensors' bytes in order, in any
 * number of pieces; alignment padding between tensors is written for you. */
int gguf_writer_write(gguf_writer *w, const void *data, size_t n, clover_error *err);
/* Checks every declared byte was written, flushes, fsyncs, closes, runs the
 * verify callback (if set) on the temporary, then renames it over path. */
int gguf_writer_finish(gguf_writer *w, clover_error *err);
/* Instead of writing the tensor data: the file is extended to its full size
 * (the data reads as zeros, a valid block of every type, and takes no disk
 * blocks), then finished as above. Only before any gguf_writer_write. */
int gguf_writer_finish_sparse(gguf_writer *w, clover_error *err);
/* Called by gguf_writer_finish on the complete temporary file before it is
 * renamed into place (a converter loads it back): non-zero refuses it, and
 * the temporary is removed, the target untouched. */
typedef int (*gguf_writer_verify_fn)(const char *tmp_path, void *user, clover_error *err);
void gguf_writer_set_verify(gguf_writer *w, gguf_writer_verify_fn fn, void *user);

#endif
