/*
 * seeds_fuzz_gguf.c: writes small valid GGUF files with clover's writer into
 * a directory, as seeds for fuzz_gguf (scripts/test.sh runs it before
 * fuzzing). Valid seeds let the fuzzer start deep in the format (kv tables,
 * string arrays, tensor infos, the data section) instead of at the magic.
 *
 *   seeds_fuzz_gguf DIR
 */
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

typedef struct seed_tensor {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
} seed_tensor;

static int write_seed(const char *dir, const char *file, uint32_t align, bool metadata, const seed_tensor *ts, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    clover_error err = {0};
    gguf_writer *w = gguf_writer_create();
    int rc = w ? CLOVER_OK : CLOVER_E_NOMEM;
    if (metadata) {
        static const uint32_t u32s[] = {1, 2, 3};
        static const float f32s[] = {0.5f, -1.0f};
        static const bool bools[] = {true, false};
        static const char *const strs[] = {"a", "", "\xc4\xa0the"};
        rc |= gguf_writer_set_string(w, "general.architecture", "qwen35moe", &err);
        rc |= gguf_writer_set_u8(w, "k.u8", 1, &err);
        rc |= gguf_writer_set_i8(w, "k.i8", -1, &err);
        rc |= gguf_writer_set_u16(w, "k.u16", 2, &err);
        rc |= gguf_writer_set_i16(w, "k.i16", -2, &err);
        rc |= gguf_writer_set_u32(w, "k.u32", 3, &err);
        rc |= gguf_writer_set_i32(w, "k.i32", -3, &err);
        rc |= gguf_writer_set_u64(w, "k.u64", 4, &err);
        rc |= gguf_writer_set_i64(w, "k.i64", -4, &err);
        rc |= gguf_writer_set_f32(w, "k.f32", 0.25f, &err);
        rc |= gguf_writer_set_f64(w, "k.f64", 0.125, &err);
        rc |= gguf_writer_set_bool(w, "k.bool", true, &err);
        rc |= gguf_writer_set_string(w, "k.str", "hello", &err);
        rc |= gguf_writer_set_array(w, "k.u32s", GGUF_VT_U32, u32s, 3, &err);
        rc |= gguf_writer_set_array(w, "k.f32s", GGUF_VT_F32, f32s, 2, &err);
        rc |= gguf_writer_set_array(w, "k.bools", GGUF_VT_BOOL, bools, 2, &err);
        rc |= gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", strs, 3, &err);
    }
    if (align) rc |= gguf_writer_set_u32(w, "general.alignment", align, &err);
    for (size_t i = 0; i < n && rc == CLOVER_OK; i++) rc = gguf_writer_add_tensor(w, ts[i].name, ts[i].n_dims, ts[i].ne, ts[i].type, &err);
    if (rc == CLOVER_OK) rc = gguf_writer_begin(w, path, &err);
    uint8_t bytes[512];
    for (size_t i = 0; i < n && rc == CLOVER_OK; i++) {
        size_t nbytes = quant_row_bytes(ts[i].type, ts[i].ne[0]);
        for (uint32_t d = 1; d < ts[i].n_dims; d++) nbytes *= ts[i].ne[d];
        for (size_t k = 0; k < sizeof bytes; k++) bytes[k] = (uint8_t)(k * 13 + i);
        /* f16 scales of the quantised blocks stay finite: clear the exponents' top bit */
        for (size_t k = 1; k < sizeof bytes; k += 2) bytes[k] &= 0x3f;
        while (nbytes && rc == CLOVER_OK) {
            size_t k = nbytes < sizeof bytes ? nbytes : sizeof bytes;
            rc = gguf_writer_write(w, bytes, k, &err);
            nbytes -= k;
        }
    }
    if (rc == CLOVER_OK) rc = gguf_writer_finish(w, &err);
    gguf_writer_free(w);
    if (rc != CLOVER_OK) fprintf(stderr, "seeds_fuzz_gguf: %s: %s\n", path, err.message);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: seeds_fuzz_gguf DIR\n");
        return 2;
    }
    static const seed_tensor mixed[] = {
        {"token_embd.weight", 2, {8, 2}, QUANT_F32},
        {"output_norm.weight", 1, {8}, QUANT_F16},
        {"blk.0.attn_q.weight", 2, {32, 2}, QUANT_Q8_0},
        {"blk.0.ffn_down_exps.weight", 3, {256, 1, 1}, QUANT_Q4_K},
        {"blk.0.bf16", 4, {2, 1, 2, 1}, QUANT_BF16},
    };
    static const seed_tensor kquants[] = {
        {"q5", 1, {256}, QUANT_Q5_K},
        {"q6", 1, {256}, QUANT_Q6_K},
        {"empty", 2, {4, 0}, QUANT_F32},
        {"q4_0", 1, {32}, QUANT_Q4_0},
    };
    int rc = 0;
    rc |= write_seed(argv[1], "seed_mixed.gguf", 0, true, mixed, 5);
    rc |= write_seed(argv[1], "seed_kquants_align64.gguf", 64, false, kquants, 4);
    rc |= write_seed(argv[1], "seed_metadata_only.gguf", 0, true, NULL, 0);
    rc |= write_seed(argv[1], "seed_empty.gguf", 0, false, NULL, 0);
    rc |= write_seed(argv[1], "seed_one_tensor_align8.gguf", 8, false, mixed, 1);
    return rc ? 1 : 0;
}
