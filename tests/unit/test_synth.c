/*
 * test_synth.c: `clover synth`'s tiny preset, written and loaded back.
 * Expected values are the tiny geometry as the task defines it (4 layers:
 * 3 GDN + 1 attention, hidden 64, 4 q / 2 kv heads of 32 with 8 rotary
 * dims, 2 key / 4 value GDN heads of 16, conv 4, 8 experts top-2, widths
 * 32), the record SPEC.md's release uses, Qwen's token ids and GPT-2's
 * byte-to-unicode map, written here by hand, never read from synth's tables.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clover.h"
#include "model/model.h"
#include "quant/quant.h"
#include "test.h"

static char dir[64];

static const char *tmp_path(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

static clover_model *synth_and_load(const char *file, const clover_synth_options *o) {
    char path[256];
    clover_error err = {0};
    tmp_path(file, path, sizeof path);
    int rc = clover_synth(path, o, &err);
    CHECK_MSG(rc == CLOVER_OK, "synth %s: %s", file, err.message);
    if (rc) return NULL;
    clover_model *m = NULL;
    rc = clover_model_load(&m, path, &err);
    CHECK_MSG(rc == CLOVER_OK, "load %s: %s", file, err.message);
    return m;
}

static bool read_file(const char *path, unsigned char **buf, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = malloc(n > 0 ? (size_t)n : 1);
    *len = fread(*buf, 1, (size_t)n, f);
    fclose(f);
    return *len == (size_t)n;
}

/* Every hyper-parameter of the tiny preset. */
static void check_tiny_hparams(const clover_model *m) {
    const model_hparams *hp = &m->hp;
    CHECK_EQ_INT(hp->n_layer, 4);
    CHECK_EQ_INT(hp->n_layer_nextn, 0);
    CHECK_EQ_INT(hp->n_embd, 64);
    CHECK_EQ_INT(hp->n_vocab, 256 + 33 + 1);
    CHECK_EQ_INT(hp->n_head, 4);
    CHECK_EQ_INT(hp->n_head_kv, 2);
    CHECK_EQ_INT(hp->head_dim, 32);
    CHECK_EQ_INT(hp->n_rot, 8);
    CHECK_NEAR(hp->rope_freq_base, 1e7, 1.0);
    CHECK_NEAR(hp->rms_eps, 1e-6, 1e-12);
    CHECK_EQ_INT(hp->full_attention_interval, 4);
    CHECK_EQ_INT(hp->ssm_conv_kernel, 4);
    CHECK_EQ_INT(hp->gdn_nk, 2);
    CHECK_EQ_INT(hp->gdn_nv, 4);
    CHECK_EQ_INT(hp->gdn_dk, 16);
    CHECK_EQ_INT(hp->gdn_dv, 16);
    CHECK_EQ_INT(hp->gdn_conv_dim, 2 * 2 * 16 + 4 * 16);
    CHECK_EQ_INT(hp->n_expert, 8);
    CHECK_EQ_INT(hp->n_expert_used, 2);
    CHECK_EQ_INT(hp->n_ff_exp, 32);
    CHECK_EQ_INT(hp->n_ff_shexp, 32);
    CHECK(m->layer_kinds && !strcmp(m->layer_kinds, "GGGA"));
    CHECK(m->layers[3].kind == MODEL_LAYER_ATTENTION && m->layers[0].kind == MODEL_LAYER_GDN);
}

/* The release record: ids are <|im_end|> = 256+2, <|endoftext|> = 256, </think> = 256+25, <|mask|> = 256+33. */
static void check_tiny_record(const clover_model *m) {
    CHECK(m->has_record);
    const clover_record *r = &m->record;
    CHECK(r->algorithm && !strcmp(r->algorithm, "low_confidence"));
    CHECK_EQ_INT(r->block_size, 32);
    CHECK_NEAR(r->threshold, 0.9, 1e-7);
    CHECK_EQ_INT(r->mask_token_id, 289);
    CHECK_EQ_INT(r->coreset_enabled, 1);
    CHECK_NEAR(r->coreset_top_p, 0.9, 1e-7);
    CHECK_NEAR(r->presence_penalty, 0.0, 0.0);
    CHECK_NEAR(r->frequency_penalty, 0.0, 0.0);
    CHECK_NEAR(r->repetition_penalty, 1.0, 0.0);
    CHECK_NEAR(r->length_penalty, 0.0, 0.0);
    CHECK_EQ_INT(r->length_penalty_start, 0);
    CHECK_EQ_INT(r->length_penalty_window, 1);
    CHECK_NEAR(r->think_end_bias, 0.0, 0.0);
    CHECK_EQ_INT(r->think_end_start, 0);
    CHECK_EQ_INT(r->think_end_window, 1);
    CHECK_EQ_INT(r->think_end_token_id, 281);
    CHECK_EQ_INT(r->n_stop_token_ids, 2);
    if (r->n_stop_token_ids == 2) {
        CHECK_EQ_INT(r->stop_token_ids[0], 258);
        CHECK_EQ_INT(r->stop_token_ids[1], 256);
    }
}

static bool token_is(const model_tokenizer *t, uint32_t id, const char *s) {
    return id < t->n_tokens && t->tokens[id].len == strlen(s) && !memcmp(t->tokens[id].str, s, strlen(s));
}

static void check_tiny_tokenizer(const clover_model *m) {
    const model_tokenizer *t = &m->tok;
    CHECK(t->model && !strcmp(t->model, "gpt2"));
    CHECK(t->pre && !strcmp(t->pre, "qwen35"));
    CHECK_EQ_INT(t->n_tokens, 290);
    CHECK_EQ_INT(t->n_merges, 0);
    CHECK_EQ_INT(t->eos_id, 258);
    CHECK_EQ_INT(t->pad_id, 256);
    CHECK_EQ_INT(t->bos_id, 256);
    CHECK(!t->add_bos);
    /* GPT-2 byte order: '!' is id 0, 'A' (65) id 32, '\n' (byte 10) id 198 as U+010A, ' ' id 220 as U+0120. */
    CHECK(token_is(t, 0, "!"));
    CHECK(token_is(t, 32, "A"));
    CHECK(token_is(t, 198, "\xC4\x8A"));
    CHECK(token_is(t, 220, "\xC4\xA0"));
    CHECK(token_is(t, 188, "\xC4\x80")); /* byte 0 -> U+0100 */
    CHECK(token_is(t, 256, "<|endoftext|>"));
    CHECK(token_is(t, 257, "<|im_start|>"));
    CHECK(token_is(t, 258, "<|im_end|>"));
    CHECK(token_is(t, 280, "<think>"));
    CHECK(token_is(t, 281, "</think>"));
    CHECK(token_is(t, 288, "<|audio_pad|>"));
    CHECK(token_is(t, 289, "<|mask|>"));
    CHECK(t->token_types != NULL);
    if (t->token_types) {
        CHECK_EQ_INT(t->token_types[0], 1);   /* normal */
        CHECK_EQ_INT(t->token_types[256], 3); /* control */
        CHECK_EQ_INT(t->token_types[270], 4); /* <tool_call>: user-defined */
        CHECK_EQ_INT(t->token_types[281], 4); /* </think> */
        CHECK_EQ_INT(t->token_types[289], 3); /* <|mask|> */
    }
}

static void check_values_f32(const clover_model *m) {
    /* Spot checks of the value ranges on an f32 file: decays in (0, 1) means ssm_a < 0;
     * zero-centred norms stored as 1 + w near 1; finite everywhere. */
    const model_gdn_weights *g = &m->layers[0].gdn;
    const float *a = g->a.data;
    for (int h = 0; h < 4; h++)
        CHECK_MSG(a[h] < -0.1f && a[h] > -5.0f, "ssm_a[%d] = %g", h, (double)a[h]);
    const float *norm = m->layers[1].attn_norm.data;
    for (int i = 0; i < 64; i++)
        CHECK_MSG(fabsf(norm[i] - 1.0f) < 0.25f, "attn_norm[%d] = %g", i, (double)norm[i]);
    const float *q = m->layers[3].attn.q.data;
    double ss = 0;
    for (int i = 0; i < 64 * 256; i++) {
        CHECK(isfinite(q[i]));
        ss += (double)q[i] * q[i];
    }
    /* N(0, 1/64): the mean square is 1/64 */
    CHECK_NEAR(ss / (64 * 256), 1.0 / 64, 0.2 / 64);
}

static uint32_t expected_matrix_type(const char *mix) {
    if (!strcmp(mix, "f16")) return QUANT_F16;
    if (!strcmp(mix, "bf16")) return QUANT_BF16;
    if (!strcmp(mix, "q8_0") || !strcmp(mix, "q4_k_m")) return QUANT_Q8_0; /* rows of 64: no Q4_K */
    return QUANT_F32;
}

static void test_tiny_every_type(void) {
    const char *mixes[] = {"f32", "f16", "bf16", "q8_0", "q4_k_m"};
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) {
        for (int diffusion = 0; diffusion < 2; diffusion++) {
            clover_synth_options o = {.preset = "tiny", .type = mixes[i], .seed = 7, .no_diffusion = !diffusion};
            char name[64];
            snprintf(name, sizeof name, "tiny-%s-%d.gguf", mixes[i], diffusion);
            clover_model *m = synth_and_load(name, &o);
            if (!m) continue;
            check_tiny_hparams(m);
            check_tiny_tokenizer(m);
            if (diffusion) {
                check_tiny_record(m);
            } else {
                CHECK(!m->has_record);
            }
            uint32_t mt = expected_matrix_type(mixes[i]);
            bool quantized = mt == QUANT_Q8_0;
            CHECK_MSG(m->token_embd.type == mt, "%s: token_embd %s", mixes[i], quant_type_name(m->token_embd.type));
            CHECK(!m->output_tied && m->output.type == mt);
            CHECK_EQ_INT(m->output_norm.type, QUANT_F32);
            for (uint32_t il = 0; il < 4; il++) {
                const model_layer *l = &m->layers[il];
                CHECK_EQ_INT(l->moe.gate_inp.type, quantized ? QUANT_F32 : mt);
                CHECK_EQ_INT(l->moe.gate_exps.type, mt);
                CHECK_EQ_INT(l->moe.down_exps.type, mt);
                CHECK_EQ_INT(l->moe.down_exps.ne[0], 32);
                CHECK_EQ_INT(l->moe.down_exps.ne[1], 64);
                CHECK_EQ_INT(l->moe.down_exps.ne[2], 8);
                CHECK_EQ_INT(l->moe.gate_inp_shexp.type, QUANT_F32);
                if (l->kind == MODEL_LAYER_GDN) {
                    CHECK_EQ_INT(l->gdn.qkv.type, mt);
                    CHECK_EQ_INT(l->gdn.qkv.ne[1], 128);
                    CHECK_EQ_INT(l->gdn.conv.type, QUANT_F32);
                    CHECK_EQ_INT(l->gdn.a.type, QUANT_F32);
                    CHECK(diffusion ? l->gdn.conv_right.data != NULL : l->gdn.conv_right.data == NULL);
                    CHECK(diffusion ? l->gdn.history_c.data != NULL : l->gdn.history_c.data == NULL);
                    if (diffusion) {
                        CHECK_EQ_INT(l->gdn.conv_right.ne[0], 3);
                        CHECK_EQ_INT(l->gdn.conv_right.ne[1], 128);
                        CHECK_EQ_INT(l->gdn.logit_scale.ne[0], 4);
                    }
                } else {
                    CHECK_EQ_INT(l->attn.q.type, mt);
                    CHECK_EQ_INT(l->attn.q.ne[1], 2 * 32 * 4);
                    CHECK_EQ_INT(l->attn.o.ne[0], 128);
                    CHECK_EQ_INT(l->attn.q_norm.type, QUANT_F32);
                }
            }
            if (mt == QUANT_F32) check_values_f32(m);
            /* the public summary agrees */
            clover_model_info info;
            clover_model_get_info(m, &info);
            CHECK(!strcmp(info.architecture, "qwen35moe"));
            CHECK(!strcmp(info.layer_kinds, "GGGA"));
            CHECK(diffusion ? info.record != NULL : info.record == NULL);
            CHECK_EQ_INT(info.n_tensors, diffusion ? 88 : 88 - 3 * 4);
            size_t counted = 0;
            for (size_t t = 0; t < info.n_types; t++)
                counted += info.types[t].n_tensors;
            CHECK_EQ_INT(counted, info.n_tensors);
            clover_model_free(m);
        }
    }
}

/* Rows of 256 take Q4_K for the routed experts; the other matrices stay Q8_0. */
static void test_q4_k_m_experts(void) {
    clover_synth_options o = {.type = "q4_k_m", .n_embd = 256, .n_ff_exp = 256, .n_layer = 8};
    clover_model *m = synth_and_load("q4km.gguf", &o);
    if (!m) return;
    CHECK_EQ_INT(m->hp.n_embd, 256);
    CHECK_EQ_INT(m->hp.n_ff_exp, 256);
    CHECK_EQ_INT(m->hp.n_ff_shexp, 256);
    CHECK_EQ_INT(m->hp.n_layer, 8);
    CHECK(!strcmp(m->layer_kinds, "GGGAGGGA"));
    for (uint32_t il = 0; il < 8; il++) {
        CHECK_EQ_INT(m->layers[il].moe.gate_exps.type, QUANT_Q4_K);
        CHECK_EQ_INT(m->layers[il].moe.up_exps.type, QUANT_Q4_K);
        CHECK_EQ_INT(m->layers[il].moe.down_exps.type, QUANT_Q4_K);
        CHECK_EQ_INT(m->layers[il].moe.gate_shexp.type, QUANT_Q8_0);
        CHECK_EQ_INT(m->layers[il].moe.gate_inp.type, QUANT_F32);
    }
    CHECK_EQ_INT(m->token_embd.type, QUANT_Q8_0);
    clover_model_free(m);
}

static void test_deterministic(void) {
    char p1[256], p2[256], p3[256];
    clover_error err = {0};
    clover_synth_options o = {.type = "q8_0", .seed = 42};
    CHECK(clover_synth(tmp_path("d1.gguf", p1, sizeof p1), &o, &err) == CLOVER_OK);
    CHECK(clover_synth(tmp_path("d2.gguf", p2, sizeof p2), &o, &err) == CLOVER_OK);
    o.seed = 43;
    CHECK(clover_synth(tmp_path("d3.gguf", p3, sizeof p3), &o, &err) == CLOVER_OK);
    unsigned char *a = NULL, *b = NULL, *c = NULL;
    size_t na = 0, nb = 0, nc = 0;
    CHECK(read_file(p1, &a, &na) && read_file(p2, &b, &nb) && read_file(p3, &c, &nc));
    CHECK(na > 100000 && na == nb && na == nc);
    CHECK_MSG(na == nb && !memcmp(a, b, na), "two synths with the same options differ");
    CHECK_MSG(na == nc && memcmp(a, c, na) != 0, "another seed gave the same bytes");
    /* the embedded-model path: the same bytes load from memory */
    clover_model *m = NULL;
    CHECK(clover_model_load_memory(&m, a, na, "d1 in memory", &err) == CLOVER_OK);
    if (m) {
        check_tiny_hparams(m);
        check_tiny_record(m);
        clover_model_free(m);
    }
    free(a);
    free(b);
    free(c);
}

/* Chunks generated on several threads give the bytes one thread gives (experts of 256 x 256 x 8 span 8 chunks). */
static void test_threads_do_not_change_bytes(void) {
    char p1[256], p3[256];
    clover_error err = {0};
    clover_synth_options o = {.type = "q4_k_m", .n_embd = 256, .n_ff_exp = 256, .seed = 9, .n_threads = 1};
    CHECK(clover_synth(tmp_path("t1.gguf", p1, sizeof p1), &o, &err) == CLOVER_OK);
    o.n_threads = 3;
    CHECK(clover_synth(tmp_path("t3.gguf", p3, sizeof p3), &o, &err) == CLOVER_OK);
    unsigned char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    CHECK(read_file(p1, &a, &na) && read_file(p3, &b, &nb));
    CHECK_MSG(na == nb && !memcmp(a, b, na), "1 and 3 threads wrote different files");
    free(a);
    free(b);
}

static void test_bad_options(void) {
    char p[256];
    clover_error err = {0};
    clover_synth_options o = {.preset = "huge"};
    CHECK_EQ_INT(clover_synth(tmp_path("bad.gguf", p, sizeof p), &o, &err), CLOVER_E_INVALID);
    CHECK(strstr(err.message, "huge") != NULL);
    clover_synth_options t = {.type = "q3_k"};
    CHECK_EQ_INT(clover_synth(p, &t, &err), CLOVER_E_INVALID);
    CHECK(strstr(err.message, "q3_k") != NULL);
    CHECK(access(p, F_OK) != 0);
    CHECK_EQ_INT(clover_synth("/nonexistent-dir/x.gguf", NULL, &err), CLOVER_E_IO);
    CHECK(strstr(err.message, "/nonexistent-dir/x.gguf") != NULL);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/clover-synth-XXXXXX", tmp && strlen(tmp) < 30 ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_tiny_every_type);
    RUN(test_q4_k_m_experts);
    RUN(test_deterministic);
    RUN(test_threads_do_not_change_bytes);
    RUN(test_bad_options);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return TEST_EXIT();
}
