/*
 * model.c: the public model API. Loading is a fixed sequence of checks over
 * the mapped file (architecture, hyper-parameters, tokenizer metadata,
 * record, weights, then the tokenizer built from its metadata); the first
 * failure stops it, gets the file name in front of its
 * message and frees whatever was built, so a caller never sees a half-loaded
 * model.
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/model.h"
#include "quant/gemm_amx_pack.h"
#include "quant/quant.h"

static int check_architecture(const gguf_file *f, clover_error *err) {
    if (!gguf_kv_find(f, "general.architecture"))
        return error_set(err, CLOVER_E_FORMAT, "missing general.architecture (expected '" MODEL_ARCH "')");
    const gguf_string *arch;
    int rc = gguf_get_string(f, "general.architecture", &arch, err);
    if (rc) return rc;
    if (strcmp(arch->str, MODEL_ARCH) != 0)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "general.architecture = '%.64s' is not supported (expected '" MODEL_ARCH "')", arch->str);
    return CLOVER_OK;
}

/* The encoder and decoder of the file's tokenizer, when it has one: a
 * model without tokenizer metadata still loads (token ids in and out), but
 * metadata that is there and cannot be used is a load error, like any other
 * bad key. */
static int load_tokenizer(clover_model *m, clover_error *err) {
    if (!m->tok.model) return CLOVER_OK;
    return tokenizer_load_gguf(&m->tokenizer, m->file, err); /* its messages name the file and key */
}

/* The file's Q4_K tensors as stable memory (add) for the AMX level's
 * repacked panels (gemm_amx_pack.h: read-only bytes for the model's life),
 * or no longer, their panels freed (before the file is unmapped). */
static void stable_q4k(const gguf_file *f, int add) {
    for (size_t i = 0; f && i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (t->type != QUANT_Q4_K || !t->data || !t->nbytes) continue;
        if (add)
            gemm_amx_stable_add(t->data, (size_t)t->nbytes);
        else
            gemm_amx_stable_remove(t->data, (size_t)t->nbytes);
    }
}

static int load_steps(clover_model *m, clover_error *err) {
    int rc;
    if ((rc = check_architecture(m->file, err))) return rc;
    if ((rc = model_hparams_read(m->file, &m->hp, err))) return rc;
    if ((rc = model_tokenizer_read(m->file, m->hp.n_vocab, &m->tok, err))) return rc;
    if ((rc = model_record_read(m->file, m->hp.n_vocab, &m->record, &m->has_record, err))) return rc;
    if ((rc = model_weights_bind(m, err))) return rc;
    stable_q4k(m->file, 1);
    return load_tokenizer(m, err); /* last: the costliest step, once the file is known to be a model */
}

/* Takes ownership of f (closed on failure). */
static int load_from(clover_model **out, gguf_file *f, clover_error *err) {
    clover_model *m = mem_calloc(1, sizeof *m);
    if (!m) {
        gguf_close(f);
        return error_set(err, CLOVER_E_NOMEM, "out of memory for the model");
    }
    m->file = f;
    m->tok.bos_id = m->tok.eos_id = m->tok.eot_id = m->tok.pad_id = m->tok.unk_id = m->tok.mask_id = -1;
    int rc = load_steps(m, err);
    if (rc) {
        /* the GGUF getters name the file themselves */
        const char *name = gguf_name(f);
        if (err && strncmp(err->message, name, strlen(name)) != 0) error_prefix(err, "%s", name);
        clover_model_free(m);
        return rc;
    }
    error_clear(err);
    *out = m;
    return CLOVER_OK;
}

int clover_model_load(clover_model **out, const char *path, clover_error *err) {
    if (!out || !path) return error_set(err, CLOVER_E_INVALID, "clover_model_load: out and path must not be NULL");
    *out = NULL;
    gguf_file *f;
    int rc = gguf_open(&f, path, err);
    if (rc) return rc;
    return load_from(out, f, err);
}

int clover_model_load_memory(clover_model **out, const void *buf, size_t len, const char *name, clover_error *err) {
    if (!out || !buf) return error_set(err, CLOVER_E_INVALID, "clover_model_load_memory: out and buf must not be NULL");
    *out = NULL;
    gguf_file *f;
    int rc = gguf_open_memory(&f, buf, len, name ? name : "(memory)", err);
    if (rc) return rc;
    return load_from(out, f, err);
}

void clover_model_free(clover_model *m) {
    if (!m) return;
    model_record_free(&m->record);
    model_tokenizer_free(&m->tok);
    tokenizer_free(m->tokenizer);
    mem_free(m->layers);
    mem_free(m->layer_kinds);
    stable_q4k(m->file, 0);
    gguf_close(m->file);
    mem_free(m);
}

static void fill_type_stats(const gguf_file *f, clover_model_info *info) {
    clover_type_stats by_type[QUANT_TYPE_LIMIT];
    memset(by_type, 0, sizeof by_type);
    size_t n = gguf_tensor_count(f);
    for (size_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        uint64_t elems = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++)
            elems *= t->ne[d];
        uint32_t ty = t->type < QUANT_TYPE_LIMIT ? t->type : QUANT_TYPE_LIMIT - 1;
        by_type[ty].n_tensors++;
        by_type[ty].n_params += elems;
        by_type[ty].n_bytes += t->nbytes;
        info->n_params += elems;
        info->n_bytes += t->nbytes;
    }
    info->n_tensors = n;
    for (uint32_t ty = 0; ty < QUANT_TYPE_LIMIT && info->n_types < CLOVER_MAX_TYPE_STATS; ty++) {
        if (!by_type[ty].n_tensors) continue;
        by_type[ty].type = quant_type_name(ty);
        info->types[info->n_types++] = by_type[ty];
    }
}

void clover_model_get_info(const clover_model *m, clover_model_info *info) {
    memset(info, 0, sizeof *info);
    const model_hparams *hp = &m->hp;
    const gguf_file *f = m->file;
    const gguf_string *s;
    info->source = gguf_name(f);
    info->architecture = MODEL_ARCH;
    if (gguf_kv_find(f, "general.name") && gguf_get_string(f, "general.name", &s, NULL) == CLOVER_OK)
        info->name = s->str;
    info->file_bytes = gguf_file_size(f);

    info->n_layer = hp->n_layer;
    info->n_embd = hp->n_embd;
    info->n_vocab = hp->n_vocab;
    info->n_ctx_train = hp->n_ctx_train;
    info->rms_eps = hp->rms_eps;
    info->n_head = hp->n_head;
    info->n_head_kv = hp->n_head_kv;
    info->head_dim = hp->head_dim;
    info->n_rot = hp->n_rot;
    info->rope_freq_base = hp->rope_freq_base;
    info->gdn_key_heads = hp->gdn_nk;
    info->gdn_value_heads = hp->gdn_nv;
    info->gdn_key_dim = hp->gdn_dk;
    info->gdn_value_dim = hp->gdn_dv;
    info->gdn_conv_kernel = hp->ssm_conv_kernel;
    info->n_expert = hp->n_expert;
    info->n_expert_used = hp->n_expert_used;
    info->expert_ff = hp->n_ff_exp;
    info->shared_expert_ff = hp->n_ff_shexp;
    info->full_attention_interval = hp->full_attention_interval;
    info->layer_kinds = m->layer_kinds;
    info->record = m->has_record ? &m->record : NULL;

    fill_type_stats(f, info);

    info->tokenizer_model = m->tok.model;
    info->tokenizer_pre = m->tok.pre;
    info->n_tokens = m->tok.n_tokens;
    info->n_merges = m->tok.n_merges;
    info->bos_id = m->tok.bos_id;
    info->eos_id = m->tok.eos_id;
    info->eot_id = m->tok.eot_id;
    info->pad_id = m->tok.pad_id;
    info->add_bos = m->tok.add_bos;
}
