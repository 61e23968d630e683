/*
 * test_safetensors.c: the safetensors reader against hand-built files:
 * a valid one (values written as known bit patterns: BF16 0x3F80 = 1.0,
 * F16 0xC000 = -2.0, ...) and one broken file per validation rule, each of
 * which must fail with CLOVER_E_FORMAT (or UNSUPPORTED) and a message that
 * names the file and the tensor or field.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "convert/safetensors.h"
#include "test.h"

/* 8-byte little-endian header length + header + data, into buf. */
static size_t build(uint8_t *buf, size_t cap, const char *header, const void *data, size_t data_len) {
    size_t h = strlen(header);
    if (8 + h + data_len > cap) return 0;
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, header, h);
    if (data_len) memcpy(buf + 8 + h, data, data_len);
    return 8 + h + data_len;
}

static const char *VALID =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
    "\"h\":{\"dtype\":\"F16\",\"shape\":[1,2],\"data_offsets\":[12,16]},"
    "\"s\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[16,20]},"
    "\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[20,20]}}";

static void valid_data(uint8_t *d) {
    float a[2] = {1.0f, -2.5f};
    uint16_t b[2] = {0x3F80, 0xC0A0}; /* bf16 1.0, -5.0 */
    uint16_t h[2] = {0x3C00, 0xC000}; /* f16 1.0, -2.0 */
    int32_t s = 7;
    memcpy(d, a, 8);
    memcpy(d + 8, b, 4);
    memcpy(d + 12, h, 4);
    memcpy(d + 16, &s, 4);
}

static void test_valid(void) {
    uint8_t buf[1024], data[20];
    valid_data(data);
    size_t n = build(buf, sizeof buf, VALID, data, sizeof data);
    st_file *f;
    clover_error err = {0};
    int rc = st_file_open_memory(&f, buf, n, "mem.safetensors", &err);
    CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
    if (rc) return;
    CHECK_EQ_INT(st_file_tensor_count(f), 5);
    const char *order[5] = {"a", "b", "h", "s", "z"};
    for (int i = 0; i < 5; i++) CHECK(!strcmp(st_file_tensor_at(f, (size_t)i)->name, order[i]));

    const st_tensor *a = st_file_find(f, "a"), *b = st_file_find(f, "b"), *h = st_file_find(f, "h");
    const st_tensor *s = st_file_find(f, "s"), *z = st_file_find(f, "z");
    CHECK(a && b && h && s && z);
    CHECK(st_file_find(f, "c") == NULL && st_file_find(f, "__metadata__") == NULL);
    if (!(a && b && h && s && z)) goto done;
    CHECK_EQ_INT(a->dtype, ST_F32);
    CHECK_EQ_INT(a->n_dims, 1);
    CHECK_EQ_INT(a->shape[0], 2);
    CHECK_EQ_INT(a->nbytes, 8);
    CHECK(a->data == buf + 8 + strlen(VALID));
    CHECK_EQ_INT(h->n_dims, 2);
    CHECK_EQ_INT(h->numel, 2);
    CHECK_EQ_INT(h->offset, 12);
    CHECK_EQ_INT(s->n_dims, 0);
    CHECK_EQ_INT(s->numel, 1);
    CHECK_EQ_INT(z->numel, 0);
    CHECK_EQ_INT(z->nbytes, 0);

    float v[2] = {0};
    st_tensor_read_f32(a, 0, 2, v);
    CHECK(v[0] == 1.0f && v[1] == -2.5f);
    st_tensor_read_f32(b, 0, 2, v);
    CHECK(v[0] == 1.0f && v[1] == -5.0f);
    st_tensor_read_f32(h, 1, 1, v);
    CHECK(v[0] == -2.0f);
    CHECK(st_dtype_is_float(ST_BF16) && !st_dtype_is_float(ST_I32));
done:
    st_file_close(f);
}

/* One malformed header per rule: code and message fragments. */
static void expect_fail(const char *header, size_t data_len, int code, const char *frag1, const char *frag2) {
    uint8_t buf[4096], data[64] = {0};
    size_t n = build(buf, sizeof buf, header, data, data_len);
    st_file *f = (st_file *)1;
    clover_error err = {0};
    int rc = st_file_open_memory(&f, buf, n, "bad.safetensors", &err);
    CHECK_MSG(rc == code, "header %s: rc %d, expected %d (%s)", header, rc, code, err.message);
    CHECK(f == NULL);
    CHECK_MSG(strstr(err.message, "bad.safetensors") != NULL, "%s", err.message);
    CHECK_MSG(!frag1 || strstr(err.message, frag1), "'%s' not in: %s", frag1, err.message);
    CHECK_MSG(!frag2 || strstr(err.message, frag2), "'%s' not in: %s", frag2, err.message);
    if (rc == CLOVER_OK) st_file_close(f);
}

static void test_malformed_headers(void) {
    const int F = CLOVER_E_FORMAT;
    expect_fail("[1,2]", 0, F, "header is an array", NULL);
    expect_fail("\"x\"", 0, F, "not valid JSON", NULL);
    expect_fail("{\"t\":[1]}", 0, F, "tensor 't'", "expected an object");
    expect_fail("{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, F, "tensor 't'", "lacks 'dtype'");
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, F, "tensor 't'", "lacks 'shape'");
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, F, "tensor 't'", "lacks 'data_offsets'");
    expect_fail("{\"t\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, F, "dtype is an integer", NULL);
    expect_fail("{\"t\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, F, "unknown dtype 'Q4'", NULL);
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", 4, F, "shape is an object", NULL);
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, F, "shape[0]", NULL);
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, F, "shape[0]", NULL);
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
                CLOVER_E_UNSUPPORTED, "9 dimensions", NULL);
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, F,
                "overflows", NULL);
    expect_fail("{\"t\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,4]}}", 4, F,
                "overflows", NULL);
    expect_fail("{\"t\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, F, "whole number of bytes", NULL);
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, F, "data_offsets", NULL);
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", 4, F, "data_offsets", NULL);
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, F, "end before they begin",
                NULL);
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, F, "span 4 bytes", "need 8");
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, F, "past the 4 bytes of data",
                NULL);
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"u\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                8, F, "overlap", "'t' and 'u'");
    expect_fail("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                8, F, "not valid JSON", "duplicate");
    expect_fail("{\"__metadata__\":[1]}", 0, F, "__metadata__", NULL);
    expect_fail("{\"t\":", 0, F, "not valid JSON", NULL);
}

static void test_truncated(void) {
    uint8_t buf[64] = {0};
    clover_error err = {0};
    st_file *f;
    CHECK_EQ_INT(st_file_open_memory(&f, buf, 5, "short", &err), CLOVER_E_FORMAT);
    CHECK(strstr(err.message, "truncated: 5 bytes") != NULL);
    size_t n = build(buf, sizeof buf, "{}", NULL, 0);
    buf[0] = 200; /* claims 200 header bytes, has 2 */
    CHECK_EQ_INT(st_file_open_memory(&f, buf, n, "short", &err), CLOVER_E_FORMAT);
    CHECK(strstr(err.message, "header length 200 runs past the end") != NULL);
    for (int i = 0; i < 8; i++) buf[i] = 0xFF;
    CHECK_EQ_INT(st_file_open_memory(&f, buf, n, "short", &err), CLOVER_E_FORMAT);
    n = build(buf, sizeof buf, "{}", NULL, 0);
    CHECK_EQ_INT(st_file_open_memory(&f, buf, n, "empty", &err), CLOVER_OK);
    CHECK_EQ_INT(st_file_tensor_count(f), 0);
    st_file_close(f);
}

static void test_from_disk(void) {
    char path[] = "/tmp/clover_st_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    uint8_t buf[1024], data[20];
    valid_data(data);
    size_t n = build(buf, sizeof buf, VALID, data, sizeof data);
    CHECK(write(fd, buf, n) == (ssize_t)n);
    close(fd);
    st_file *f;
    clover_error err = {0};
    int rc = st_file_open(&f, path, &err);
    CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
    if (!rc) {
        const st_tensor *b = st_file_find(f, "b");
        float v[2] = {0};
        CHECK(b != NULL);
        if (b) st_tensor_read_f32(b, 0, 2, v);
        CHECK(v[0] == 1.0f && v[1] == -5.0f);
        if (b) st_file_release(f, b);
        CHECK(!strcmp(st_file_name(f), path));
        st_file_close(f);
    }
    /* The same file cut inside the data. */
    CHECK(truncate(path, (off_t)n - 3) == 0);
    CHECK_EQ_INT(st_file_open(&f, path, &err), CLOVER_E_FORMAT);
    CHECK(strstr(err.message, path) && strstr(err.message, "tensor 's'"));
    unlink(path);
    CHECK_EQ_INT(st_file_open(&f, path, &err), CLOVER_E_IO);
    CHECK(strstr(err.message, "cannot open") != NULL);
}

static void test_dtype_names(void) {
    CHECK_EQ_INT(st_dtype_from_name("BF16"), ST_BF16);
    CHECK_EQ_INT(st_dtype_from_name("F8_E4M3"), ST_F8_E4M3);
    CHECK_EQ_INT(st_dtype_from_name("bf16"), -1);
    CHECK_EQ_INT(st_dtype_bits(ST_F16), 16);
    CHECK_EQ_INT(st_dtype_bits(ST_F6_E2M3), 6);
    CHECK(!strcmp(st_dtype_name(ST_I64), "I64"));
}

int main(void) {
    RUN(test_valid);
    RUN(test_malformed_headers);
    RUN(test_truncated);
    RUN(test_from_disk);
    RUN(test_dtype_names);
    return TEST_EXIT();
}
