/*
 * golden_checks.h: the golden checks both fixture models share (included by
 * tests/unit/test_golden_clover.c and test_golden_ar.c): causal logits and
 * hidden states, the committed state through state_export, and the NLL of
 * the manifest's text. See test_golden_clover.c for what each compares and
 * how the value-head order is mapped.
 */
#ifndef CLOVER_TEST_GOLDEN_CHECKS_H
#define CLOVER_TEST_GOLDEN_CHECKS_H

#include "backend_test.h"

#define BOUND 1e-4

static void golden_causal_and_state(const fixture *fx, const test_model *tm) {
    const model_hparams *hp = &tm->model->hp;
    const size_t V = hp->n_vocab, H = hp->n_embd, L = hp->n_layer;
    CHECK_EQ_INT(V, json_integer_value(json_object_get(fx->manifest, "vocab_size")));
    CHECK_EQ_INT(L, json_integer_value(json_object_get(fx->manifest, "num_layers")));
    size_t n;
    int32_t *ids = fixture_ids(fixture_get(fx->manifest, "causal", "ids", NULL), &n);
    float *ref_logits = fixture_f32(fx, fixture_get(fx->manifest, "causal", "logits", NULL), NULL);
    float *ref_hidden = fixture_f32(fx, fixture_get(fx->manifest, "causal", "hidden_states", NULL), NULL);
    float *logits = malloc(n * V * sizeof *logits), *hidden = malloc((L + 1) * n * H * sizeof *hidden);
    tseq *s = test_session(tm->model, 64, 0);
    if (!s || !ref_logits || !ref_hidden) goto done;

    clover_error err = {0};
    backend_pass_stats st = {0};
    backend_commit_seq out = {.all_logits = logits, .hidden = hidden};
    int rc = seq_commit(s, ids, n, &out, &st, &err);
    CHECK_MSG(rc == 0, "commit: %s", err.message);
    CHECK_EQ_INT(seq_length(s), n);
    double e = rel_err(logits, ref_logits, n * V);
    printf("     causal logits (%zu rows): rel err %.3g\n", n, e);
    CHECK_MSG(e <= BOUND, "causal logits rel err %.3g", e);
    double worst = 0;
    size_t worst_l = 0;
    for (size_t l = 0; l <= L; l++) {
        double el = rel_err(hidden + l * n * H, ref_hidden + l * n * H, n * H);
        if (!(el <= worst)) {
            worst = el;
            worst_l = l;
        }
    }
    printf("     hidden states: worst rel err %.3g at slot %zu (0 = embeddings)\n", worst, worst_l);
    CHECK_MSG(worst <= BOUND, "hidden states: rel err %.3g after layer %zu (slot %zu)", worst, worst_l - 1, worst_l);
    CHECK(st.gdn_s > 0 && st.attn_s > 0 && st.moe_s > 0 && st.head_s > 0);
    /* the products' share of each family (matmul_thread_seconds): inside it, and there */
    CHECK(st.gdn_mm_s > 0 && st.gdn_mm_s <= st.gdn_s && st.attn_mm_s > 0 && st.attn_mm_s <= st.attn_s);
    CHECK(st.moe_mm_s > 0 && st.moe_mm_s <= st.moe_s && st.head_mm_s > 0 && st.head_mm_s <= st.head_s);
    CHECK(st.coreset_layers == 0);

    /* the committed state through state_export */
    size_t bytes = seq_state_bytes(s);
    unsigned char *buf = malloc(bytes);
    rc = seq_state_export(s, buf, bytes, &err);
    CHECK_MSG(rc == 0, "state_export: %s", err.message);
    uint64_t n_exp = 0;
    for (int i = 0; i < 8; i++) n_exp |= (uint64_t)buf[i] << (8 * i);
    CHECK_EQ_INT(n_exp, n);
    const size_t nk = hp->gdn_nk, nv = hp->gdn_nv, dk = hp->gdn_dk, dv = hp->gdn_dv, cd = hp->gdn_conv_dim;
    const size_t K1 = hp->ssm_conv_kernel - 1, nkv = hp->n_head_kv, hd = hp->head_dim;
    const float *p = (const float *)(buf + 8);
    json_t *layers = fixture_get(fx->manifest, "committed_state", "layers", NULL);
    for (size_t l = 0; l < L; l++) {
        json_t *jl = json_array_get(layers, l);
        if (tm->model->layers[l].kind == MODEL_LAYER_GDN) {
            float *ring = fixture_f32(fx, json_object_get(jl, "conv_ring"), NULL);
            float *S = fixture_f32(fx, json_object_get(jl, "state"), NULL);
            float *mr = malloc(K1 * cd * sizeof *mr), *ms = malloc(nv * dk * dv * sizeof *ms);
            if (ring && S) {
                for (size_t t = 0; t < K1; t++) {
                    memcpy(mr + t * cd, ring + t * cd, 2 * nk * dk * sizeof *mr); /* q | k: same order */
                    for (size_t h = 0; h < nv; h++)
                        memcpy(mr + t * cd + 2 * nk * dk + tiled_of_grouped(h, nk, nv) * dv,
                               ring + t * cd + 2 * nk * dk + h * dv, dv * sizeof *mr);
                }
                for (size_t h = 0; h < nv; h++)
                    memcpy(ms + tiled_of_grouped(h, nk, nv) * dk * dv, S + h * dk * dv, dk * dv * sizeof *ms);
                double er = rel_err(p, mr, K1 * cd), es = rel_err(p + K1 * cd, ms, nv * dk * dv);
                printf("     layer %zu (GDN): ring rel err %.3g, state rel err %.3g\n", l, er, es);
                CHECK_MSG(er <= BOUND && es <= BOUND, "layer %zu: ring %.3g, state %.3g", l, er, es);
            }
            p += K1 * cd + nv * dk * dv;
            free(ring), free(S), free(mr), free(ms);
        } else {
            float *keys = fixture_f32(fx, json_object_get(jl, "keys"), NULL);
            float *values = fixture_f32(fx, json_object_get(jl, "values"), NULL);
            float *mk = malloc(n * nkv * hd * sizeof *mk), *mv = malloc(n * nkv * hd * sizeof *mv);
            if (keys && values) {
                for (size_t j = 0; j < nkv; j++)
                    for (size_t r = 0; r < n; r++) {
                        memcpy(mk + (r * nkv + j) * hd, keys + (j * n + r) * hd, hd * sizeof *mk);
                        memcpy(mv + (r * nkv + j) * hd, values + (j * n + r) * hd, hd * sizeof *mv);
                    }
                double ek = rel_err(p, mk, n * nkv * hd), ev = rel_err(p + n * nkv * hd, mv, n * nkv * hd);
                printf("     layer %zu (attention): keys rel err %.3g, values rel err %.3g\n", l, ek, ev);
                CHECK_MSG(ek <= BOUND && ev <= BOUND, "layer %zu: keys %.3g, values %.3g", l, ek, ev);
            }
            p += 2 * n * nkv * hd;
            free(keys), free(values), free(mk), free(mv);
        }
    }
    CHECK_EQ_INT((const unsigned char *)p - buf, bytes);
    free(buf);
done:
    seq_free(s);
    free(ids), free(ref_logits), free(ref_hidden), free(logits), free(hidden);
}

static void golden_nll(const fixture *fx, const test_model *tm) {
    const size_t V = tm->model->hp.n_vocab;
    size_t n;
    json_t *jn = json_object_get(fx->manifest, "nll");
    int32_t *ids = fixture_ids(json_object_get(jn, "ids"), &n);
    json_t *ref = json_object_get(jn, "per_token_nll");
    CHECK_EQ_INT(json_array_size(ref), n - 1);
    float *nll = malloc(n * sizeof *nll), *logits = malloc(n * V * sizeof *logits);
    tseq *s = test_session(tm->model, 64, 0);
    if (!s) goto done;
    clover_error err = {0};
    /* rows 0..n-2 score tokens 1..n-1 */
    backend_commit_seq out = {.targets = ids + 1, .nll = nll, .all_logits = logits};
    int rc = seq_commit(s, ids, n - 1, &out, NULL, &err);
    CHECK_MSG(rc == 0, "commit: %s", err.message);
    double worst = 0, mean = 0;
    for (size_t r = 0; r + 1 < n; r++) {
        double want = json_real_value(json_array_get(ref, r));
        /* logits within 1e-4 of their scale move a log-softmax by at most 2e-4 of it */
        double scale = 1;
        for (size_t v = 0; v < V; v++) scale = fmax(scale, fabs(logits[r * V + v]));
        double e = fabs(nll[r] - want) / scale;
        if (e > worst) worst = e;
        mean += nll[r];
    }
    mean /= (double)(n - 1);
    double ref_mean = json_real_value(json_object_get(jn, "mean_nll"));
    printf("     NLL: worst |nll - ref| / logit scale %.3g; mean %.6f vs %.6f\n", worst, mean, ref_mean);
    CHECK_MSG(worst <= 2 * BOUND, "per-token NLL off by %.3g of the logit scale", worst);
    CHECK_NEAR(mean, ref_mean, 1e-4 * fmax(1.0, ref_mean));
done:
    seq_free(s);
    free(ids), free(nll), free(logits);
}

#endif
