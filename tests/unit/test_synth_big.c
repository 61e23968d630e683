/*
 * test_synth_big.c: the qwen3.5-35b-a3b preset at its full geometry, without
 * writing 19 GB: `synth --sparse` writes the header and tables and extends
 * the file with ftruncate, and the real loader then validates and binds
 * every one of its tensors. Expected values are TRUNK.md's table (section
 * 1.1) and hand-derived sizes, not synth's own constants. Skipped (exit 77,
 * "SKIP: ..."), where the temp directory's file system cannot take the file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "clover.h"
#include "model/model.h"
#include "quant/quant.h"
#include "synth_sparse.h"
#include "test.h"

static char path[128];
static void test_full_geometry(void) {
    clover_synth_options o = {.preset = "qwen3.5-35b-a3b", .sparse = 1, .seed = 3};
    clover_model *m = synth_sparse_load(path, &o);
    if (!m) return;
    const model_hparams *hp = &m->hp;
    CHECK_EQ_INT(hp->n_vocab, 248320);
    CHECK_EQ_INT(hp->n_embd, 2048);
    CHECK_EQ_INT(hp->n_layer, 40);
    CHECK_EQ_INT(hp->n_head, 16);
    CHECK_EQ_INT(hp->n_head_kv, 2);
    CHECK_EQ_INT(hp->head_dim, 256);
    CHECK_EQ_INT(hp->n_rot, 64);
    CHECK_NEAR(hp->rope_freq_base, 1e7, 1.0);
    CHECK_EQ_INT(hp->gdn_nk, 16);
    CHECK_EQ_INT(hp->gdn_nv, 32);
    CHECK_EQ_INT(hp->gdn_dk, 128);
    CHECK_EQ_INT(hp->gdn_dv, 128);
    CHECK_EQ_INT(hp->ssm_conv_kernel, 4);
    CHECK_EQ_INT(hp->gdn_conv_dim, 8192);
    CHECK_EQ_INT(hp->n_expert, 256);
    CHECK_EQ_INT(hp->n_expert_used, 8);
    CHECK_EQ_INT(hp->n_ff_exp, 512);
    CHECK_EQ_INT(hp->n_ff_shexp, 512);
    CHECK_NEAR(hp->rms_eps, 1e-6, 1e-12);
    CHECK_EQ_INT(hp->n_ctx_train, 262144);
    for (uint32_t i = 0; i < 40; i++)
        CHECK_MSG(m->layer_kinds[i] == ((i + 1) % 4 == 0 ? 'A' : 'G'), "layer %u is '%c'", i, m->layer_kinds[i]);

    /* TRUNK.md's ids: <|im_end|> 248046, <|endoftext|> 248044, </think> 248069; the mask after them */
    CHECK(m->has_record);
    CHECK_EQ_INT(m->record.mask_token_id, 248077);
    CHECK_EQ_INT(m->record.think_end_token_id, 248069);
    CHECK_EQ_INT(m->record.n_stop_token_ids, 2);
    CHECK_EQ_INT(m->tok.eos_id, 248046);
    CHECK_EQ_INT(m->tok.pad_id, 248044);
    CHECK_EQ_INT(m->tok.n_tokens, 248320);
    CHECK(m->tok.tokens[248046].len == 10 && !memcmp(m->tok.tokens[248046].str, "<|im_end|>", 10));

    /* q4_k_m: routed experts q4_K, every other matrix q8_0, vectors and the router f32 */
    const model_layer *l39 = &m->layers[39], *l0 = &m->layers[0];
    CHECK_EQ_INT(l39->moe.down_exps.type, QUANT_Q4_K);
    CHECK_EQ_INT(l39->moe.down_exps.ne[0], 512);
    CHECK_EQ_INT(l39->moe.down_exps.ne[1], 2048);
    CHECK_EQ_INT(l39->moe.down_exps.ne[2], 256);
    CHECK_EQ_INT(l39->moe.down_exps.nbytes, 512ull / 256 * 144 * 2048 * 256);
    CHECK_EQ_INT(l39->attn.q.type, QUANT_Q8_0);
    CHECK_EQ_INT(l39->attn.q.ne[1], 8192);
    CHECK_EQ_INT(l39->attn.o.ne[0], 4096);
    CHECK_EQ_INT(l0->gdn.qkv.ne[1], 8192);
    CHECK_EQ_INT(l0->gdn.z.ne[1], 4096);
    CHECK_EQ_INT(l0->gdn.out.ne[0], 4096);
    CHECK_EQ_INT(l0->gdn.conv_right.ne[0], 3);
    CHECK_EQ_INT(l0->gdn.conv_right.ne[1], 8192);
    CHECK_EQ_INT(l0->moe.gate_inp.type, QUANT_F32);
    CHECK_EQ_INT(m->token_embd.type, QUANT_Q8_0);
    CHECK_EQ_INT(m->output.ne[1], 248320);

    clover_model_info info;
    clover_model_get_info(m, &info);
    /* parameters, summed by hand: embedding + head, final norm, 40 x (two norms + MoE), 30 GDN + 10 attention mixers */
    uint64_t E = 2048, V = 248320;
    uint64_t moe = E * 256 + 3 * E * 512 * 256 + E + 3 * E * 512;
    uint64_t gdn = E * 8192 + E * 4096 + 4 * 8192 + 32 + 32 + 2 * E * 32 + 128 + 4096 * E + 3 * 8192 + 3 * 32;
    uint64_t attn = E * 8192 + 2 * E * 512 + 4096 * E + 2 * 256;
    uint64_t params = 2 * V * E + E + 40 * (2 * E + moe) + 30 * gdn + 10 * attn;
    CHECK_EQ_INT(info.n_params, params);
    CHECK_EQ_INT(info.n_tensors, 3 + 40 * 10 + 30 * 13 + 10 * 6);
    for (size_t i = 0; i < info.n_types; i++) {
        if (!strcmp(info.types[i].type, "q4_K")) CHECK_EQ_INT(info.types[i].n_tensors, 3 * 40);
        CHECK_MSG(!strcmp(info.types[i].type, "q4_K") || !strcmp(info.types[i].type, "q8_0") ||
                      !strcmp(info.types[i].type, "f32"),
                  "unexpected type %s", info.types[i].type);
    }
    struct stat st;
    CHECK(stat(path, &st) == 0);
    CHECK_EQ_INT(info.file_bytes, (uint64_t)st.st_size);
    clover_model_free(m);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/clover-big-%ld.gguf", tmp && strlen(tmp) < 64 ? tmp : "/tmp", (long)getpid());
    char dir[128];
    snprintf(dir, sizeof dir, "%s", tmp && strlen(tmp) < 64 ? tmp : "/tmp");
    struct statvfs vfs;
    if (statvfs(dir, &vfs) != 0 || (uint64_t)vfs.f_bavail * vfs.f_frsize < (256u << 20)) {
        TEST_SKIP("%s has less than 256 MB free for the header of the sparse 21 GB file", dir);
    }
    RUN(test_full_geometry);
    unlink(path);
    return TEST_EXIT();
}
