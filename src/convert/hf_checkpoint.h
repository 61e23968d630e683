/*
 * hf_checkpoint.h: every tensor of a Hugging Face checkpoint directory,
 * whatever its sharding, under one name table.
 *
 * Names are normalised to the text trunk's own ("layers.3.mlp.gate.weight",
 * "embed_tokens.weight", "lm_head.weight") whichever prefix the checkpoint
 * uses (`model.language_model.` of the released multimodal checkpoints,
 * `model.` of a save_pretrained of the causal LM), so the tensor map is
 * written once. The vision tower (`model.visual.*`) and the multi-token
 * prediction head (`mtp.*`) are counted and left out. Two tensors that
 * normalise to one name (a tensor in two shards, or under both prefixes)
 * are an error.
 */
#ifndef CLOVER_CONVERT_HF_CHECKPOINT_H
#define CLOVER_CONVERT_HF_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "clover.h"
#include "convert/safetensors.h"

typedef struct hf_entry {
    const char *key;      /* normalised name */
    const char *name;     /* the name in the file */
    const st_tensor *t;
    const st_file *file;
    bool used;            /* claimed by the tensor map */
} hf_entry;

typedef struct hf_checkpoint {
    char *dir;
    st_file **files;      /* [n_files] */
    size_t n_files;
    hf_entry *entries;    /* [n_entries], sorted by key */
    size_t n_entries;
    size_t n_vision;      /* tensors skipped */
    size_t n_mtp;
    const char *prefix;   /* "model.language_model." or "model.": for messages about missing tensors */
} hf_checkpoint;

/* Opens dir/model.safetensors.index.json and the shards it names, or
 * dir/model.safetensors, or every dir/ *.safetensors. */
int hf_checkpoint_open(hf_checkpoint *ck, const char *dir, clover_error *err);
void hf_checkpoint_close(hf_checkpoint *ck);

/* The entry under a normalised name, or NULL. */
hf_entry *hf_checkpoint_find(const hf_checkpoint *ck, const char *key);

#endif
