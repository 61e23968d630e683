/*
 * gguf_index.c: the name index of the GGUF reader and writer. Open
 * addressing with linear probing, kept at most half full; names are
 * compared as (bytes, length) because GGUF strings may hold NULs.
 */
#include <string.h>

#include "base/alloc.h"
#include "gguf/gguf_internal.h"

static uint64_t index_hash(const char *s, uint64_t len) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (uint64_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void gguf_index_free(gguf_index *ix) {
    mem_free(ix->slots);
    ix->slots = NULL;
    ix->cap = ix->count = 0;
}

static size_t index_probe(const gguf_index *ix, const char *s, uint64_t len, uint64_t h) {
    size_t mask = ix->cap - 1;
    size_t i = (size_t)h & mask;
    while (ix->slots[i].str) {
        const gguf_index_slot *sl = &ix->slots[i];
        if (sl->hash == h && sl->len == len && memcmp(sl->str, s, (size_t)len) == 0) return i;
        i = (i + 1) & mask;
    }
    return i;
}

size_t gguf_index_find(const gguf_index *ix, const char *s, uint64_t len) {
    if (ix->cap == 0) return SIZE_MAX;
    size_t i = index_probe(ix, s, len, index_hash(s, len));
    return ix->slots[i].str ? ix->slots[i].item : SIZE_MAX;
}

static int index_grow(gguf_index *ix) {
    size_t cap = ix->cap ? ix->cap * 2 : 64;
    if (cap < ix->cap) return CLOVER_E_NOMEM;
    gguf_index_slot *slots = mem_calloc(cap, sizeof *slots);
    if (!slots) return CLOVER_E_NOMEM;
    gguf_index bigger = {slots, cap, ix->count};
    for (size_t i = 0; i < ix->cap; i++) {
        const gguf_index_slot *sl = &ix->slots[i];
        if (sl->str) bigger.slots[index_probe(&bigger, sl->str, sl->len, sl->hash)] = *sl;
    }
    mem_free(ix->slots);
    *ix = bigger;
    return CLOVER_OK;
}

int gguf_index_insert(gguf_index *ix, const char *s, uint64_t len, size_t item, size_t *existing) {
    if ((ix->count + 1) * 2 > ix->cap) {
        int rc = index_grow(ix);
        if (rc < 0) return rc;
    }
    uint64_t h = index_hash(s, len);
    size_t i = index_probe(ix, s, len, h);
    if (ix->slots[i].str) {
        if (existing) *existing = ix->slots[i].item;
        return 1;
    }
    ix->slots[i] = (gguf_index_slot){s, len, h, item};
    ix->count++;
    return CLOVER_OK;
}
