/*
 * safetensors.h: Hugging Face safetensors files, mapped and validated.
 *
 * A checkpoint is the input of `clover convert`, and a real one is tens of
 * gigabytes, so the file is mapped, never read: tensor data stays in the
 * mapping and is converted row by row as the GGUF is streamed out. The
 * header (8-byte little-endian length, then a JSON object) is validated
 * completely before anything uses it, because it comes from anywhere: the
 * length lies inside the file, every entry has a known dtype, a shape and
 * data_offsets, offsets agree with shape x dtype size (without overflow),
 * lie inside the data section and no two tensors overlap.
 */
#ifndef CLOVER_CONVERT_SAFETENSORS_H
#define CLOVER_CONVERT_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"

#define ST_MAX_DIMS 8
/* The safetensors library's own limit on the JSON header. */
#define ST_MAX_HEADER_BYTES 100000000u

typedef enum st_dtype {
    ST_BOOL,
    ST_U8,
    ST_I8,
    ST_F8_E5M2,
    ST_F8_E4M3,
    ST_F8_E8M0,
    ST_I16,
    ST_U16,
    ST_F16,
    ST_BF16,
    ST_I32,
    ST_U32,
    ST_F32,
    ST_I64,
    ST_U64,
    ST_F64,
    ST_C64,
    ST_F4,
    ST_F6_E2M3,
    ST_F6_E3M2,
    ST_DTYPE_COUNT
} st_dtype;

typedef struct st_tensor {
    const char *name;             /* owned by the st_file */
    st_dtype dtype;
    uint32_t n_dims;              /* 0 for a scalar */
    uint64_t shape[ST_MAX_DIMS];  /* row-major: shape[n_dims-1] is contiguous */
    uint64_t numel;               /* product of the shape (1 for a scalar) */
    uint64_t offset;              /* begin, relative to the data section */
    uint64_t nbytes;
    const uint8_t *data;          /* into the mapping; may be unaligned */
} st_tensor;

typedef struct st_file st_file;

/* Maps and validates path. On failure *out = NULL and err names the file
 * and, where one is at fault, the tensor and the field. */
int st_file_open(st_file **out, const char *path, clover_error *err);
/* The same over a caller's buffer (it must outlive the st_file). */
int st_file_open_memory(st_file **out, const void *buf, size_t len, const char *name, clover_error *err);
void st_file_close(st_file *f);

const char *st_file_name(const st_file *f);
size_t st_file_tensor_count(const st_file *f);
/* Tensors sorted by name. */
const st_tensor *st_file_tensor_at(const st_file *f, size_t i);
const st_tensor *st_file_find(const st_file *f, const char *name); /* NULL when absent */

/* Tells the kernel a tensor's pages are no longer needed, so a conversion
 * that walks a 67 GB checkpoint keeps only what it is working on resident. */
void st_file_release(const st_file *f, const st_tensor *t);

const char *st_dtype_name(st_dtype dt);
int st_dtype_from_name(const char *name); /* -1 when unknown */
/* Bits per element. */
unsigned st_dtype_bits(st_dtype dt);
/* True for F32, F16 and BF16, the float types a conversion reads. */
bool st_dtype_is_float(st_dtype dt);

/* n elements of a float tensor (F32, F16 or BF16), from element first on,
 * widened to f32. The caller keeps first + n <= numel. */
void st_tensor_read_f32(const st_tensor *t, uint64_t first, size_t n, float *dst);

#endif
