/*
 * gguf_value.c: metadata values as owned objects: type names and sizes,
 * freeing, deep copies. Shared by the reader (which fills values from the
 * file) and the writer (which copies what callers hand it), so both agree
 * on one ownership rule: a value owns its string bytes and array block.
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "gguf/gguf_internal.h"

const char *gguf_value_type_name(uint32_t type) {
    static const char *const names[GGUF_VT_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
    };
    return type < GGUF_VT_COUNT ? names[type] : "?";
}

size_t gguf_value_type_size(uint32_t type) {
    switch (type) {
    case GGUF_VT_U8:
    case GGUF_VT_I8:
    case GGUF_VT_BOOL: return 1;
    case GGUF_VT_U16:
    case GGUF_VT_I16: return 2;
    case GGUF_VT_U32:
    case GGUF_VT_I32:
    case GGUF_VT_F32: return 4;
    case GGUF_VT_U64:
    case GGUF_VT_I64:
    case GGUF_VT_F64: return 8;
    default: return 0;
    }
}

gguf_string *gguf_strings_alloc(uint64_t n, uint64_t total, char **chars) {
    size_t table, bytes;
    if (n > SIZE_MAX || total > SIZE_MAX) return NULL;
    if (!mem_mul_ok((size_t)n, sizeof(gguf_string), &table)) return NULL;
    if (!mem_add_ok(table, (size_t)total, &bytes) || !mem_add_ok(bytes, (size_t)n, &bytes)) return NULL;
    if (bytes == 0) bytes = 1;
    gguf_string *strs = mem_alloc(bytes);
    if (strs) *chars = (char *)strs + table;
    return strs;
}

void gguf_value_free(gguf_value *v) {
    if (v->type == GGUF_VT_STRING) mem_free(v->v.str.str);
    if (v->type == GGUF_VT_ARRAY) mem_free(v->v.arr.data);
    memset(v, 0, sizeof *v);
}

static int copy_string(gguf_string *dst, const gguf_string *src) {
    if (src->len >= SIZE_MAX) return CLOVER_E_NOMEM;
    dst->str = mem_alloc((size_t)src->len + 1);
    if (!dst->str) return CLOVER_E_NOMEM;
    if (src->len) memcpy(dst->str, src->str, (size_t)src->len);
    dst->str[src->len] = '\0';
    dst->len = src->len;
    return CLOVER_OK;
}

static int copy_string_array(gguf_value *dst, const gguf_value *src, clover_error *err) {
    const gguf_string *in = src->v.arr.data; /* [len] */
    uint64_t n = src->v.arr.len, total = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (__builtin_add_overflow(total, in[i].len, &total))
            return error_set(err, CLOVER_E_NOMEM, "string array of %llu strings is too large",
                             (unsigned long long)n);
    }
    char *chars;
    gguf_string *out = gguf_strings_alloc(n, total, &chars);
    if (!out) return error_set(err, CLOVER_E_NOMEM, "out of memory copying an array of %llu strings", (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        out[i].str = chars;
        out[i].len = in[i].len;
        if (in[i].len) memcpy(chars, in[i].str, (size_t)in[i].len);
        chars[in[i].len] = '\0';
        chars += in[i].len + 1;
    }
    dst->v.arr.data = out;
    return CLOVER_OK;
}

int gguf_value_copy(gguf_value *dst, const gguf_value *src, clover_error *err) {
    memset(dst, 0, sizeof *dst);
    if (src->type >= GGUF_VT_COUNT) return error_set(err, CLOVER_E_INVALID, "unknown value type %u", src->type);
    if (src->type == GGUF_VT_BOOL) {
        dst->type = GGUF_VT_BOOL;
        dst->v.b = src->v.b;
        return CLOVER_OK;
    }
    if (src->type == GGUF_VT_STRING) {
        if (!src->v.str.str && src->v.str.len) return error_set(err, CLOVER_E_INVALID, "string value without bytes");
        gguf_string empty = {"", 0};
        if (copy_string(&dst->v.str, src->v.str.str ? &src->v.str : &empty) < 0)
            return error_set(err, CLOVER_E_NOMEM, "out of memory copying a string of %llu bytes",
                             (unsigned long long)src->v.str.len);
        dst->type = GGUF_VT_STRING;
        return CLOVER_OK;
    }
    if (src->type != GGUF_VT_ARRAY) {
        *dst = *src;
        return CLOVER_OK;
    }
    uint32_t et = src->v.arr.type;
    uint64_t n = src->v.arr.len;
    if (et == GGUF_VT_ARRAY) return error_set(err, CLOVER_E_UNSUPPORTED, "arrays of arrays are not supported");
    if (et >= GGUF_VT_COUNT) return error_set(err, CLOVER_E_INVALID, "array of unknown element type %u", et);
    if (n && !src->v.arr.data) return error_set(err, CLOVER_E_INVALID, "array of %llu elements without data", (unsigned long long)n);
    dst->v.arr.type = et;
    dst->v.arr.len = n;
    if (n == 0) {
        dst->type = GGUF_VT_ARRAY;
        return CLOVER_OK;
    }
    if (et == GGUF_VT_STRING) {
        int rc = copy_string_array(dst, src, err);
        if (rc < 0) return rc;
        dst->type = GGUF_VT_ARRAY;
        return CLOVER_OK;
    }
    size_t bytes;
    if (n > SIZE_MAX || !mem_mul_ok((size_t)n, gguf_value_type_size(et), &bytes))
        return error_set(err, CLOVER_E_NOMEM, "array of %llu elements is too large", (unsigned long long)n);
    if (et == GGUF_VT_BOOL) {
        const uint8_t *b = src->v.arr.data;
        for (size_t i = 0; i < bytes; i++)
            if (b[i] > 1) return error_set(err, CLOVER_E_INVALID, "bool array element %zu is %u (expected 0 or 1)", i, b[i]);
    }
    dst->v.arr.data = mem_alloc(bytes);
    if (!dst->v.arr.data) return error_set(err, CLOVER_E_NOMEM, "out of memory copying an array of %zu bytes", bytes);
    memcpy(dst->v.arr.data, src->v.arr.data, bytes);
    dst->type = GGUF_VT_ARRAY;
    return CLOVER_OK;
}
