/*
 * gguf_meta.c: typed metadata getters. Converters disagree on integer widths
 * (a context length may be u32 in one file and u64 or i32 in another), so an
 * integer getter takes any integer type whose value fits; anything lossy is
 * an error naming the key, the type found and the type wanted.
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>

#include "base/error.h"
#include "gguf/gguf_internal.h"

static int find_value(const gguf_file *f, const char *key, const gguf_value **out, clover_error *err) {
    const gguf_kv *kv = gguf_kv_find(f, key);
    if (!kv) return error_set(err, CLOVER_E_FORMAT, "%s: missing key %s", f->name, key ? key : "(null)");
    *out = &kv->value;
    return CLOVER_OK;
}

static int wrong_type(const gguf_file *f, const char *key, uint32_t found, const char *expected, clover_error *err) {
    return error_set(err, CLOVER_E_FORMAT, "%s: key %s has type %s (expected %s)", f->name, key, gguf_value_type_name(found),
                     expected);
}

/* An integer value: *neg true when it is below zero (then *sval holds it),
 * otherwise *uval holds it. False for a non-integer type. */
static bool value_integer(const gguf_value *v, bool *neg, int64_t *sval, uint64_t *uval) {
    int64_t s = 0;
    uint64_t u = 0;
    bool is_signed = false;
    switch (v->type) {
    case GGUF_VT_U8: u = v->v.u8; break;
    case GGUF_VT_U16: u = v->v.u16; break;
    case GGUF_VT_U32: u = v->v.u32; break;
    case GGUF_VT_U64: u = v->v.u64; break;
    case GGUF_VT_I8: s = v->v.i8, is_signed = true; break;
    case GGUF_VT_I16: s = v->v.i16, is_signed = true; break;
    case GGUF_VT_I32: s = v->v.i32, is_signed = true; break;
    case GGUF_VT_I64: s = v->v.i64, is_signed = true; break;
    default: return false;
    }
    if (is_signed && s >= 0) u = (uint64_t)s, is_signed = false;
    *neg = is_signed;
    *sval = s;
    *uval = u;
    return true;
}

/* The value of key as an integer in [lo, hi]. */
static int get_integer(const gguf_file *f, const char *key, int64_t lo, uint64_t hi, const char *expected, bool *neg,
                       int64_t *sval, uint64_t *uval, clover_error *err) {
    const gguf_value *v = NULL;
    int rc = find_value(f, key, &v, err);
    if (rc < 0) return rc;
    if (!value_integer(v, neg, sval, uval)) return wrong_type(f, key, v->type, expected, err);
    if (*neg ? *sval < lo : *uval > hi) {
        if (*neg)
            return error_set(err, CLOVER_E_FORMAT, "%s: key %s = %" PRId64 " (%s) is out of range for %s", f->name, key, *sval,
                             gguf_value_type_name(v->type), expected);
        return error_set(err, CLOVER_E_FORMAT, "%s: key %s = %" PRIu64 " (%s) is out of range for %s", f->name, key, *uval,
                         gguf_value_type_name(v->type), expected);
    }
    return CLOVER_OK;
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, clover_error *err) {
    bool neg = false;
    int64_t s = 0;
    uint64_t u = 0;
    int rc = get_integer(f, key, 0, UINT32_MAX, "u32", &neg, &s, &u, err);
    if (rc == CLOVER_OK) *out = (uint32_t)u;
    return rc;
}

int gguf_get_i32(const gguf_file *f, const char *key, int32_t *out, clover_error *err) {
    bool neg = false;
    int64_t s = 0;
    uint64_t u = 0;
    int rc = get_integer(f, key, INT32_MIN, INT32_MAX, "i32", &neg, &s, &u, err);
    if (rc == CLOVER_OK) *out = neg ? (int32_t)s : (int32_t)u;
    return rc;
}

int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out, clover_error *err) {
    bool neg = false;
    int64_t s = 0;
    uint64_t u = 0;
    int rc = get_integer(f, key, 0, UINT64_MAX, "u64", &neg, &s, &u, err);
    if (rc == CLOVER_OK) *out = u;
    return rc;
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out, clover_error *err) {
    const gguf_value *v = NULL;
    int rc = find_value(f, key, &v, err);
    if (rc < 0) return rc;
    if (v->type == GGUF_VT_F32) {
        *out = v->v.f32;
        return CLOVER_OK;
    }
    if (v->type != GGUF_VT_F64) return wrong_type(f, key, v->type, "f32", err);
    if (isfinite(v->v.f64) && fabs(v->v.f64) > FLT_MAX)
        return error_set(err, CLOVER_E_FORMAT, "%s: key %s = %g (f64) is out of range for f32", f->name, key, v->v.f64);
    *out = (float)v->v.f64;
    return CLOVER_OK;
}

int gguf_get_bool(const gguf_file *f, const char *key, bool *out, clover_error *err) {
    const gguf_value *v = NULL;
    int rc = find_value(f, key, &v, err);
    if (rc < 0) return rc;
    if (v->type != GGUF_VT_BOOL) return wrong_type(f, key, v->type, "bool", err);
    *out = v->v.b;
    return CLOVER_OK;
}

int gguf_get_string(const gguf_file *f, const char *key, const gguf_string **out, clover_error *err) {
    const gguf_value *v = NULL;
    int rc = find_value(f, key, &v, err);
    if (rc < 0) return rc;
    if (v->type != GGUF_VT_STRING) return wrong_type(f, key, v->type, "string", err);
    *out = &v->v.str;
    return CLOVER_OK;
}

int gguf_get_u32_or(const gguf_file *f, const char *key, uint32_t dflt, uint32_t *out, clover_error *err) {
    if (!gguf_kv_find(f, key)) {
        *out = dflt;
        return CLOVER_OK;
    }
    return gguf_get_u32(f, key, out, err);
}

int gguf_get_f32_or(const gguf_file *f, const char *key, float dflt, float *out, clover_error *err) {
    if (!gguf_kv_find(f, key)) {
        *out = dflt;
        return CLOVER_OK;
    }
    return gguf_get_f32(f, key, out, err);
}

int gguf_get_array(const gguf_file *f, const char *key, const gguf_value **out, clover_error *err) {
    const gguf_value *v = NULL;
    int rc = find_value(f, key, &v, err);
    if (rc < 0) return rc;
    if (v->type != GGUF_VT_ARRAY) return wrong_type(f, key, v->type, "array", err);
    *out = v;
    return CLOVER_OK;
}
