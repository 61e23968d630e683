/*
 * dump.c: the first-preview parity dump (seed 000's dump_first_preview):
 * the prompt ids and, for every row of the first pass, the ten largest raw
 * logits (before any forbidding or penalty) with their ids, as one JSON
 * object {"prompt_ids": [...], "rows": [{"ids": [...], "logits": [...]}]}.
 * A partial selection per row (ids ascending, replace only on a strictly
 * larger value) gives the seed's order: value descending, ties lower id.
 * Written as every output is (base/safe_output.h): to a temporary beside
 * the path, renamed when complete, and never over the model being read.
 */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/safe_output.h"
#include "engine/request.h"

#define DUMP_TOP 10

/* The top min(10, n) of row: ids[] by value descending, ties lower id first. */
static size_t row_top(const float *row, size_t n, int32_t *ids) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        float v = row[i];
        if (isnan(v)) continue;
        if (k == DUMP_TOP && !(v > row[ids[k - 1]])) continue;
        size_t j = k < DUMP_TOP ? k++ : k - 1;
        while (j > 0 && v > row[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = (int32_t)i;
    }
    return k;
}

static json_t *dump_json(const int32_t *prompt, size_t n_prompt, const float *logits, size_t b, size_t n_vocab) {
    json_t *root = json_object(), *pids = json_array(), *rows = json_array();
    if (!root || !pids || !rows) goto fail;
    json_object_set_new(root, "prompt_ids", pids);
    json_object_set_new(root, "rows", rows);
    for (size_t i = 0; i < n_prompt; i++)
        if (json_array_append_new(pids, json_integer(prompt[i]))) goto fail_root;
    for (size_t r = 0; r < b; r++) {
        const float *row = logits + r * n_vocab;
        int32_t top[DUMP_TOP];
        size_t k = row_top(row, n_vocab, top);
        json_t *o = json_object(), *ids = json_array(), *vals = json_array();
        if (!o || !ids || !vals) {
            json_decref(o);
            json_decref(ids);
            json_decref(vals);
            goto fail_root;
        }
        json_object_set_new(o, "ids", ids);
        json_object_set_new(o, "logits", vals);
        if (json_array_append_new(rows, o)) goto fail_root;
        for (size_t i = 0; i < k; i++) {
            if (json_array_append_new(ids, json_integer(top[i]))) goto fail_root;
            float v = row[top[i]];
            if (json_array_append_new(vals, isfinite(v) ? json_real((double)v) : json_null())) goto fail_root;
        }
    }
    return root;
fail:
    json_decref(pids);
    json_decref(rows);
fail_root:
    json_decref(root);
    return NULL;
}

int engine_dump_first_preview(const char *path, const int32_t *prompt, size_t n_prompt, const float *logits,
                              size_t b, size_t n_vocab, clover_error *err) {
    json_t *root = dump_json(prompt, n_prompt, logits, b, n_vocab);
    if (!root) return error_set(err, CLOVER_E_NOMEM, "first-preview dump: no memory for the JSON");
    safe_output out;
    int rc = safe_output_open(&out, path, err);
    if (rc != CLOVER_OK) {
        json_decref(root);
        return rc;
    }
    rc = json_dumpfd(root, out.fd, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (rc) {
        safe_output_abort(&out);
        return error_set(err, CLOVER_E_IO, "first-preview dump '%s': cannot write the file", path);
    }
    return safe_output_commit(&out, err);
}
