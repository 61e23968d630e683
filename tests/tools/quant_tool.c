/*
 * quant_tool.c: the tensor-type functions over stdin/stdout, so the Python
 * tests can compare them with llama.cpp's gguf package (gguf-py) and numpy.
 *
 *   quant_tool info                       code name block_elems block_bytes known supported, per code 0..63
 *   quant_tool dequant TYPE N [scalar]    row bytes in -> N f32 out
 *   quant_tool quant TYPE N               N f32 in -> row bytes out
 *   quant_tool dot TYPE N [scalar]        row bytes then N f32 in -> one f32 out
 *   quant_tool f16_to_f32 N | f32_to_f16 N | bf16_to_f32 N | f32_to_bf16 N
 *
 * Binary data is little-endian and raw. Exit status 2 on bad usage or input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "quant/quant.h"

static int read_all(void *buf, size_t n) {
    size_t got = n ? fread(buf, 1, n, stdin) : 0;
    if (got != n) {
        fprintf(stderr, "quant_tool: expected %zu bytes on stdin, got %zu\n", n, got);
        return -1;
    }
    return 0;
}

static int write_all(const void *buf, size_t n) { return fwrite(buf, 1, n, stdout) == n ? 0 : -1; }

static int usage(void) {
    fprintf(stderr, "usage: quant_tool info | dequant|quant|dot TYPE N [scalar] | "
                    "f16_to_f32|f32_to_f16|bf16_to_f32|f32_to_bf16 N\n");
    return 2;
}

static int convert(const char *cmd, size_t n) {
    const int from16 = strcmp(cmd, "f16_to_f32") == 0 || strcmp(cmd, "bf16_to_f32") == 0;
    const int bf = strncmp(cmd, "bf16", 4) == 0 || strcmp(cmd, "f32_to_bf16") == 0;
    void *in = mem_alloc(n * (from16 ? 2 : 4) + 1), *out = mem_alloc(n * (from16 ? 4 : 2) + 1);
    int rc = 2;
    if (in && out && read_all(in, n * (from16 ? 2 : 4)) == 0) {
        for (size_t i = 0; i < n; i++) {
            if (from16) {
                uint16_t h;
                memcpy(&h, (uint8_t *)in + 2 * i, 2);
                float f = bf ? quant_bf16_to_f32(h) : quant_f16_to_f32(h);
                memcpy((uint8_t *)out + 4 * i, &f, 4);
            } else {
                float f;
                memcpy(&f, (uint8_t *)in + 4 * i, 4);
                uint16_t h = bf ? quant_f32_to_bf16(f) : quant_f32_to_f16(f);
                memcpy((uint8_t *)out + 2 * i, &h, 2);
            }
        }
        rc = write_all(out, n * (from16 ? 4 : 2)) == 0 ? 0 : 2;
    }
    mem_free(in);
    mem_free(out);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0) {
        for (uint32_t t = 0; t < QUANT_TYPE_LIMIT; t++)
            printf("%u %s %zu %zu %d %d\n", t, quant_type_name(t), quant_block_elems(t), quant_block_bytes(t),
                   quant_type_known(t), quant_type_supported(t));
        return 0;
    }
    if (strstr(cmd, "16_to_") || strstr(cmd, "_to_f16") || strstr(cmd, "_to_bf16")) {
        if (argc != 3) return usage();
        return convert(cmd, strtoull(argv[2], NULL, 10));
    }
    if (argc < 4) return usage();
    const int type = quant_type_from_name(argv[2]);
    const size_t n = strtoull(argv[3], NULL, 10);
    const int scalar = argc > 4 && strcmp(argv[4], "scalar") == 0;
    if (type < 0 || !quant_type_supported((uint32_t)type) || n == 0 || quant_row_bytes((uint32_t)type, n) == 0) {
        fprintf(stderr, "quant_tool: type %s with %zu elements is not usable\n", argv[2], n);
        return 2;
    }
    const size_t rb = quant_row_bytes((uint32_t)type, n);
    uint8_t *row = mem_alloc(rb);
    float *f = mem_alloc(n * sizeof(float));
    int rc = 2;
    if (!row || !f) goto done;
    if (strcmp(cmd, "dequant") == 0) {
        if (read_all(row, rb)) goto done;
        if (scalar)
            quant_dequantize_row_scalar((uint32_t)type, row, f, n);
        else
            quant_dequantize_row((uint32_t)type, row, f, n);
        rc = write_all(f, n * sizeof(float)) ? 2 : 0;
    } else if (strcmp(cmd, "quant") == 0) {
        if (read_all(f, n * sizeof(float))) goto done;
        quant_quantize_row((uint32_t)type, f, row, n);
        rc = write_all(row, rb) ? 2 : 0;
    } else if (strcmp(cmd, "dot") == 0) {
        if (read_all(row, rb) || read_all(f, n * sizeof(float))) goto done;
        float d = scalar ? quant_dot_scalar((uint32_t)type, row, f, n) : quant_dot((uint32_t)type, row, f, n);
        rc = write_all(&d, sizeof d) ? 2 : 0;
    } else {
        rc = usage();
    }
done:
    mem_free(row);
    mem_free(f);
    return rc;
}
