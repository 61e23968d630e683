/*
 * synth_plan.c: the tensors of a synthetic model, with llama.cpp's qwen35moe
 * names and ggml shapes (the ones model/weights.c checks) and value
 * distributions that keep a random model numerically tame through many
 * layers: input projections ~ N(0, 1/fan_in) so their outputs have unit
 * scale, the projections that write into the residual stream shrunk by a
 * further 1/sqrt(2 * layers), norms stored as llama.cpp stores them (1 + w
 * with w near 0; the gated norm's plain weight near 1), ssm_a = -exp(A_log)
 * with A_log in (-2, 1.5) so every decay exp(g) lies in (0, 1).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/synth.h"
#include "quant/quant.h"

typedef struct plan {
    const synth_geometry *g;
    synth_tensor *t;
    size_t n, cap;
} plan;

static void add(plan *p, synth_role role, synth_init init, float a, float b, uint64_t e0, uint64_t e1, uint64_t e2,
                const char *fmt, int layer) {
    synth_tensor *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    if (layer >= 0)
        snprintf(t->name, sizeof t->name, fmt, layer);
    else
        snprintf(t->name, sizeof t->name, "%s", fmt);
    t->n_dims = e2 ? 3 : e1 ? 2 : 1;
    t->ne[0] = e0;
    t->ne[1] = e1 ? e1 : 1;
    t->ne[2] = e2 ? e2 : 1;
    t->ne[3] = 1;
    t->type = synth_pick_type(p->g->mix, role, e0);
    t->init = init;
    t->a = a;
    t->b = b;
    t->direct = p->g->direct_q4_k && t->type == QUANT_Q4_K && init == SYNTH_INIT_NORMAL;
}

#define NORMAL(p, role, scale, e0, e1, e2, fmt, il) add(p, role, SYNTH_INIT_NORMAL, scale, 0, e0, e1, e2, fmt, il)
#define NORM_WEIGHT(p, e0, fmt, il) add(p, SYNTH_ROLE_VECTOR, SYNTH_INIT_ONE_PLUS, 0.05f, 0, e0, 0, 0, fmt, il)

static void add_attention(plan *p, int il, float out_gain) {
    const synth_geometry *g = p->g;
    uint64_t E = g->n_embd, hd = g->head_dim, nh = g->n_head, nkv = g->n_head_kv;
    float in = 1.0f / sqrtf((float)E);
    NORMAL(p, SYNTH_ROLE_MATRIX, in, E, 2 * hd * nh, 0, "blk.%d.attn_q.weight", il);
    NORMAL(p, SYNTH_ROLE_MATRIX, in, E, hd * nkv, 0, "blk.%d.attn_k.weight", il);
    NORMAL(p, SYNTH_ROLE_MATRIX, in, E, hd * nkv, 0, "blk.%d.attn_v.weight", il);
    NORMAL(p, SYNTH_ROLE_MATRIX, out_gain / sqrtf((float)(hd * nh)), hd * nh, E, 0, "blk.%d.attn_output.weight", il);
    NORM_WEIGHT(p, hd, "blk.%d.attn_q_norm.weight", il);
    NORM_WEIGHT(p, hd, "blk.%d.attn_k_norm.weight", il);
}

static void add_gdn(plan *p, int il, float out_gain, bool diffusion) {
    const synth_geometry *g = p->g;
    uint64_t E = g->n_embd, nv = g->gdn_nv, vd = g->gdn_nv * g->gdn_dv, K = g->conv_kernel;
    uint64_t C = 2ull * g->gdn_nk * g->gdn_dk + vd;
    float in = 1.0f / sqrtf((float)E), tap = 1.0f / sqrtf((float)K);
    NORMAL(p, SYNTH_ROLE_MATRIX, in, E, C, 0, "blk.%d.attn_qkv.weight", il);
    NORMAL(p, SYNTH_ROLE_MATRIX, in, E, vd, 0, "blk.%d.attn_gate.weight", il);
    add(p, SYNTH_ROLE_VECTOR, SYNTH_INIT_UNIFORM, -tap, tap, K, C, 0, "blk.%d.ssm_conv1d.weight", il);
    add(p, SYNTH_ROLE_VECTOR, SYNTH_INIT_UNIFORM, -0.5f, 0.5f, nv, 0, 0, "blk.%d.ssm_dt.bias", il);
    add(p, SYNTH_ROLE_VECTOR, SYNTH_INIT_NEG_EXP_UNIFORM, -2.0f, 1.5f, nv, 0, 0, "blk.%d.ssm_a", il);
    NORMAL(p, SYNTH_ROLE_MATRIX, in, E, nv, 0, "blk.%d.ssm_alpha.weight", il);
    NORMAL(p, SYNTH_ROLE_MATRIX, in, E, nv, 0, "blk.%d.ssm_beta.weight", il);
    NORM_WEIGHT(p, g->gdn_dv, "blk.%d.ssm_norm.weight", il);
    NORMAL(p, SYNTH_ROLE_MATRIX, out_gain / sqrtf((float)vd), vd, E, 0, "blk.%d.ssm_out.weight", il);
    if (!diffusion) return;
    add(p, SYNTH_ROLE_VECTOR, SYNTH_INIT_UNIFORM, -0.5f * tap, 0.5f * tap, K - 1, C, 0, "blk.%d.ssm_conv1d_right", il);
    add(p, SYNTH_ROLE_VECTOR, SYNTH_INIT_UNIFORM, 1.0f, 4.0f, nv, 0, 0, "blk.%d.bd_logit_scale", il);
    add(p, SYNTH_ROLE_VECTOR, SYNTH_INIT_NORMAL, 0.5f, 0, nv, 0, 0, "blk.%d.bd_history_bias", il);
    add(p, SYNTH_ROLE_VECTOR, SYNTH_INIT_UNIFORM, 0.0f, 1.0f, nv, 0, 0, "blk.%d.bd_history_c", il);
}

static void add_moe(plan *p, int il, float out_gain) {
    const synth_geometry *g = p->g;
    uint64_t E = g->n_embd, X = g->n_expert, I = g->n_ff_exp, S = g->n_ff_shexp;
    float in = 1.0f / sqrtf((float)E);
    NORMAL(p, SYNTH_ROLE_ROUTER, in, E, X, 0, "blk.%d.ffn_gate_inp.weight", il);
    p->t[p->n - 1].skew = g->route_skew;
    NORMAL(p, SYNTH_ROLE_EXPERT, in, E, I, X, "blk.%d.ffn_gate_exps.weight", il);
    NORMAL(p, SYNTH_ROLE_EXPERT, in, E, I, X, "blk.%d.ffn_up_exps.weight", il);
    NORMAL(p, SYNTH_ROLE_EXPERT, out_gain / sqrtf((float)I), I, E, X, "blk.%d.ffn_down_exps.weight", il);
    NORMAL(p, SYNTH_ROLE_VECTOR, in, E, 0, 0, "blk.%d.ffn_gate_inp_shexp.weight", il);
    NORMAL(p, SYNTH_ROLE_MATRIX, in, E, S, 0, "blk.%d.ffn_gate_shexp.weight", il);
    NORMAL(p, SYNTH_ROLE_MATRIX, in, E, S, 0, "blk.%d.ffn_up_shexp.weight", il);
    NORMAL(p, SYNTH_ROLE_MATRIX, out_gain / sqrtf((float)S), S, E, 0, "blk.%d.ffn_down_shexp.weight", il);
}

int synth_plan_make(const synth_geometry *g, bool diffusion, synth_tensor **out, size_t *n, clover_error *err) {
    plan p = {.g = g, .cap = 3 + (size_t)g->n_layer * 24};
    p.t = mem_calloc(p.cap, sizeof *p.t);
    if (!p.t) return error_set(err, CLOVER_E_NOMEM, "synth: out of memory for %zu tensor descriptions", p.cap);
    uint64_t E = g->n_embd, V = g->n_vocab;
    float out_gain = 1.0f / sqrtf(2.0f * (float)g->n_layer);
    NORMAL(&p, SYNTH_ROLE_MATRIX, 1.0f, E, V, 0, "token_embd.weight", -1);
    for (uint32_t il = 0; il < g->n_layer; il++) {
        NORM_WEIGHT(&p, E, "blk.%d.attn_norm.weight", (int)il);
        if ((il + 1) % g->full_attention_interval == 0)
            add_attention(&p, (int)il, out_gain);
        else
            add_gdn(&p, (int)il, out_gain, diffusion);
        NORM_WEIGHT(&p, E, "blk.%d.post_attention_norm.weight", (int)il);
        add_moe(&p, (int)il, out_gain);
    }
    NORM_WEIGHT(&p, E, "output_norm.weight", -1);
    NORMAL(&p, SYNTH_ROLE_MATRIX, 2.0f / sqrtf((float)E), E, V, 0, "output.weight", -1);
    *out = p.t;
    *n = p.n;
    return CLOVER_OK;
}

uint64_t synth_tensor_rows(const synth_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }
