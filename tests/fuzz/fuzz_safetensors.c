/*
 * fuzz_safetensors.c: libFuzzer target of the safetensors header parser.
 * Any input either opens or fails with a negative status and a non-empty
 * message naming the input; an opened file keeps its promises: every tensor
 * lies inside the buffer (its first and last byte are read, ASan checks),
 * byte counts agree with shape x dtype, tensors are sorted, found by name and
 * do not overlap, and float tensors read back. A broken promise traps.
 *
 * Seeds: tests/fuzz/corpus/fuzz_safetensors/ holds small files written by the
 * Python `safetensors` package (F32, F16, BF16, I32, scalars, empty tensors,
 * metadata, several tensors) and a few broken ones.
 */
#include <stdint.h>
#include <string.h>

#include "convert/safetensors.h"

#define REQUIRE(cond)                  \
    do {                               \
        if (!(cond)) __builtin_trap(); \
    } while (0)

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_file *f = NULL;
    clover_error err = {0};
    int rc = st_file_open_memory(&f, data, size, "fuzz", &err);
    if (rc != CLOVER_OK) {
        REQUIRE(rc < 0 && f == NULL && err.code == rc && err.message[0] && strstr(err.message, "fuzz"));
        return 0;
    }
    size_t n = st_file_tensor_count(f);
    const st_tensor *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const st_tensor *t = st_file_tensor_at(f, i);
        REQUIRE(t && st_file_find(f, t->name) == t);
        REQUIRE(!prev || strcmp(prev->name, t->name) < 0);
        REQUIRE(t->data >= data && t->nbytes <= size && (size_t)(t->data - data) <= size - t->nbytes);
        REQUIRE(t->numel * st_dtype_bits(t->dtype) / 8 == t->nbytes);
        if (t->nbytes) sink += t->data[0] + t->data[t->nbytes - 1];
        if (st_dtype_is_float(t->dtype) && t->numel) {
            float v[16];
            size_t k = t->numel < 16 ? (size_t)t->numel : 16;
            st_tensor_read_f32(t, 0, k, v);
            st_tensor_read_f32(t, t->numel - k, k, v);
            sink += (uint64_t)(v[0] == v[0]);
        }
        /* No overlap with any other non-empty tensor. */
        for (size_t j = 0; j < i && t->nbytes; j++) {
            const st_tensor *u = st_file_tensor_at(f, j);
            REQUIRE(!u->nbytes || u->offset + u->nbytes <= t->offset || t->offset + t->nbytes <= u->offset);
        }
        prev = t;
    }
    st_file_close(f);
    return 0;
}
