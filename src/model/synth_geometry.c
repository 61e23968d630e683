/*
 * synth_geometry.c: the presets of `clover synth` and the type policy.
 * `tiny` is the embedded default model: every structural feature of the
 * real one (GDN and attention layers, more value than key heads, partial
 * rotary, GQA, top-k > 1 routing, a shared expert) at a size that keeps the
 * binary small and the tests fast. `qwen3.5-35b-a3b` is TRUNK.md's geometry;
 * its Q4_K tensors (the routed experts) are drawn as Q4_K blocks directly
 * (synth_values_fill_q4_k), so the 19 GB file takes minutes, not hours, and
 * its experts are not the Q4_K rounding of the f32 file of the same seed.
 * `qwen3.5-122b-a10b` and `qwen3.5-397b-a17b` are the larger siblings (the
 * multi-GPU geometries, docs/MULTI_GPU.md, which names the public configs
 * they come from); at q4_k_m they are ~70 GB and ~220 GB, so tests write
 * them with --sparse.
 */
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "model/synth.h"
#include "quant/quant.h"

static const synth_geometry preset_tiny = {
    .name = "clover-tiny",
    .n_layer = 4,
    .full_attention_interval = 4,
    .n_embd = 64,
    .n_ctx = 4096,
    .n_head = 4,
    .n_head_kv = 2,
    .head_dim = 32,
    .n_rot = 8,
    .rope_freq_base = 1e7f,
    .rms_eps = 1e-6f,
    .gdn_nk = 2,
    .gdn_nv = 4,
    .gdn_dk = 16,
    .gdn_dv = 16,
    .conv_kernel = 4,
    .n_expert = 8,
    .n_expert_used = 2,
    .n_ff_exp = 32,
    .n_ff_shexp = 32,
    .n_vocab = 256 + SYNTH_N_SPECIAL,
    .special_base = 256,
    .mix = SYNTH_MIX_F32,
};

static const synth_geometry preset_35b = {
    .name = "clover-qwen3.5-35b-a3b-synthetic",
    .n_layer = 40,
    .full_attention_interval = 4,
    .n_embd = 2048,
    .n_ctx = 262144,
    .n_head = 16,
    .n_head_kv = 2,
    .head_dim = 256,
    .n_rot = 64,
    .rope_freq_base = 1e7f,
    .rms_eps = 1e-6f,
    .gdn_nk = 16,
    .gdn_nv = 32,
    .gdn_dk = 128,
    .gdn_dv = 128,
    .conv_kernel = 4,
    .n_expert = 256,
    .n_expert_used = 8,
    .n_ff_exp = 512,
    .n_ff_shexp = 512,
    .n_vocab = 248320,
    .special_base = 248044,
    .mix = SYNTH_MIX_Q4_K_M,
    .direct_q4_k = true,
};

/* Qwen3.5-122B-A10B's text config: 48 layers, hidden 3072, 32 / 2 heads of
 * 256, GDN 16 key / 64 value heads of 128, 256 experts (8 used) of 1024 and
 * a shared expert of 1024. */
static const synth_geometry preset_122b = {
    .name = "clover-qwen3.5-122b-a10b-synthetic",
    .n_layer = 48,
    .full_attention_interval = 4,
    .n_embd = 3072,
    .n_ctx = 262144,
    .n_head = 32,
    .n_head_kv = 2,
    .head_dim = 256,
    .n_rot = 64,
    .rope_freq_base = 1e7f,
    .rms_eps = 1e-6f,
    .gdn_nk = 16,
    .gdn_nv = 64,
    .gdn_dk = 128,
    .gdn_dv = 128,
    .conv_kernel = 4,
    .n_expert = 256,
    .n_expert_used = 8,
    .n_ff_exp = 1024,
    .n_ff_shexp = 1024,
    .n_vocab = 248320,
    .special_base = 248044,
    .mix = SYNTH_MIX_Q4_K_M,
    .direct_q4_k = true,
};

/* Qwen3.5-397B-A17B's: 60 layers, hidden 4096, 32 / 2 heads of 256, GDN 16 /
 * 64 heads of 128, 512 experts (10 used) of 1024, shared expert 1024. */
static const synth_geometry preset_397b = {
    .name = "clover-qwen3.5-397b-a17b-synthetic",
    .n_layer = 60,
    .full_attention_interval = 4,
    .n_embd = 4096,
    .n_ctx = 262144,
    .n_head = 32,
    .n_head_kv = 2,
    .head_dim = 256,
    .n_rot = 64,
    .rope_freq_base = 1e7f,
    .rms_eps = 1e-6f,
    .gdn_nk = 16,
    .gdn_nv = 64,
    .gdn_dk = 128,
    .gdn_dv = 128,
    .conv_kernel = 4,
    .n_expert = 512,
    .n_expert_used = 10,
    .n_ff_exp = 1024,
    .n_ff_shexp = 1024,
    .n_vocab = 248320,
    .special_base = 248044,
    .mix = SYNTH_MIX_Q4_K_M,
    .direct_q4_k = true,
};

static const struct {
    const char *name;
    synth_mix mix;
} mix_names[] = {
    {"f32", SYNTH_MIX_F32},   {"f16", SYNTH_MIX_F16},       {"bf16", SYNTH_MIX_BF16},
    {"q8_0", SYNTH_MIX_Q8_0}, {"q4_k_m", SYNTH_MIX_Q4_K_M},
};

const char *synth_mix_name(synth_mix mix) {
    for (size_t i = 0; i < sizeof mix_names / sizeof mix_names[0]; i++)
        if (mix_names[i].mix == mix) return mix_names[i].name;
    return "?";
}

static int override(uint32_t *field, uint32_t value, uint32_t lo, uint32_t hi, const char *what, clover_error *err) {
    if (value == 0) return CLOVER_OK;
    if (value < lo || value > hi)
        return error_set(err, CLOVER_E_INVALID, "synth: %s = %u is out of range (expected %u..%u)", what, value, lo,
                         hi);
    *field = value;
    return CLOVER_OK;
}

int synth_geometry_make(const clover_synth_options *opts, synth_geometry *g, clover_error *err) {
    const char *preset = opts && opts->preset ? opts->preset : "tiny";
    if (!strcmp(preset, "tiny"))
        *g = preset_tiny;
    else if (!strcmp(preset, "qwen3.5-35b-a3b"))
        *g = preset_35b;
    else if (!strcmp(preset, "qwen3.5-122b-a10b"))
        *g = preset_122b;
    else if (!strcmp(preset, "qwen3.5-397b-a17b"))
        *g = preset_397b;
    else
        return error_set(err, CLOVER_E_INVALID,
                         "synth: unknown preset '%.64s' (expected tiny, qwen3.5-35b-a3b, qwen3.5-122b-a10b or "
                         "qwen3.5-397b-a17b)",
                         preset);
    if (!opts) return CLOVER_OK;
    if (opts->type) {
        size_t i = 0, n = sizeof mix_names / sizeof mix_names[0];
        while (i < n && strcasecmp(mix_names[i].name, opts->type) != 0)
            i++;
        if (i == n)
            return error_set(err, CLOVER_E_INVALID,
                             "synth: unknown type '%.64s' (expected f32, f16, bf16, q8_0 or q4_k_m)", opts->type);
        g->mix = mix_names[i].mix;
    }
    int rc;
    if ((rc = override(&g->n_layer, opts->n_layer, 1, 4096, "layers", err))) return rc;
    if ((rc = override(&g->n_embd, opts->n_embd, 1, 65536, "hidden size", err))) return rc;
    if ((rc = override(&g->n_expert, opts->n_expert, 1, 4096, "experts", err))) return rc;
    if ((rc = override(&g->n_ff_exp, opts->n_ff_exp, 1, 65536, "expert width", err))) return rc;
    if (opts->n_ff_exp) g->n_ff_shexp = opts->n_ff_exp;
    if (!(opts->route_skew >= 0.0f && opts->route_skew <= 64.0f))
        return error_set(err, CLOVER_E_INVALID, "synth: route skew %g, expected 0..64", (double)opts->route_skew);
    g->route_skew = opts->route_skew;
    if (g->n_expert_used > g->n_expert) g->n_expert_used = g->n_expert;
    return CLOVER_OK;
}

static uint32_t mix_type(synth_mix mix) {
    switch (mix) {
    case SYNTH_MIX_F16: return QUANT_F16;
    case SYNTH_MIX_BF16: return QUANT_BF16;
    case SYNTH_MIX_Q8_0: return QUANT_Q8_0;
    case SYNTH_MIX_Q4_K_M: return QUANT_Q8_0;
    case SYNTH_MIX_F32: break;
    }
    return QUANT_F32;
}

uint32_t synth_pick_type(synth_mix mix, synth_role role, uint64_t row_len) {
    bool quantized = mix == SYNTH_MIX_Q8_0 || mix == SYNTH_MIX_Q4_K_M;
    uint32_t t;
    switch (role) {
    case SYNTH_ROLE_VECTOR: return QUANT_F32;
    case SYNTH_ROLE_ROUTER: t = quantized ? QUANT_F32 : mix_type(mix); break;
    case SYNTH_ROLE_EXPERT: t = mix == SYNTH_MIX_Q4_K_M ? QUANT_Q4_K : mix_type(mix); break;
    default: t = mix_type(mix); break;
    }
    if (t == QUANT_Q4_K && row_len % quant_block_elems(QUANT_Q4_K)) t = QUANT_Q8_0;
    if (t == QUANT_Q8_0 && row_len % quant_block_elems(QUANT_Q8_0)) t = QUANT_F32;
    return t;
}
