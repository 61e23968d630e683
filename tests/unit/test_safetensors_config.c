/*
 * test_safetensors_config.c: the config.json side of a safetensors
 * checkpoint (hf_config), on hand-written JSON: where fields are looked up
 * (text_config first), the values derived when a field is absent (head_dim,
 * the layer pattern, MRoPE sections, the record's neutral defaults), and one
 * error per kind of bad input, each naming the file and the field.
 */
#include <string.h>

#include "convert/hf_config.h"
#include "test.h"

#define GEOM                                                                                                    \
    "\"vocab_size\":300,\"hidden_size\":64,\"num_hidden_layers\":6,\"num_attention_heads\":4,"                  \
    "\"num_key_value_heads\":2,\"linear_num_key_heads\":2,\"linear_num_value_heads\":6,"                        \
    "\"linear_key_head_dim\":16,\"linear_value_head_dim\":32,\"linear_conv_kernel_dim\":4,\"num_experts\":8,"   \
    "\"num_experts_per_tok\":2,\"moe_intermediate_size\":32,\"shared_expert_intermediate_size\":32,"            \
    "\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-6"

static int parse(hf_config *c, const char *json, clover_error *err) {
    return hf_config_parse(c, json, strlen(json), "cfg.json", err);
}

static void test_nested_and_defaults(void) {
    const char *j = "{\"model_type\":\"qwen3_5_moe\",\"hidden_size\":999,\"text_config\":{" GEOM
                    ",\"rope_theta\":5e6,\"model_type\":\"qwen3_5_moe_text\"},"
                    "\"block_diffusion\":{\"algorithm\":\"low_confidence\",\"block_size\":32,\"threshold\":1,"
                    "\"mask_token_id\":299,\"think_end_token_id\":null,\"stop_token_ids\":[1,2,3]}}";
    hf_config c;
    clover_error err = {0};
    int rc = parse(&c, j, &err);
    CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
    if (rc) return;
    CHECK_EQ_INT(c.hidden_size, 64); /* text_config wins over the top level */
    CHECK_EQ_INT(c.head_dim, 16);    /* hidden / heads when absent */
    CHECK_EQ_INT(c.full_attention_interval, 4);
    const uint8_t want[6] = {1, 1, 1, 0, 1, 1};
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(c.layer_is_linear[i], want[i]);
    CHECK_NEAR(c.rope_theta, 5e6, 1);
    CHECK_NEAR(c.partial_rotary_factor, 0.25, 0);
    /* no mrope_section, 4 rotary dims: llama.cpp's 11, 11, 10 scaled to fit them */
    CHECK(c.rope_sections[0] == 2 && c.rope_sections[1] == 1 && c.rope_sections[2] == 1 && c.rope_sections[3] == 0);
    CHECK(!c.tie_word_embeddings && c.rope_type == NULL);
    CHECK_EQ_INT(hf_config_conv_dim(&c), 2 * 2 * 16 + 6 * 32);
    CHECK(c.bd.present && !strcmp(c.bd.algorithm, "low_confidence"));
    CHECK_EQ_INT(c.bd.think_end_token_id, -1);
    CHECK(!c.bd.coreset_enabled);
    CHECK_NEAR(c.bd.coreset_top_p, 1.0, 0);
    CHECK_NEAR(c.bd.repetition_penalty, 1.0, 0);
    CHECK_EQ_INT(c.bd.length_penalty_window, 1);
    CHECK_EQ_INT(c.bd.n_stop_token_ids, 3);
    CHECK_EQ_INT(c.bd.stop_token_ids[2], 3);
    hf_config_free(&c);
}

/* layer_types is authoritative: an irregular pattern is kept as it is (the
 * GGUF then lists the layers) and a regular one gives its interval, whatever
 * full_attention_interval says. */
static void test_layer_patterns(void) {
    static const struct {
        const char *types; /* L = linear, F = full */
        const char *interval_key;
        uint32_t want_interval;
    } cases[] = {
        {"LFLFLL", "", 0}, {"LLFLLF", ",\"full_attention_interval\":4", 3}, {"FFFFFF", "", 1},
        {"LLLLLL", "", 0}, {"LLLFLL", "", 4}, {"LLLLLF", "", 6},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char j[1024], lt[256] = "";
        for (int i = 0; i < 6; i++) {
            strcat(lt, i ? "," : "");
            strcat(lt, cases[k].types[i] == 'L' ? "\"linear_attention\"" : "\"full_attention\"");
        }
        snprintf(j, sizeof j, "{" GEOM ",\"rope_theta\":1e7%s,\"layer_types\":[%s]}", cases[k].interval_key, lt);
        hf_config c;
        clover_error err = {0};
        int rc = parse(&c, j, &err);
        CHECK_MSG(rc == CLOVER_OK, "%s: %s", cases[k].types, err.message);
        if (rc) continue;
        CHECK_MSG(c.full_attention_interval == cases[k].want_interval, "%s: interval %u, expected %u",
                  cases[k].types, c.full_attention_interval, cases[k].want_interval);
        for (int i = 0; i < 6; i++) CHECK_EQ_INT(c.layer_is_linear[i], cases[k].types[i] == 'L');
        hf_config_free(&c);
    }
}

/* Without mrope_section a model of >= 32 rotary dims gets llama.cpp's 11, 11, 10, 0. */
static void test_default_sections(void) {
    hf_config c;
    clover_error err = {0};
    int rc = parse(&c, "{" GEOM ",\"rope_theta\":1e7,\"head_dim\":256}", &err);
    CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
    if (rc) return;
    CHECK(c.rope_sections[0] == 11 && c.rope_sections[1] == 11 && c.rope_sections[2] == 10 && c.rope_sections[3] == 0);
    hf_config_free(&c);
}

static void test_flat_with_layer_types_and_rope(void) {
    const char *j = "{" GEOM ",\"head_dim\":8,\"full_attention_interval\":3,"
                    "\"layer_types\":[\"linear_attention\",\"linear_attention\",\"full_attention\","
                    "\"linear_attention\",\"linear_attention\",\"full_attention\"],"
                    "\"rope_parameters\":{\"rope_type\":\"yarn\",\"factor\":4.0,\"original_max_position_embeddings\":"
                    "2048,\"rope_theta\":1e7,\"partial_rotary_factor\":0.5,\"mrope_section\":[3,1]},"
                    "\"tie_word_embeddings\":true,\"eos_token_id\":[7,8],\"bos_token_id\":null}";
    hf_config c;
    clover_error err = {0};
    int rc = parse(&c, j, &err);
    CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
    if (rc) return;
    CHECK_EQ_INT(c.head_dim, 8);
    CHECK_EQ_INT(c.layer_is_linear[2], 0);
    CHECK_EQ_INT(c.layer_is_linear[3], 1);
    CHECK(c.rope_type && !strcmp(c.rope_type, "yarn"));
    CHECK_NEAR(c.rope_factor, 4.0, 0);
    CHECK_EQ_INT(c.rope_orig_ctx, 2048);
    CHECK_NEAR(c.partial_rotary_factor, 0.5, 0);
    CHECK(c.rope_sections[0] == 3 && c.rope_sections[1] == 1 && c.rope_sections[2] == 0 && c.rope_sections[3] == 0);
    CHECK(c.tie_word_embeddings);
    CHECK_EQ_INT(c.eos_token_id, 7);
    CHECK_EQ_INT(c.bos_token_id, -1);
    CHECK(!c.bd.present);
    hf_config_free(&c);
}

static void expect_fail(const char *json, int code, const char *frag) {
    hf_config c;
    clover_error err = {0};
    int rc = parse(&c, json, &err);
    CHECK_MSG(rc == code, "rc %d, expected %d: %s", rc, code, err.message);
    CHECK_MSG(strstr(err.message, "cfg.json") && strstr(err.message, frag), "'%s' not in: %s", frag, err.message);
    if (rc == CLOVER_OK) hf_config_free(&c);
}

static void test_errors(void) {
    const int F = CLOVER_E_FORMAT;
    expect_fail("[]", F, "is an array, expected a JSON object");
    expect_fail("{\"hidden_size\":", F, "not valid JSON");
    expect_fail("{\"rope_theta\":1e7}", F, "missing field 'vocab_size'");
    expect_fail("{\"text_config\":{\"rope_theta\":1e7}}", F, "looked in text_config");
    expect_fail("{\"text_config\":3}", F, "'text_config' is an integer, expected an object");
    expect_fail("{" GEOM ",\"rope_theta\":1e7,\"hidden_size\":\"64\"}", F, "duplicate");
    expect_fail("{" GEOM "}", F, "missing field 'rope_theta'");
    expect_fail("{\"vocab_size\":-3}", F, "'vocab_size' is -3");
    expect_fail("{\"vocab_size\":3.5}", F, "'vocab_size' is a real number, expected a non-negative integer");
    expect_fail("{\"vocab_size\":0}", F, "'vocab_size' is 0, expected 1..");
    expect_fail("{\"model_type\":\"qwen3_next\"}", CLOVER_E_UNSUPPORTED, "model_type 'qwen3_next'");
    expect_fail("{" GEOM ",\"rope_theta\":1e7,\"head_dim\":\"8\"}", F, "'head_dim' is a string");
    expect_fail("{" GEOM ",\"rope_theta\":1e7,\"tie_word_embeddings\":1}", F,
                "'tie_word_embeddings' is an integer, expected a boolean");
    expect_fail("{" GEOM ",\"rope_theta\":\"1e7\"}", F, "'rope_theta' is a string, expected a number");
    expect_fail("{" GEOM ",\"rope_theta\":1e7,\"layer_types\":[\"full_attention\"]}", F,
                "layer_types has 1 entries");
    expect_fail("{" GEOM ",\"rope_theta\":1e7,\"layer_types\":[1,2,3,4,5,6]}", F, "layer_types[0] is an integer");
    expect_fail("{" GEOM ",\"rope_parameters\":{\"rope_type\":\"dynamic\",\"rope_theta\":1e7}}", CLOVER_E_UNSUPPORTED,
                "rope_type 'dynamic'");
    expect_fail("{" GEOM ",\"rope_parameters\":{\"rope_type\":\"yarn\",\"rope_theta\":1e7,\"factor\":2}}", F,
                "missing field 'original_max_position_embeddings' in rope_parameters");
    expect_fail("{" GEOM ",\"rope_theta\":1e7,\"partial_rotary_factor\":2}", F, "partial_rotary_factor 2");
    expect_fail("{" GEOM ",\"rope_theta\":1e7,\"block_diffusion\":[]}", F, "'block_diffusion' is an array");
    expect_fail("{" GEOM ",\"rope_theta\":1e7,\"block_diffusion\":{\"algorithm\":\"low_confidence\","
                "\"block_size\":32,\"threshold\":0.9}}",
                F, "missing field 'mask_token_id' in block_diffusion");
    expect_fail("{" GEOM ",\"rope_theta\":1e7,\"block_diffusion\":{\"algorithm\":\"low_confidence\","
                "\"block_size\":32,\"threshold\":1.5,\"mask_token_id\":1}}",
                F, "threshold 1.5");
    expect_fail("{" GEOM ",\"rope_theta\":1e7,\"block_diffusion\":{\"algorithm\":\"low_confidence\","
                "\"block_size\":0,\"threshold\":0.5,\"mask_token_id\":1}}",
                F, "block_size is 0");
    expect_fail("{" GEOM ",\"rope_theta\":1e7,\"block_diffusion\":{\"algorithm\":\"low_confidence\","
                "\"block_size\":4,\"threshold\":0.5,\"mask_token_id\":1,\"stop_token_ids\":[1,\"x\"]}}",
                F, "block_diffusion.stop_token_ids' is a string");
}

static void test_head_ratios(void) {
    /* 6 value heads over 4 key heads: the grouping is undefined. */
    const char *bad = "{\"vocab_size\":300,\"hidden_size\":64,\"num_hidden_layers\":6,\"num_attention_heads\":4,"
                      "\"num_key_value_heads\":2,\"linear_num_key_heads\":4,\"linear_num_value_heads\":6,"
                      "\"linear_key_head_dim\":16,\"linear_value_head_dim\":32,\"linear_conv_kernel_dim\":4,"
                      "\"num_experts\":8,\"num_experts_per_tok\":2,\"moe_intermediate_size\":32,"
                      "\"shared_expert_intermediate_size\":32,\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-6,"
                      "\"rope_theta\":1e7}";
    expect_fail(bad, CLOVER_E_FORMAT, "linear_num_value_heads 6 is not a multiple of linear_num_key_heads 4");
}

int main(void) {
    RUN(test_nested_and_defaults);
    RUN(test_flat_with_layer_types_and_rope);
    RUN(test_layer_patterns);
    RUN(test_default_sections);
    RUN(test_errors);
    RUN(test_head_ratios);
    return TEST_EXIT();
}
