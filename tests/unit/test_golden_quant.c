/*
 * test_golden_quant.c: quantised models against independent expected values.
 *
 *  - The tiny Clover fixture converted with --type q8_0 and --type q4_k_m,
 *    against tests/fixtures/tiny_clover_quant (tools/reference/
 *    make_quant_fixtures.py): transformers run on each file's own weights,
 *    dequantised by llama.cpp's gguf package, with clover's 8-bit
 *    activation rounding where clover applies it. The rule (src/quant/
 *    matmul.c; tools/reference/clover_ref/quant.py): with AVX2 on, every
 *    product against Q8_0 / K-quant weights, whatever its row count,
 *    rounds each row in blocks of 32 (Q8_0) or 256 (K-quants),
 *    d = max|x| / 127, codes round-half-even(x * 127 / max|x|); otherwise
 *    activations stay f32. The fixture holds both sets ("act8", "f32"); the
 *    test takes the one this process's dispatch uses (ctest also runs it
 *    with CLOVER_NO_SIMD=1, the other one). Every row is checked at SPEC's
 *    1e-4 of the logit scale, or, for an act8 case, at twice its recorded
 *    act8_spread where that is larger: how far the reference itself moves
 *    when every rounded input moves by one float32 ulp (the size of a
 *    summation-order difference), since an input at a rounding boundary
 *    flips its 8-bit code and these tiny random models magnify that (the
 *    64-wide q8_0 model's causal logits move by 0.16 of their scale: no
 *    correct implementation can be held closer; the 256-wide K-quant
 *    model's previews by 6e-7, its causal pass by 1.2e-3). Rows the
 *    fixture lists as loose (a router top-k gap below its min_router_gap)
 *    are checked finite only.
 *    there are none). The fixture's rows are 64 wide, so every Q4_K / Q6_K
 *    choice of q4_k_m falls back to Q8_0 (convert_policy.c): the fixture
 *    says so (same_tensors_as) and the q4_k_m file is checked against the
 *    same values.
 *  - tests/fixtures/tiny_clover_k: a model 256 wide, converted by clover
 *    --type q4_k_m (committed as model.gguf), so its routed experts and
 *    token_embd really are Q4_K and its output Q6_K (the rest Q8_0 / F32),
 *    against the same kind of expected values made by the same script
 *    (k_fixture): every row at the same bounds, both activation sets. This case
 *    replaced a synthetic 256-wide comparison of clover with its own f32
 *    path at observed bounds.
 */
#include "backend_test.h"
#include "quant/quant.h"

/* SPEC 1.1: relative error below 1e-4 of the logit scale */
#define BOUND 1e-4

static fixture fx, fxq;

/* A case's bound: BOUND, or twice its act8_spread where that is larger (the header says why). */
static double case_bound(const json_t *jcase) {
    const json_t *js = json_object_get(jcase, "act8_spread");
    const double spread = js ? json_number_value(js) : 0.0;
    return 2 * spread > BOUND ? 2 * spread : BOUND;
}

/* max |x - ref| over the rows not listed in `loose`, over max(1, max|ref|)
 * of all rows; a loose row must be finite. */
static double golden_err(const char *what, const float *x, const float *ref, size_t n, size_t V, const json_t *loose) {
    double scale = 1, worst = 0;
    for (size_t i = 0; i < n * V; i++) scale = fmax(scale, fabs(ref[i]));
    for (size_t r = 0; r < n; r++) {
        bool is_loose = false;
        size_t li;
        json_t *jl;
        json_array_foreach(loose, li, jl) is_loose |= (size_t)json_integer_value(jl) == r;
        for (size_t v = 0; v < V; v++) {
            const double d = fabs((double)x[r * V + v] - ref[r * V + v]);
            if (is_loose)
                CHECK_MSG(isfinite(x[r * V + v]), "%s: loose row %zu: logit %zu not finite", what, r, v);
            else if (!(d <= worst))
                worst = d; /* NaN too */
        }
    }
    return worst / scale;
}

static void check_golden(const clover_model *model, const char *type_name, const char *same, const char *rule,
                         json_t *exp);

static void fixture_quantised(const char *type_name, convert_type type) {
    const char *rule = quant_simd_active() ? "act8" : "f32";
    json_t *types = json_object_get(fxq.manifest, "types");
    json_t *jt = json_object_get(types, type_name);
    CHECK_MSG(jt != NULL, "tiny_clover_quant has no %s entry", type_name);
    const char *same = json_string_value(json_object_get(jt, "same_tensors_as"));
    json_t *exp = json_object_get(same ? json_object_get(types, same) : jt, rule);
    CHECK_MSG(exp != NULL, "tiny_clover_quant: %s has no %s set", type_name, rule);
    test_model tm;
    if (!exp || test_model_convert(&tm, &fx, type)) {
        if (exp) test_model_free(&tm);
        return;
    }
    check_golden(tm.model, type_name, same, rule, exp);
    test_model_free(&tm);
}

/* every case of exp (fxq's manifest: causal_ids, previews) against model */
static void check_golden(const clover_model *model, const char *type_name, const char *same, const char *rule,
                         json_t *exp) {
    const size_t V = model->hp.n_vocab;
    size_t n;
    int32_t *ids = fixture_ids(json_object_get(fxq.manifest, "causal_ids"), &n);
    json_t *jc = json_object_get(exp, "causal");
    float *ref = fixture_f32(&fxq, json_object_get(jc, "logits"), NULL);
    float *logits = malloc(n * V * sizeof *logits);
    tseq *s = test_session(model, 64, 0);
    clover_error err = {0};
    backend_commit_seq out = {.all_logits = logits};
    int rc = s && ref ? seq_commit(s, ids, n, &out, NULL, &err) : -1;
    CHECK_MSG(rc == 0, "commit: %s", err.message);
    if (rc == 0) {
        double e = golden_err("causal", logits, ref, n, V, json_object_get(jc, "loose_rows"));
        const double bound = case_bound(jc);
        printf("     %s (%s%s), activations %s: causal %zu rows: rel err %.3g (bound %.3g)\n", type_name,
               same ? "the tensors of " : "", same ? same : "its own tensors", rule, n, e, bound);
        CHECK_MSG(e <= bound, "%s causal logits: rel err %.3g (bound %g)", type_name, e, bound);
    }
    json_t *cases = json_object_get(fxq.manifest, "previews"), *pc;
    size_t ci;
    json_array_foreach(cases, ci, pc) {
        const char *name = json_string_value(json_object_get(pc, "name"));
        json_t *jp = json_object_get(exp, name ? name : "");
        size_t b;
        int32_t *block = fixture_ids(json_object_get(pc, "block_ids"), &b);
        float *pref = jp ? fixture_f32(&fxq, json_object_get(jp, "logits"), NULL) : NULL;
        CHECK_MSG(pref != NULL, "%s: no expected logits for preview %s", type_name, name ? name : "?");
        backend_preview_opts opts = {
            .record_block_size = (uint32_t)json_integer_value(json_object_get(pc, "record_block_size")),
            .coreset = json_is_true(json_object_get(pc, "coreset")),
            .coreset_top_p = model->record.coreset_top_p};
        rc = pref && s && rc == 0 ? seq_preview(s, block, b, &opts, logits, NULL, &err) : -1;
        CHECK_MSG(rc == 0, "preview %s: %s", name ? name : "?", err.message);
        if (rc == 0) {
            double e = golden_err(name, logits, pref, b, V, json_object_get(jp, "loose_rows"));
            const double bound = case_bound(jp);
            printf("     %s, activations %s: %s (%zu rows): rel err %.3g (bound %.3g)\n", type_name, rule, name, b, e,
                   bound);
            CHECK_MSG(e <= bound, "%s %s logits: rel err %.3g (bound %g)", type_name, name, e, bound);
        }
        free(block), free(pref);
    }
    seq_free(s);
    free(ids), free(ref), free(logits);
}

static void fixture_q8_0(void) { fixture_quantised("q8_0", CONVERT_Q8_0); }
static void fixture_q4_k_m(void) { fixture_quantised("q4_k_m", CONVERT_Q4_K_M); }

/* the 256-wide q4_k_m file: its own fixture directory (the same manifest
 * shape as one type of tiny_clover_quant, the rule sets at the top) */
static void fixture_k_quant(void) {
    fixture fk;
    if (fixture_open(&fk, "tiny_clover_k")) {
        CHECK_MSG(false, "tests/fixtures/tiny_clover_k missing");
        return;
    }
    const char *rule = quant_simd_active() ? "act8" : "f32";
    json_t *exp = json_object_get(fk.manifest, rule);
    CHECK_MSG(exp != NULL, "tiny_clover_k has no %s set", rule);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", fk.dir, json_string_value(json_object_get(fk.manifest, "gguf")));
    clover_model *m = NULL;
    clover_error err = {0};
    int rc = exp ? clover_model_load(&m, path, &err) : -1;
    CHECK_MSG(rc == 0, "load %s: %s", path, err.message);
    if (rc == 0) {
        /* what makes this the K-quant case */
        for (uint32_t l = 0; l < m->hp.n_layer; l++) {
            CHECK_EQ_INT(m->layers[l].moe.gate_exps.type, QUANT_Q4_K);
            CHECK_EQ_INT(m->layers[l].moe.up_exps.type, QUANT_Q4_K);
            CHECK_EQ_INT(m->layers[l].moe.down_exps.type, QUANT_Q4_K);
        }
        CHECK_EQ_INT(m->token_embd.type, QUANT_Q4_K);
        CHECK_EQ_INT(m->output.type, QUANT_Q6_K);
        fixture saved = fxq;
        fxq = fk; /* check_golden reads ids and arrays from fxq */
        check_golden(m, "q4_k_m 256-wide", NULL, rule, exp);
        fxq = saved;
    }
    clover_model_free(m);
    fixture_close(&fk);
}

int main(void) {
    if (fixture_open(&fx, "tiny_clover") || fixture_open(&fxq, "tiny_clover_quant")) return TEST_EXIT();
    RUN(fixture_q8_0);
    RUN(fixture_q4_k_m);
    RUN(fixture_k_quant);
    fixture_close(&fx);
    fixture_close(&fxq);
    return TEST_EXIT();
}
