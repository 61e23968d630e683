/*
 * fuzz_hf_config.c: libFuzzer target of the config.json parser (hf_config).
 * Any input either parses or fails with a negative status and a non-empty
 * message naming the input; a parsed config keeps its promises: sizes in
 * range, value heads a multiple of key heads, one layer kind per layer, a
 * record with a block size and an in-range threshold. A broken promise traps.
 *
 * Seeds: tests/fuzz/corpus/fuzz_hf_config/ holds config.json files of the
 * shapes clover convert meets: nested text_config (the released checkpoints)
 * and flat (save_pretrained), with and without a block_diffusion record,
 * explicit layer_types, rope_parameters variants.
 */
#include <stdint.h>
#include <string.h>

#include "convert/hf_config.h"

#define REQUIRE(cond)                  \
    do {                               \
        if (!(cond)) __builtin_trap(); \
    } while (0)

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hf_config c;
    clover_error err = {0};
    int rc = hf_config_parse(&c, (const char *)data, size, "fuzz.json", &err);
    if (rc != CLOVER_OK) {
        REQUIRE(rc < 0 && err.code == rc && err.message[0] && strstr(err.message, "fuzz.json"));
        return 0;
    }
    REQUIRE(c.n_layers >= 1 && c.n_layers <= HF_MAX_LAYERS && c.layer_is_linear);
    REQUIRE(c.hidden_size >= 1 && c.head_dim >= 1 && c.n_heads % c.n_kv_heads == 0);
    REQUIRE(c.lin_n_k_heads >= 1 && c.lin_n_v_heads % c.lin_n_k_heads == 0);
    REQUIRE(c.n_experts_used <= c.n_experts && c.rms_eps > 0 && c.rope_theta > 0);
    REQUIRE(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1);
    for (uint32_t i = 0; i < c.n_layers; i++) {
        REQUIRE(c.layer_is_linear[i] <= 1);
        sink += c.layer_is_linear[i];
    }
    if (c.bd.present) {
        REQUIRE(c.bd.algorithm && c.bd.block_size >= 1 && c.bd.threshold >= 0 && c.bd.threshold <= 1);
        for (size_t i = 0; i < c.bd.n_stop_token_ids; i++) sink += c.bd.stop_token_ids[i];
    }
    sink += hf_config_conv_dim(&c);
    hf_config_free(&c);
    return 0;
}
