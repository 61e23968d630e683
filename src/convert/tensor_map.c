/*
 * tensor_map.c: the Qwen3.5-MoE name table (Hugging Face -> llama.cpp
 * qwen35moe), the shape every source must have, and row reading.
 *
 * Sources are found by their normalised names (hf_checkpoint.h), checked
 * (dtype, exact shape; conv taps may carry their size-1 middle dimension)
 * and claimed; anything left unclaimed afterwards is an unknown tensor and
 * fails the conversion rather than silently vanishing from the GGUF.
 */
#include "convert/tensor_map.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

typedef struct map_ctx {
    conv_plan *p;
    hf_checkpoint *ck;
    const hf_config *cfg;
    clover_error *err;
    uint32_t vk, vr; /* key heads, value heads per key head (vr 1: no reorder) */
} map_ctx;

typedef struct shape {
    uint32_t n;
    uint64_t d[4];
} shape;

static shape S1(uint64_t a) { return (shape){1, {a}}; }
static shape S2(uint64_t a, uint64_t b) { return (shape){2, {a, b}}; }
static shape S3(uint64_t a, uint64_t b, uint64_t c) { return (shape){3, {a, b, c}}; }

static void shape_str(char *buf, size_t n, uint32_t nd, const uint64_t *d) {
    size_t used = (size_t)snprintf(buf, n, "[");
    for (uint32_t i = 0; i < nd && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%llu", i ? ", " : "", (unsigned long long)d[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

/* Equal shapes; with squeeze, size-1 dimensions are ignored on both sides. */
static bool shape_matches(const st_tensor *t, const shape *want, bool squeeze) {
    uint64_t a[ST_MAX_DIMS], b[4];
    uint32_t na = 0, nb = 0;
    for (uint32_t i = 0; i < t->n_dims; i++)
        if (!squeeze || t->shape[i] != 1) a[na++] = t->shape[i];
    for (uint32_t i = 0; i < want->n; i++)
        if (!squeeze || want->d[i] != 1) b[nb++] = want->d[i];
    if (na != nb) return false;
    for (uint32_t i = 0; i < na; i++)
        if (a[i] != b[i]) return false;
    return true;
}

/* Finds, checks and claims the source `key`; *out NULL (and CLOVER_OK) when
 * it is absent and optional. */
static int source(map_ctx *c, const char *key, shape want, bool squeeze, bool required, const char *why,
                  hf_entry **out) {
    *out = NULL;
    hf_entry *e = hf_checkpoint_find(c->ck, key);
    if (!e) {
        if (!required) return CLOVER_OK;
        return error_set(c->err, CLOVER_E_FORMAT, "%s: missing tensor '%s%s'%s%s%s", c->ck->dir,
                         strcmp(key, "lm_head.weight") ? c->ck->prefix : "", key, why ? " (" : "", why ? why : "",
                         why ? ")" : "");
    }
    if (!st_dtype_is_float(e->t->dtype))
        return error_set(c->err, CLOVER_E_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported (BF16, F16 or F32)",
                         st_file_name(e->file), e->name, st_dtype_name(e->t->dtype));
    if (!shape_matches(e->t, &want, squeeze)) {
        char have[160], exp[160];
        shape_str(have, sizeof have, e->t->n_dims, e->t->shape);
        shape_str(exp, sizeof exp, want.n, want.d);
        return error_set(c->err, CLOVER_E_FORMAT, "%s: tensor '%s': shape %s, expected %s", st_file_name(e->file),
                         e->name, have, exp);
    }
    e->used = true;
    *out = e;
    return CLOVER_OK;
}

/* Appends an output tensor reading one whole source; returns it (NULL on
 * allocation failure, err set). */
static conv_tensor *emit(map_ctx *c, const char *name, uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                         conv_role role, conv_op op, hf_entry **src, uint32_t n_src) {
    conv_plan *p = c->p;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        conv_tensor *nt = mem_calloc(cap, sizeof *nt);
        if (!nt) {
            error_set(c->err, CLOVER_E_NOMEM, "out of memory for the tensor plan");
            return NULL;
        }
        if (p->n) memcpy(nt, p->t, p->n * sizeof *nt);
        mem_free(p->t);
        p->t = nt;
        p->cap = cap;
    }
    conv_tensor *t = &p->t[p->n];
    memset(t, 0, sizeof *t);
    t->src = mem_calloc(n_src, sizeof *t->src);
    if (!t->src) {
        error_set(c->err, CLOVER_E_NOMEM, "out of memory for the tensor plan");
        return NULL;
    }
    memcpy(t->src, src, n_src * sizeof *src);
    t->n_src = n_src;
    p->n++;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->ne[3] = 1;
    t->role = role;
    t->op = op;
    t->rows_per_group = ne1 * ne2;
    t->vk = c->vk;
    t->vr = c->vr;
    return t;
}

/* source + emit for the common case: an HF [out, in] matrix or a vector. */
static int one(map_ctx *c, const char *key, shape want, bool squeeze, const char *gguf_name, uint32_t n_dims,
               uint64_t ne0, uint64_t ne1, conv_role role, conv_op op, conv_tensor **out) {
    hf_entry *e;
    int rc = source(c, key, want, squeeze, true, NULL, &e);
    if (rc) return rc;
    conv_tensor *t = emit(c, gguf_name, n_dims, ne0, ne1, 1, role, op, &e, 1);
    if (!t) return c->err->code;
    if (out) *out = t;
    return CLOVER_OK;
}

/* The value-head reorder only exists when value heads outnumber key heads. */
static void reorder_rows(const map_ctx *c, conv_tensor *t, uint64_t begin, uint32_t head) {
    if (c->vr > 1) {
        t->vrow_begin = begin;
        t->vrow_head = head;
    }
}

static void reorder_cols(const map_ctx *c, conv_tensor *t, uint32_t head) {
    if (c->vr > 1) t->vcol_head = head;
}

#define KEY(buf, ...) (snprintf(buf, sizeof buf, __VA_ARGS__), buf)

static int map_attention(map_ctx *c, uint32_t il) {
    const hf_config *h = c->cfg;
    uint64_t H = h->hidden_size, hd = h->head_dim, nh = h->n_heads, nkv = h->n_kv_heads;
    char k[160], g[64];
    int rc;
    if ((rc = one(c, KEY(k, "layers.%u.self_attn.q_proj.weight", il), S2(2 * nh * hd, H), false,
                  KEY(g, "blk.%u.attn_q.weight", il), 2, H, 2 * nh * hd, CONV_ROLE_MATRIX, CONV_OP_COPY, NULL)) ||
        (rc = one(c, KEY(k, "layers.%u.self_attn.k_proj.weight", il), S2(nkv * hd, H), false,
                  KEY(g, "blk.%u.attn_k.weight", il), 2, H, nkv * hd, CONV_ROLE_MATRIX, CONV_OP_COPY, NULL)) ||
        (rc = one(c, KEY(k, "layers.%u.self_attn.v_proj.weight", il), S2(nkv * hd, H), false,
                  KEY(g, "blk.%u.attn_v.weight", il), 2, H, nkv * hd, CONV_ROLE_MATRIX, CONV_OP_COPY, NULL)) ||
        (rc = one(c, KEY(k, "layers.%u.self_attn.o_proj.weight", il), S2(H, nh * hd), false,
                  KEY(g, "blk.%u.attn_output.weight", il), 2, nh * hd, H, CONV_ROLE_MATRIX, CONV_OP_COPY, NULL)) ||
        (rc = one(c, KEY(k, "layers.%u.self_attn.q_norm.weight", il), S1(hd), false,
                  KEY(g, "blk.%u.attn_q_norm.weight", il), 1, hd, 1, CONV_ROLE_SMALL, CONV_OP_ADD_ONE, NULL)) ||
        (rc = one(c, KEY(k, "layers.%u.self_attn.k_norm.weight", il), S1(hd), false,
                  KEY(g, "blk.%u.attn_k_norm.weight", il), 1, hd, 1, CONV_ROLE_SMALL, CONV_OP_ADD_ONE, NULL)))
        return rc;
    return CLOVER_OK;
}

static int map_gdn(map_ctx *c, uint32_t il) {
    const hf_config *h = c->cfg;
    uint64_t H = h->hidden_size, nv = h->lin_n_v_heads, dv = h->lin_v_head_dim, K = h->conv_kernel;
    uint64_t qk = 2ull * h->lin_n_k_heads * h->lin_k_head_dim, C = hf_config_conv_dim(h);
    uint32_t dvh = h->lin_v_head_dim;
    char k[160], g[64];
    conv_tensor *t = NULL;
    int rc;
    if ((rc = one(c, KEY(k, "layers.%u.linear_attn.in_proj_qkv.weight", il), S2(C, H), false,
                  KEY(g, "blk.%u.attn_qkv.weight", il), 2, H, C, CONV_ROLE_MATRIX, CONV_OP_COPY, &t)))
        return rc;
    reorder_rows(c, t, qk, dvh);
    if ((rc = one(c, KEY(k, "layers.%u.linear_attn.in_proj_z.weight", il), S2(nv * dv, H), false,
                  KEY(g, "blk.%u.attn_gate.weight", il), 2, H, nv * dv, CONV_ROLE_MATRIX, CONV_OP_COPY, &t)))
        return rc;
    reorder_rows(c, t, 0, dvh);
    if ((rc = one(c, KEY(k, "layers.%u.linear_attn.in_proj_b.weight", il), S2(nv, H), false,
                  KEY(g, "blk.%u.ssm_beta.weight", il), 2, H, nv, CONV_ROLE_MATRIX, CONV_OP_COPY, &t)))
        return rc;
    reorder_rows(c, t, 0, 1);
    if ((rc = one(c, KEY(k, "layers.%u.linear_attn.in_proj_a.weight", il), S2(nv, H), false,
                  KEY(g, "blk.%u.ssm_alpha.weight", il), 2, H, nv, CONV_ROLE_MATRIX, CONV_OP_COPY, &t)))
        return rc;
    reorder_rows(c, t, 0, 1);
    if ((rc = one(c, KEY(k, "layers.%u.linear_attn.conv1d.weight", il), S3(C, 1, K), true,
                  KEY(g, "blk.%u.ssm_conv1d.weight", il), 2, K, C, CONV_ROLE_SMALL, CONV_OP_COPY, &t)))
        return rc;
    reorder_rows(c, t, qk, dvh);
    if ((rc = one(c, KEY(k, "layers.%u.linear_attn.A_log", il), S1(nv), false, KEY(g, "blk.%u.ssm_a", il), 1, nv, 1,
                  CONV_ROLE_SMALL, CONV_OP_NEG_EXP, &t)))
        return rc;
    reorder_cols(c, t, 1);
    if ((rc = one(c, KEY(k, "layers.%u.linear_attn.dt_bias", il), S1(nv), false, KEY(g, "blk.%u.ssm_dt.bias", il), 1,
                  nv, 1, CONV_ROLE_SMALL, CONV_OP_COPY, &t)))
        return rc;
    reorder_cols(c, t, 1);
    if ((rc = one(c, KEY(k, "layers.%u.linear_attn.norm.weight", il), S1(dv), false,
                  KEY(g, "blk.%u.ssm_norm.weight", il), 1, dv, 1, CONV_ROLE_SMALL, CONV_OP_COPY, NULL)))
        return rc;
    if ((rc = one(c, KEY(k, "layers.%u.linear_attn.out_proj.weight", il), S2(H, nv * dv), false,
                  KEY(g, "blk.%u.ssm_out.weight", il), 2, nv * dv, H, CONV_ROLE_MATRIX, CONV_OP_COPY, &t)))
        return rc;
    reorder_cols(c, t, dvh);

    /* Clover's preview tensors: required with a block_diffusion record,
     * carried over when present without one. */
    bool req = h->bd.present;
    const char *why = "config.json has a block_diffusion record";
    static const struct {
        const char *hf, *gguf;
    } vec[3] = {{"bd_softmax_logit_scale", "bd_logit_scale"},
                {"bd_softmax_history_bias", "bd_history_bias"},
                {"bd_softmax_history_c", "bd_history_c"}};
    hf_entry *e;
    if ((rc = source(c, KEY(k, "layers.%u.linear_attn.conv_right_weight", il), S2(C, K - 1), true, req, why, &e)))
        return rc;
    if (e) {
        if (!(t = emit(c, KEY(g, "blk.%u.ssm_conv1d_right", il), 2, K - 1, C, 1, CONV_ROLE_SMALL, CONV_OP_COPY, &e, 1)))
            return c->err->code;
        reorder_rows(c, t, qk, dvh);
    }
    for (int i = 0; i < 3; i++) {
        if ((rc = source(c, KEY(k, "layers.%u.linear_attn.%s", il, vec[i].hf), S1(nv), false, req, why, &e)))
            return rc;
        if (!e) continue;
        if (!(t = emit(c, KEY(g, "blk.%u.%s", il, vec[i].gguf), 1, nv, 1, 1, CONV_ROLE_SMALL, CONV_OP_COPY, &e, 1)))
            return c->err->code;
        reorder_cols(c, t, 1);
    }
    return CLOVER_OK;
}

static int map_experts_fused(map_ctx *c, uint32_t il, hf_entry *gu) {
    const hf_config *h = c->cfg;
    uint64_t H = h->hidden_size, I = h->moe_ffn, E = h->n_experts;
    char k[160], g[64];
    conv_tensor *t = NULL;
    if (!(t = emit(c, KEY(g, "blk.%u.ffn_gate_exps.weight", il), 3, H, I, E, CONV_ROLE_EXPERTS, CONV_OP_COPY, &gu, 1)))
        return c->err->code;
    t->rows_per_group = I;
    t->group_stride = 2 * I;
    if (!(t = emit(c, KEY(g, "blk.%u.ffn_up_exps.weight", il), 3, H, I, E, CONV_ROLE_EXPERTS, CONV_OP_COPY, &gu, 1)))
        return c->err->code;
    t->rows_per_group = I;
    t->group_stride = 2 * I;
    t->row_offset = I;
    hf_entry *dn;
    int rc = source(c, KEY(k, "layers.%u.mlp.experts.down_proj", il), S3(E, H, I), false, false, NULL, &dn);
    if (rc) return rc;
    if (!dn &&
        (rc = source(c, KEY(k, "layers.%u.mlp.experts.down_proj.weight", il), S3(E, H, I), false, true,
                     "the experts' gate_up_proj is fused", &dn)))
        return rc;
    if (!emit(c, KEY(g, "blk.%u.ffn_down_exps.weight", il), 3, I, H, E, CONV_ROLE_EXPERTS, CONV_OP_COPY, &dn, 1))
        return c->err->code;
    return CLOVER_OK;
}

static int map_experts_split(map_ctx *c, uint32_t il) {
    const hf_config *h = c->cfg;
    uint64_t H = h->hidden_size, I = h->moe_ffn, E = h->n_experts;
    static const struct {
        const char *hf, *gguf;
        bool down;
    } w[3] = {{"gate_proj", "ffn_gate_exps", false},
              {"up_proj", "ffn_up_exps", false},
              {"down_proj", "ffn_down_exps", true}};
    hf_entry **src = mem_calloc(E, sizeof *src);
    if (!src) return error_set(c->err, CLOVER_E_NOMEM, "out of memory for %llu experts", (unsigned long long)E);
    int rc = CLOVER_OK;
    char k[160], g[64];
    for (int i = 0; i < 3 && !rc; i++) {
        for (uint64_t e = 0; e < E && !rc; e++)
            rc = source(c, KEY(k, "layers.%u.mlp.experts.%llu.%s.weight", il, (unsigned long long)e, w[i].hf),
                        w[i].down ? S2(H, I) : S2(I, H), false, true, "the checkpoint stores experts one by one",
                        &src[e]);
        if (rc) break;
        conv_tensor *t = w[i].down ? emit(c, KEY(g, "blk.%u.%s.weight", il, w[i].gguf), 3, I, H, E,
                                          CONV_ROLE_EXPERTS, CONV_OP_COPY, src, (uint32_t)E)
                                   : emit(c, KEY(g, "blk.%u.%s.weight", il, w[i].gguf), 3, H, I, E,
                                          CONV_ROLE_EXPERTS, CONV_OP_COPY, src, (uint32_t)E);
        if (!t) rc = c->err->code;
        else t->rows_per_group = w[i].down ? H : I;
    }
    mem_free(src);
    return rc;
}

static int map_moe(map_ctx *c, uint32_t il) {
    const hf_config *h = c->cfg;
    uint64_t H = h->hidden_size, I = h->moe_ffn, E = h->n_experts, S = h->shared_ffn;
    char k[160], g[64];
    int rc;
    if ((rc = one(c, KEY(k, "layers.%u.mlp.gate.weight", il), S2(E, H), false, KEY(g, "blk.%u.ffn_gate_inp.weight", il),
                  2, H, E, CONV_ROLE_ROUTER, CONV_OP_COPY, NULL)))
        return rc;
    hf_entry *gu;
    if ((rc = source(c, KEY(k, "layers.%u.mlp.experts.gate_up_proj", il), S3(E, 2 * I, H), false, false, NULL, &gu)))
        return rc;
    if (!gu && (rc = source(c, KEY(k, "layers.%u.mlp.experts.gate_up_proj.weight", il), S3(E, 2 * I, H), false, false,
                            NULL, &gu)))
        return rc;
    if (gu) rc = map_experts_fused(c, il, gu);
    else if (hf_checkpoint_find(c->ck, KEY(k, "layers.%u.mlp.experts.0.gate_proj.weight", il)))
        rc = map_experts_split(c, il);
    else
        rc = error_set(c->err, CLOVER_E_FORMAT,
                       "%s: missing tensor '%slayers.%u.mlp.experts.gate_up_proj' (or per-expert "
                       "mlp.experts.N.gate_proj.weight)",
                       c->ck->dir, c->ck->prefix, il);
    if (rc) return rc;
    if ((rc = one(c, KEY(k, "layers.%u.mlp.shared_expert.gate_proj.weight", il), S2(S, H), false,
                  KEY(g, "blk.%u.ffn_gate_shexp.weight", il), 2, H, S, CONV_ROLE_MATRIX, CONV_OP_COPY, NULL)) ||
        (rc = one(c, KEY(k, "layers.%u.mlp.shared_expert.up_proj.weight", il), S2(S, H), false,
                  KEY(g, "blk.%u.ffn_up_shexp.weight", il), 2, H, S, CONV_ROLE_MATRIX, CONV_OP_COPY, NULL)) ||
        (rc = one(c, KEY(k, "layers.%u.mlp.shared_expert.down_proj.weight", il), S2(H, S), false,
                  KEY(g, "blk.%u.ffn_down_shexp.weight", il), 2, S, H, CONV_ROLE_MATRIX, CONV_OP_COPY, NULL)) ||
        /* {n_embd, 1}, the [1, n_embd] tensor as llama.cpp's converter writes it (no squeeze) */
        (rc = one(c, KEY(k, "layers.%u.mlp.shared_expert_gate.weight", il), S2(1, H), true,
                  KEY(g, "blk.%u.ffn_gate_inp_shexp.weight", il), 2, H, 1, CONV_ROLE_ROUTER, CONV_OP_COPY, NULL)))
        return rc;
    return CLOVER_OK;
}

static int map_layer(map_ctx *c, uint32_t il) {
    uint64_t H = c->cfg->hidden_size;
    char k[160], g[64];
    int rc;
    if ((rc = one(c, KEY(k, "layers.%u.input_layernorm.weight", il), S1(H), false,
                  KEY(g, "blk.%u.attn_norm.weight", il), 1, H, 1, CONV_ROLE_SMALL, CONV_OP_ADD_ONE, NULL)))
        return rc;
    rc = c->cfg->layer_is_linear[il] ? map_gdn(c, il) : map_attention(c, il);
    if (rc) return rc;
    if ((rc = one(c, KEY(k, "layers.%u.post_attention_layernorm.weight", il), S1(H), false,
                  KEY(g, "blk.%u.post_attention_norm.weight", il), 1, H, 1, CONV_ROLE_SMALL, CONV_OP_ADD_ONE, NULL)))
        return rc;
    return map_moe(c, il);
}

static bool ignorable(const char *key) {
    size_t n = strlen(key);
    static const char *const suffix = ".rotary_emb.inv_freq";
    return n >= strlen(suffix) && !strcmp(key + n - strlen(suffix), suffix);
}

int tensor_map_plan(conv_plan *p, hf_checkpoint *ck, const hf_config *cfg, clover_error *err) {
    memset(p, 0, sizeof *p);
    clover_error local;
    if (!err) err = &local;
    map_ctx c = {.p = p, .ck = ck, .cfg = cfg, .err = err, .vk = cfg->lin_n_k_heads,
                 .vr = cfg->lin_n_v_heads / cfg->lin_n_k_heads};
    uint64_t H = cfg->hidden_size, V = cfg->vocab_size;
    int rc = one(&c, "embed_tokens.weight", S2(V, H), false, "token_embd.weight", 2, H, V, CONV_ROLE_EMBED,
                 CONV_OP_COPY, NULL);
    for (uint32_t il = 0; il < cfg->n_layers && !rc; il++) rc = map_layer(&c, il);
    if (!rc)
        rc = one(&c, "norm.weight", S1(H), false, "output_norm.weight", 1, H, 1, CONV_ROLE_SMALL, CONV_OP_ADD_ONE,
                 NULL);
    if (!rc) {
        hf_entry *e;
        rc = source(&c, "lm_head.weight", S2(V, H), false, !cfg->tie_word_embeddings,
                    "tie_word_embeddings is false", &e);
        if (!rc && e && !emit(&c, "output.weight", 2, H, V, 1, CONV_ROLE_HEAD, CONV_OP_COPY, &e, 1)) rc = err->code;
    }
    for (size_t i = 0; i < ck->n_entries && !rc; i++) {
        const hf_entry *e = &ck->entries[i];
        if (!e->used && !ignorable(e->key))
            rc = error_set(err, CLOVER_E_UNSUPPORTED,
                           "%s: tensor '%s' is not a weight of a Qwen3.5-MoE text model with this config.json",
                           st_file_name(e->file), e->name);
    }
    if (rc) tensor_map_free(p);
    return rc;
}

void tensor_map_free(conv_plan *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) mem_free(p->t[i].src);
    mem_free(p->t);
    memset(p, 0, sizeof *p);
}

uint64_t conv_tensor_rows(const conv_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

uint64_t conv_vhead_source(uint64_t rel, uint32_t hs, uint32_t vk, uint32_t vr) {
    uint64_t pos = rel / hs, i = rel % hs;
    uint64_t j = pos / vk, k = pos % vk; /* tiled: position j * vk + k holds key group k's j-th value head */
    return (k * vr + j) * hs + i;        /* grouped: that head is k * vr + j */
}

void conv_tensor_read_row(const conv_tensor *t, uint64_t r, float *dst, float *tmp) {
    uint64_t ne0 = t->ne[0];
    if (t->vrow_head && r >= t->vrow_begin)
        r = t->vrow_begin + conv_vhead_source(r - t->vrow_begin, t->vrow_head, t->vk, t->vr);
    uint64_t g = r / t->rows_per_group, i = r % t->rows_per_group;
    const st_tensor *s;
    uint64_t srow;
    if (t->n_src > 1) {
        s = t->src[g]->t;
        srow = t->row_offset + i;
    } else {
        s = t->src[0]->t;
        srow = g * t->group_stride + t->row_offset + i;
    }
    float *raw = t->vcol_head ? tmp : dst;
    st_tensor_read_f32(s, srow * ne0, (size_t)ne0, raw);
    if (t->vcol_head) {
        uint32_t hs = t->vcol_head;
        for (uint64_t p = 0; p < ne0 / hs; p++)
            memcpy(dst + p * hs, raw + conv_vhead_source(p * hs, hs, t->vk, t->vr), hs * sizeof *dst);
    }
    switch (t->op) {
    case CONV_OP_ADD_ONE:
        for (uint64_t j = 0; j < ne0; j++) dst[j] += 1.0f;
        break;
    case CONV_OP_NEG_EXP:
        for (uint64_t j = 0; j < ne0; j++) dst[j] = -expf(dst[j]);
        break;
    default: break;
    }
}
