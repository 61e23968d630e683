/*
 * weights.c: binds every tensor the trunk (and the Clover preview) reads, by
 * llama.cpp's qwen35moe names, and checks each shape against the
 * hyper-parameters and each type against what the backends compute with.
 * The expected shapes are llama.cpp's (src/models/qwen35moe.cpp), written
 * below as tables so they can be read side by side with it; a file
 * llama.cpp accepts binds here. All checking happens at load: a backend may
 * then trust every ne[] and type it reads.
 *
 * Type policy: vectors and the conv taps are F32 (llama.cpp's converter
 * always writes them so and its quantiser leaves them); matrices may be any
 * type clover computes with (quant_type_supported).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/model.h"
#include "quant/quant.h"

bool model_matrix_type_ok(uint32_t type) { return quant_type_supported(type); }

/* The sizes a shape is made of. */
typedef enum dim {
    D_NONE, /* ends a shape */
    D_EMBD, /* n_embd */
    D_VOCAB,
    D_HD,     /* head_dim */
    D_QG,     /* 2 * head_dim * n_head: query and gate */
    D_KV,     /* head_dim * n_head_kv */
    D_ATT,    /* head_dim * n_head */
    D_CONV,   /* GDN conv channels 2*nk*dk + nv*dv */
    D_VAL,    /* nv * dv */
    D_NV,     /* value heads */
    D_DV,     /* value head dim */
    D_K,      /* conv taps */
    D_KM1,    /* conv taps - 1 */
    D_EXPERT, /* routed experts */
    D_FF,     /* expert width */
    D_SHFF,   /* shared expert width */
} dim;

typedef enum { KIND_F32, KIND_MATRIX } type_kind;

typedef struct weight_spec {
    size_t offset;      /* of the model_weight in its struct */
    const char *suffix; /* the name after "blk.N." */
    const char *what;   /* for messages */
    dim shape[3];
    type_kind kind;
} weight_spec;

#define SPEC(type, field, suffix, what, d0, d1, d2, kind)                                                              \
    { offsetof(type, field), suffix, what, {d0, d1, d2}, kind }

static const weight_spec layer_specs[] = {
    SPEC(model_layer, attn_norm, "attn_norm.weight", "input norm", D_EMBD, D_NONE, D_NONE, KIND_F32),
    SPEC(model_layer, post_norm, "post_attention_norm.weight", "post-mixer norm", D_EMBD, D_NONE, D_NONE, KIND_F32),
};

static const weight_spec attention_specs[] = {
#define A(field, suffix, what, d0, d1, kind) SPEC(model_attention_weights, field, suffix, what, d0, d1, D_NONE, kind)
    A(q, "attn_q.weight", "query and gate projection", D_EMBD, D_QG, KIND_MATRIX),
    A(k, "attn_k.weight", "key projection", D_EMBD, D_KV, KIND_MATRIX),
    A(v, "attn_v.weight", "value projection", D_EMBD, D_KV, KIND_MATRIX),
    A(o, "attn_output.weight", "attention output projection", D_ATT, D_EMBD, KIND_MATRIX),
    A(q_norm, "attn_q_norm.weight", "query norm", D_HD, D_NONE, KIND_F32),
    A(k_norm, "attn_k_norm.weight", "key norm", D_HD, D_NONE, KIND_F32),
#undef A
};

#define G(field, suffix, what, d0, d1, kind) SPEC(model_gdn_weights, field, suffix, what, d0, d1, D_NONE, kind)
static const weight_spec gdn_specs[] = {
    G(qkv, "attn_qkv.weight", "GDN q|k|v projection", D_EMBD, D_CONV, KIND_MATRIX),
    G(z, "attn_gate.weight", "GDN output gate z projection", D_EMBD, D_VAL, KIND_MATRIX),
    G(conv, "ssm_conv1d.weight", "GDN causal conv taps", D_K, D_CONV, KIND_F32),
    G(dt_bias, "ssm_dt.bias", "GDN dt bias", D_NV, D_NONE, KIND_F32),
    G(a, "ssm_a", "GDN -exp(A_log)", D_NV, D_NONE, KIND_F32),
    G(alpha, "ssm_alpha.weight", "GDN decay input projection", D_EMBD, D_NV, KIND_MATRIX),
    G(beta, "ssm_beta.weight", "GDN write strength projection", D_EMBD, D_NV, KIND_MATRIX),
    G(norm, "ssm_norm.weight", "GDN gated norm", D_DV, D_NONE, KIND_F32),
    G(out, "ssm_out.weight", "GDN output projection", D_VAL, D_EMBD, KIND_MATRIX),
};

/* SPEC.md 6: required when the file has a record. */
static const weight_spec clover_specs[] = {
    G(conv_right, "ssm_conv1d_right", "Clover right conv taps", D_KM1, D_CONV, KIND_F32),
    G(logit_scale, "bd_logit_scale", "Clover block logit scale", D_NV, D_NONE, KIND_F32),
    G(history_bias, "bd_history_bias", "Clover history bias", D_NV, D_NONE, KIND_F32),
    G(history_c, "bd_history_c", "Clover history decay coefficient", D_NV, D_NONE, KIND_F32),
};
#undef G

static const weight_spec moe_specs[] = {
#define M(field, suffix, what, d0, d1, d2, kind) SPEC(model_moe_weights, field, suffix, what, d0, d1, d2, kind)
    M(gate_inp, "ffn_gate_inp.weight", "expert router", D_EMBD, D_EXPERT, D_NONE, KIND_MATRIX),
    M(gate_exps, "ffn_gate_exps.weight", "expert gate projections", D_EMBD, D_FF, D_EXPERT, KIND_MATRIX),
    M(up_exps, "ffn_up_exps.weight", "expert up projections", D_EMBD, D_FF, D_EXPERT, KIND_MATRIX),
    M(down_exps, "ffn_down_exps.weight", "expert down projections", D_FF, D_EMBD, D_EXPERT, KIND_MATRIX),
    M(gate_inp_shexp, "ffn_gate_inp_shexp.weight", "shared expert gate", D_EMBD, D_NONE, D_NONE, KIND_F32),
    M(gate_shexp, "ffn_gate_shexp.weight", "shared expert gate projection", D_EMBD, D_SHFF, D_NONE, KIND_MATRIX),
    M(up_shexp, "ffn_up_shexp.weight", "shared expert up projection", D_EMBD, D_SHFF, D_NONE, KIND_MATRIX),
    M(down_shexp, "ffn_down_shexp.weight", "shared expert down projection", D_SHFF, D_EMBD, D_NONE, KIND_MATRIX),
#undef M
};

static uint64_t dim_size(const model_hparams *hp, dim d) {
    switch (d) {
    case D_NONE: return 1;
    case D_EMBD: return hp->n_embd;
    case D_VOCAB: return hp->n_vocab;
    case D_HD: return hp->head_dim;
    case D_QG: return 2ull * hp->head_dim * hp->n_head;
    case D_KV: return (uint64_t)hp->head_dim * hp->n_head_kv;
    case D_ATT: return (uint64_t)hp->head_dim * hp->n_head;
    case D_CONV: return hp->gdn_conv_dim;
    case D_VAL: return (uint64_t)hp->gdn_nv * hp->gdn_dv;
    case D_NV: return hp->gdn_nv;
    case D_DV: return hp->gdn_dv;
    case D_K: return hp->ssm_conv_kernel;
    case D_KM1: return hp->ssm_conv_kernel - 1;
    case D_EXPERT: return hp->n_expert;
    case D_FF: return hp->n_ff_exp;
    case D_SHFF: return hp->n_ff_shexp;
    }
    return 0;
}

static void shape_str(char *buf, size_t n, const uint64_t *ne, int nd) {
    size_t used = (size_t)snprintf(buf, n, "{");
    for (int i = 0; i < nd && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%llu", i ? ", " : "", (unsigned long long)ne[i]);
    if (used < n) snprintf(buf + used, n - used, "}");
}

/* Binds `name` into w, checking the spec's shape (unused dims are 1) and type.
 * layer < 0 for the global tensors. An absent tensor is an error when required. */
static int bind(const gguf_file *f, const model_hparams *hp, model_weight *w, int layer, const char *name,
                const weight_spec *s, bool required, clover_error *err) {
    char where[48] = "";
    if (layer >= 0) snprintf(where, sizeof where, "layer %d: ", layer);
    memset(w, 0, sizeof *w);
    const gguf_tensor *t = gguf_tensor_find(f, name);
    if (!t) {
        if (!required) return CLOVER_OK;
        return error_set(err, CLOVER_E_FORMAT, "%smissing tensor %s (%s)", where, name, s->what);
    }
    uint64_t want[GGUF_MAX_DIMS] = {1, 1, 1, 1};
    int want_nd = 0;
    while (want_nd < 3 && s->shape[want_nd] != D_NONE) {
        want[want_nd] = dim_size(hp, s->shape[want_nd]);
        want_nd++;
    }
    if (memcmp(t->ne, want, sizeof want) != 0) {
        char ws[96], fs[96];
        shape_str(ws, sizeof ws, want, want_nd);
        shape_str(fs, sizeof fs, t->ne, t->n_dims ? (int)t->n_dims : 1);
        return error_set(err, CLOVER_E_FORMAT, "%stensor %s (%s): shape %s, expected %s", where, name, s->what, fs, ws);
    }
    if (s->kind == KIND_F32 && t->type != QUANT_F32)
        return error_set(err, CLOVER_E_UNSUPPORTED, "%stensor %s (%s): type %s, expected f32", where, name, s->what,
                         quant_type_name(t->type));
    if (s->kind == KIND_MATRIX && !model_matrix_type_ok(t->type))
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "%stensor %s (%s): type %s is not supported (expected f32, f16, bf16, q8_0, q4_K, q5_K or "
                         "q6_K)",
                         where, name, s->what, quant_type_name(t->type));
    if (quant_row_bytes(t->type, (size_t)t->ne[0]) == 0)
        return error_set(err, CLOVER_E_FORMAT, "%stensor %s (%s): rows of %llu elements do not fit %s blocks of %zu",
                         where, name, s->what, (unsigned long long)t->ne[0], quant_type_name(t->type),
                         quant_block_elems(t->type));
    w->name = t->name.str;
    w->data = t->data;
    w->type = t->type;
    memcpy(w->ne, t->ne, sizeof w->ne);
    w->nbytes = t->nbytes;
    return CLOVER_OK;
}

/* Binds a table of layer tensors into the struct at base. */
static int bind_table(const gguf_file *f, const model_hparams *hp, uint32_t il, void *base, const weight_spec *specs,
                      size_t n, clover_error *err) {
    for (size_t i = 0; i < n; i++) {
        char name[96];
        snprintf(name, sizeof name, "blk.%u.%s", il, specs[i].suffix);
        model_weight *w = (model_weight *)((char *)base + specs[i].offset);
        int rc = bind(f, hp, w, (int)il, name, &specs[i], true, err);
        if (rc) return rc;
    }
    return CLOVER_OK;
}

#define BIND_TABLE(f, hp, il, base, specs, err) bind_table(f, hp, il, base, specs, sizeof specs / sizeof specs[0], err)

static int bind_layer(const clover_model *m, uint32_t il, model_layer *l, clover_error *err) {
    const gguf_file *f = m->file;
    const model_hparams *hp = &m->hp;
    int rc = BIND_TABLE(f, hp, il, l, layer_specs, err);
    if (rc) return rc;
    if (l->kind == MODEL_LAYER_ATTENTION) {
        rc = BIND_TABLE(f, hp, il, &l->attn, attention_specs, err);
    } else {
        rc = BIND_TABLE(f, hp, il, &l->gdn, gdn_specs, err);
        if (!rc && m->has_record) {
            if (hp->ssm_conv_kernel < 2)
                return error_set(err, CLOVER_E_FORMAT,
                                 "layer %u: " MODEL_ARCH ".ssm.conv_kernel = %u leaves no right conv taps for the "
                                 "Clover preview (expected >= 2)",
                                 il, hp->ssm_conv_kernel);
            rc = BIND_TABLE(f, hp, il, &l->gdn, clover_specs, err);
        }
    }
    return rc ? rc : BIND_TABLE(f, hp, il, &l->moe, moe_specs, err);
}

static const weight_spec embd_spec = {0, "token_embd.weight", "token embedding", {D_EMBD, D_VOCAB}, KIND_MATRIX};
static const weight_spec output_norm_spec = {0, "output_norm.weight", "final norm", {D_EMBD}, KIND_F32};
static const weight_spec output_spec = {0, "output.weight", "output head", {D_EMBD, D_VOCAB}, KIND_MATRIX};

int model_weights_bind(clover_model *m, clover_error *err) {
    const gguf_file *f = m->file;
    const model_hparams *hp = &m->hp;
    int rc;
    if ((rc = bind(f, hp, &m->token_embd, -1, embd_spec.suffix, &embd_spec, true, err)) ||
        (rc = bind(f, hp, &m->output_norm, -1, output_norm_spec.suffix, &output_norm_spec, true, err)) ||
        (rc = bind(f, hp, &m->output, -1, output_spec.suffix, &output_spec, false, err)))
        return rc;
    m->output_tied = m->output.data == NULL; /* llama.cpp ties the head to the embedding then */
    if (m->output_tied) m->output = m->token_embd;

    m->layers = mem_calloc(hp->n_layer, sizeof *m->layers);
    m->layer_kinds = mem_calloc((size_t)hp->n_layer + 1, 1);
    model_layer_kind *kinds = mem_calloc(hp->n_layer, sizeof *kinds);
    if (!m->layers || !m->layer_kinds || !kinds) {
        mem_free(kinds);
        return error_set(err, CLOVER_E_NOMEM, "out of memory for %u layers", hp->n_layer);
    }
    rc = model_layer_kinds_read(f, hp, kinds, err);
    for (uint32_t il = 0; il < hp->n_layer && !rc; il++) {
        m->layers[il].kind = kinds[il];
        m->layer_kinds[il] = kinds[il] == MODEL_LAYER_ATTENTION ? 'A' : 'G';
        rc = bind_layer(m, il, &m->layers[il], err);
    }
    mem_free(kinds);
    return rc;
}
