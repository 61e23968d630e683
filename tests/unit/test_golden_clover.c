/*
 * test_golden_clover.c: the CPU backend against the PyTorch reference on the
 * tiny Clover fixture (tests/fixtures/tiny_clover: transformers'
 * Qwen3_5MoeForCausalLM for the causal trunk, tools/reference for the
 * preview). The fixture's hf/ directory is converted to an F32 GGUF by the
 * converter library and loaded, so the comparison also covers the
 * converter's transformations (1 + w norms, -exp(A_log), tiled value heads).
 *
 *  - causal logits and the residual stream after every layer, within the
 *    fixtures' bound max|x - ref| <= 1e-4 max(1, max|ref|);
 *  - the committed state, read through state_export in backend.h's layout:
 *    conv rings, states S and K/V rows. The fixture is in Hugging Face's
 *    GROUPED value-head order, the GGUF in llama.cpp's TILED one: HF value
 *    head h = kh*r + i (r = nv/nk) is stored as head i*nk + kh, in S and in
 *    the v channels of the ring (tiled_of_grouped); K/V go from the
 *    fixture's [nkv][n][hd] to the layout's [n][nkv][hd];
 *  - NLL of the manifest's text (row r scores token r+1);
 *  - every preview case: logits, hidden states (preview_debug) and each
 *    layer's coreset, with the state_export bytes hashed before and after
 *    every preview (a preview must change nothing).
 */
#include "golden_checks.h"

static fixture fx;
static test_model tm;

static void causal_and_state(void) { golden_causal_and_state(&fx, &tm); }
static void nll_of_text(void) { golden_nll(&fx, &tm); }

static void preview_cases(void) {
    const model_hparams *hp = &tm.model->hp;
    const size_t V = hp->n_vocab, H = hp->n_embd, L = hp->n_layer, E = hp->n_expert;
    const float top_p = (float)json_real_value(fixture_get(fx.manifest, "record", "coreset_top_p", NULL));
    CHECK(top_p == tm.model->record.coreset_top_p);
    json_t *cases = json_object_get(fx.manifest, "preview"), *c;
    size_t ci;
    CHECK(json_array_size(cases) == 3);
    json_array_foreach(cases, ci, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        size_t np, b;
        int32_t *prefix = fixture_ids(json_object_get(c, "prefix_ids"), &np);
        int32_t *block = fixture_ids(json_object_get(c, "block_ids"), &b);
        CHECK_EQ_INT(json_integer_value(json_object_get(c, "position")), np);
        float *ref_logits = fixture_f32(&fx, json_object_get(c, "logits"), NULL);
        float *ref_hidden = fixture_f32(&fx, json_object_get(c, "hidden_states"), NULL);
        float *logits = malloc(b * V * sizeof *logits), *hidden = malloc((L + 1) * b * H * sizeof *hidden);
        uint8_t *kept = malloc(L * E);
        tseq *s = test_session(tm.model, 8, 0);
        clover_error err = {0};
        if (!s || !ref_logits || !ref_hidden) goto next;
        int rc = seq_commit(s, prefix, np, NULL, NULL, &err);
        CHECK_MSG(rc == 0, "%s: commit: %s", name, err.message);

        size_t bytes = seq_state_bytes(s);
        unsigned char *before = malloc(bytes), *after = malloc(bytes);
        seq_state_export(s, before, bytes, &err);
        uint64_t h0 = test_hash(before, bytes);

        backend_preview_opts opts = {
            .record_block_size = (uint32_t)json_integer_value(json_object_get(c, "record_block_size")),
            .coreset = json_is_true(json_object_get(c, "coreset")),
            .coreset_top_p = top_p};
        backend_pass_stats st = {0};
        rc = seq_preview(s, block, b, &opts, logits, &st, &err);
        CHECK_MSG(rc == 0, "%s: preview: %s", name, err.message);
        rc = seq_preview_debug(s, hidden, kept, &err);
        CHECK_MSG(rc == 0, "%s: preview_debug: %s", name, err.message);

        /* nothing committed changed */
        CHECK_EQ_INT(seq_length(s), np);
        CHECK_EQ_INT(seq_state_bytes(s), bytes);
        seq_state_export(s, after, bytes, &err);
        CHECK_MSG(test_hash(after, bytes) == h0 && memcmp(before, after, bytes) == 0,
                  "%s: the preview changed the committed state", name);
        free(before), free(after);

        double el = rel_err(logits, ref_logits, b * V), worst = 0;
        size_t worst_l = 0;
        for (size_t l = 0; l <= L; l++) {
            double e = rel_err(hidden + l * b * H, ref_hidden + l * b * H, b * H);
            if (!(e <= worst)) worst = e, worst_l = l;
        }
        printf("     %s (b %zu, B %u, coreset %d): logits rel err %.3g, hidden worst %.3g (slot %zu)\n", name, b,
               opts.record_block_size, opts.coreset, el, worst, worst_l);
        CHECK_MSG(el <= BOUND, "%s: logits rel err %.3g", name, el);
        CHECK_MSG(worst <= BOUND, "%s: hidden rel err %.3g after layer %zu", name, worst, worst_l - 1);

        if (opts.coreset) {
            json_t *cl = json_object_get(c, "coreset_layers");
            CHECK_EQ_INT(json_array_size(cl), L);
            uint64_t want_kept = 0;
            for (size_t l = 0; l < L; l++) {
                json_t *jk = json_object_get(json_array_get(cl, l), "kept");
                uint8_t want[256] = {0};
                size_t i;
                json_t *e;
                json_array_foreach(jk, i, e) want[json_integer_value(e)] = 1;
                want_kept += json_array_size(jk);
                for (size_t x = 0; x < E; x++)
                    CHECK_MSG(kept[l * E + x] == want[x], "%s: layer %zu expert %zu kept %d, reference %d", name, l, x,
                              kept[l * E + x], want[x]);
            }
            CHECK_EQ_INT(st.coreset_layers, L);
            CHECK_EQ_INT(st.coreset_kept, want_kept);
        } else {
            for (size_t x = 0; x < L * E; x++) CHECK(kept[x] == 1);
            CHECK_EQ_INT(st.coreset_layers, 0);
        }
    next:
        seq_free(s);
        free(prefix), free(block), free(ref_logits), free(ref_hidden), free(logits), free(hidden), free(kept);
    }
}

int main(void) {
    if (fixture_open(&fx, "tiny_clover")) return TEST_EXIT();
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) {
        CHECK(tm.model->has_record);
        RUN(causal_and_state);
        RUN(nll_of_text);
        RUN(preview_cases);
    }
    test_model_free(&tm);
    fixture_close(&fx);
    return TEST_EXIT();
}
