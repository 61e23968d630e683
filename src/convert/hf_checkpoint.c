/*
 * hf_checkpoint.c: finding the shards, opening them, building the name table.
 *
 * The index (model.safetensors.index.json) is trusted only as a list of
 * shard files: each shard's own header says what it holds, and a tensor the
 * index places in a shard that lacks it is an error, so a stale index cannot
 * silently drop a weight. Shard names are plain file names inside the
 * directory: an index cannot point outside it.
 */
#include "convert/hf_checkpoint.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/error.h"
#include "convert/json_util.h"

static char *str_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = mem_alloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + 1 + strlen(name) + 1;
    char *p = mem_alloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int add_file(hf_checkpoint *ck, const char *name, clover_error *err) {
    for (size_t i = 0; i < ck->n_files; i++) {
        const char *fn = st_file_name(ck->files[i]);
        const char *base = strrchr(fn, '/');
        if (!strcmp(base ? base + 1 : fn, name)) return CLOVER_OK;
    }
    char *path = path_join(ck->dir, name);
    if (!path) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", ck->dir);
    st_file **nf = realloc(ck->files, (ck->n_files + 1) * sizeof *nf);
    if (!nf) {
        mem_free(path);
        return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", ck->dir);
    }
    ck->files = nf;
    int rc = st_file_open(&ck->files[ck->n_files], path, err);
    mem_free(path);
    if (rc) return rc;
    ck->n_files++;
    return CLOVER_OK;
}

static bool safe_shard_name(const char *s) {
    return s[0] && s[0] != '.' && !strchr(s, '/') && !strchr(s, '\\');
}

static int open_from_index(hf_checkpoint *ck, const char *index_path, clover_error *err) {
    json_t *root;
    int rc = json_util_load(index_path, 256u << 20, &root, err);
    if (rc) return rc;
    json_t *wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    if (!wm || !json_is_object(wm)) {
        rc = error_set(err, CLOVER_E_FORMAT, "%s: expected an object with a 'weight_map' object", index_path);
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(wm, key, val) {
        const char *fname = json_string_value(val);
        if (!fname) {
            rc = error_set(err, CLOVER_E_FORMAT, "%s: weight_map['%s'] is %s, expected a file name", index_path, key,
                           json_util_kind(val));
            goto done;
        }
        if (!safe_shard_name(fname)) {
            rc = error_set(err, CLOVER_E_FORMAT, "%s: weight_map['%s'] names '%s', not a file in the directory",
                           index_path, key, fname);
            goto done;
        }
        if ((rc = add_file(ck, fname, err))) goto done;
    }
    /* Every tensor the index lists must be where it says. */
    json_object_foreach(wm, key, val) {
        const char *fname = json_string_value(val);
        for (size_t i = 0; i < ck->n_files; i++) {
            const char *fn = st_file_name(ck->files[i]);
            const char *base = strrchr(fn, '/');
            if (strcmp(base ? base + 1 : fn, fname)) continue;
            if (!st_file_find(ck->files[i], key)) {
                rc = error_set(err, CLOVER_E_FORMAT, "%s: missing tensor '%s' (the index places it in this file)", fn,
                               key);
                goto done;
            }
        }
    }
done:
    json_decref(root);
    return rc;
}

static int open_all_shards(hf_checkpoint *ck, clover_error *err) {
    DIR *d = opendir(ck->dir);
    if (!d) return error_set(err, CLOVER_E_IO, "%s: cannot open the directory", ck->dir);
    char **names = NULL;
    size_t n = 0;
    int rc = CLOVER_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l <= 12 || strcmp(de->d_name + l - 12, ".safetensors") || de->d_name[0] == '.') continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn || !(nn[n] = str_dup(de->d_name))) {
            if (nn) names = nn;
            rc = error_set(err, CLOVER_E_NOMEM, "%s: out of memory", ck->dir);
            break;
        }
        names = nn;
        n++;
    }
    closedir(d);
    if (!rc && n == 0)
        rc = error_set(err, CLOVER_E_IO, "%s: no model.safetensors.index.json, model.safetensors or *.safetensors",
                       ck->dir);
    if (!rc) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (!rc) rc = add_file(ck, names[i], err);
        mem_free(names[i]);
    }
    free(names);
    return rc;
}

/* Normalises name; returns 0 trunk, 1 vision, 2 MTP. *key points into name. */
static int classify(const char *name, const char **key, const char **prefix) {
    static const char *const lm = "model.language_model.", *const m = "model.";
    *prefix = NULL;
    if (!strncmp(name, "mtp.", 4) || !strncmp(name, "model.mtp.", 10)) return 2;
    if (!strncmp(name, "model.visual.", 13) || !strncmp(name, "visual.", 7) ||
        !strncmp(name, "model.vision_tower.", 19))
        return 1;
    if (!strncmp(name, lm, strlen(lm))) {
        *key = name + strlen(lm);
        *prefix = lm;
    } else if (!strncmp(name, m, strlen(m))) {
        *key = name + strlen(m);
        *prefix = m;
    } else {
        *key = name;
    }
    return 0;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const hf_entry *)a)->key, ((const hf_entry *)b)->key);
}

static int build_table(hf_checkpoint *ck, clover_error *err) {
    size_t total = 0;
    for (size_t i = 0; i < ck->n_files; i++) total += st_file_tensor_count(ck->files[i]);
    ck->entries = total ? mem_calloc(total, sizeof *ck->entries) : NULL;
    if (total && !ck->entries)
        return error_set(err, CLOVER_E_NOMEM, "%s: out of memory for %zu tensors", ck->dir, total);
    size_t n_lm = 0, n_m = 0;
    for (size_t i = 0; i < ck->n_files; i++) {
        const st_file *f = ck->files[i];
        for (size_t j = 0; j < st_file_tensor_count(f); j++) {
            const st_tensor *t = st_file_tensor_at(f, j);
            const char *key = NULL, *prefix;
            int cls = classify(t->name, &key, &prefix);
            if (cls == 1) {
                ck->n_vision++;
                continue;
            }
            if (cls == 2) {
                ck->n_mtp++;
                continue;
            }
            if (prefix && !strcmp(prefix, "model.language_model.")) n_lm++;
            else if (prefix) n_m++;
            hf_entry *e = &ck->entries[ck->n_entries++];
            e->key = key;
            e->name = t->name;
            e->t = t;
            e->file = f;
        }
    }
    ck->prefix = n_lm >= n_m && n_lm ? "model.language_model." : "model.";
    if (ck->n_entries) qsort(ck->entries, ck->n_entries, sizeof *ck->entries, cmp_entry);
    for (size_t i = 1; i < ck->n_entries; i++) {
        const hf_entry *a = &ck->entries[i - 1], *b = &ck->entries[i];
        if (!strcmp(a->key, b->key))
            return error_set(err, CLOVER_E_FORMAT,
                             "%s: tensor '%s' (in %s) and tensor '%s' (in %s) are the same weight",
                             ck->dir, a->name, st_file_name(a->file), b->name, st_file_name(b->file));
    }
    return CLOVER_OK;
}

int hf_checkpoint_open(hf_checkpoint *ck, const char *dir, clover_error *err) {
    memset(ck, 0, sizeof *ck);
    ck->dir = str_dup(dir);
    if (!ck->dir) return error_set(err, CLOVER_E_NOMEM, "out of memory");
    char *index = path_join(dir, "model.safetensors.index.json");
    char *single = path_join(dir, "model.safetensors");
    int rc;
    if (!index || !single) rc = error_set(err, CLOVER_E_NOMEM, "out of memory");
    else if (is_file(index)) rc = open_from_index(ck, index, err);
    else if (is_file(single)) rc = add_file(ck, "model.safetensors", err);
    else rc = open_all_shards(ck, err);
    mem_free(index);
    mem_free(single);
    if (!rc) rc = build_table(ck, err);
    if (rc) hf_checkpoint_close(ck);
    return rc;
}

void hf_checkpoint_close(hf_checkpoint *ck) {
    if (!ck) return;
    for (size_t i = 0; i < ck->n_files; i++) st_file_close(ck->files[i]);
    free(ck->files);
    mem_free(ck->entries);
    mem_free(ck->dir);
    memset(ck, 0, sizeof *ck);
}

hf_entry *hf_checkpoint_find(const hf_checkpoint *ck, const char *key) {
    size_t lo = 0, hi = ck->n_entries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(key, ck->entries[mid].key);
        if (!c) return &ck->entries[mid];
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}
