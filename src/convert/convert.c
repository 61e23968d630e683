/*
 * convert.c: `clover convert` end to end: read config.json, open the
 * shards, plan every output tensor (which checks every name, dtype and
 * shape before a byte is written), read the tokenizer, declare metadata and
 * tensors to the GGUF writer, stream the data, and finally load the file
 * written with every check a run makes, so the user is never handed a file
 * clover will not run. Any failure frees the writer, which removes the
 * unfinished file (a written file that fails to load is removed too).
 */
#include "convert/convert.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/safe_output.h"
#include "convert/convert_internal.h"
#include "convert/hf_checkpoint.h"
#include "quant/quant.h"

/* The directory's last component, for general.name. */
static void model_name(const char *dir, char *out, size_t n) {
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && dir[start - 1] != '/') start--;
    size_t l = len - start;
    if (l == 0 || l >= n) {
        snprintf(out, n, "model");
        return;
    }
    memcpy(out, dir + start, l);
    out[l] = '\0';
}

static int check_record(const hf_config *cfg, const char *path, clover_error *err) {
    if (!cfg->bd.present) return CLOVER_OK;
    if (cfg->bd.mask_token_id >= cfg->vocab_size)
        return error_set(err, CLOVER_E_FORMAT, "%s: block_diffusion.mask_token_id %u is not below vocab_size %u", path,
                         cfg->bd.mask_token_id, cfg->vocab_size);
    if (cfg->bd.think_end_token_id >= 0 && (uint32_t)cfg->bd.think_end_token_id >= cfg->vocab_size)
        return error_set(err, CLOVER_E_FORMAT, "%s: block_diffusion.think_end_token_id %d is not below vocab_size %u",
                         path, cfg->bd.think_end_token_id, cfg->vocab_size);
    if (cfg->conv_kernel < 2)
        return error_set(err, CLOVER_E_FORMAT,
                         "%s: linear_conv_kernel_dim %u leaves no right conv taps for the block_diffusion record", path,
                         cfg->conv_kernel);
    return CLOVER_OK;
}

int convert_run(const convert_options *opt, convert_report *report, clover_error *err) {
    clover_error local;
    if (!err) err = &local;
    if (report) memset(report, 0, sizeof *report);
    if (!opt || !opt->input_dir || !opt->output_path)
        return error_set(err, CLOVER_E_INVALID, "convert: an input directory and an output path are required");
    if ((unsigned)opt->type > CONVERT_Q4_K_M)
        return error_set(err, CLOVER_E_INVALID, "convert: unknown output type %d", (int)opt->type);

    hf_config cfg;
    hf_checkpoint ck;
    hf_vocab vocab;
    conv_plan plan;
    gguf_writer *w = NULL;
    memset(&ck, 0, sizeof ck);
    memset(&vocab, 0, sizeof vocab);
    memset(&plan, 0, sizeof plan);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", opt->input_dir);
    const char *inputs[] = {opt->input_dir};
    int rc = safe_output_check_inputs(opt->output_path, inputs, 1, err);
    if (rc) return rc;
    if ((rc = hf_config_load(&cfg, path, err))) return rc;
    if ((rc = check_record(&cfg, path, err))) goto done;
    if ((rc = hf_checkpoint_open(&ck, opt->input_dir, err))) goto done;
    if ((rc = tensor_map_plan(&plan, &ck, &cfg, err))) goto done;
    if ((rc = hf_vocab_load(&vocab, opt->input_dir, &cfg, err))) goto done;

    w = gguf_writer_create();
    if (!w) {
        rc = error_set(err, CLOVER_E_NOMEM, "out of memory for the GGUF writer");
        goto done;
    }
    char name[256];
    model_name(opt->input_dir, name, sizeof name);
    if ((rc = convert_write_metadata(w, &cfg, &vocab, name, opt->type, err))) goto done;
    uint64_t total = 0;
    for (size_t i = 0; i < plan.n; i++) {
        conv_tensor *t = &plan.t[i];
        t->type = convert_pick_type(opt->type, t->role, t->ne[0]);
        if ((rc = gguf_writer_add_tensor(w, t->name, t->n_dims, t->ne, t->type, err))) goto done;
        total += (uint64_t)quant_row_bytes(t->type, (size_t)t->ne[0]) * conv_tensor_rows(t);
    }
    gguf_writer_set_verify(w, convert_verify_loads, NULL);
    if ((rc = gguf_writer_begin(w, opt->output_path, err))) goto done;
    if ((rc = convert_write_tensors(w, &plan, opt, total, err))) goto done;
    if ((rc = gguf_writer_finish(w, err))) goto done;

    if (report) {
        report->n_tensors = plan.n;
        report->n_bytes = total;
        report->n_vision_skipped = ck.n_vision;
        report->n_mtp_skipped = ck.n_mtp;
        report->has_record = cfg.bd.present;
        report->n_layers = cfg.n_layers;
        report->n_vocab = cfg.vocab_size;
        report->dk_ne_dv = cfg.lin_k_head_dim != cfg.lin_v_head_dim;
    }
done:
    gguf_writer_free(w);
    hf_vocab_free(&vocab);
    tensor_map_free(&plan);
    hf_checkpoint_close(&ck);
    hf_config_free(&cfg);
    return rc;
}
