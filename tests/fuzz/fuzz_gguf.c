/*
 * fuzz_gguf.c: libFuzzer target of the GGUF reader. Any input either opens
 * or fails with a negative status and a non-empty one-line message; an
 * opened file is walked completely (every kv and array element, every
 * tensor byte, every lookup by name and every typed getter), and its values
 * are copied into a writer, so whatever the reader accepts is consistent
 * and usable. A broken promise traps, which libFuzzer reports.
 *
 * Seeds: tests/fuzz/corpus/fuzz_gguf/ holds small valid files written by
 * llama.cpp's gguf.GGUFWriter (gguf_py_*) and by clover's writer (seed_*,
 * from tests/tools/seeds_fuzz_gguf, which scripts/test.sh also runs).
 */
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

#define REQUIRE(cond)                 \
    do {                              \
        if (!(cond)) __builtin_trap(); \
    } while (0)

static volatile uint64_t sink;

static void walk_string(const gguf_string *s) {
    REQUIRE(s->str != NULL && s->str[s->len] == '\0');
    uint64_t h = 0;
    for (uint64_t i = 0; i < s->len; i++) h = h * 31 + (uint8_t)s->str[i];
    sink += h;
}

static void walk_value(const gguf_value *v) {
    REQUIRE(v->type < GGUF_VT_COUNT);
    if (v->type == GGUF_VT_STRING) walk_string(&v->v.str);
    if (v->type != GGUF_VT_ARRAY) return;
    REQUIRE(v->v.arr.type < GGUF_VT_COUNT && v->v.arr.type != GGUF_VT_ARRAY);
    REQUIRE(v->v.arr.len == 0 || v->v.arr.data != NULL);
    if (v->v.arr.type == GGUF_VT_STRING) {
        const gguf_string *s = v->v.arr.data;
        for (uint64_t i = 0; i < v->v.arr.len; i++) walk_string(&s[i]);
        return;
    }
    static const size_t sizes[GGUF_VT_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    const uint8_t *p = v->v.arr.data;
    for (uint64_t i = 0; i < v->v.arr.len * sizes[v->v.arr.type]; i++) sink += p[i];
    if (v->v.arr.type == GGUF_VT_BOOL)
        for (uint64_t i = 0; i < v->v.arr.len; i++) REQUIRE(p[i] <= 1);
}

static void walk_getters(const gguf_file *f, const char *key) {
    clover_error err;
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    float f32;
    bool b;
    const gguf_string *s;
    const gguf_value *v;
    int rcs[] = {gguf_get_u32(f, key, &u32, &err), gguf_get_i32(f, key, &i32, &err), gguf_get_u64(f, key, &u64, &err),
                 gguf_get_f32(f, key, &f32, &err), gguf_get_bool(f, key, &b, &err),  gguf_get_string(f, key, &s, &err),
                 gguf_get_array(f, key, &v, &err), gguf_get_u32_or(f, key, 1, &u32, &err),
                 gguf_get_f32_or(f, key, 1, &f32, &err)};
    for (size_t i = 0; i < sizeof rcs / sizeof rcs[0]; i++) REQUIRE(rcs[i] == CLOVER_OK || (rcs[i] < 0 && err.message[0]));
}

static void walk(const gguf_file *f, const uint8_t *data, size_t size) {
    REQUIRE(gguf_version(f) == GGUF_VERSION);
    uint32_t align = gguf_alignment(f);
    REQUIRE(align && (align & (align - 1)) == 0 && gguf_data_offset(f) % align == 0);
    gguf_writer *w = gguf_writer_create();
    for (size_t i = 0; i < gguf_kv_count(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        walk_string(&kv->key);
        walk_value(&kv->value);
        if (kv->key.len == strlen(kv->key.str)) {
            REQUIRE(gguf_kv_find(f, kv->key.str) == kv);
            walk_getters(f, kv->key.str);
        }
        clover_error err;
        if (w && kv->key.len) {
            int rc = gguf_writer_set_value(w, kv->key.str, &kv->value, &err);
            REQUIRE(rc == CLOVER_OK || (rc < 0 && err.message[0]));
        }
    }
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        walk_string(&t->name);
        if (t->name.len == strlen(t->name.str)) REQUIRE(gguf_tensor_find(f, t->name.str) == t);
        REQUIRE(t->n_dims <= GGUF_MAX_DIMS && quant_type_known(t->type));
        const uint8_t *d = t->data;
        REQUIRE(d >= data && t->nbytes <= size && (size_t)(d - data) <= size - t->nbytes);
        for (uint64_t k = 0; k < t->nbytes; k++) sink += d[k];
        clover_error err;
        if (w && t->name.len) {
            int rc = gguf_writer_add_tensor(w, t->name.str, t->n_dims, t->ne, t->type, &err);
            REQUIRE(rc == CLOVER_OK || (rc < 0 && err.message[0]));
        }
    }
    gguf_writer_free(w); /* never begun: writes nothing, removes nothing */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clover_error err = {0};
    gguf_file *f = NULL;
    int rc = gguf_open_memory(&f, data, size, "fuzz", &err);
    if (rc == CLOVER_OK) {
        REQUIRE(f != NULL);
        walk(f, data, size);
        gguf_close(f);
    } else {
        REQUIRE(rc < 0 && f == NULL && err.code == rc && err.message[0] && !strchr(err.message, '\n'));
    }
    return 0;
}
