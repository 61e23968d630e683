/*
 * test_golden_interop.c: the CPU backend on the fixture a new user's own
 * transformers save_pretrained gives (tests/fixtures/tiny_interop): an
 * irregular layer pattern (attention at layers 1 and 4, which no
 * full_attention_interval describes), rope_parameters without mrope_section,
 * tied embeddings (no lm_head.weight). It converts unedited, the GGUF lists
 * its recurrent layers and ties the head, and the causal logits, hidden
 * states, committed state and NLL are transformers' (golden_checks.h).
 */
#include "golden_checks.h"

static fixture fx;
static test_model tm;

static void causal_and_state(void) { golden_causal_and_state(&fx, &tm); }
static void nll_of_text(void) { golden_nll(&fx, &tm); }

static void file_shape(void) {
    const clover_model *m = tm.model;
    CHECK(m->output_tied && m->output.data == m->token_embd.data);
    CHECK_EQ_INT(m->hp.full_attention_interval, 0); /* the pattern came from attention.recurrent_layers */
    json_t *types = json_object_get(fx.manifest, "layer_types");
    CHECK_EQ_INT(json_array_size(types), m->hp.n_layer);
    for (uint32_t i = 0; i < m->hp.n_layer; i++) {
        int full = !strcmp(json_string_value(json_array_get(types, i)), "full_attention");
        CHECK_MSG(m->layers[i].kind == (full ? MODEL_LAYER_ATTENTION : MODEL_LAYER_GDN), "layer %u", i);
    }
    /* no mrope_section: llama.cpp's 11:11:10 proportions scaled into the 8 rotary dims (llama.cpp's
     * rope needs 0 < sum <= n_rot) */
    const uint32_t *sec = m->hp.rope_sections;
    CHECK_EQ_INT(m->hp.n_rot, 8);
    CHECK(sec[0] == 4 && sec[1] == 2 && sec[2] == 2 && sec[3] == 0);
}

int main(void) {
    if (fixture_open(&fx, "tiny_interop")) return TEST_EXIT();
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) {
        CHECK(!tm.model->has_record);
        RUN(file_shape);
        RUN(causal_and_state);
        RUN(nll_of_text);
    }
    test_model_free(&tm);
    fixture_close(&fx);
    return TEST_EXIT();
}
