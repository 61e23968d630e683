/*
 * test_gguf_roundtrip.c: what clover's GGUF writer writes, clover's reader
 * reads back unchanged: metadata of every value type (string arrays and
 * empty arrays included), tensors of several types and ranks, a zero-byte
 * tensor, a custom alignment, data streamed in odd-sized pieces. Expected
 * offsets and sizes are computed by hand from the format, not taken from the
 * writer; both gguf_open and gguf_open_memory are checked. Also the typed
 * getters' conversions and the writer's refusals.
 */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "test.h"

static char tmp_dir[256];

static const char *tmp_path(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", tmp_dir, name);
    return buf;
}

static bool file_exists(const char *path) { return access(path, F_OK) == 0; }

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    *len = (size_t)n;
    return buf;
}

/* ---- the sample file ---- */

static const uint8_t arr_u8[] = {0, 1, 255};
static const int8_t arr_i8[] = {-128, 0, 127};
static const uint16_t arr_u16[] = {0, 65535};
static const int16_t arr_i16[] = {-32768, 32767, -1};
static const uint32_t arr_u32[] = {4000000000u, 7};
static const int32_t arr_i32[] = {INT32_MIN, INT32_MAX};
static const float arr_f32[] = {1.0f, -0.5f, 3.25e-20f, 1e30f};
static const bool arr_bool[] = {true, false, true, true};
static const uint64_t arr_u64[] = {UINT64_MAX, 0, 1ull << 40};
static const int64_t arr_i64[] = {INT64_MIN, -1, INT64_MAX};
static const double arr_f64[] = {3.141592653589793, -1e-300};
static const char *const arr_str[] = {"", "a", "hello world", "\xc3\xa9t\xc3\xa9", "tab\tand\nnewline"};

typedef struct sample_tensor {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    uint64_t nbytes;         /* by hand from the type's block geometry */
    uint64_t offset_align32; /* expected offsets for alignment 32 and 64 */
    uint64_t offset_align64;
} sample_tensor;

static const sample_tensor tensors[] = {
    {"tok_embd.weight", 2, {5, 3}, QUANT_F32, 60, 0, 0},           /* 15 x 4 */
    {"norm", 1, {7}, QUANT_F16, 14, 64, 64},                       /* pad 60 -> 64 */
    {"blk.0.q8", 2, {64, 2}, QUANT_Q8_0, 136, 96, 128},            /* 2 rows x 2 blocks x 34 */
    {"zero", 2, {4, 0}, QUANT_F32, 0, 256, 320},                   /* no bytes */
    {"blk.0.q4k", 1, {256}, QUANT_Q4_K, 144, 256, 320},            /* one block */
    {"blk.0.bf16.4d", 4, {3, 1, 1, 2}, QUANT_BF16, 12, 416, 512}, /* 6 x 2 */
    {"blk.0.q6k", 2, {256, 3}, QUANT_Q6_K, 630, 448, 576},        /* 3 x 210 */
};
enum { N_TENSORS = sizeof tensors / sizeof tensors[0] };

static uint8_t tensor_byte(size_t t, uint64_t i) { return (uint8_t)(i * 7 + t * 31 + 1); }

/* Writes the sample (alignment 0: the default), streaming the data in pieces
 * of 1, 2, 3, ... bytes that run across tensor boundaries. */
static int write_sample(const char *path, uint32_t alignment, clover_error *err) {
    gguf_writer *w = gguf_writer_create();
    if (!w) return CLOVER_E_NOMEM;
    int rc = 0;
    rc |= gguf_writer_set_string(w, "general.architecture", "qwen35moe", err);
    if (alignment) rc |= gguf_writer_set_u32(w, "general.alignment", alignment, err);
    rc |= gguf_writer_set_u8(w, "t.u8", 200, err);
    rc |= gguf_writer_set_i8(w, "t.i8", -100, err);
    rc |= gguf_writer_set_u16(w, "t.u16", 60000, err);
    rc |= gguf_writer_set_i16(w, "t.i16", -30000, err);
    rc |= gguf_writer_set_u32(w, "t.u32", 4000000000u, err);
    rc |= gguf_writer_set_i32(w, "t.i32", -2000000000, err);
    rc |= gguf_writer_set_u64(w, "t.u64", (1ull << 63) + 5, err);
    rc |= gguf_writer_set_i64(w, "t.i64", -(1ll << 62) - 3, err);
    rc |= gguf_writer_set_f32(w, "t.f32", 1.5f, err);
    rc |= gguf_writer_set_f64(w, "t.f64", -2.25e300, err);
    rc |= gguf_writer_set_bool(w, "t.bool", true, err);
    rc |= gguf_writer_set_bool(w, "t.false", false, err);
    rc |= gguf_writer_set_string(w, "t.str", "h\xc3\xa9llo", err);
    rc |= gguf_writer_set_string(w, "t.empty", "", err);
    rc |= gguf_writer_set_array(w, "a.u8", GGUF_VT_U8, arr_u8, 3, err);
    rc |= gguf_writer_set_array(w, "a.i8", GGUF_VT_I8, arr_i8, 3, err);
    rc |= gguf_writer_set_array(w, "a.u16", GGUF_VT_U16, arr_u16, 2, err);
    rc |= gguf_writer_set_array(w, "a.i16", GGUF_VT_I16, arr_i16, 3, err);
    rc |= gguf_writer_set_array(w, "a.u32", GGUF_VT_U32, arr_u32, 2, err);
    rc |= gguf_writer_set_array(w, "a.i32", GGUF_VT_I32, arr_i32, 2, err);
    rc |= gguf_writer_set_array(w, "a.f32", GGUF_VT_F32, arr_f32, 4, err);
    rc |= gguf_writer_set_array(w, "a.bool", GGUF_VT_BOOL, arr_bool, 4, err);
    rc |= gguf_writer_set_array(w, "a.u64", GGUF_VT_U64, arr_u64, 3, err);
    rc |= gguf_writer_set_array(w, "a.i64", GGUF_VT_I64, arr_i64, 3, err);
    rc |= gguf_writer_set_array(w, "a.f64", GGUF_VT_F64, arr_f64, 2, err);
    rc |= gguf_writer_set_array(w, "a.empty", GGUF_VT_I32, NULL, 0, err);
    rc |= gguf_writer_set_string_array(w, "a.str", arr_str, 5, err);
    rc |= gguf_writer_set_string_array(w, "a.str_empty", NULL, 0, err);
    for (size_t t = 0; t < N_TENSORS && !rc; t++)
        rc = gguf_writer_add_tensor(w, tensors[t].name, tensors[t].n_dims, tensors[t].ne, tensors[t].type, err);
    if (!rc) rc = gguf_writer_begin(w, path, err);
    /* all tensor bytes in one stream, cut into growing pieces */
    uint8_t stream[2048];
    size_t total = 0;
    for (size_t t = 0; t < N_TENSORS; t++)
        for (uint64_t i = 0; i < tensors[t].nbytes; i++) stream[total++] = tensor_byte(t, i);
    for (size_t at = 0, piece = 1; !rc && at < total; at += piece, piece++) {
        size_t k = total - at < piece ? total - at : piece;
        rc = gguf_writer_write(w, stream + at, k, err);
    }
    if (!rc) rc = gguf_writer_finish(w, err);
    gguf_writer_free(w);
    return rc;
}

static int n_sample_kvs(uint32_t alignment) { return 29 + (alignment ? 1 : 0); }

/* ---- checks ---- */

static void check_scalar_kvs(const gguf_file *f) {
    const gguf_kv *kv;
#define KV(key, vt) ((kv = gguf_kv_find(f, key)) != NULL && kv->value.type == (vt))
    CHECK(KV("t.u8", GGUF_VT_U8) && kv->value.v.u8 == 200);
    CHECK(KV("t.i8", GGUF_VT_I8) && kv->value.v.i8 == -100);
    CHECK(KV("t.u16", GGUF_VT_U16) && kv->value.v.u16 == 60000);
    CHECK(KV("t.i16", GGUF_VT_I16) && kv->value.v.i16 == -30000);
    CHECK(KV("t.u32", GGUF_VT_U32) && kv->value.v.u32 == 4000000000u);
    CHECK(KV("t.i32", GGUF_VT_I32) && kv->value.v.i32 == -2000000000);
    CHECK(KV("t.u64", GGUF_VT_U64) && kv->value.v.u64 == (1ull << 63) + 5);
    CHECK(KV("t.i64", GGUF_VT_I64) && kv->value.v.i64 == -(1ll << 62) - 3);
    CHECK(KV("t.f32", GGUF_VT_F32) && kv->value.v.f32 == 1.5f);
    CHECK(KV("t.f64", GGUF_VT_F64) && kv->value.v.f64 == -2.25e300);
    CHECK(KV("t.bool", GGUF_VT_BOOL) && kv->value.v.b == true);
    CHECK(KV("t.false", GGUF_VT_BOOL) && kv->value.v.b == false);
    CHECK(KV("t.str", GGUF_VT_STRING) && kv->value.v.str.len == 6 && strcmp(kv->value.v.str.str, "h\xc3\xa9llo") == 0);
    CHECK(KV("t.empty", GGUF_VT_STRING) && kv->value.v.str.len == 0 && kv->value.v.str.str[0] == '\0');
    CHECK(KV("general.architecture", GGUF_VT_STRING) && strcmp(kv->value.v.str.str, "qwen35moe") == 0);
#undef KV
}

static void check_array(const gguf_file *f, const char *key, uint32_t et, const void *elems, uint64_t len, size_t esize) {
    const gguf_kv *kv = gguf_kv_find(f, key);
    CHECK_MSG(kv != NULL, "key %s", key);
    if (!kv) return;
    CHECK_EQ_INT(kv->value.type, GGUF_VT_ARRAY);
    CHECK_EQ_INT(kv->value.v.arr.type, et);
    CHECK_EQ_INT(kv->value.v.arr.len, len);
    if (kv->value.type == GGUF_VT_ARRAY && kv->value.v.arr.len == len && len)
        CHECK_MSG(memcmp(kv->value.v.arr.data, elems, (size_t)len * esize) == 0, "array %s", key);
}

static void check_arrays(const gguf_file *f) {
    check_array(f, "a.u8", GGUF_VT_U8, arr_u8, 3, 1);
    check_array(f, "a.i8", GGUF_VT_I8, arr_i8, 3, 1);
    check_array(f, "a.u16", GGUF_VT_U16, arr_u16, 2, 2);
    check_array(f, "a.i16", GGUF_VT_I16, arr_i16, 3, 2);
    check_array(f, "a.u32", GGUF_VT_U32, arr_u32, 2, 4);
    check_array(f, "a.i32", GGUF_VT_I32, arr_i32, 2, 4);
    check_array(f, "a.f32", GGUF_VT_F32, arr_f32, 4, 4);
    check_array(f, "a.bool", GGUF_VT_BOOL, arr_bool, 4, 1);
    check_array(f, "a.u64", GGUF_VT_U64, arr_u64, 3, 8);
    check_array(f, "a.i64", GGUF_VT_I64, arr_i64, 3, 8);
    check_array(f, "a.f64", GGUF_VT_F64, arr_f64, 2, 8);
    check_array(f, "a.empty", GGUF_VT_I32, NULL, 0, 4);
    check_array(f, "a.str_empty", GGUF_VT_STRING, NULL, 0, 0);
    const gguf_kv *kv = gguf_kv_find(f, "a.str");
    CHECK(kv && kv->value.type == GGUF_VT_ARRAY && kv->value.v.arr.type == GGUF_VT_STRING && kv->value.v.arr.len == 5);
    if (kv && kv->value.type == GGUF_VT_ARRAY && kv->value.v.arr.len == 5) {
        const gguf_string *s = kv->value.v.arr.data;
        for (int i = 0; i < 5; i++) {
            CHECK_EQ_INT(s[i].len, strlen(arr_str[i]));
            CHECK_MSG(strcmp(s[i].str, arr_str[i]) == 0, "string %d: '%s'", i, s[i].str);
        }
    }
}

static void check_tensors(const gguf_file *f, uint32_t alignment) {
    CHECK_EQ_INT(gguf_tensor_count(f), N_TENSORS);
    if (gguf_tensor_count(f) != N_TENSORS) return;
    uint64_t data = gguf_data_offset(f);
    CHECK_EQ_INT(data % alignment, 0);
    for (size_t t = 0; t < N_TENSORS; t++) {
        const sample_tensor *e = &tensors[t];
        const gguf_tensor *g = gguf_tensor_at(f, t);
        CHECK(g == gguf_tensor_find(f, e->name));
        CHECK_MSG(strcmp(g->name.str, e->name) == 0, "tensor %zu is '%s'", t, g->name.str);
        CHECK_EQ_INT(g->n_dims, e->n_dims);
        for (int d = 0; d < 4; d++) CHECK_EQ_INT(g->ne[d], d < (int)e->n_dims ? e->ne[d] : 1);
        CHECK_EQ_INT(g->type, e->type);
        CHECK_EQ_INT(g->nbytes, e->nbytes);
        CHECK_EQ_INT(g->offset, alignment == 64 ? e->offset_align64 : e->offset_align32);
        const uint8_t *bytes = g->data; /* [nbytes] */
        int bad = 0;
        for (uint64_t i = 0; i < g->nbytes; i++) bad += bytes[i] != tensor_byte(t, i);
        CHECK_MSG(bad == 0, "tensor %s: %d bytes differ", e->name, bad);
    }
    /* the last tensor is padded too (as llama.cpp writes it) */
    const sample_tensor *last = &tensors[N_TENSORS - 1];
    uint64_t end = (alignment == 64 ? last->offset_align64 : last->offset_align32) + last->nbytes;
    CHECK_EQ_INT(gguf_file_size(f), data + (end + alignment - 1) / alignment * alignment);
    CHECK(gguf_tensor_find(f, "missing") == NULL);
    CHECK(gguf_tensor_find(f, "blk.0") == NULL);
}

static void check_sample(const gguf_file *f, uint32_t alignment) {
    CHECK_EQ_INT(gguf_version(f), 3);
    CHECK_EQ_INT(gguf_alignment(f), alignment);
    CHECK_EQ_INT(gguf_kv_count(f), n_sample_kvs(alignment == 32 ? 0 : alignment));
    check_scalar_kvs(f);
    check_arrays(f);
    check_tensors(f, alignment);
    /* declaration order is kept */
    CHECK(strcmp(gguf_kv_at(f, 0)->key.str, "general.architecture") == 0);
    CHECK(gguf_kv_at(f, gguf_kv_count(f)) == NULL);
    CHECK(gguf_kv_find(f, "t.u") == NULL);
}

static void test_roundtrip_file_and_memory(void) {
    static const uint32_t aligns[] = {32, 64};
    for (int a = 0; a < 2; a++) {
        char path[512];
        tmp_path(a ? "sample64.gguf" : "sample32.gguf", path, sizeof path);
        clover_error err = {0};
        int rc = write_sample(path, a ? 64 : 0, &err);
        CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
        if (rc) continue;
        gguf_file *f = NULL;
        rc = gguf_open(&f, path, &err);
        CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
        if (f) {
            CHECK(strcmp(gguf_name(f), path) == 0);
            check_sample(f, aligns[a]);
            gguf_close(f);
        }
        size_t len;
        uint8_t *buf = read_all(path, &len);
        CHECK(buf != NULL);
        if (!buf) continue;
        /* the header by hand: magic, version, tensor count, kv count */
        uint32_t u32;
        uint64_t u64;
        memcpy(&u32, buf, 4);
        CHECK(memcmp(buf, "GGUF", 4) == 0);
        memcpy(&u32, buf + 4, 4);
        CHECK_EQ_INT(u32, 3);
        memcpy(&u64, buf + 8, 8);
        CHECK_EQ_INT(u64, N_TENSORS);
        memcpy(&u64, buf + 16, 8);
        CHECK_EQ_INT(u64, n_sample_kvs(a ? 64 : 0));
        rc = gguf_open_memory(&f, buf, len, "sample", &err);
        CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
        if (f) {
            CHECK(strcmp(gguf_name(f), "sample") == 0);
            check_sample(f, aligns[a]);
            const gguf_tensor *t = gguf_tensor_at(f, 0);
            CHECK((const uint8_t *)t->data == buf + gguf_data_offset(f)); /* no copy */
            gguf_close(f);
        }
        free(buf);
    }
}

/* Every kv of a read file copied into a new writer gives the same metadata. */
static void test_copy_values(void) {
    char src[512], dst[512];
    tmp_path("copy_src.gguf", src, sizeof src);
    tmp_path("copy_dst.gguf", dst, sizeof dst);
    clover_error err = {0};
    CHECK_EQ_INT(write_sample(src, 64, &err), CLOVER_OK);
    gguf_file *f = NULL;
    CHECK_EQ_INT(gguf_open(&f, src, &err), CLOVER_OK);
    if (!f) return;
    gguf_writer *w = gguf_writer_create();
    for (size_t i = 0; i < gguf_kv_count(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        int rc = gguf_writer_set_value(w, kv->key.str, &kv->value, &err);
        CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
    }
    for (size_t t = 0; t < N_TENSORS; t++) {
        const gguf_tensor *g = gguf_tensor_at(f, t);
        CHECK_EQ_INT(gguf_writer_add_tensor(w, g->name.str, g->n_dims, g->ne, g->type, &err), CLOVER_OK);
    }
    CHECK_EQ_INT(gguf_writer_begin(w, dst, &err), CLOVER_OK);
    for (size_t t = 0; t < N_TENSORS; t++) {
        const gguf_tensor *g = gguf_tensor_at(f, t);
        CHECK_EQ_INT(gguf_writer_write(w, g->data, g->nbytes, &err), CLOVER_OK);
    }
    CHECK_EQ_INT(gguf_writer_finish(w, &err), CLOVER_OK);
    gguf_writer_free(w);
    gguf_close(f);
    CHECK_EQ_INT(gguf_open(&f, dst, &err), CLOVER_OK);
    if (f) {
        check_sample(f, 64);
        gguf_close(f);
    }
    /* byte-identical to the original */
    size_t la, lb;
    uint8_t *a = read_all(src, &la), *b = read_all(dst, &lb);
    CHECK(a && b && la == lb && memcmp(a, b, la) == 0);
    free(a);
    free(b);
}

static void test_getters(void) {
    char path[512];
    tmp_path("getters.gguf", path, sizeof path);
    clover_error err = {0};
    CHECK_EQ_INT(write_sample(path, 0, &err), CLOVER_OK);
    gguf_file *f = NULL;
    CHECK_EQ_INT(gguf_open(&f, path, &err), CLOVER_OK);
    if (!f) return;
    uint32_t u32 = 0;
    int32_t i32 = 0;
    uint64_t u64 = 0;
    float f32 = 0;
    bool b = false;
    const gguf_string *s = NULL;
    const gguf_value *v = NULL;
    CHECK_EQ_INT(gguf_get_u32(f, "t.u8", &u32, &err), CLOVER_OK);
    CHECK_EQ_INT(u32, 200);
    CHECK_EQ_INT(gguf_get_u32(f, "t.u32", &u32, &err), CLOVER_OK);
    CHECK_EQ_INT(u32, 4000000000u);
    CHECK_EQ_INT(gguf_get_i32(f, "t.i8", &i32, &err), CLOVER_OK);
    CHECK_EQ_INT(i32, -100);
    CHECK_EQ_INT(gguf_get_i32(f, "t.u16", &i32, &err), CLOVER_OK);
    CHECK_EQ_INT(i32, 60000);
    CHECK_EQ_INT(gguf_get_u64(f, "t.u64", &u64, &err), CLOVER_OK);
    CHECK(u64 == (1ull << 63) + 5);
    CHECK_EQ_INT(gguf_get_u64(f, "t.u16", &u64, &err), CLOVER_OK);
    CHECK_EQ_INT(u64, 60000);
    /* out of range and wrong types name the key and both types */
    CHECK_EQ_INT(gguf_get_u32(f, "t.i8", &u32, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "t.i8") && strstr(err.message, "-100") && strstr(err.message, "out of range for u32"), "%s",
              err.message);
    CHECK_EQ_INT(gguf_get_u32(f, "t.u64", &u32, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "out of range for u32"), "%s", err.message);
    CHECK_EQ_INT(gguf_get_i32(f, "t.u32", &i32, &err), CLOVER_E_FORMAT);
    CHECK_EQ_INT(gguf_get_i32(f, "t.i64", &i32, &err), CLOVER_E_FORMAT);
    CHECK_EQ_INT(gguf_get_u64(f, "t.i64", &u64, &err), CLOVER_E_FORMAT);
    CHECK_EQ_INT(gguf_get_u32(f, "t.f32", &u32, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "t.f32 has type f32 (expected u32)"), "%s", err.message);
    CHECK_EQ_INT(gguf_get_u32(f, "t.bool", &u32, &err), CLOVER_E_FORMAT);
    CHECK_EQ_INT(gguf_get_u32(f, "nope", &u32, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "missing key nope") && strstr(err.message, path), "%s", err.message);
    /* floats */
    CHECK_EQ_INT(gguf_get_f32(f, "t.f32", &f32, &err), CLOVER_OK);
    CHECK(f32 == 1.5f);
    CHECK_EQ_INT(gguf_get_f32(f, "t.f64", &f32, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "out of range for f32"), "%s", err.message);
    CHECK_EQ_INT(gguf_get_f32(f, "t.u32", &f32, &err), CLOVER_E_FORMAT);
    CHECK_EQ_INT(gguf_get_f32(f, "t.str", &f32, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "has type string (expected f32)"), "%s", err.message);
    /* defaults only when absent */
    CHECK_EQ_INT(gguf_get_u32_or(f, "nope", 77, &u32, &err), CLOVER_OK);
    CHECK_EQ_INT(u32, 77);
    CHECK_EQ_INT(gguf_get_u32_or(f, "t.u16", 77, &u32, &err), CLOVER_OK);
    CHECK_EQ_INT(u32, 60000);
    CHECK_EQ_INT(gguf_get_u32_or(f, "t.str", 77, &u32, &err), CLOVER_E_FORMAT);
    CHECK_EQ_INT(gguf_get_f32_or(f, "nope", 0.25f, &f32, &err), CLOVER_OK);
    CHECK(f32 == 0.25f);
    CHECK_EQ_INT(gguf_get_f32_or(f, "t.f32", 0.25f, &f32, &err), CLOVER_OK);
    CHECK(f32 == 1.5f);
    CHECK_EQ_INT(gguf_get_bool(f, "t.bool", &b, &err), CLOVER_OK);
    CHECK(b);
    CHECK_EQ_INT(gguf_get_bool(f, "t.u8", &b, &err), CLOVER_E_FORMAT);
    CHECK_EQ_INT(gguf_get_string(f, "t.str", &s, &err), CLOVER_OK);
    CHECK(s && strcmp(s->str, "h\xc3\xa9llo") == 0);
    CHECK_EQ_INT(gguf_get_string(f, "a.str", &s, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "has type array (expected string)"), "%s", err.message);
    CHECK_EQ_INT(gguf_get_array(f, "a.u16", &v, &err), CLOVER_OK);
    CHECK(v && v->v.arr.type == GGUF_VT_U16 && v->v.arr.len == 2);
    CHECK_EQ_INT(gguf_get_array(f, "t.u16", &v, &err), CLOVER_E_FORMAT);
    gguf_close(f);

    /* f64 in range converts to the nearest f32 */
    gguf_writer *w = gguf_writer_create();
    tmp_path("getters2.gguf", path, sizeof path);
    CHECK_EQ_INT(gguf_writer_set_f64(w, "x", 0.1, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_begin(w, path, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_finish(w, &err), CLOVER_OK);
    gguf_writer_free(w);
    CHECK_EQ_INT(gguf_open(&f, path, &err), CLOVER_OK);
    if (f) {
        CHECK_EQ_INT(gguf_get_f32(f, "x", &f32, &err), CLOVER_OK);
        CHECK(f32 == 0.1f);
        CHECK_EQ_INT(gguf_tensor_count(f), 0);
        gguf_close(f);
    }
}

static void test_writer_refusals(void) {
    clover_error err = {0};
    char path[512];
    gguf_writer *w = gguf_writer_create();
    uint64_t ne[2] = {33, 2};
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "q", 2, ne, QUANT_Q8_0, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "not a multiple of the q8_0 block (32)"), "%s", err.message);
    ne[0] = 32;
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "q", 2, ne, 99, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "type code 99"), "%s", err.message);
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "q", 5, ne, QUANT_F32, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "", 2, ne, QUANT_F32, &err), CLOVER_E_INVALID);
    uint64_t huge[2] = {1ull << 40, 1ull << 40};
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "huge", 2, huge, QUANT_F32, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "q", 2, ne, QUANT_Q8_0, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "q", 2, ne, QUANT_Q8_0, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "declared twice"), "%s", err.message);
    CHECK_EQ_INT(gguf_writer_set_u32(w, "general.alignment", 48, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "power of two"), "%s", err.message);
    CHECK_EQ_INT(gguf_writer_set_u32(w, "general.alignment", 0, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(gguf_writer_set_u64(w, "general.alignment", 64, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "must be u32"), "%s", err.message);
    CHECK_EQ_INT(gguf_writer_set_array(w, "a", GGUF_VT_STRING, NULL, 0, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(gguf_writer_set_array(w, "a", 13, NULL, 0, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(gguf_writer_set_string(w, "", "x", &err), CLOVER_E_INVALID);
    gguf_value nested = {.type = GGUF_VT_ARRAY};
    nested.v.arr.type = GGUF_VT_ARRAY;
    CHECK_EQ_INT(gguf_writer_set_value(w, "nested", &nested, &err), CLOVER_E_UNSUPPORTED);
    const uint8_t bad_bools[2] = {1, 2};
    CHECK_EQ_INT(gguf_writer_set_array(w, "bools", GGUF_VT_BOOL, bad_bools, 2, &err), CLOVER_E_INVALID);
    /* a key set twice keeps its place and takes the last value */
    CHECK_EQ_INT(gguf_writer_set_u32(w, "k", 1, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_set_string(w, "k", "two", &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_write(w, "x", 1, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "begin was not called"), "%s", err.message);
    CHECK_EQ_INT(gguf_writer_begin(w, "/nonexistent-dir/x.gguf", &err), CLOVER_E_IO);
    CHECK_MSG(strstr(err.message, "/nonexistent-dir/x.gguf: cannot create"), "%s", err.message);
    tmp_path("partial.gguf", path, sizeof path);
    CHECK_EQ_INT(gguf_writer_begin(w, path, &err), CLOVER_OK);
    CHECK(!file_exists(path)); /* a temporary until finish renames it into place */
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "late", 2, ne, QUANT_Q8_0, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(gguf_writer_set_u32(w, "late", 1, &err), CLOVER_E_INVALID);
    uint8_t bytes[100] = {0};
    CHECK_EQ_INT(gguf_writer_write(w, bytes, 50, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_finish(w, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "tensor q has 50 of its 68 bytes"), "%s", err.message);
    CHECK_EQ_INT(gguf_writer_write(w, bytes, 19, &err), CLOVER_E_INVALID); /* one byte too many */
    CHECK_MSG(strstr(err.message, "1 bytes of tensor data beyond the declared tensors"), "%s", err.message);
    gguf_writer_free(w); /* unfinished: the partial file goes */
    CHECK(!file_exists(path));

    /* a finished file stays, and the writer refuses more */
    w = gguf_writer_create();
    CHECK_EQ_INT(gguf_writer_add_tensor(w, "q", 2, ne, QUANT_Q8_0, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_begin(w, path, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_write(w, bytes, 68, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_finish(w, &err), CLOVER_OK);
    CHECK_EQ_INT(gguf_writer_write(w, bytes, 1, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(gguf_writer_finish(w, &err), CLOVER_E_INVALID);
    gguf_writer_free(w);
    CHECK(file_exists(path));
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size % 32 == 0);
    gguf_file *f = NULL;
    CHECK_EQ_INT(gguf_open(&f, path, &err), CLOVER_OK);
    if (f) {
        CHECK_EQ_INT(gguf_kv_count(f), 0);
        CHECK_EQ_INT(gguf_tensor_count(f), 1);
        gguf_close(f);
    }
    remove(path);
    gguf_writer_free(NULL);

    /* a device that fails every write: an I/O error, and the device stays */
    struct stat dev;
    if (stat("/dev/full", &dev) == 0 && S_ISCHR(dev.st_mode)) {
        w = gguf_writer_create();
        CHECK_EQ_INT(gguf_writer_add_tensor(w, "q", 2, ne, QUANT_Q8_0, &err), CLOVER_OK);
        CHECK_EQ_INT(gguf_writer_begin(w, "/dev/full", &err), CLOVER_OK); /* buffered so far */
        int rc = gguf_writer_write(w, bytes, 68, &err);
        if (rc == CLOVER_OK) rc = gguf_writer_finish(w, &err);
        CHECK_EQ_INT(rc, CLOVER_E_IO);
        CHECK_MSG(strstr(err.message, "/dev/full: write failed"), "%s", err.message);
        CHECK_EQ_INT(gguf_writer_finish(w, &err), CLOVER_E_INVALID);
        CHECK_MSG(strstr(err.message, "an earlier write failed"), "%s", err.message);
        gguf_writer_free(w);
        CHECK(stat("/dev/full", &dev) == 0 && S_ISCHR(dev.st_mode));
    }
}

/* Rebuilds the tmp dir name and removes what the tests left. */
static void cleanup(void) {
    static const char *const names[] = {"sample32.gguf", "sample64.gguf", "copy_src.gguf", "copy_dst.gguf",
                                        "getters.gguf",  "getters2.gguf", "partial.gguf"};
    char path[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) remove(tmp_path(names[i], path, sizeof path));
    rmdir(tmp_dir);
}

int main(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/clover-gguf-rt-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    RUN(test_roundtrip_file_and_memory);
    RUN(test_copy_values);
    RUN(test_getters);
    RUN(test_writer_refusals);
    cleanup();
    return TEST_EXIT();
}
