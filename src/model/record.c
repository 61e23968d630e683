/*
 * record.c: the block-diffusion record (SPEC.md 1.2 and 6, clover.* keys).
 * clover.algorithm decides whether there is one at all; with it, the four
 * fields the generation loop cannot run without (algorithm, block size,
 * threshold, mask id) are required and the rest default to "off"
 * (no coreset, no penalties, no ramps, no extra stop ids). Every value the
 * loop divides by or indexes with is range-checked here, once, so the
 * engine never meets a record that makes it divide by zero or index past
 * the vocabulary. clover.decode_rule is clover's own optional key beside
 * SPEC.md 1.2's record (docs/DEVELOPING.md): "threshold" (absent: the
 * same) or "causal_fallback" (src/engine/generate_causal.c).
 */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "model/model.h"

#define ALGO_LOW_CONFIDENCE "low_confidence"

static int get_f32_opt(const gguf_file *f, const char *key, float dflt, float *out, clover_error *err) {
    int rc = gguf_get_f32_or(f, key, dflt, out, err);
    if (rc) return rc;
    if (!isfinite(*out)) return error_set(err, CLOVER_E_FORMAT, "%s = %g is not a finite number", key, (double)*out);
    return CLOVER_OK;
}

static int get_u32_opt(const gguf_file *f, const char *key, uint32_t dflt, uint32_t *out, clover_error *err) {
    return gguf_get_u32_or(f, key, dflt, out, err);
}

static int require(const gguf_file *f, const char *key, clover_error *err) {
    if (gguf_kv_find(f, key)) return CLOVER_OK;
    return error_set(err, CLOVER_E_FORMAT, "missing %s (required when clover.algorithm is set)", key);
}

/* A ramp's window divides the distance from its start: 0 is only allowed when the ramp is off. */
static int check_window(const char *key, uint32_t window, float strength, const char *strength_key, clover_error *err) {
    if (window == 0 && strength != 0.0f)
        return error_set(err, CLOVER_E_FORMAT, "%s = 0 while %s = %g (expected a window >= 1)", key, strength_key,
                         (double)strength);
    return CLOVER_OK;
}

static int read_stop_ids(const gguf_file *f, model_record *rec, clover_error *err) {
    const char *key = "clover.stop_token_ids";
    if (!gguf_kv_find(f, key)) return CLOVER_OK;
    const gguf_value *v;
    int rc = gguf_get_array(f, key, &v, err);
    if (rc) return rc;
    uint64_t n = v->v.arr.len;
    if (n == 0) return CLOVER_OK;
    if (n > (1u << 20))
        return error_set(err, CLOVER_E_FORMAT, "%s has %llu entries (at most 1048576)", key, (unsigned long long)n);
    uint32_t *ids = mem_calloc((size_t)n, sizeof *ids);
    if (!ids) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", key);
    const void *d = v->v.arr.data;
    for (uint64_t i = 0; i < n; i++) {
        int64_t x;
        switch (v->v.arr.type) {
        case GGUF_VT_U32: x = ((const uint32_t *)d)[i]; break;
        case GGUF_VT_I32: x = ((const int32_t *)d)[i]; break;
        case GGUF_VT_U16: x = ((const uint16_t *)d)[i]; break;
        case GGUF_VT_I16: x = ((const int16_t *)d)[i]; break;
        case GGUF_VT_U8: x = ((const uint8_t *)d)[i]; break;
        case GGUF_VT_I8: x = ((const int8_t *)d)[i]; break;
        case GGUF_VT_U64: x = ((const uint64_t *)d)[i] > UINT32_MAX ? -1 : (int64_t)((const uint64_t *)d)[i]; break;
        case GGUF_VT_I64: x = ((const int64_t *)d)[i]; break;
        default:
            mem_free(ids);
            return error_set(err, CLOVER_E_FORMAT, "%s is an array of %s (expected u32 token ids)", key,
                             gguf_value_type_name(v->v.arr.type));
        }
        if (x < 0 || x > UINT32_MAX) {
            mem_free(ids);
            return error_set(err, CLOVER_E_FORMAT, "%s: entry %llu = %lld is not a token id", key,
                             (unsigned long long)i, (long long)x);
        }
        ids[i] = (uint32_t)x;
    }
    rec->stop_token_ids = ids;
    rec->n_stop_token_ids = (size_t)n;
    return CLOVER_OK;
}

/* clover.decode_rule: optional; a value other than the two is a load error naming it. */
static int read_decode_rule(const gguf_file *f, model_record *rec, clover_error *err) {
    rec->decode_rule = CLOVER_RULE_THRESHOLD;
    if (!gguf_kv_find(f, "clover.decode_rule")) return CLOVER_OK;
    const gguf_string *v;
    int rc = gguf_get_string(f, "clover.decode_rule", &v, err);
    if (rc) return rc;
    if (v->len == 9 && !memcmp(v->str, "threshold", 9)) return CLOVER_OK;
    if (v->len == 15 && !memcmp(v->str, "causal_fallback", 15)) {
        rec->decode_rule = CLOVER_RULE_CAUSAL;
        return CLOVER_OK;
    }
    return error_set(err, CLOVER_E_FORMAT,
                     "clover.decode_rule = '%.*s' is not a decoding rule (expected 'threshold' or 'causal_fallback')",
                     v->len > 64 ? 64 : (int)v->len, v->str);
}

static int read_fields(const gguf_file *f, uint32_t n_vocab, model_record *rec, clover_error *err) {
    int rc;
    const gguf_string *algo;
    if ((rc = gguf_get_string(f, "clover.algorithm", &algo, err))) return rc;
    if (algo->len != strlen(ALGO_LOW_CONFIDENCE) || memcmp(algo->str, ALGO_LOW_CONFIDENCE, algo->len) != 0)
        return error_set(err, CLOVER_E_UNSUPPORTED, "clover.algorithm = '%.64s' is not supported (expected '%s')",
                         algo->str, ALGO_LOW_CONFIDENCE);
    rec->algorithm = algo->str;

    if ((rc = require(f, "clover.block_size", err)) ||
        (rc = gguf_get_u32(f, "clover.block_size", &rec->block_size, err)))
        return rc;
    if (rec->block_size == 0)
        return error_set(err, CLOVER_E_FORMAT, "clover.block_size = 0 is invalid (expected a block size >= 1)");

    if ((rc = require(f, "clover.threshold", err)) || (rc = gguf_get_f32(f, "clover.threshold", &rec->threshold, err)))
        return rc;
    if (!(rec->threshold >= 0.0f && rec->threshold <= 1.0f))
        return error_set(err, CLOVER_E_FORMAT, "clover.threshold = %g is out of range (expected 0..1)",
                         (double)rec->threshold);

    if ((rc = require(f, "clover.mask_token_id", err)) ||
        (rc = gguf_get_u32(f, "clover.mask_token_id", &rec->mask_token_id, err)))
        return rc;
    if (rec->mask_token_id >= n_vocab)
        return error_set(err, CLOVER_E_FORMAT, "clover.mask_token_id = %u is not a token id (vocabulary size %u)",
                         rec->mask_token_id, n_vocab);

    bool coreset = false;
    if (gguf_kv_find(f, "clover.coreset_enabled") && (rc = gguf_get_bool(f, "clover.coreset_enabled", &coreset, err)))
        return rc;
    rec->coreset_enabled = coreset ? 1 : 0;
    if ((rc = get_f32_opt(f, "clover.coreset_top_p", 1.0f, &rec->coreset_top_p, err))) return rc;
    if (!(rec->coreset_top_p > 0.0f && rec->coreset_top_p <= 1.0f))
        return error_set(err, CLOVER_E_FORMAT,
                         "clover.coreset_top_p = %g is out of range (expected more than 0, at most 1)",
                         (double)rec->coreset_top_p);

    if ((rc = get_f32_opt(f, "clover.presence_penalty", 0.0f, &rec->presence_penalty, err))) return rc;
    if ((rc = get_f32_opt(f, "clover.frequency_penalty", 0.0f, &rec->frequency_penalty, err))) return rc;
    if ((rc = get_f32_opt(f, "clover.repetition_penalty", 1.0f, &rec->repetition_penalty, err))) return rc;
    if (!(rec->repetition_penalty > 0.0f))
        return error_set(err, CLOVER_E_FORMAT, "clover.repetition_penalty = %g is invalid (expected > 0; 1 = none)",
                         (double)rec->repetition_penalty);

    if ((rc = get_f32_opt(f, "clover.length_penalty", 0.0f, &rec->length_penalty, err))) return rc;
    if ((rc = get_u32_opt(f, "clover.length_penalty_start", 0, &rec->length_penalty_start, err))) return rc;
    if ((rc = get_u32_opt(f, "clover.length_penalty_window", 1, &rec->length_penalty_window, err))) return rc;
    if ((rc = check_window("clover.length_penalty_window", rec->length_penalty_window, rec->length_penalty,
                           "clover.length_penalty", err)))
        return rc;

    if ((rc = get_f32_opt(f, "clover.think_end_bias", 0.0f, &rec->think_end_bias, err))) return rc;
    if ((rc = get_u32_opt(f, "clover.think_end_start", 0, &rec->think_end_start, err))) return rc;
    if ((rc = get_u32_opt(f, "clover.think_end_window", 1, &rec->think_end_window, err))) return rc;
    if ((rc = check_window("clover.think_end_window", rec->think_end_window, rec->think_end_bias,
                           "clover.think_end_bias", err)))
        return rc;
    rec->think_end_token_id = -1;
    if (gguf_kv_find(f, "clover.think_end_token_id") &&
        (rc = gguf_get_i32(f, "clover.think_end_token_id", &rec->think_end_token_id, err)))
        return rc;
    if (rec->think_end_token_id < -1 || (rec->think_end_token_id >= 0 && (uint32_t)rec->think_end_token_id >= n_vocab))
        return error_set(err, CLOVER_E_FORMAT,
                         "clover.think_end_token_id = %d is not a token id (vocabulary size %u; -1 for none)",
                         rec->think_end_token_id, n_vocab);

    if ((rc = read_decode_rule(f, rec, err))) return rc;
    return read_stop_ids(f, rec, err);
}

int model_record_read(const gguf_file *f, uint32_t n_vocab, model_record *rec, bool *present, clover_error *err) {
    memset(rec, 0, sizeof *rec);
    *present = false;
    if (!gguf_kv_find(f, "clover.algorithm")) return CLOVER_OK;
    int rc = read_fields(f, n_vocab, rec, err);
    if (rc) {
        model_record_free(rec);
        return rc;
    }
    *present = true;
    return CLOVER_OK;
}

void model_record_free(model_record *rec) {
    mem_free((void *)rec->stop_token_ids);
    memset(rec, 0, sizeof *rec);
}
