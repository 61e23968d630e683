/*
 * gguf_dump.c: prints what clover's GGUF reader sees in a file as JSON, for
 * the Python cross-checks against llama.cpp's gguf package: every kv (type,
 * value; u64 as a decimal string since JSON integers stop at 2^63, floats
 * that JSON cannot hold as "nan"/"inf"/"-inf", strings that are not UTF-8
 * as {"hex": ...}), every tensor's info, and optionally the dequantised
 * values of every supported tensor (f32, concatenated in tensor order) as
 * the dispatching path and the scalar oracle compute them.
 *
 *   gguf_dump FILE [--dequant OUT.f32] [--dequant-scalar OUT.f32] [--time]
 *
 * On a reader error: the message on stderr, exit status 1.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timer.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

static json_t *json_gguf_string(const gguf_string *s) {
    json_t *j = json_stringn(s->str, (size_t)s->len);
    if (j) return j;
    char *hex = malloc((size_t)s->len * 2 + 1);
    for (uint64_t i = 0; i < s->len; i++) snprintf(hex + 2 * i, 3, "%02x", (uint8_t)s->str[i]);
    hex[s->len * 2] = '\0';
    j = json_pack("{s:s}", "hex", hex);
    free(hex);
    return j;
}

static json_t *json_float(double x) {
    if (isnan(x)) return json_string("nan");
    if (isinf(x)) return json_string(x > 0 ? "inf" : "-inf");
    return json_real(x);
}

static json_t *json_u64(uint64_t x) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)x);
    return json_string(buf);
}

/* Element i of a packed scalar array of type t, or the scalar in v. */
static json_t *json_scalar(uint32_t t, const void *p) {
    switch (t) {
    case GGUF_VT_U8: return json_integer(*(const uint8_t *)p);
    case GGUF_VT_I8: return json_integer(*(const int8_t *)p);
    case GGUF_VT_U16: return json_integer(*(const uint16_t *)p);
    case GGUF_VT_I16: return json_integer(*(const int16_t *)p);
    case GGUF_VT_U32: return json_integer(*(const uint32_t *)p);
    case GGUF_VT_I32: return json_integer(*(const int32_t *)p);
    case GGUF_VT_F32: return json_float(*(const float *)p);
    case GGUF_VT_BOOL: return json_boolean(*(const uint8_t *)p);
    case GGUF_VT_U64: return json_u64(*(const uint64_t *)p);
    case GGUF_VT_I64: return json_integer(*(const int64_t *)p);
    case GGUF_VT_F64: return json_float(*(const double *)p);
    default: return json_null();
    }
}

static json_t *json_value(const gguf_value *v) {
    if (v->type == GGUF_VT_STRING) return json_gguf_string(&v->v.str);
    if (v->type == GGUF_VT_BOOL) return json_boolean(v->v.b);
    if (v->type != GGUF_VT_ARRAY) return json_scalar(v->type, &v->v);
    json_t *arr = json_array();
    uint32_t et = v->v.arr.type;
    for (uint64_t i = 0; i < v->v.arr.len; i++) {
        if (et == GGUF_VT_STRING) {
            json_array_append_new(arr, json_gguf_string(&((const gguf_string *)v->v.arr.data)[i]));
        } else {
            static const size_t sizes[GGUF_VT_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
            json_array_append_new(arr, json_scalar(et, (const uint8_t *)v->v.arr.data + i * sizes[et]));
        }
    }
    return arr;
}

/* Appends the tensor's dequantised values to fp; false on a write error. */
static int dump_dequant(const gguf_tensor *t, FILE *fp, bool scalar) {
    size_t row_elems = (size_t)t->ne[0], row_bytes = quant_row_bytes(t->type, row_elems);
    if (row_elems == 0 || row_bytes == 0) return 1;
    size_t rows = (size_t)(t->nbytes / row_bytes);
    float *row = malloc(row_elems * sizeof *row); /* [ne0] */
    int ok = row != NULL;
    for (size_t r = 0; ok && r < rows; r++) {
        const uint8_t *src = (const uint8_t *)t->data + r * row_bytes;
        if (scalar)
            quant_dequantize_row_scalar(t->type, src, row, row_elems);
        else
            quant_dequantize_row(t->type, src, row, row_elems);
        ok = fwrite(row, sizeof *row, row_elems, fp) == row_elems;
    }
    free(row);
    return ok;
}

int main(int argc, char **argv) {
    const char *path = NULL, *deq_path = NULL, *deq_scalar_path = NULL;
    bool timing = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dequant") == 0 && i + 1 < argc)
            deq_path = argv[++i];
        else if (strcmp(argv[i], "--dequant-scalar") == 0 && i + 1 < argc)
            deq_scalar_path = argv[++i];
        else if (strcmp(argv[i], "--time") == 0)
            timing = true;
        else if (!path && argv[i][0] != '-')
            path = argv[i];
        else {
            fprintf(stderr, "usage: gguf_dump FILE [--dequant OUT.f32] [--dequant-scalar OUT.f32] [--time]\n");
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: gguf_dump FILE [--dequant OUT.f32] [--dequant-scalar OUT.f32] [--time]\n");
        return 2;
    }
    clover_error err = {0};
    gguf_file *f = NULL;
    double t0 = timer_now();
    int rc = gguf_open(&f, path, &err);
    double load_s = timer_now() - t0;
    if (rc < 0) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    json_t *root = json_object();
    json_object_set_new(root, "version", json_integer(gguf_version(f)));
    json_object_set_new(root, "alignment", json_integer(gguf_alignment(f)));
    json_object_set_new(root, "data_offset", json_integer((json_int_t)gguf_data_offset(f)));
    json_object_set_new(root, "file_size", json_integer((json_int_t)gguf_file_size(f)));
    if (timing) json_object_set_new(root, "load_seconds", json_real(load_s));
    json_t *kvs = json_array();
    for (size_t i = 0; i < gguf_kv_count(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        json_t *o = json_object();
        json_object_set_new(o, "key", json_gguf_string(&kv->key));
        json_object_set_new(o, "type", json_string(gguf_value_type_name(kv->value.type)));
        if (kv->value.type == GGUF_VT_ARRAY) json_object_set_new(o, "elem_type", json_string(gguf_value_type_name(kv->value.v.arr.type)));
        json_object_set_new(o, "value", json_value(&kv->value));
        json_array_append_new(kvs, o);
    }
    json_object_set_new(root, "kv", kvs);
    FILE *deq = deq_path ? fopen(deq_path, "wb") : NULL;
    FILE *deq_scalar = deq_scalar_path ? fopen(deq_scalar_path, "wb") : NULL;
    if ((deq_path && !deq) || (deq_scalar_path && !deq_scalar)) {
        fprintf(stderr, "cannot create the dequantised output\n");
        return 1;
    }
    json_t *tensors = json_array();
    uint64_t deq_elems = 0;
    int ok = 1;
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        json_t *o = json_object();
        json_object_set_new(o, "name", json_gguf_string(&t->name));
        json_t *ne = json_array();
        for (uint32_t d = 0; d < t->n_dims; d++) json_array_append_new(ne, json_integer((json_int_t)t->ne[d]));
        json_object_set_new(o, "ne", ne);
        json_object_set_new(o, "type", json_integer(t->type));
        json_object_set_new(o, "type_name", json_string(quant_type_name(t->type)));
        json_object_set_new(o, "offset", json_integer((json_int_t)t->offset));
        json_object_set_new(o, "nbytes", json_integer((json_int_t)t->nbytes));
        if (quant_type_supported(t->type)) {
            json_object_set_new(o, "dequant_at", json_integer((json_int_t)deq_elems));
            deq_elems += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
            if (deq) ok &= dump_dequant(t, deq, false);
            if (deq_scalar) ok &= dump_dequant(t, deq_scalar, true);
        }
        json_array_append_new(tensors, o);
    }
    json_object_set_new(root, "tensors", tensors);
    if (deq && fclose(deq) != 0) ok = 0;
    if (deq_scalar && fclose(deq_scalar) != 0) ok = 0;
    json_dumpf(root, stdout, JSON_INDENT(1) | JSON_ENSURE_ASCII);
    putchar('\n');
    json_decref(root);
    gguf_close(f);
    if (!ok) {
        fprintf(stderr, "writing the dequantised values failed\n");
        return 1;
    }
    return 0;
}
