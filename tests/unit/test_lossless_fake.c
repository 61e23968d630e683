/*
 * test_lossless_fake.c: lossless mode's accept / reject / recommit rule
 * (src/engine/generate_lossless.c) over the fake backend, whose causal
 * trunk is a scripted chain (next token = f(last), plus a spread for
 * sampling) and whose previews draft that chain except on scripted rows.
 * So blocks are accepted whole, cut at a wrong draft, end on a stop id
 * inside the accepted prefix, or at a length cut; every path must give
 * --ar's tokens, confidences, finish and committed ids exactly (the fake
 * has no float reassociation). The fake gains the verifying commit's
 * every-row picks and a checkpoint here (its committed length).
 */
#include <math.h>

#include "engine/session.h"
#include "fake_backend.h"
#include "test.h"

#define NV 16
#define STOP (NV - 2)
#define MASK (NV - 1)

static clover_model model;
static uint32_t stop_ids[1];
static int wrong_mod = 3; /* previews draft a wrong token where (pos + r) % wrong_mod == 0 */

static int32_t chain(int32_t last) { return (int32_t)((last * 5 + 3) % 15); } /* 14 = STOP sometimes */

static void next_logits(int32_t last, float *l) {
    for (int i = 0; i < NV; i++) l[i] = 0.25f * (float)((last * 7 + i * 3) % 5);
    l[chain(last)] += 2.5f;
}

static void preview_logits(const int32_t *block, size_t b, size_t pos, int pass, float *l) {
    (void)pass;
    for (size_t r = 0; r < b; r++) {
        float *row = l + r * NV;
        for (int i = 0; i < NV; i++) row[i] = 0.0f;
        if (r == 0 || block[r - 1] == MASK) {
            row[(r * 3) % 13] = 0.5f; /* unsure: waits for the row before it */
            continue;
        }
        int32_t d = chain(block[r - 1]);
        if (wrong_mod && (pos + r) % (size_t)wrong_mod == 0) d = (d + 1) % 14; /* a wrong draft */
        row[d] = 6.0f;
    }
}

/* The verifying commit's picks of every row, and a checkpoint. */
static int lf_commit_one(backend *be, backend_commit_seq *q, backend_pass_stats *st) {
    if (q->n_pick <= 1) return fk_commit_one(be, q, st);
    backend_commit_seq c = *q;
    c.n_pick = 0;
    c.pick = NULL;
    int rc = fk_commit_one(be, &c, st);
    if (rc) {
        q->err = c.err;
        return rc;
    }
    backend_pick pk = *q->pick;
    pk.pen = NULL;
    for (size_t i = 0; i < q->n_pick; i++) {
        size_t row = 0;
        next_logits(q->ids[q->n - q->n_pick + i], be->logits);
        backend_pick_out o = {.id = q->pick_out.id + i, .conf = q->pick_out.conf + i};
        rc = host_pick_rows(&be->pick, &pk, be->logits, &row, 1, q->u ? q->u + i : NULL, NULL, 0, &o, st, &q->err);
        if (rc) return rc;
    }
    return 0;
}

static int lf_commit(backend *be, backend_commit_seq *seqs, size_t n, backend_pass_stats *st) {
    int first = 0;
    for (size_t i = 0; i < n; i++) {
        seqs[i].rc = lf_commit_one(be, &seqs[i], st);
        if (seqs[i].rc && !first) first = seqs[i].rc;
    }
    return first;
}

static backend_ops lossless_ops;

static void setup(uint32_t B, float threshold) {
    memset(&fk, 0, sizeof fk);
    fk.V = NV;
    fk.next = next_logits;
    fk.preview = preview_logits;
    memset(&model, 0, sizeof model);
    model.hp.n_vocab = NV;
    model.has_record = true;
    model.tok.eos_id = model.tok.eot_id = -1;
    stop_ids[0] = STOP;
    model.record.algorithm = "low_confidence";
    model.record.block_size = B;
    model.record.threshold = threshold;
    model.record.mask_token_id = MASK;
    model.record.repetition_penalty = 1.0f;
    model.record.think_end_token_id = -1;
    model.record.stop_token_ids = stop_ids;
    model.record.n_stop_token_ids = 1;
    lossless_ops = fake_ops;
    lossless_ops.commit = lf_commit;
}

static size_t full_blocks, cut_blocks, stops_inside, runs;

static void compare(const char *name, const int32_t *prompt, size_t n, const clover_generate_params *p) {
    clover_session *sa = NULL, *sl = NULL;
    clover_error err = {0};
    CHECK(engine_session_create(&sa, &model, &lossless_ops, NULL, &err) == 0);
    CHECK(engine_session_create(&sl, &model, &lossless_ops, NULL, &err) == 0);
    clover_generate_params ar = *p, ll = *p;
    ar.mode = CLOVER_MODE_AUTOREGRESSIVE;
    ll.lossless = 1;
    clover_generate_result ra, rl;
    int rc = sa && sl ? clover_generate(sa, prompt, n, &ar, &ra, &err) : -1;
    CHECK_MSG(rc == 0, "%s --ar: %s", name, err.message);
    int rc2 = rc ? -1 : clover_generate(sl, prompt, n, &ll, &rl, &err);
    CHECK_MSG(rc || rc2 == 0, "%s lossless: %s", name, err.message);
    if (!rc && !rc2) {
        size_t bad = 0;
        CHECK_MSG(rl.n_generated == ra.n_generated, "%s: %zu tokens, --ar %zu", name, rl.n_generated,
                  ra.n_generated);
        for (size_t i = 0; i < ra.n_generated && i < rl.n_generated; i++)
            bad += rl.ids[i] != ra.ids[i] || rl.confidences[i] != ra.confidences[i];
        CHECK_MSG(bad == 0, "%s: %zu tokens or confidences differ from --ar", name, bad);
        CHECK_MSG(rl.finish == ra.finish, "%s: finish %s, --ar %s", name, clover_finish_name(rl.finish),
                  clover_finish_name(ra.finish));
        size_t la = clover_session_length(sa);
        CHECK_MSG(clover_session_length(sl) == la, "%s: %zu committed, --ar %zu", name, clover_session_length(sl),
                  la);
        if (clover_session_length(sl) == la)
            CHECK_MSG(!memcmp(clover_session_ids(sl), clover_session_ids(sa), la * sizeof(int32_t)),
                      "%s: committed ids differ", name);
        CHECK(sl->bs->n == sl->n_ids && !memcmp(sl->bs->ids, sl->ids, sl->n_ids * sizeof(int32_t)));
        for (size_t b = 0; b < rl.n_blocks; b++) {
            full_blocks += rl.commits_per_block[b] == 1;
            cut_blocks += rl.commits_per_block[b] == 2;
        }
        stops_inside += rl.finish == CLOVER_FINISH_STOP && rl.n_blocks &&
                        rl.accepted_per_block[rl.n_blocks - 1] > 1;
        runs++;
        clover_generate_result_free(&ra);
        clover_generate_result_free(&rl);
    } else if (!rc) {
        clover_generate_result_free(&ra);
    }
    clover_session_free(sa);
    clover_session_free(sl);
}

static void every_path_equals_ar(void) {
    const uint32_t Bs[] = {4, 8, 1};
    const float ths[] = {0.5f, 0.0f, 1.0f};
    const int wrongs[] = {3, 5, 0};
    for (size_t bi = 0; bi < 3; bi++)
        for (size_t ti = 0; ti < 3; ti++)
            for (size_t wi = 0; wi < 3; wi++)
                for (int seed = 0; seed < 6; seed++) {
                    setup(Bs[bi], ths[ti]);
                    wrong_mod = wrongs[wi];
                    int32_t prompt[3] = {(int32_t)(seed % 13), (int32_t)((seed * 5 + 1) % 13), (int32_t)(seed % 7)};
                    clover_generate_params p;
                    clover_generate_params_init(&p);
                    p.max_tokens = 5 + (size_t)seed * 7;
                    p.ignore_eos = seed % 3 == 2;
                    p.temperature = seed % 2 ? 1.0f : 0.0f;
                    p.seed = (uint64_t)seed * 31 + bi;
                    char nm[64];
                    snprintf(nm, sizeof nm, "B %u th %.1f wrong %d seed %d", Bs[bi], (double)ths[ti], wrongs[wi],
                             seed);
                    compare(nm, prompt, 1 + (size_t)seed % 3, &p);
                }
    printf("     %zu runs: %zu blocks accepted whole, %zu cut and recommitted, %zu stops inside an accepted block\n",
           runs, full_blocks, cut_blocks, stops_inside);
    CHECK_MSG(full_blocks > 0 && cut_blocks > 0 && stops_inside > 0, "every path exercised");
}

int main(void) {
    RUN(every_path_equals_ar);
    return TEST_EXIT();
}
