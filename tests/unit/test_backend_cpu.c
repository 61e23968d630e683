/*
 * test_backend_cpu.c: the CPU backend's behaviour as backend.h promises it,
 * on the tiny Clover fixture converted to F32 (the golden tests compare the
 * numbers with the reference; these compare the backend with itself where
 * the contract says two ways must agree, and check every refusal):
 *  - a commit split into chunks of max_rows, a commit one row at a time (the
 *    recurrent GDN form, matmul's vector path) and one call of 79 rows (the
 *    chunked GDN form over two chunks of 64) give the same logits and state;
 *  - committing a prefix and then the rest equals a fresh commit;
 *  - a preview changes nothing: the state_export bytes are identical before
 *    and after, also when the preview has to grow the KV cache, and the next
 *    commit gives bit-identical logits to a session that never previewed;
 *  - state_export / state_import round-trip bit-exactly (the imported
 *    session continues exactly as the original), reset returns to a fresh
 *    sequence, and thread counts do not change the results;
 *  - every bad argument or state is refused with a message and leaves the
 *    session as it was.
 */
#include "backend_test.h"

static fixture fx;
static test_model tm;
static int32_t *seq; /* 79 ids: the causal prompt, then the NLL text */
static size_t n_seq;

/* A session of max_rows that commits ids in calls of `step` rows, keeping every row's logits. */
static tseq *commit_in_steps(size_t max_rows, size_t threads, const int32_t *ids, size_t n, size_t step,
                                        float *logits) {
    const size_t V = tm.model->hp.n_vocab;
    tseq *s = test_session(tm.model, max_rows, threads);
    if (!s) return NULL;
    clover_error err = {0};
    for (size_t r = 0; r < n; r += step) {
        size_t k = n - r < step ? n - r : step;
        backend_commit_seq out = {.all_logits = logits + r * V};
        int rc = seq_commit(s, ids + r, k, &out, NULL, &err);
        CHECK_MSG(rc == 0, "commit rows %zu..%zu: %s", r, r + k, err.message);
    }
    CHECK_EQ_INT(seq_length(s), n);
    return s;
}

/* The state_export bytes of a session (malloc'd). */
static unsigned char *export_state(tseq *s, size_t *bytes) {
    *bytes = seq_state_bytes(s);
    unsigned char *buf = malloc(*bytes);
    clover_error err = {0};
    int rc = seq_state_export(s, buf, *bytes, &err);
    CHECK_MSG(rc == 0, "state_export: %s", err.message);
    return buf;
}

/* rel_err over the float part of two exports of the same length */
static double state_err(const unsigned char *a, const unsigned char *b, size_t bytes) {
    CHECK(memcmp(a, b, 8) == 0);
    return rel_err((const float *)(a + 8), (const float *)(b + 8), (bytes - 8) / 4);
}

static void chunked_recurrent_and_one_call(void) {
    const size_t V = tm.model->hp.n_vocab, n = n_seq;
    float *one = malloc(n * V * 4), *chunks = malloc(n * V * 4), *rows = malloc(n * V * 4);
    tseq *a = commit_in_steps(128, 0, seq, n, n, one);     /* chunked form, 64 + 15 */
    tseq *b = commit_in_steps(16, 0, seq, n, n, chunks);   /* backend chunks of 16 */
    tseq *c = commit_in_steps(64, 0, seq, n, 1, rows);     /* recurrent form, vector matmul */
    if (a && b && c) {
        size_t sa, sb, sc;
        unsigned char *ea = export_state(a, &sa), *eb = export_state(b, &sb), *ec = export_state(c, &sc);
        CHECK(sa == sb && sa == sc);
        double l_ab = rel_err(chunks, one, n * V), l_ac = rel_err(rows, one, n * V);
        double s_ab = state_err(eb, ea, sa), s_ac = state_err(ec, ea, sa);
        printf("     79 rows: chunks of 16 vs one call: logits %.3g, state %.3g; one row at a time: logits %.3g, "
               "state %.3g\n", l_ab, s_ab, l_ac, s_ac);
        /* float32 reorderings of the same sums (chunked vs recurrent GDN, tiled vs vector matmul) */
        CHECK(l_ab <= 5e-5 && s_ab <= 5e-5 && l_ac <= 5e-5 && s_ac <= 5e-5);
        free(ea), free(eb), free(ec);
    }
    seq_free(a), seq_free(b), seq_free(c);
    free(one), free(chunks), free(rows);
}

static void prefix_then_rest_equals_fresh(void) {
    const size_t V = tm.model->hp.n_vocab, n = n_seq, k = 40;
    float *fresh = malloc(n * V * 4), *parts = malloc(n * V * 4);
    tseq *a = commit_in_steps(64, 0, seq, n, n, fresh);
    tseq *b = test_session(tm.model, 64, 0);
    clover_error err = {0};
    backend_commit_seq o1 = {.all_logits = parts}, o2 = {.all_logits = parts + k * V};
    CHECK(seq_commit(b, seq, k, &o1, NULL, &err) == 0);
    CHECK(seq_commit(b, seq + k, n - k, &o2, NULL, &err) == 0);
    size_t sa, sb;
    unsigned char *ea = export_state(a, &sa), *eb = export_state(b, &sb);
    CHECK(sa == sb);
    double el = rel_err(parts, fresh, n * V), es = sa == sb ? state_err(eb, ea, sa) : 1;
    printf("     prefix of %zu then %zu rows vs one commit: logits %.3g, state %.3g\n", k, n - k, el, es);
    CHECK(el <= 5e-5 && es <= 5e-5);
    free(ea), free(eb);
    seq_free(a), seq_free(b);
    free(fresh), free(parts);
}

static void preview_changes_nothing(void) {
    const size_t V = tm.model->hp.n_vocab;
    /* 250 committed rows: a block of 8 needs 258 KV rows, past the first 256 the cache holds */
    size_t n = 250;
    int32_t *ids = malloc(n * sizeof *ids);
    for (size_t i = 0; i < n; i++) ids[i] = seq[i % n_seq];
    float *l1 = malloc(5 * V * 4), *l2 = malloc(5 * V * 4), *pl = malloc(8 * V * 4);
    tseq *p = test_session(tm.model, 64, 0), *q = test_session(tm.model, 64, 0);
    clover_error err = {0};
    CHECK(seq_commit(p, ids, n, NULL, NULL, &err) == 0);
    CHECK(seq_commit(q, ids, n, NULL, NULL, &err) == 0);
    size_t bytes, after_bytes;
    unsigned char *before = export_state(p, &bytes);
    const int32_t block[8] = {433, 393, 433, 433, 393, 393, 433, 433};
    for (int coreset = 0; coreset < 2; coreset++) {
        backend_preview_opts opts = {.record_block_size = 8, .coreset = coreset, .coreset_top_p = 0.8f};
        int rc = seq_preview(p, block, 8, &opts, pl, NULL, &err);
        CHECK_MSG(rc == 0, "preview: %s", err.message);
        unsigned char *after = export_state(p, &after_bytes);
        CHECK(after_bytes == bytes && test_hash(after, bytes) == test_hash(before, bytes) &&
              memcmp(after, before, bytes) == 0);
        free(after);
    }
    CHECK_EQ_INT(seq_length(p), n);
    /* the next commit is exactly what it would have been */
    backend_commit_seq o1 = {.all_logits = l1}, o2 = {.all_logits = l2};
    CHECK(seq_commit(p, seq, 5, &o1, NULL, &err) == 0);
    CHECK(seq_commit(q, seq, 5, &o2, NULL, &err) == 0);
    CHECK(memcmp(l1, l2, 5 * V * 4) == 0);
    size_t sp, sq;
    unsigned char *ep = export_state(p, &sp), *eq = export_state(q, &sq);
    CHECK(sp == sq && memcmp(ep, eq, sp) == 0);
    free(ep), free(eq), free(before);
    seq_free(p), seq_free(q);
    free(ids), free(l1), free(l2), free(pl);
}

static void state_roundtrip_and_reset(void) {
    const size_t V = tm.model->hp.n_vocab, n = n_seq;
    float *la = malloc(n * V * 4), *lb = malloc(V * 4), *lc = malloc(V * 4);
    float *pa = malloc(8 * V * 4), *pb = malloc(8 * V * 4);
    tseq *a = commit_in_steps(64, 0, seq, 60, 60, la);
    size_t bytes;
    unsigned char *st = export_state(a, &bytes);
    tseq *b = test_session(tm.model, 8, 1); /* another shape of session: the layout is the same */
    clover_error err = {0};
    int rc = seq_state_import(b, st, bytes, &err);
    CHECK_MSG(rc == 0, "state_import: %s", err.message);
    CHECK_EQ_INT(seq_length(b), 60);
    size_t bytes_b;
    unsigned char *st_b = export_state(b, &bytes_b);
    CHECK(bytes_b == bytes && memcmp(st, st_b, bytes) == 0);
    /* both continue identically: a preview, then a decode step */
    const int32_t block[8] = {433, 393, 433, 433, 393, 393, 433, 433};
    backend_preview_opts opts = {.record_block_size = 8, .coreset = true, .coreset_top_p = 0.8f};
    CHECK(seq_preview(a, block, 8, &opts, pa, NULL, &err) == 0);
    CHECK(seq_preview(b, block, 8, &opts, pb, NULL, &err) == 0);
    CHECK(memcmp(pa, pb, 8 * V * 4) == 0);
    backend_commit_seq oa = {.last_logits = lb}, ob = {.last_logits = lc};
    CHECK(seq_commit(a, seq + 60, 1, &oa, NULL, &err) == 0);
    CHECK(seq_commit(b, seq + 60, 1, &ob, NULL, &err) == 0);
    CHECK(memcmp(lb, lc, V * 4) == 0);

    /* reset: a fresh sequence (zero rings and states), same results as a new session */
    seq_reset(b);
    CHECK_EQ_INT(seq_length(b), 0);
    size_t n_attn = 0;
    for (size_t l = 0; l < tm.model->hp.n_layer; l++) n_attn += tm.model->layers[l].kind == MODEL_LAYER_ATTENTION;
    CHECK_EQ_INT(seq_state_bytes(b), bytes - n_attn * 60 * 2 * tm.model->hp.n_head_kv *
                                                         tm.model->hp.head_dim * 4);
    CHECK(seq_preview_debug(b, NULL, NULL, &err) == CLOVER_E_INVALID);
    float *lr = malloc(n * V * 4);
    backend_commit_seq orr = {.all_logits = lr};
    CHECK(seq_commit(b, seq, 60, &orr, NULL, &err) == 0);
    tseq *c = commit_in_steps(8, 1, seq, 60, 60, la);
    CHECK(memcmp(lr, la, 60 * V * 4) == 0);
    free(st), free(st_b), free(lr);
    seq_free(a), seq_free(b), seq_free(c);
    free(la), free(lb), free(lc), free(pa), free(pb);
}

static void threads_do_not_change_results(void) {
    const size_t V = tm.model->hp.n_vocab, n = n_seq;
    float *l1 = malloc(n * V * 4), *l2 = malloc(n * V * 4), *p1 = malloc(8 * V * 4), *p2 = malloc(8 * V * 4);
    tseq *a = commit_in_steps(32, 1, seq, n, n, l1), *b = commit_in_steps(32, 3, seq, n, n, l2);
    const int32_t block[5] = {433, 433, 12, 433, 433};
    backend_preview_opts opts = {.record_block_size = 8, .coreset = true, .coreset_top_p = 0.8f};
    clover_error err = {0};
    CHECK(seq_preview(a, block, 5, &opts, p1, NULL, &err) == 0);
    CHECK(seq_preview(b, block, 5, &opts, p2, NULL, &err) == 0);
    double el = rel_err(l2, l1, n * V), ep = rel_err(p2, p1, 5 * V);
    printf("     1 vs 3 threads: commit logits %.3g, preview logits %.3g\n", el, ep);
    CHECK(el == 0 && ep == 0);
    seq_free(a), seq_free(b);
    free(l1), free(l2), free(p1), free(p2);
}

static void kv_growth_over_long_commits(void) {
    const size_t V = tm.model->hp.n_vocab, n = 600;
    int32_t *ids = malloc(n * sizeof *ids);
    for (size_t i = 0; i < n; i++) ids[i] = seq[(i * 7) % n_seq];
    float *la = malloc(V * 4), *lb = malloc(V * 4);
    clover_error err = {0};
    /* a: the default context, the cache doubles 256 -> 512 -> 1024; b: max_context 600, capped growth */
    tseq *a = test_session(tm.model, 64, 0);
    backend_config cfg = {.max_rows = 50, .max_context = 600};
    tseq *b = NULL;
    CHECK(seq_create(&backend_cpu, tm.model, &cfg, &b, &err) == 0);
    backend_commit_seq oa = {.last_logits = la}, ob = {.last_logits = lb};
    CHECK(seq_commit(a, ids, n, &oa, NULL, &err) == 0);
    for (size_t r = 0; r < n; r += 150) CHECK(seq_commit(b, ids + r, 150, &ob, NULL, &err) == 0);
    double e = rel_err(lb, la, V);
    printf("     600 rows (KV cache grown): last logits, chunks of 64 vs 50: %.3g\n", e);
    CHECK(e <= 5e-5);
    /* b is full now: one more row is refused and nothing changes */
    int32_t one = 5;
    CHECK_EQ_INT(seq_commit(b, &one, 1, &ob, NULL, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "context") != NULL, "%s", err.message);
    CHECK_EQ_INT(seq_length(b), n);
    seq_free(a), seq_free(b);
    free(ids), free(la), free(lb);
}

static void refusals_leave_the_session_unchanged(void) {
    const size_t V = tm.model->hp.n_vocab;
    backend_config cfg = {.max_rows = 8, .max_context = 40};
    tseq *s = NULL;
    clover_error err = {0};
    CHECK(seq_create(&backend_cpu, tm.model, &cfg, &s, &err) == 0);
    if (!s) return;
    CHECK(seq_commit(s, seq, 31, NULL, NULL, &err) == 0);
    size_t bytes, after_bytes;
    unsigned char *before = export_state(s, &bytes);
    float *lg = malloc(10 * V * 4), nll[10];
    int32_t bad[3] = {1, (int32_t)V, 2}, neg[2] = {-1, 3};

    CHECK_EQ_INT(seq_commit(s, bad, 3, NULL, NULL, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "row 1") != NULL, "%s", err.message);
    CHECK_EQ_INT(seq_commit(s, neg, 2, NULL, NULL, &err), CLOVER_E_INVALID);
    backend_commit_seq half = {.nll = nll};
    CHECK_EQ_INT(seq_commit(s, seq, 2, &half, NULL, &err), CLOVER_E_INVALID);
    backend_commit_seq badt = {.nll = nll, .targets = bad};
    CHECK_EQ_INT(seq_commit(s, seq, 3, &badt, NULL, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(seq_commit(s, seq, 10, NULL, NULL, &err), CLOVER_E_INVALID); /* 41 > 40 */
    CHECK_EQ_INT(seq_commit(s, NULL, 2, NULL, NULL, &err), CLOVER_E_INVALID);
    backend_commit_seq last = {.last_logits = lg};
    CHECK_EQ_INT(seq_commit(s, seq, 0, &last, NULL, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(seq_commit(s, seq, 0, NULL, NULL, &err), CLOVER_OK);

    backend_preview_opts opts = {.record_block_size = 8, .coreset = true, .coreset_top_p = 0.8f};
    CHECK_EQ_INT(seq_preview(s, seq, 0, &opts, lg, NULL, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(seq_preview(s, seq, 9, &opts, lg, NULL, &err), CLOVER_E_INVALID); /* > max_rows */
    CHECK_MSG(strstr(err.message, "max_rows") != NULL, "%s", err.message);
    CHECK_EQ_INT(seq_preview(s, bad, 3, &opts, lg, NULL, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(seq_preview(s, seq, 4, NULL, lg, NULL, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(seq_preview(s, seq, 4, &opts, NULL, NULL, &err), CLOVER_E_INVALID);
    backend_preview_opts zero_b = opts, nan_p = opts;
    zero_b.record_block_size = 0;
    nan_p.coreset_top_p = NAN;
    CHECK_EQ_INT(seq_preview(s, seq, 4, &zero_b, lg, NULL, &err), CLOVER_E_INVALID);
    CHECK_EQ_INT(seq_preview(s, seq, 4, &nan_p, lg, NULL, &err), CLOVER_E_INVALID);
    CHECK_MSG(strstr(err.message, "coreset_top_p") != NULL, "%s", err.message);
    /* 31 committed + 8 rows fit the context of 40 */
    CHECK_EQ_INT(seq_preview(s, seq, 8, &opts, lg, NULL, &err), CLOVER_OK);

    /* state_export into a short buffer; imports of the wrong length or an impossible length */
    unsigned char *buf = malloc(bytes + 16);
    CHECK_EQ_INT(seq_state_export(s, buf, bytes - 1, &err), CLOVER_E_INVALID);
    CHECK(seq_state_export(s, buf, bytes, &err) == 0);
    CHECK_EQ_INT(seq_state_import(s, buf, bytes - 4, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "committed length 31") != NULL, "%s", err.message);
    CHECK_EQ_INT(seq_state_import(s, buf, bytes + 4, &err), CLOVER_E_FORMAT);
    CHECK_EQ_INT(seq_state_import(s, buf, 7, &err), CLOVER_E_FORMAT);
    buf[0] = 41; /* a committed length past the context of 40 */
    CHECK_EQ_INT(seq_state_import(s, buf, bytes, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "41") != NULL, "%s", err.message);
    buf[0] = 30; /* a valid length that does not match the bytes */
    CHECK_EQ_INT(seq_state_import(s, buf, bytes, &err), CLOVER_E_FORMAT);
    buf[0] = 31;
    buf[7] = 0x80; /* 2^63 + 31 */
    CHECK_EQ_INT(seq_state_import(s, buf, bytes, &err), CLOVER_E_FORMAT);

    CHECK_EQ_INT(seq_length(s), 31);
    unsigned char *after = export_state(s, &after_bytes);
    CHECK(after_bytes == bytes && memcmp(before, after, bytes) == 0);
    /* session_create refusals */
    tseq *t = NULL;
    backend_config huge = {.max_rows = (size_t)1 << 40};
    CHECK_EQ_INT(seq_create(&backend_cpu, tm.model, &huge, &t, &err), CLOVER_E_INVALID);
    CHECK(t == NULL);
    CHECK_EQ_INT(seq_create(&backend_cpu, NULL, NULL, &t, &err), CLOVER_E_INVALID);
    free(before), free(after), free(buf), free(lg);
    seq_free(s);
}

int main(void) {
    if (fixture_open(&fx, "tiny_clover")) return TEST_EXIT();
    size_t a, b;
    int32_t *p1 = fixture_ids(fixture_get(fx.manifest, "causal", "ids", NULL), &a);
    int32_t *p2 = fixture_ids(fixture_get(fx.manifest, "nll", "ids", NULL), &b);
    n_seq = a + b;
    seq = malloc(n_seq * sizeof *seq);
    memcpy(seq, p1, a * sizeof *seq);
    memcpy(seq + a, p2, b * sizeof *seq);
    free(p1), free(p2);
    if (test_model_convert(&tm, &fx, CONVERT_F32) == 0) {
        RUN(chunked_recurrent_and_one_call);
        RUN(prefix_then_rest_equals_fresh);
        RUN(preview_changes_nothing);
        RUN(state_roundtrip_and_reset);
        RUN(threads_do_not_change_results);
        RUN(kv_growth_over_long_commits);
        RUN(refusals_leave_the_session_unchanged);
    }
    test_model_free(&tm);
    fixture_close(&fx);
    free(seq);
    return TEST_EXIT();
}
