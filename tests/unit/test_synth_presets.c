/*
 * test_synth_presets.c: the multi-GPU siblings' synth presets,
 * qwen3.5-122b-a10b and qwen3.5-397b-a17b, at their full geometry without
 * writing 70 / 228 GB: `synth --sparse` writes the header and tables and the
 * real loader validates and binds every tensor. Expected values: the public
 * configs (docs/MULTI_GPU.md names them), a parameter count summed by hand
 * from those figures (not synth's plan), and the published totals: 122B /
 * 397B within 1 %, and 10B / 17B active within 5 % (the published active
 * figures are rounded to whole billions, 5 % of 10B). Skipped (exit 77)
 * where the temp directory's file system cannot take a sparse file.
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

typedef struct published {
    const char *preset;
    uint64_t L, E, nh, nkv, hd, nk, nv, dk, dv, X, k, I, S, V;
    double total, active; /* the published figures */
} published;

static const published models[] = {
    {"qwen3.5-122b-a10b", 48, 3072, 32, 2, 256, 16, 64, 128, 128, 256, 8, 1024, 1024, 248320, 122e9, 10e9},
    {"qwen3.5-397b-a17b", 60, 4096, 32, 2, 256, 16, 64, 128, 128, 512, 10, 1024, 1024, 248320, 397e9, 17e9},
};

/* every tensor's elements, by hand: embedding + head, final norm, L x (two norms + MoE),
 * 3 of 4 layers GDN (with Clover's conv_right and three per-head vectors), 1 of 4 attention */
static uint64_t by_hand(const published *p, uint64_t *active) {
    const uint64_t E = p->E, C = 2 * p->nk * p->dk + p->nv * p->dv, vd = p->nv * p->dv, K = 4;
    const uint64_t experts = 3 * E * p->I * p->X;
    const uint64_t moe = E * p->X + experts + E + 3 * E * p->S;
    const uint64_t gdn = E * C + E * vd + K * C + 2 * p->nv + 2 * E * p->nv + p->dv + vd * E + (K - 1) * C + 3 * p->nv;
    const uint64_t attn = E * 2 * p->hd * p->nh + 2 * E * p->hd * p->nkv + p->hd * p->nh * E + 2 * p->hd;
    const uint64_t n_attn = p->L / 4, n_gdn = p->L - n_attn;
    const uint64_t total = 2 * p->V * E + E + p->L * (2 * E + moe) + n_gdn * gdn + n_attn * attn;
    *active = total - p->L * experts + p->L * (experts / p->X * p->k);
    return total;
}

static char path[128];

static void check_preset(const published *p) {
    clover_error err = {0};
    clover_synth_options o = {.preset = p->preset, .sparse = 1, .seed = 1};
    clover_synth_params pc;
    CHECK_MSG(clover_synth_count(&o, &pc, &err) == 0, "%s", err.message);
    uint64_t active_hand, total_hand = by_hand(p, &active_hand);
    CHECK_EQ_INT(pc.total, total_hand);
    CHECK_EQ_INT(pc.active, active_hand);
    double rt = (double)pc.total / p->total - 1, ra = (double)pc.active / p->active - 1;
    printf("  %s: %.3f B total (published %.0f B: %+.2f %%), %.3f B active (published %.0f B: %+.2f %%)\n",
           p->preset, pc.total / 1e9, p->total / 1e9, 100 * rt, pc.active / 1e9, p->active / 1e9, 100 * ra);
    CHECK_MSG(rt > -0.01 && rt < 0.01, "%s: total %.3f B is not within 1 %% of %.0f B", p->preset, pc.total / 1e9,
              p->total / 1e9);
    CHECK_MSG(ra > -0.05 && ra < 0.05, "%s: active %.3f B is not within 5 %% of %.0f B", p->preset, pc.active / 1e9,
              p->active / 1e9);

    clover_model *m = synth_sparse_load(path, &o);
    if (m) {
        const model_hparams *hp = &m->hp;
        CHECK_EQ_INT(hp->n_layer, p->L);
        CHECK_EQ_INT(hp->n_embd, p->E);
        CHECK_EQ_INT(hp->n_head, p->nh);
        CHECK_EQ_INT(hp->n_head_kv, p->nkv);
        CHECK_EQ_INT(hp->head_dim, p->hd);
        CHECK_EQ_INT(hp->n_rot, p->hd / 4); /* partial_rotary_factor 0.25 */
        CHECK_EQ_INT(hp->gdn_nk, p->nk);
        CHECK_EQ_INT(hp->gdn_nv, p->nv);
        CHECK_EQ_INT(hp->gdn_dk, p->dk);
        CHECK_EQ_INT(hp->gdn_dv, p->dv);
        CHECK_EQ_INT(hp->n_expert, p->X);
        CHECK_EQ_INT(hp->n_expert_used, p->k);
        CHECK_EQ_INT(hp->n_ff_exp, p->I);
        CHECK_EQ_INT(hp->n_ff_shexp, p->S);
        CHECK_EQ_INT(hp->n_vocab, p->V);
        CHECK_NEAR(hp->rope_freq_base, 1e7, 1.0);
        for (uint32_t i = 0; i < p->L; i++)
            CHECK_MSG(m->layer_kinds[i] == ((i + 1) % 4 == 0 ? 'A' : 'G'), "layer %u is '%c'", i, m->layer_kinds[i]);
        const model_layer *l = &m->layers[p->L - 1];
        CHECK_EQ_INT(l->moe.down_exps.type, QUANT_Q4_K);
        CHECK_EQ_INT(l->moe.down_exps.nbytes, p->I / 256 * 144 * p->E * p->X);
        clover_model_info info;
        clover_model_get_info(m, &info);
        CHECK_EQ_INT(info.n_params, total_hand);
        struct stat st;
        CHECK(stat(path, &st) == 0);
        CHECK_EQ_INT(info.file_bytes, (uint64_t)st.st_size);
        clover_model_free(m);
    }
    unlink(path);
}

static void preset_122b(void) { check_preset(&models[0]); }
static void preset_397b(void) { check_preset(&models[1]); }

int main(void) {
    const char *tmp = getenv("TMPDIR");
    const char *dir = tmp && strlen(tmp) < 64 ? tmp : "/tmp";
    snprintf(path, sizeof path, "%s/clover-presets-%ld.gguf", dir, (long)getpid());
    struct statvfs vfs;
    if (statvfs(dir, &vfs) != 0 || (uint64_t)vfs.f_bavail * vfs.f_frsize < (256u << 20))
        TEST_SKIP("%s has less than 256 MB free for the headers of the sparse files", dir);
    RUN(preset_122b);
    RUN(preset_397b);
    return TEST_EXIT();
}
