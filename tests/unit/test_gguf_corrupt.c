/*
 * test_gguf_corrupt.c: a table of broken GGUF files, each built by hand
 * (byte by byte, not with clover's writer) from one valid file by patching
 * one field, and each expected to fail with its own status and message,
 * through gguf_open (a file in a temp dir) and through gguf_open_memory over
 * a heap buffer of exactly the file's size, so the sanitizers see any read
 * past the end. Then the valid file cut at every offset.
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "test.h"

static char tmp_dir[256];

/* ---- a little byte builder ---- */

typedef struct buf {
    uint8_t b[4096];
    size_t n;
} buf;

static size_t put(buf *b, const void *p, size_t n) {
    size_t at = b->n;
    memcpy(b->b + b->n, p, n);
    b->n += n;
    return at;
}
static size_t put_u32(buf *b, uint32_t x) { return put(b, &x, 4); }
static size_t put_u64(buf *b, uint64_t x) { return put(b, &x, 8); }
static size_t put_str(buf *b, const char *s) {
    size_t at = put_u64(b, strlen(s));
    put(b, s, strlen(s));
    return at;
}
static void pad_to(buf *b, size_t align) {
    while (b->n % align) b->b[b->n++] = 0;
}
static void patch_u32(buf *b, size_t at, uint32_t x) { memcpy(b->b + at, &x, 4); }
static void patch_u64(buf *b, size_t at, uint64_t x) { memcpy(b->b + at, &x, 8); }

/* Where the fields the cases patch sit in the valid file. */
typedef struct layout {
    size_t n_tensors, n_kv;
    size_t kv_flag_type, kv_flag_value; /* "k.flag": bool 1 */
    size_t align_value;                 /* "general.alignment": u32 32 */
    size_t arr_type, arr_len;           /* "k.arr": u32 [1, 2, 3] */
    size_t str_key;                     /* "k.str" key length, then its chars */
    size_t strs_len, strs_elem1;        /* "k.strs": ["a", "bc"]: array length, 2nd string's length */
    size_t w_ndims, w_ne, w_type, w_offset; /* tensor "w": [32, 2] q8_0 at 0 (68 bytes) */
    size_t v_name, v_type, v_offset;        /* tensor "v": [4] f32 at 96 (16 bytes) */
    size_t data, data_end;                  /* data section start, end of the last tensor's bytes */
} layout;

/* The valid file: 5 kvs, 2 tensors, alignment 32, padded like llama.cpp. */
static void build_valid(buf *b, layout *o) {
    memset(b, 0, sizeof *b);
    put(b, "GGUF", 4);
    put_u32(b, 3);
    o->n_tensors = put_u64(b, 2);
    o->n_kv = put_u64(b, 5);
    put_str(b, "general.alignment");
    put_u32(b, GGUF_VT_U32);
    o->align_value = put_u32(b, 32);
    put_str(b, "k.flag");
    o->kv_flag_type = put_u32(b, GGUF_VT_BOOL);
    o->kv_flag_value = put(b, "\x01", 1);
    put_str(b, "k.arr");
    put_u32(b, GGUF_VT_ARRAY);
    o->arr_type = put_u32(b, GGUF_VT_U32);
    o->arr_len = put_u64(b, 3);
    put_u32(b, 1), put_u32(b, 2), put_u32(b, 3);
    o->str_key = put_str(b, "k.str");
    put_u32(b, GGUF_VT_STRING);
    put_str(b, "tiny");
    put_str(b, "k.strs");
    put_u32(b, GGUF_VT_ARRAY);
    put_u32(b, GGUF_VT_STRING);
    o->strs_len = put_u64(b, 2);
    put_str(b, "a");
    o->strs_elem1 = put_str(b, "bc");
    put_str(b, "w");
    o->w_ndims = put_u32(b, 2);
    o->w_ne = put_u64(b, 32);
    put_u64(b, 2);
    o->w_type = put_u32(b, QUANT_Q8_0);
    o->w_offset = put_u64(b, 0);
    o->v_name = put_str(b, "v");
    put_u32(b, 1);
    put_u64(b, 4);
    o->v_type = put_u32(b, QUANT_F32);
    o->v_offset = put_u64(b, 96);
    pad_to(b, 32);
    o->data = b->n;
    for (int i = 0; i < 68; i++) b->b[b->n++] = (uint8_t)(i * 3);
    pad_to(b, 32);
    float v[4] = {1, 2, 3, 4};
    put(b, v, sizeof v);
    o->data_end = b->n;
    pad_to(b, 32);
}

/* Opens bytes both ways; returns the memory status, checks the file status
 * agrees and both messages carry `want` (and the file's name). */
static int open_both(const uint8_t *bytes, size_t n, const char *want, int *code_file, char *msg, size_t msg_n) {
    uint8_t *exact = malloc(n ? n : 1); /* exactly n bytes: ASan catches any over-read */
    memcpy(exact, bytes, n);
    clover_error err = {0};
    gguf_file *f = (gguf_file *)1;
    int rc = gguf_open_memory(&f, exact, n, "case.gguf", &err);
    if (rc < 0) CHECK(f == NULL);
    if (f && rc == CLOVER_OK) {
        /* touch everything, as a user would */
        for (size_t i = 0; i < gguf_tensor_count(f); i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            const uint8_t *d = t->data;
            volatile uint8_t sum = 0;
            for (uint64_t k = 0; k < t->nbytes; k++) sum += d[k];
            (void)sum;
        }
        gguf_close(f);
    }
    snprintf(msg, msg_n, "%s", err.message);
    if (rc < 0) {
        CHECK_MSG(strncmp(err.message, "case.gguf: ", 11) == 0, "message lacks the name: %s", err.message);
        if (want) CHECK_MSG(strstr(err.message, want) != NULL, "expected '%s' in: %s", want, err.message);
        CHECK_MSG(strchr(err.message, '\n') == NULL, "not one line: %s", err.message);
    }
    free(exact);

    char path[512];
    snprintf(path, sizeof path, "%s/case.gguf", tmp_dir);
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    if (!fp) return rc;
    if (n) CHECK(fwrite(bytes, 1, n, fp) == n);
    fclose(fp);
    clover_error ferr = {0};
    gguf_file *g = NULL;
    *code_file = gguf_open(&g, path, &ferr);
    if (g) gguf_close(g);
    remove(path);
    if (*code_file < 0 && n) {
        /* same failure, the path in place of the name */
        const char *tail = strchr(ferr.message, ':'), *mtail = strchr(err.message, ':');
        CHECK_MSG(strncmp(ferr.message, path, strlen(path)) == 0, "%s", ferr.message);
        CHECK_MSG(tail && mtail && strcmp(ferr.message + strlen(path), err.message + strlen("case.gguf")) == 0,
                  "file: %s / memory: %s", ferr.message, err.message);
    }
    return rc;
}

typedef struct corrupt_case {
    const char *what;
    int code;         /* expected status */
    const char *want; /* expected in the message */
} corrupt_case;

static void expect(const buf *b, const corrupt_case *c) {
    int code_file = 0;
    char msg[1024];
    int rc = open_both(b->b, b->n, c->want, &code_file, msg, sizeof msg);
    CHECK_MSG(rc == c->code, "%s: status %d (expected %d): %s", c->what, rc, c->code, msg);
    CHECK_MSG(code_file == c->code, "%s: file status %d (expected %d)", c->what, code_file, c->code);
}

static void test_valid_file_opens(void) {
    buf b;
    layout o;
    build_valid(&b, &o);
    clover_error err = {0};
    gguf_file *f = NULL;
    CHECK_EQ_INT(gguf_open_memory(&f, b.b, b.n, "valid", &err), CLOVER_OK);
    if (!f) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    CHECK_EQ_INT(gguf_kv_count(f), 5);
    CHECK_EQ_INT(gguf_tensor_count(f), 2);
    CHECK_EQ_INT(gguf_data_offset(f), o.data);
    const gguf_tensor *w = gguf_tensor_find(f, "w"), *v = gguf_tensor_find(f, "v");
    CHECK(w && w->nbytes == 68 && w->data == b.b + o.data);
    CHECK(v && v->nbytes == 16 && ((const float *)v->data)[3] == 4.0f);
    const gguf_value *strs = NULL;
    CHECK_EQ_INT(gguf_get_array(f, "k.strs", &strs, &err), CLOVER_OK);
    CHECK(strs && strs->v.arr.len == 2 && strcmp(((const gguf_string *)strs->v.arr.data)[1].str, "bc") == 0);
    gguf_close(f);
}

static void test_corrupt_table(void) {
    buf b;
    layout o;
#define CASE(code, want, patch)                       \
    do {                                              \
        build_valid(&b, &o);                          \
        patch;                                        \
        corrupt_case c_ = {#patch, code, want};       \
        expect(&b, &c_);                              \
    } while (0)
    const int F = CLOVER_E_FORMAT, U = CLOVER_E_UNSUPPORTED;
    CASE(F, "not a GGUF file: magic 47 47 55 58 at offset 0", b.b[3] = 'X');
    CASE(U, "GGUF version 2 is not supported (expected 3)", patch_u32(&b, 4, 2));
    CASE(F, "GGUF version 4 at offset 4 (expected 3)", patch_u32(&b, 4, 4));
    CASE(F, "GGUF version 0 at offset 4", patch_u32(&b, 4, 0));
    CASE(U, "big-endian", patch_u32(&b, 4, 0x03000000u));
    CASE(F, "kv count 18446744073709551615 at offset 16 cannot fit", patch_u64(&b, o.n_kv, UINT64_MAX));
    CASE(F, "kv count 1000 at offset 16 cannot fit", patch_u64(&b, o.n_kv, 1000));
    CASE(F, "tensor count 9223372036854775808 at offset 8 cannot fit", patch_u64(&b, o.n_tensors, 1ull << 63));
    CASE(F, "tensor count 100 at offset 8 cannot fit", patch_u64(&b, o.n_tensors, 100));
    CASE(F, "kv 3: key at offset", patch_u64(&b, o.str_key, UINT64_MAX));
    CASE(F, "has length 18446744073709551615, past the end of the file", patch_u64(&b, o.str_key, UINT64_MAX));
    CASE(F, "kv 2 'k.arr': array length 4611686018427387904 (u32)", patch_u64(&b, o.arr_len, 1ull << 62));
    CASE(F, "cannot fit in the", patch_u64(&b, o.arr_len, UINT64_MAX));
    CASE(F, "kv 4 'k.strs': array length 1152921504606846976 (string)", patch_u64(&b, o.strs_len, 1ull << 60));
    CASE(F, "kv 4 'k.strs': string 1 of 2 at offset", patch_u64(&b, o.strs_elem1, 1ull << 40));
    CASE(F, "kv 1 'k.flag': value type 13 at offset", patch_u32(&b, o.kv_flag_type, 13));
    CASE(F, "is not a GGUF value type (0..12)", patch_u32(&b, o.kv_flag_type, 0xffffffffu));
    CASE(F, "kv 2 'k.arr': array element type 99 at offset", patch_u32(&b, o.arr_type, 99));
    CASE(U, "kv 2 'k.arr': array of arrays at offset", patch_u32(&b, o.arr_type, GGUF_VT_ARRAY));
    CASE(F, "kv 1 'k.flag': bool at offset", b.b[o.kv_flag_value] = 2);
    CASE(F, "kv 1 '\\x0a.fl\\x00g': value type 13", (patch_u32(&b, o.kv_flag_type, 13), b.b[o.kv_flag_type - 6] = '\n',
                                                        b.b[o.kv_flag_type - 2] = '\0'));
    CASE(F, "kv 3 at offset", memcpy(b.b + o.str_key + 8, "k.arr", 5));
    CASE(F, "duplicate key 'k.arr' (first defined by kv 2)", memcpy(b.b + o.str_key + 8, "k.arr", 5));
    CASE(F, "general.alignment is 48 (expected a power of two)", patch_u32(&b, o.align_value, 48));
    CASE(F, "general.alignment is 0 (expected a power of two)", patch_u32(&b, o.align_value, 0));
    CASE(F, "tensor 'w': type code 99 at offset", patch_u32(&b, o.w_type, 99));
    CASE(F, "tensor 'v': type code 4 at offset", patch_u32(&b, o.v_type, 4)); /* a retired ggml code */
    CASE(F, "tensor 'w': type code 64", patch_u32(&b, o.w_type, 64));
    CASE(F, "tensor 'w': n_dims 5 at offset", patch_u32(&b, o.w_ndims, 5));
    CASE(F, "tensor 'w': n_dims 4294967295", patch_u32(&b, o.w_ndims, UINT32_MAX));
    CASE(F, "tensor 'w': the element count overflows at ne[1]",
         (patch_u64(&b, o.w_ne, 1ull << 32), patch_u64(&b, o.w_ne + 8, 1ull << 32)));
    CASE(F, "tensor 'w': ne[0] = 18446744073709551615", patch_u64(&b, o.w_ne, UINT64_MAX));
    CASE(F, "tensor 'w': ne[0] = 33 is not a multiple of the q8_0 block (32)", patch_u64(&b, o.w_ne, 33));
    CASE(F, "tensor 'v': the byte size of 4611686018427387904 f32 elements overflows", patch_u64(&b, o.v_name + 8 + 1 + 4, 1ull << 62));
    CASE(F, "tensor 'v': data [128, +16) runs past the end of the data section (128 bytes at file offset",
         patch_u64(&b, o.v_offset, 128));
    CASE(F, "tensor 'w': data [18446744073709551584, +68) runs past the end", patch_u64(&b, o.w_offset, UINT64_MAX - 31));
    CASE(F, "tensor 'v': data [0, +68719476736) runs past the end",
         (patch_u64(&b, o.v_name + 8 + 1 + 4, 1ull << 34), patch_u64(&b, o.v_offset, 0)));
    CASE(F, "tensor 'v': data offset 100 is not a multiple of the alignment 32", patch_u64(&b, o.v_offset, 100));
    CASE(F, "tensor 'w': data offset 8 is not a multiple of the alignment 32", patch_u64(&b, o.w_offset, 8));
    CASE(F, "tensors 'w' [0, 68) and 'v' [64, 80) overlap in the data section", patch_u64(&b, o.v_offset, 64));
    CASE(F, "tensors 'v' [0, 16) and 'w' [0, 68) overlap", patch_u64(&b, o.v_offset, 0));
    CASE(F, "tensor 1 at offset", b.b[o.v_name + 8] = 'w');
    CASE(F, "duplicate name 'w' (first used by tensor 0)", b.b[o.v_name + 8] = 'w');
    /* alignment 64: the data section moves, the offsets 0 and 96 are no longer both aligned */
    CASE(F, "tensor 'v': data offset 96 is not a multiple of the alignment 64", patch_u32(&b, o.align_value, 64));
#undef CASE
}

static void test_alignment_of_wrong_type(void) {
    buf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 1);
    put_str(&b, "general.alignment");
    put_u32(&b, GGUF_VT_U64);
    put_u64(&b, 32);
    corrupt_case c = {"alignment u64", CLOVER_E_FORMAT, "general.alignment has type u64 (expected u32)"};
    expect(&b, &c);
    /* the same file with a u32 alignment and no tensors is fine, unpadded */
    b.n = 0;
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 1);
    put_str(&b, "general.alignment");
    put_u32(&b, GGUF_VT_U32);
    put_u32(&b, 4096);
    corrupt_case ok = {"no tensors, unpadded", CLOVER_OK, NULL};
    expect(&b, &ok);
}

static void test_small_and_missing(void) {
    corrupt_case empty = {"empty", CLOVER_E_FORMAT, "truncated: magic at offset 0 needs 4 bytes, 0 left"};
    int code_file = 0;
    char msg[1024];
    CHECK_EQ_INT(open_both((const uint8_t *)"", 0, empty.want, &code_file, msg, sizeof msg), CLOVER_E_FORMAT);
    CHECK_EQ_INT(code_file, CLOVER_E_FORMAT); /* "empty file" from gguf_open */
    clover_error err = {0};
    gguf_file *f = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/empty.gguf", tmp_dir);
    FILE *fp = fopen(path, "wb");
    if (fp) fclose(fp);
    CHECK_EQ_INT(gguf_open(&f, path, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "empty file"), "%s", err.message);
    remove(path);
    CHECK_EQ_INT(gguf_open(&f, "/nonexistent/model.gguf", &err), CLOVER_E_IO);
    CHECK_MSG(strstr(err.message, "/nonexistent/model.gguf: cannot open"), "%s", err.message);
    CHECK(f == NULL);
    CHECK_EQ_INT(gguf_open(&f, tmp_dir, &err), CLOVER_E_IO);
    CHECK_MSG(strstr(err.message, "not a regular file"), "%s", err.message);
    CHECK_EQ_INT(gguf_open_memory(&f, NULL, 10, NULL, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(gguf_open_memory(&f, "GGUF", 4, NULL, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "<memory>: truncated: version at offset 4"), "%s", err.message);
    CHECK_EQ_INT(gguf_open_memory(&f, "GGUF", 4, NULL, NULL), CLOVER_E_FORMAT); /* no error object */
    buf b;
    layout o;
    build_valid(&b, &o);
    patch_u32(&b, 4, 7);
    CHECK_EQ_INT(gguf_open_memory(&f, b.b, b.n, NULL, NULL), CLOVER_E_FORMAT);
    patch_u32(&b, 4, 3);
    b.b[o.kv_flag_value] = 5;
    CHECK_EQ_INT(gguf_open_memory(&f, b.b, b.n, NULL, NULL), CLOVER_E_FORMAT);
}

/* Every prefix of the valid file: an error up to the end of the last
 * tensor's bytes (the trailing padding is optional), then success. */
static void test_truncated_everywhere(void) {
    buf b;
    layout o;
    build_valid(&b, &o);
    int failures = 0;
    for (size_t len = 0; len <= b.n; len++) {
        int code_file = 0;
        char msg[1024];
        int want = len < o.data_end ? CLOVER_E_FORMAT : CLOVER_OK;
        int rc = open_both(b.b, len, NULL, &code_file, msg, sizeof msg);
        bool specific = rc == CLOVER_OK || strstr(msg, "truncated") || strstr(msg, "past the end") || strstr(msg, "cannot fit");
        if (rc != want || code_file != want || !specific) {
            if (failures++ < 10) fprintf(stderr, "length %zu: status %d/%d (expected %d): %s\n", len, rc, code_file, want, msg);
        }
    }
    CHECK_EQ_INT(failures, 0);
}

int main(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/clover-gguf-bad-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    RUN(test_valid_file_opens);
    RUN(test_corrupt_table);
    RUN(test_alignment_of_wrong_type);
    RUN(test_small_and_missing);
    RUN(test_truncated_everywhere);
    rmdir(tmp_dir);
    return TEST_EXIT();
}
