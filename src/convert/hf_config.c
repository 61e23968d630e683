/*
 * hf_config.c: reading config.json with jansson.
 *
 * A small typed accessor layer (cfg_u32, cfg_f32, ...) does the lookups, so
 * every field gets the same treatment: text_config first, then the top
 * level; JSON null counts as absent (transformers writes nulls for unset
 * options); integers must be integers in range, numbers may be either; and
 * a failure is one message naming the file and the field.
 */
#include "convert/hf_config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "convert/json_util.h"

typedef struct cfg_ctx {
    json_t *root;
    json_t *text; /* text_config, or NULL */
    const char *name;
    clover_error *err;
} cfg_ctx;

static json_t *obj_get(json_t *obj, const char *key) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    return (v && !json_is_null(v)) ? v : NULL;
}

/* text_config first, then the top level. */
static json_t *cfg_find(const cfg_ctx *c, const char *key) {
    json_t *v = obj_get(c->text, key);
    return v ? v : obj_get(c->root, key);
}

static int missing(const cfg_ctx *c, const char *where, const char *key) {
    return error_set(c->err, CLOVER_E_FORMAT, "%s: missing field '%s'%s%s", c->name, key, where ? " in " : "",
                     where ? where : (c->text ? " (looked in text_config and at the top level)" : ""));
}

static int wrong_type(const cfg_ctx *c, const char *where, const char *key, const char *expected, const json_t *v) {
    return error_set(c->err, CLOVER_E_FORMAT, "%s: field '%s%s%s' is %s, expected %s", c->name, where ? where : "",
                     where ? "." : "", key, json_util_kind(v), expected);
}

/* The value v (already found) as u32 / f32 / bool / string. */
static int val_u32(const cfg_ctx *c, const char *where, const char *key, const json_t *v, uint32_t *out) {
    if (!json_is_integer(v)) return wrong_type(c, where, key, "a non-negative integer", v);
    json_int_t i = json_integer_value(v);
    if (i < 0 || (unsigned long long)i > UINT32_MAX)
        return error_set(c->err, CLOVER_E_FORMAT, "%s: field '%s%s%s' is %lld, expected 0..%u", c->name,
                         where ? where : "", where ? "." : "", key, (long long)i, UINT32_MAX);
    *out = (uint32_t)i;
    return CLOVER_OK;
}

static int val_f32(const cfg_ctx *c, const char *where, const char *key, const json_t *v, float *out) {
    if (!json_is_number(v)) return wrong_type(c, where, key, "a number", v);
    double d = json_number_value(v);
    if (!isfinite(d) || fabs(d) > 3.0e38)
        return error_set(c->err, CLOVER_E_FORMAT, "%s: field '%s%s%s' (%g) does not fit a float", c->name,
                         where ? where : "", where ? "." : "", key, d);
    *out = (float)d;
    return CLOVER_OK;
}

static int val_bool(const cfg_ctx *c, const char *where, const char *key, const json_t *v, bool *out) {
    if (!json_is_boolean(v)) return wrong_type(c, where, key, "a boolean", v);
    *out = json_is_true(v);
    return CLOVER_OK;
}

static int cfg_u32(const cfg_ctx *c, const char *key, bool required, uint32_t dflt, uint32_t *out) {
    json_t *v = cfg_find(c, key);
    if (!v) {
        if (required) return missing(c, NULL, key);
        *out = dflt;
        return CLOVER_OK;
    }
    return val_u32(c, NULL, key, v, out);
}

static int cfg_f32(const cfg_ctx *c, const char *key, bool required, float dflt, float *out) {
    json_t *v = cfg_find(c, key);
    if (!v) {
        if (required) return missing(c, NULL, key);
        *out = dflt;
        return CLOVER_OK;
    }
    return val_f32(c, NULL, key, v, out);
}

/* An optional token id: an integer, or (eos) a list whose first entry is used. */
static int cfg_token_id(const cfg_ctx *c, const char *key, int64_t *out) {
    *out = -1;
    json_t *v = cfg_find(c, key);
    if (!v) return CLOVER_OK;
    if (json_is_array(v)) {
        if (json_array_size(v) == 0) return CLOVER_OK;
        v = json_array_get(v, 0);
    }
    uint32_t id = 0;
    int rc = val_u32(c, NULL, key, v, &id);
    if (rc) return rc;
    *out = id;
    return CLOVER_OK;
}

static int positive(const cfg_ctx *c, const char *key, uint32_t v) {
    if (v == 0 || v > HF_MAX_DIM)
        return error_set(c->err, CLOVER_E_FORMAT, "%s: field '%s' is %u, expected 1..%u", c->name, key, v,
                         HF_MAX_DIM);
    return CLOVER_OK;
}

/* ---- sections ---- */

static int parse_geometry(const cfg_ctx *c, hf_config *h) {
    static const struct {
        const char *key;
        size_t off;
    } req[] = {
        {"vocab_size", offsetof(hf_config, vocab_size)},
        {"hidden_size", offsetof(hf_config, hidden_size)},
        {"num_hidden_layers", offsetof(hf_config, n_layers)},
        {"num_attention_heads", offsetof(hf_config, n_heads)},
        {"num_key_value_heads", offsetof(hf_config, n_kv_heads)},
        {"linear_num_key_heads", offsetof(hf_config, lin_n_k_heads)},
        {"linear_num_value_heads", offsetof(hf_config, lin_n_v_heads)},
        {"linear_key_head_dim", offsetof(hf_config, lin_k_head_dim)},
        {"linear_value_head_dim", offsetof(hf_config, lin_v_head_dim)},
        {"linear_conv_kernel_dim", offsetof(hf_config, conv_kernel)},
        {"num_experts", offsetof(hf_config, n_experts)},
        {"num_experts_per_tok", offsetof(hf_config, n_experts_used)},
        {"moe_intermediate_size", offsetof(hf_config, moe_ffn)},
        {"shared_expert_intermediate_size", offsetof(hf_config, shared_ffn)},
        {"max_position_embeddings", offsetof(hf_config, max_positions)},
    };
    int rc;
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        uint32_t *dst = (uint32_t *)((char *)h + req[i].off);
        if ((rc = cfg_u32(c, req[i].key, true, 0, dst))) return rc;
        if ((rc = positive(c, req[i].key, *dst))) return rc;
    }
    if (h->n_layers > HF_MAX_LAYERS)
        return error_set(c->err, CLOVER_E_FORMAT, "%s: num_hidden_layers %u exceeds %u", c->name, h->n_layers,
                         HF_MAX_LAYERS);
    if ((rc = cfg_u32(c, "head_dim", false, h->hidden_size / h->n_heads, &h->head_dim))) return rc;
    if ((rc = positive(c, "head_dim", h->head_dim))) return rc;
    if ((rc = cfg_u32(c, "intermediate_size", false, 0, &h->ffn))) return rc;
    if (h->n_heads % h->n_kv_heads)
        return error_set(c->err, CLOVER_E_FORMAT,
                         "%s: num_attention_heads %u is not a multiple of num_key_value_heads %u",
                         c->name, h->n_heads, h->n_kv_heads);
    if (h->lin_n_v_heads % h->lin_n_k_heads)
        return error_set(c->err, CLOVER_E_FORMAT,
                         "%s: linear_num_value_heads %u is not a multiple of linear_num_key_heads %u", c->name,
                         h->lin_n_v_heads, h->lin_n_k_heads);
    if (h->n_experts_used > h->n_experts)
        return error_set(c->err, CLOVER_E_FORMAT, "%s: num_experts_per_tok %u exceeds num_experts %u", c->name,
                         h->n_experts_used, h->n_experts);
    if ((rc = cfg_f32(c, "rms_norm_eps", true, 0, &h->rms_eps))) return rc;
    if (!(h->rms_eps > 0))
        return error_set(c->err, CLOVER_E_FORMAT, "%s: rms_norm_eps %g must be positive", c->name, h->rms_eps);
    json_t *tie = cfg_find(c, "tie_word_embeddings");
    h->tie_word_embeddings = false;
    if (tie && (rc = val_bool(c, NULL, "tie_word_embeddings", tie, &h->tie_word_embeddings))) return rc;
    if ((rc = cfg_token_id(c, "bos_token_id", &h->bos_token_id))) return rc;
    if ((rc = cfg_token_id(c, "eos_token_id", &h->eos_token_id))) return rc;
    if ((rc = cfg_token_id(c, "pad_token_id", &h->pad_token_id))) return rc;
    return CLOVER_OK;
}

/* layer_types is authoritative (transformers builds its layers from it and
 * writes it without full_attention_interval); the interval (default 4, as
 * transformers and llama.cpp assume) only fills in when it is absent. The
 * pattern is then classified: "regular" when some k puts full attention at
 * exactly every k-th layer, which the GGUF states as full_attention_interval;
 * anything else goes out as the per-layer attention.recurrent_layers array. */
static int parse_layer_types(const cfg_ctx *c, hf_config *h) {
    int rc;
    uint32_t interval;
    if ((rc = cfg_u32(c, "full_attention_interval", false, 4, &interval))) return rc;
    if ((rc = positive(c, "full_attention_interval", interval))) return rc;
    h->layer_is_linear = mem_calloc(h->n_layers, 1);
    if (!h->layer_is_linear) return error_set(c->err, CLOVER_E_NOMEM, "%s: out of memory", c->name);
    for (uint32_t i = 0; i < h->n_layers; i++) h->layer_is_linear[i] = (i + 1) % interval != 0;
    json_t *lt = cfg_find(c, "layer_types");
    if (lt) {
        if (!json_is_array(lt)) return wrong_type(c, NULL, "layer_types", "an array of strings", lt);
        if (json_array_size(lt) != h->n_layers)
            return error_set(c->err, CLOVER_E_FORMAT, "%s: layer_types has %zu entries, num_hidden_layers is %u",
                             c->name, json_array_size(lt), h->n_layers);
        for (uint32_t i = 0; i < h->n_layers; i++) {
            json_t *e = json_array_get(lt, i);
            const char *s = json_string_value(e);
            if (s && !strcmp(s, "linear_attention")) h->layer_is_linear[i] = 1;
            else if (s && !strcmp(s, "full_attention")) h->layer_is_linear[i] = 0;
            else
                return error_set(c->err, CLOVER_E_FORMAT,
                                 "%s: layer_types[%u] is %s%s%s, expected \"linear_attention\" or \"full_attention\"",
                                 c->name, i, s ? "\"" : json_util_kind(e), s ? s : "", s ? "\"" : "");
        }
    }
    /* The only candidate interval is the first full-attention layer's 1-based index. */
    h->full_attention_interval = 0;
    for (uint32_t i = 0; i < h->n_layers && !h->full_attention_interval; i++)
        if (!h->layer_is_linear[i]) h->full_attention_interval = i + 1;
    for (uint32_t i = 0; h->full_attention_interval && i < h->n_layers; i++)
        if (h->layer_is_linear[i] != ((i + 1) % h->full_attention_interval != 0)) h->full_attention_interval = 0;
    return CLOVER_OK;
}

static int parse_rope(const cfg_ctx *c, hf_config *h) {
    int rc;
    json_t *rp = cfg_find(c, "rope_parameters");
    if (!rp) rp = cfg_find(c, "rope_scaling");
    if (rp && !json_is_object(rp)) return wrong_type(c, NULL, "rope_parameters", "an object", rp);
    const char *where = "rope_parameters";

    json_t *theta = rp ? obj_get(rp, "rope_theta") : NULL;
    if (theta) rc = val_f32(c, where, "rope_theta", theta, &h->rope_theta);
    else rc = cfg_f32(c, "rope_theta", true, 0, &h->rope_theta);
    if (rc) return rc;
    if (!(h->rope_theta > 0))
        return error_set(c->err, CLOVER_E_FORMAT, "%s: rope_theta %g must be positive", c->name, h->rope_theta);

    json_t *prf = rp ? obj_get(rp, "partial_rotary_factor") : NULL;
    if (prf) rc = val_f32(c, where, "partial_rotary_factor", prf, &h->partial_rotary_factor);
    else rc = cfg_f32(c, "partial_rotary_factor", false, 0.25f, &h->partial_rotary_factor);
    if (rc) return rc;
    if (!(h->partial_rotary_factor > 0 && h->partial_rotary_factor <= 1))
        return error_set(c->err, CLOVER_E_FORMAT, "%s: partial_rotary_factor %g is outside (0, 1]", c->name,
                         h->partial_rotary_factor);

    /* Without mrope_section: llama.cpp's converter writes 11, 11, 10, 0, but
     * llama.cpp's rope asserts that the sections add up to at most the
     * rotary dimensions (and divides by their sum), so a small model with
     * those sections aborts there. For text the split does not change the
     * math, so a model with fewer than 32 rotary dimensions gets the same
     * proportions scaled down to fit (at least one dimension). */
    static const int32_t dflt_sections[4] = {11, 11, 10, 0};
    memcpy(h->rope_sections, dflt_sections, sizeof dflt_sections);
    int32_t n_rot = (int32_t)((double)h->head_dim * (double)h->partial_rotary_factor);
    if (n_rot < 32) {
        h->rope_sections[0] = n_rot * 11 / 32;
        h->rope_sections[1] = n_rot * 11 / 32;
        h->rope_sections[2] = n_rot * 10 / 32;
        int32_t rest = n_rot - h->rope_sections[0] - h->rope_sections[1] - h->rope_sections[2];
        h->rope_sections[0] += rest > 0 ? rest : 0;
        if (h->rope_sections[0] == 0) h->rope_sections[0] = 1;
    }
    json_t *ms = rp ? obj_get(rp, "mrope_section") : NULL;
    if (ms) {
        if (!json_is_array(ms) || json_array_size(ms) > 4)
            return wrong_type(c, where, "mrope_section", "an array of at most 4 integers", ms);
        memset(h->rope_sections, 0, sizeof h->rope_sections);
        for (size_t i = 0; i < json_array_size(ms); i++) {
            uint32_t v;
            if ((rc = val_u32(c, where, "mrope_section", json_array_get(ms, i), &v))) return rc;
            if (v > HF_MAX_DIM) return error_set(c->err, CLOVER_E_FORMAT, "%s: mrope_section[%zu] = %u", c->name, i, v);
            h->rope_sections[i] = (int32_t)v;
        }
    }

    json_t *ty = rp ? obj_get(rp, "rope_type") : NULL;
    if (!ty && rp) ty = obj_get(rp, "type");
    if (!ty) return CLOVER_OK;
    if (!json_is_string(ty)) return wrong_type(c, where, "rope_type", "a string", ty);
    const char *t = json_string_value(ty);
    if (!strcmp(t, "default")) return CLOVER_OK;
    if (strcmp(t, "yarn") && strcmp(t, "linear"))
        return error_set(c->err, CLOVER_E_UNSUPPORTED, "%s: rope_type '%s' is not supported (default, linear, yarn)",
                         c->name, t);
    size_t tl = strlen(t) + 1;
    h->rope_type = mem_alloc(tl);
    if (!h->rope_type) return error_set(c->err, CLOVER_E_NOMEM, "%s: out of memory", c->name);
    memcpy(h->rope_type, t, tl);
    json_t *f = obj_get(rp, "factor");
    if (!f) return missing(c, where, "factor");
    if ((rc = val_f32(c, where, "factor", f, &h->rope_factor))) return rc;
    if (!strcmp(t, "yarn")) {
        json_t *o = obj_get(rp, "original_max_position_embeddings");
        if (!o) return missing(c, where, "original_max_position_embeddings");
        if ((rc = val_u32(c, where, "original_max_position_embeddings", o, &h->rope_orig_ctx))) return rc;
    }
    return CLOVER_OK;
}

static int bd_u32(const cfg_ctx *c, json_t *o, const char *key, bool required, uint32_t dflt, uint32_t *out) {
    json_t *v = obj_get(o, key);
    if (!v) {
        if (required) return missing(c, "block_diffusion", key);
        *out = dflt;
        return CLOVER_OK;
    }
    return val_u32(c, "block_diffusion", key, v, out);
}

static int bd_f32(const cfg_ctx *c, json_t *o, const char *key, bool required, float dflt, float *out) {
    json_t *v = obj_get(o, key);
    if (!v) {
        if (required) return missing(c, "block_diffusion", key);
        *out = dflt;
        return CLOVER_OK;
    }
    return val_f32(c, "block_diffusion", key, v, out);
}

/* The Clover record (SPEC.md 1.2). algorithm, block_size, threshold and
 * mask_token_id are required; the penalties and ramps default to "off". */
static int parse_block_diffusion(const cfg_ctx *c, hf_config *h) {
    const char *W = "block_diffusion";
    json_t *o = obj_get(c->root, W);
    if (!o) o = obj_get(c->text, W);
    if (!o) return CLOVER_OK;
    if (!json_is_object(o)) return wrong_type(c, NULL, W, "an object", o);
    hf_block_diffusion *b = &h->bd;
    b->present = true;
    int rc;
    json_t *alg = obj_get(o, "algorithm");
    if (!alg) return missing(c, W, "algorithm");
    if (!json_is_string(alg)) return wrong_type(c, W, "algorithm", "a string", alg);
    size_t al = strlen(json_string_value(alg)) + 1;
    b->algorithm = mem_alloc(al);
    if (!b->algorithm) return error_set(c->err, CLOVER_E_NOMEM, "%s: out of memory", c->name);
    memcpy(b->algorithm, json_string_value(alg), al);

    /* clover's own optional key beside SPEC 1.2's record (docs/DEVELOPING.md), checked as the loader checks it */
    json_t *dr = obj_get(o, "decode_rule");
    if (dr) {
        if (!json_is_string(dr)) return wrong_type(c, W, "decode_rule", "a string", dr);
        const char *v = json_string_value(dr);
        if (strcmp(v, "threshold") != 0 && strcmp(v, "causal_fallback") != 0)
            return error_set(c->err, CLOVER_E_FORMAT,
                             "%s: block_diffusion.decode_rule '%.64s' is not a decoding rule (expected 'threshold' "
                             "or 'causal_fallback')",
                             c->name, v);
        size_t dl = strlen(v) + 1;
        if (!(b->decode_rule = mem_alloc(dl))) return error_set(c->err, CLOVER_E_NOMEM, "%s: out of memory", c->name);
        memcpy(b->decode_rule, v, dl);
    }

    if ((rc = bd_u32(c, o, "block_size", true, 0, &b->block_size))) return rc;
    if ((rc = bd_f32(c, o, "threshold", true, 0, &b->threshold))) return rc;
    if ((rc = bd_u32(c, o, "mask_token_id", true, 0, &b->mask_token_id))) return rc;
    if (b->block_size == 0)
        return error_set(c->err, CLOVER_E_FORMAT, "%s: block_diffusion.block_size is 0, expected at least 1", c->name);
    if (!(b->threshold >= 0 && b->threshold <= 1))
        return error_set(c->err, CLOVER_E_FORMAT, "%s: block_diffusion.threshold %g is outside [0, 1]", c->name,
                         b->threshold);

    json_t *ce = obj_get(o, "coreset_enabled");
    b->coreset_enabled = false;
    if (ce && (rc = val_bool(c, W, "coreset_enabled", ce, &b->coreset_enabled))) return rc;
    if ((rc = bd_f32(c, o, "coreset_top_p", false, 1.0f, &b->coreset_top_p))) return rc;
    if ((rc = bd_f32(c, o, "presence_penalty", false, 0.0f, &b->presence_penalty))) return rc;
    if ((rc = bd_f32(c, o, "frequency_penalty", false, 0.0f, &b->frequency_penalty))) return rc;
    if ((rc = bd_f32(c, o, "repetition_penalty", false, 1.0f, &b->repetition_penalty))) return rc;
    if ((rc = bd_f32(c, o, "length_penalty", false, 0.0f, &b->length_penalty))) return rc;
    if ((rc = bd_u32(c, o, "length_penalty_start", false, 0, &b->length_penalty_start))) return rc;
    if ((rc = bd_u32(c, o, "length_penalty_window", false, 1, &b->length_penalty_window))) return rc;
    if ((rc = bd_f32(c, o, "think_end_bias", false, 0.0f, &b->think_end_bias))) return rc;
    if ((rc = bd_u32(c, o, "think_end_start", false, 0, &b->think_end_start))) return rc;
    if ((rc = bd_u32(c, o, "think_end_window", false, 1, &b->think_end_window))) return rc;

    b->think_end_token_id = -1;
    json_t *te = obj_get(o, "think_end_token_id");
    if (te) {
        uint32_t v;
        if ((rc = val_u32(c, W, "think_end_token_id", te, &v))) return rc;
        if (v > INT32_MAX)
            return error_set(c->err, CLOVER_E_FORMAT, "%s: block_diffusion.think_end_token_id %u exceeds %d", c->name,
                             v, INT32_MAX);
        b->think_end_token_id = (int32_t)v;
    }

    json_t *st = obj_get(o, "stop_token_ids");
    if (st) {
        if (!json_is_array(st)) return wrong_type(c, W, "stop_token_ids", "an array of integers", st);
        size_t n = json_array_size(st);
        if (n) {
            b->stop_token_ids = mem_calloc(n, sizeof *b->stop_token_ids);
            if (!b->stop_token_ids) return error_set(c->err, CLOVER_E_NOMEM, "%s: out of memory", c->name);
        }
        for (size_t i = 0; i < n; i++) {
            if ((rc = val_u32(c, W, "stop_token_ids", json_array_get(st, i), &b->stop_token_ids[i]))) return rc;
            b->n_stop_token_ids = i + 1;
        }
    }
    return CLOVER_OK;
}

/* ---- entry points ---- */

int hf_config_parse(hf_config *out, const char *json, size_t len, const char *name, clover_error *err) {
    memset(out, 0, sizeof *out);
    if (!name) name = "config.json";
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return error_set(err, CLOVER_E_FORMAT, "%s: not valid JSON: %s (line %d, column %d)", name, jerr.text,
                         jerr.line, jerr.column);
    cfg_ctx c = {.root = root, .name = name, .err = err};
    int rc = CLOVER_OK;
    if (!json_is_object(root)) {
        rc = error_set(err, CLOVER_E_FORMAT, "%s: is %s, expected a JSON object", name, json_util_kind(root));
        goto done;
    }
    json_t *tc = obj_get(root, "text_config");
    if (tc && !json_is_object(tc)) {
        rc = wrong_type(&c, NULL, "text_config", "an object", tc);
        goto done;
    }
    c.text = tc;
    /* Both model_types (top level, text_config) must name Qwen3.5-MoE. */
    for (int i = 0; i < 2; i++) {
        json_t *mt = obj_get(i ? tc : root, "model_type");
        if (!mt) continue;
        const char *s = json_string_value(mt);
        if (!s) {
            rc = wrong_type(&c, i ? "text_config" : NULL, "model_type", "a string", mt);
            goto done;
        }
        if (strcmp(s, "qwen3_5_moe") && strcmp(s, "qwen3_5_moe_text")) {
            rc = error_set(err, CLOVER_E_UNSUPPORTED,
                           "%s: model_type '%s' is not a Qwen3.5-MoE (qwen3_5_moe or qwen3_5_moe_text)", name, s);
            goto done;
        }
    }
    if ((rc = parse_geometry(&c, out)) || (rc = parse_layer_types(&c, out)) || (rc = parse_rope(&c, out)) ||
        (rc = parse_block_diffusion(&c, out)))
        goto done;
done:
    json_decref(root);
    if (rc) hf_config_free(out);
    return rc;
}

int hf_config_load(hf_config *out, const char *path, clover_error *err) {
    memset(out, 0, sizeof *out);
    char *buf;
    size_t len;
    int rc = json_util_read_file(path, 64u << 20, &buf, &len, err);
    if (rc) return rc;
    rc = hf_config_parse(out, buf, len, path, err);
    mem_free(buf);
    return rc;
}

void hf_config_free(hf_config *c) {
    if (!c) return;
    mem_free(c->layer_is_linear);
    mem_free(c->rope_type);
    mem_free(c->bd.algorithm);
    mem_free(c->bd.decode_rule);
    mem_free(c->bd.stop_token_ids);
    memset(c, 0, sizeof *c);
}

uint64_t hf_config_conv_dim(const hf_config *c) {
    return 2ull * c->lin_n_k_heads * c->lin_k_head_dim + (uint64_t)c->lin_n_v_heads * c->lin_v_head_dim;
}
