/*
 * test_golden_ar.c: the CPU backend on the tiny autoregressive fixture
 * (tests/fixtures/tiny_ar: a plain Qwen3.5-MoE, no record, float32 in two
 * safetensors shards, every 4th layer attention, 1 KV head): causal logits,
 * hidden states, committed state and NLL as for the Clover fixture
 * (golden_checks.h); greedy decoding through commit's last_logits one row at
 * a time (the recurrent GDN form and matmul's vector path) reproduces the
 * reference's greedy tokens and confidences; and a preview is refused
 * (no block-diffusion tensors) without touching the session.
 */
#include "golden_checks.h"

static fixture fx;
static test_model tm;

static void causal_and_state(void) { golden_causal_and_state(&fx, &tm); }
static void nll_of_text(void) { golden_nll(&fx, &tm); }

/* The first maximum and its float32 softmax probability (tools/reference DECISIONS 1). */
static int32_t greedy_pick(const float *l, size_t V, float *conf) {
    size_t best = 0;
    for (size_t v = 1; v < V; v++)
        if (l[v] > l[best]) best = v;
    double sum = 0;
    for (size_t v = 0; v < V; v++) sum += exp((double)(float)(l[v] - l[best]));
    *conf = (float)(1.0 / sum);
    return (int32_t)best;
}

static void greedy_decoding(void) {
    const size_t V = tm.model->hp.n_vocab;
    json_t *cases = json_object_get(fx.manifest, "generate"), *c;
    size_t ci, checked = 0;
    float *logits = malloc(V * sizeof *logits);
    json_array_foreach(cases, ci, c) {
        json_t *o = json_object_get(c, "options");
        if (json_real_value(json_object_get(o, "temperature")) != 0.0) continue;
        const char *name = json_string_value(json_object_get(c, "name"));
        size_t np, nt;
        int32_t *prompt = fixture_ids(json_object_get(c, "prompt_ids"), &np);
        json_t *exp = json_object_get(c, "expected");
        int32_t *want = fixture_ids(json_object_get(exp, "tokens"), &nt);
        json_t *confs = json_object_get(exp, "confidences");
        tseq *s = test_session(tm.model, 16, 0);
        clover_error err = {0};
        backend_commit_seq out = {.last_logits = logits};
        int rc = s ? seq_commit(s, prompt, np, &out, NULL, &err) : -1;
        CHECK_MSG(rc == 0, "%s: prompt: %s", name, err.message);
        size_t same = 0;
        double worst_conf = 0;
        for (size_t t = 0; rc == 0 && t < nt; t++) {
            float conf;
            int32_t id = greedy_pick(logits, V, &conf);
            CHECK_MSG(id == want[t], "%s: token %zu is %d, reference %d", name, t, id, want[t]);
            if (id != want[t]) break;
            same++;
            worst_conf = fmax(worst_conf, fabs(conf - json_real_value(json_array_get(confs, t))));
            if (t + 1 < nt) rc = seq_commit(s, &id, 1, &out, NULL, &err); /* decode: one row */
        }
        CHECK_EQ_INT(same, nt);
        CHECK_MSG(worst_conf <= 1e-5, "%s: confidence off by %.3g", name, worst_conf);
        /* the prompt plus every emitted token but the last is committed */
        CHECK_EQ_INT(seq_length(s), json_integer_value(json_object_get(exp, "committed_after")));
        printf("     %s: %zu tokens as the reference, confidences within %.3g\n", name, same, worst_conf);
        seq_free(s);
        free(prompt), free(want);
        checked++;
    }
    CHECK(checked == 2);
    free(logits);
}

static void preview_refused(void) {
    tseq *s = test_session(tm.model, 8, 1);
    if (!s) return;
    const int32_t ids[3] = {401, 84, 82};
    clover_error err = {0};
    CHECK(seq_commit(s, ids, 3, NULL, NULL, &err) == 0);
    float *logits = malloc(3 * tm.model->hp.n_vocab * sizeof *logits);
    backend_preview_opts opts = {.record_block_size = 8};
    int rc = seq_preview(s, ids, 3, &opts, logits, NULL, &err);
    CHECK_EQ_INT(rc, CLOVER_E_UNSUPPORTED);
    CHECK_MSG(strstr(err.message, "ssm_conv1d_right") != NULL, "message: %s", err.message);
    CHECK_EQ_INT(seq_length(s), 3);
    CHECK_EQ_INT(seq_preview_debug(s, NULL, NULL, &err), CLOVER_E_INVALID);
    free(logits);
    seq_free(s);
}

int main(void) {
    if (fixture_open(&fx, "tiny_ar")) return TEST_EXIT();
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) {
        CHECK(!tm.model->has_record);
        RUN(causal_and_state);
        RUN(nll_of_text);
        RUN(greedy_decoding);
        RUN(preview_refused);
    }
    test_model_free(&tm);
    fixture_close(&fx);
    return TEST_EXIT();
}
