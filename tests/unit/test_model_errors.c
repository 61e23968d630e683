/*
 * test_model_errors.c: load errors, made by editing a valid file. A tiny
 * model is synthesised, then copied through the GGUF reader and writer with
 * one edit (a key dropped or replaced, a tensor dropped, reshaped or
 * retyped); loading the copy must fail with the expected status and a
 * one-line message that names the file and the field or tensor at fault
 * (and, for shapes, the shape expected). A few edits must still load.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clover.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/quant.h"
#include "test.h"

static char dir[64];
static char base_path[128];    /* with the record */
static char base_ar_path[128]; /* without */

typedef struct edit {
    const char *drop_key;
    const char *set_key; /* replaced (or added) with value */
    gguf_value value;
    const char *drop_tensor;
    const char *tensor; /* reshaped and/or retyped */
    uint32_t n_dims;    /* 0: unchanged */
    uint64_t ne[GGUF_MAX_DIMS];
    int type; /* -1: unchanged */
} edit;

static gguf_value v_u32(uint32_t x) {
    gguf_value v = {.type = GGUF_VT_U32};
    v.v.u32 = x;
    return v;
}
static gguf_value v_i32(int32_t x) {
    gguf_value v = {.type = GGUF_VT_I32};
    v.v.i32 = x;
    return v;
}
static gguf_value v_f32(float x) {
    gguf_value v = {.type = GGUF_VT_F32};
    v.v.f32 = x;
    return v;
}
static gguf_value v_str(const char *s) {
    gguf_value v = {.type = GGUF_VT_STRING};
    v.v.str = (gguf_string){(char *)s, strlen(s)};
    return v;
}

/* Copies src to dst with the edit applied. */
static int rewrite(const char *src, const char *dst, const edit *e) {
    clover_error err = {0};
    gguf_file *f = NULL;
    if (gguf_open(&f, src, &err)) {
        fprintf(stderr, "open %s: %s\n", src, err.message);
        return -1;
    }
    gguf_writer *w = gguf_writer_create();
    int rc = 0;
    for (size_t i = 0; i < gguf_kv_count(f) && !rc; i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        if (e->drop_key && !strcmp(kv->key.str, e->drop_key)) continue;
        if (e->set_key && !strcmp(kv->key.str, e->set_key)) continue;
        rc = gguf_writer_set_value(w, kv->key.str, &kv->value, &err);
    }
    if (!rc && e->set_key) rc = gguf_writer_set_value(w, e->set_key, &e->value, &err);
    uint64_t max_bytes = 0;
    for (size_t i = 0; i < gguf_tensor_count(f) && !rc; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (e->drop_tensor && !strcmp(t->name.str, e->drop_tensor)) continue;
        uint32_t nd = t->n_dims, type = t->type;
        const uint64_t *ne = t->ne;
        if (e->tensor && !strcmp(t->name.str, e->tensor)) {
            if (e->n_dims) {
                nd = e->n_dims;
                ne = e->ne;
            }
            if (e->type >= 0) type = (uint32_t)e->type;
        }
        rc = gguf_writer_add_tensor(w, t->name.str, nd, ne, type, &err);
        uint64_t n = quant_row_bytes(type, (size_t)ne[0]) * (nd > 1 ? ne[1] : 1) * (nd > 2 ? ne[2] : 1);
        if (n > max_bytes) max_bytes = n;
    }
    if (!rc) rc = gguf_writer_begin(w, dst, &err);
    unsigned char *zeros = calloc(1, (size_t)max_bytes + 1);
    for (size_t i = 0; i < gguf_tensor_count(f) && !rc; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (e->drop_tensor && !strcmp(t->name.str, e->drop_tensor)) continue;
        if (e->tensor && !strcmp(t->name.str, e->tensor)) {
            uint32_t nd = e->n_dims ? e->n_dims : t->n_dims;
            const uint64_t *ne = e->n_dims ? e->ne : t->ne;
            uint32_t type = e->type >= 0 ? (uint32_t)e->type : t->type;
            uint64_t n = quant_row_bytes(type, (size_t)ne[0]) * (nd > 1 ? ne[1] : 1) * (nd > 2 ? ne[2] : 1);
            rc = gguf_writer_write(w, zeros, (size_t)n, &err);
        } else {
            rc = gguf_writer_write(w, t->data, (size_t)t->nbytes, &err);
        }
    }
    if (!rc) rc = gguf_writer_finish(w, &err);
    if (rc) fprintf(stderr, "rewrite %s: %s\n", dst, err.message);
    free(zeros);
    gguf_writer_free(w);
    gguf_close(f);
    return rc;
}

typedef struct error_case {
    const char *what;
    bool autoregressive_base;
    edit e;
    int code;
    const char *needles[4]; /* all must appear in the message */
} error_case;

#define NO_TYPE .type = -1

static const error_case cases[] = {
    {"missing GDN tensor",
     false,
     {.drop_tensor = "blk.1.ssm_a", NO_TYPE},
     CLOVER_E_FORMAT,
     {"layer 1", "missing tensor blk.1.ssm_a", NULL}},
    {"missing attention tensor",
     false,
     {.drop_tensor = "blk.3.attn_q.weight", NO_TYPE},
     CLOVER_E_FORMAT,
     {"layer 3", "blk.3.attn_q.weight", "missing", NULL}},
    {"missing ssm_dt bias",
     false,
     {.drop_tensor = "blk.0.ssm_dt.bias", NO_TYPE},
     CLOVER_E_FORMAT,
     {"layer 0", "blk.0.ssm_dt.bias", NULL}},
    {"missing expert tensor",
     false,
     {.drop_tensor = "blk.2.ffn_up_exps.weight", NO_TYPE},
     CLOVER_E_FORMAT,
     {"layer 2", "blk.2.ffn_up_exps.weight", NULL}},
    {"missing Clover tensor",
     false,
     {.drop_tensor = "blk.2.bd_history_c", NO_TYPE},
     CLOVER_E_FORMAT,
     {"layer 2", "missing tensor blk.2.bd_history_c", NULL}},
    {"missing embedding",
     false,
     {.drop_tensor = "token_embd.weight", NO_TYPE},
     CLOVER_E_FORMAT,
     {"token_embd.weight", NULL}},
    {"missing final norm",
     false,
     {.drop_tensor = "output_norm.weight", NO_TYPE},
     CLOVER_E_FORMAT,
     {"output_norm.weight", NULL}},
    {"wrong matrix shape",
     false,
     {.tensor = "blk.0.attn_qkv.weight", .n_dims = 2, .ne = {64, 96, 1, 1}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"layer 0", "blk.0.attn_qkv.weight", "{64, 96}", "expected {64, 128}"}},
    {"wrong expert count",
     false,
     {.tensor = "blk.2.ffn_down_exps.weight", .n_dims = 3, .ne = {32, 64, 7, 1}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"blk.2.ffn_down_exps.weight", "{32, 64, 7}", "expected {32, 64, 8}", NULL}},
    {"transposed projection",
     false,
     {.tensor = "blk.3.attn_output.weight", .n_dims = 2, .ne = {64, 128, 1, 1}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"layer 3", "blk.3.attn_output.weight", "expected {128, 64}", NULL}},
    {"wrong Clover shape",
     false,
     {.tensor = "blk.0.ssm_conv1d_right", .n_dims = 2, .ne = {4, 128, 1, 1}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"layer 0", "blk.0.ssm_conv1d_right", "expected {3, 128}", NULL}},
    {"unsupported matrix type",
     false,
     {.tensor = "blk.0.attn_gate.weight", .type = QUANT_Q4_0},
     CLOVER_E_UNSUPPORTED,
     {"blk.0.attn_gate.weight", "q4_0", "not supported", NULL}},
    {"vector not f32",
     false,
     {.tensor = "blk.1.ssm_norm.weight", .type = QUANT_F16},
     CLOVER_E_UNSUPPORTED,
     {"blk.1.ssm_norm.weight", "f16", "expected f32", NULL}},
    {"algorithm foo",
     false,
     {.set_key = "clover.algorithm", .value = {.type = GGUF_VT_STRING}, NO_TYPE},
     CLOVER_E_UNSUPPORTED,
     {"clover.algorithm", "'foo'", "low_confidence", NULL}},
    {"decode rule causal",
     false,
     {.set_key = "clover.decode_rule", .value = {.type = GGUF_VT_STRING}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"clover.decode_rule", "'causal'", "causal_fallback", NULL}},
    {"decode rule as a number",
     false,
     {.set_key = "clover.decode_rule", .value = {.type = GGUF_VT_U32}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"clover.decode_rule", NULL}},
    {"block size 0",
     false,
     {.set_key = "clover.block_size", .value = {.type = GGUF_VT_U32}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"clover.block_size", "0", NULL}},
    {"threshold 1.5",
     false,
     {.set_key = "clover.threshold", .value = {.type = GGUF_VT_F32}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"clover.threshold", "1.5", "0..1", NULL}},
    {"threshold -0.25",
     false,
     {.set_key = "clover.threshold", .value = {.type = GGUF_VT_F32}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"clover.threshold", "-0.25", NULL}},
    {"mask id = vocab",
     false,
     {.set_key = "clover.mask_token_id", .value = {.type = GGUF_VT_U32}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"clover.mask_token_id", "290", "vocabulary size 290", NULL}},
    {"record without block size",
     false,
     {.drop_key = "clover.block_size", NO_TYPE},
     CLOVER_E_FORMAT,
     {"clover.block_size", "missing", NULL}},
    {"coreset top_p 0",
     false,
     {.set_key = "clover.coreset_top_p", .value = {.type = GGUF_VT_F32}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"clover.coreset_top_p", NULL}},
    {"think-end id past vocab",
     false,
     {.set_key = "clover.think_end_token_id", .value = {.type = GGUF_VT_I32}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"clover.think_end_token_id", "5000", NULL}},
    {"threshold as a string",
     false,
     {.set_key = "clover.threshold", .value = {.type = GGUF_VT_STRING}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"clover.threshold", NULL}},
    {"missing state size",
     false,
     {.drop_key = "qwen35moe.ssm.state_size", NO_TYPE},
     CLOVER_E_FORMAT,
     {"missing hyper-parameter qwen35moe.ssm.state_size", NULL}},
    {"missing expert count",
     true,
     {.drop_key = "qwen35moe.expert_count", NO_TYPE},
     CLOVER_E_FORMAT,
     {"qwen35moe.expert_count", NULL}},
    {"missing block count",
     true,
     {.drop_key = "qwen35moe.block_count", NO_TYPE},
     CLOVER_E_FORMAT,
     {"qwen35moe.block_count", NULL}},
    {"missing rms eps",
     false,
     {.drop_key = "qwen35moe.attention.layer_norm_rms_epsilon", NO_TYPE},
     CLOVER_E_FORMAT,
     {"qwen35moe.attention.layer_norm_rms_epsilon", NULL}},
    {"value heads not a multiple of key heads",
     false,
     {.set_key = "qwen35moe.ssm.time_step_rank", .value = {.type = GGUF_VT_U32}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"ssm.time_step_rank", "3", "ssm.group_count", NULL}},
    {"wrong architecture",
     false,
     {.set_key = "general.architecture", .value = {.type = GGUF_VT_STRING}, NO_TYPE},
     CLOVER_E_UNSUPPORTED,
     {"general.architecture", "'llama'", "qwen35moe", NULL}},
    {"eos id past the token list",
     true,
     {.set_key = "tokenizer.ggml.eos_token_id", .value = {.type = GGUF_VT_U32}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"tokenizer.ggml.eos_token_id", "1000", NULL}},
    {"token types of the wrong length",
     true,
     {.set_key = "tokenizer.ggml.token_type", .value = {.type = GGUF_VT_ARRAY}, NO_TYPE},
     CLOVER_E_FORMAT,
     {"tokenizer.ggml.token_type", "3 entries", "290", NULL}},
};

/* Values that cannot sit in a static initialiser. */
static edit case_edit(size_t i) {
    edit e = cases[i].e;
    static const int32_t three_types[3] = {1, 1, 1};
    const char *what = cases[i].what;
    if (!strcmp(what, "algorithm foo")) e.value = v_str("foo");
    if (!strcmp(what, "block size 0")) e.value = v_u32(0);
    if (!strcmp(what, "decode rule causal")) e.value = v_str("causal");
    if (!strcmp(what, "decode rule as a number")) e.value = v_u32(2);
    if (!strcmp(what, "threshold 1.5")) e.value = v_f32(1.5f);
    if (!strcmp(what, "threshold -0.25")) e.value = v_f32(-0.25f);
    if (!strcmp(what, "mask id = vocab")) e.value = v_u32(290);
    if (!strcmp(what, "coreset top_p 0")) e.value = v_f32(0.0f);
    if (!strcmp(what, "think-end id past vocab")) e.value = v_i32(5000);
    if (!strcmp(what, "threshold as a string")) e.value = v_str("high");
    if (!strcmp(what, "value heads not a multiple of key heads")) e.value = v_u32(3);
    if (!strcmp(what, "wrong architecture")) e.value = v_str("llama");
    if (!strcmp(what, "eos id past the token list")) e.value = v_u32(1000);
    if (!strcmp(what, "token types of the wrong length")) {
        e.value.type = GGUF_VT_ARRAY;
        e.value.v.arr.type = GGUF_VT_I32;
        e.value.v.arr.len = 3;
        e.value.v.arr.data = (void *)three_types;
    }
    return e;
}

static void test_error_table(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const error_case *c = &cases[i];
        char path[192];
        snprintf(path, sizeof path, "%s/case%02zu.gguf", dir, i);
        edit e = case_edit(i);
        if (rewrite(c->autoregressive_base ? base_ar_path : base_path, path, &e) != 0) {
            CHECK_MSG(0, "case '%s': could not write the edited file", c->what);
            continue;
        }
        clover_model *m = NULL;
        clover_error err = {0};
        int rc = clover_model_load(&m, path, &err);
        CHECK_MSG(rc == c->code, "case '%s': status %d, expected %d (%s)", c->what, rc, c->code, err.message);
        CHECK_MSG(m == NULL, "case '%s': a model came back with the error", c->what);
        CHECK_MSG(err.code == rc, "case '%s': err.code %d", c->what, err.code);
        CHECK_MSG(strncmp(err.message, path, strlen(path)) == 0, "case '%s': message does not start with the file: %s",
                  c->what, err.message);
        CHECK_MSG(strchr(err.message, '\n') == NULL, "case '%s': message is not one line", c->what);
        for (int k = 0; k < 4 && c->needles[k]; k++)
            CHECK_MSG(strstr(err.message, c->needles[k]) != NULL, "case '%s': '%s' not in: %s", c->what, c->needles[k],
                      err.message);
        printf("  %-42s %s\n", c->what, err.message + (strncmp(err.message, path, strlen(path)) ? 0 : strlen(dir) + 1));
        clover_model_free(m);
        unlink(path);
    }
}

/* Edits that must still load. */
static void test_tolerated_edits(void) {
    char path[192];
    snprintf(path, sizeof path, "%s/ok.gguf", dir);
    clover_model *m = NULL;
    clover_error err = {0};

    /* no clover.algorithm: an autoregressive model, even with the Clover tensors present */
    edit e1 = {.drop_key = "clover.algorithm", NO_TYPE};
    CHECK(rewrite(base_path, path, &e1) == 0);
    CHECK_MSG(clover_model_load(&m, path, &err) == CLOVER_OK, "%s", err.message);
    CHECK(m && !m->has_record && m->layers[0].gdn.conv_right.data == NULL);
    clover_model_free(m);
    m = NULL;

    /* no output.weight: the head is tied to the embedding, as llama.cpp does */
    edit e2 = {.drop_tensor = "output.weight", NO_TYPE};
    CHECK(rewrite(base_path, path, &e2) == 0);
    CHECK_MSG(clover_model_load(&m, path, &err) == CLOVER_OK, "%s", err.message);
    CHECK(m && m->output_tied && m->output.data == m->token_embd.data);
    clover_model_free(m);
    m = NULL;

    /* optional keys: head_count_kv defaults to head_count; a missing optional record field takes its default */
    edit e3 = {.drop_key = "clover.coreset_top_p", NO_TYPE};
    CHECK(rewrite(base_path, path, &e3) == 0);
    CHECK_MSG(clover_model_load(&m, path, &err) == CLOVER_OK, "%s", err.message);
    CHECK(m && m->has_record && m->record.coreset_top_p == 1.0f);
    clover_model_free(m);
    m = NULL;

    /* no full_attention_interval (nor recurrent_layers): every 4th layer is attention, as llama.cpp assumes */
    edit e5 = {.drop_key = "qwen35moe.full_attention_interval", NO_TYPE};
    CHECK(rewrite(base_path, path, &e5) == 0);
    CHECK_MSG(clover_model_load(&m, path, &err) == CLOVER_OK, "%s", err.message);
    CHECK(m && m->hp.full_attention_interval == 4);
    for (uint32_t i = 0; m && i < m->hp.n_layer; i++)
        CHECK_EQ_INT(m->layers[i].kind, (i + 1) % 4 == 0 ? MODEL_LAYER_ATTENTION : MODEL_LAYER_GDN);
    clover_model_free(m);
    m = NULL;

    /* rope sections larger than the rotary dimensions (llama.cpp's converter
     * default 11, 11, 10, 0 in a small model): llama.cpp runs such files */
    static const int32_t sections[4] = {11, 11, 10, 0};
    edit e6 = {.set_key = "qwen35moe.rope.dimension_sections", NO_TYPE};
    e6.value.type = GGUF_VT_ARRAY;
    e6.value.v.arr.type = GGUF_VT_I32;
    e6.value.v.arr.len = 4;
    e6.value.v.arr.data = (void *)sections;
    CHECK(rewrite(base_path, path, &e6) == 0);
    CHECK_MSG(clover_model_load(&m, path, &err) == CLOVER_OK, "%s", err.message);
    CHECK(m && m->hp.n_rot < 11 && m->hp.rope_sections[0] == 11 && m->hp.rope_sections[2] == 10);
    clover_model_free(m);
    m = NULL;

    /* a file that lists its recurrent layers instead of giving the interval (llama.cpp's
     * attention.recurrent_layers): layer 1 made attention must then need attention tensors */
    static const uint8_t recurrent[4] = {1, 0, 1, 0};
    edit e4 = {.set_key = "qwen35moe.attention.recurrent_layers", NO_TYPE};
    e4.value.type = GGUF_VT_ARRAY;
    e4.value.v.arr.type = GGUF_VT_BOOL;
    e4.value.v.arr.len = 4;
    e4.value.v.arr.data = (void *)recurrent;
    CHECK(rewrite(base_path, path, &e4) == 0);
    CHECK_EQ_INT(clover_model_load(&m, path, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "layer 1: missing tensor blk.1.attn_q.weight") != NULL, "%s", err.message);
    clover_model_free(m);
    m = NULL;
    unlink(path);
}

static void test_bad_files(void) {
    clover_model *m = NULL;
    clover_error err = {0};
    CHECK_EQ_INT(clover_model_load(&m, "/nonexistent/model.gguf", &err), CLOVER_E_IO);
    CHECK(strstr(err.message, "/nonexistent/model.gguf") != NULL);
    static const char junk[] = "this is not a gguf file at all, just text";
    CHECK(clover_model_load_memory(&m, junk, sizeof junk, "junk", &err) < 0);
    CHECK(m == NULL && strstr(err.message, "junk") != NULL);
    CHECK_EQ_INT(clover_model_load(NULL, "x", &err), CLOVER_E_INVALID);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/clover-errors-XXXXXX", tmp && strlen(tmp) < 30 ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(base_path, sizeof base_path, "%s/base.gguf", dir);
    snprintf(base_ar_path, sizeof base_ar_path, "%s/base-ar.gguf", dir);
    clover_error err = {0};
    clover_synth_options with = {.seed = 1}, without = {.seed = 1, .no_diffusion = 1};
    if (clover_synth(base_path, &with, &err) || clover_synth(base_ar_path, &without, &err)) {
        fprintf(stderr, "synth: %s\n", err.message);
        return 1;
    }
    RUN(test_error_table);
    RUN(test_tolerated_edits);
    RUN(test_bad_files);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return TEST_EXIT();
}
