/*
 * gemm_amx_pack.c: the bookkeeping of the repacked Q4_K weights
 * (gemm_amx_pack.h): the stable ranges, the packs keyed by weight address,
 * the budget. Plain C under one mutex: it runs once per product on the
 * calling thread (matmul_prepare), against the product's millions of
 * multiply-adds; the panels themselves are filled by the kernel's tasks
 * (gemm_amx.c), each tile once, claimed through its atomic state.
 */
#include "quant/gemm_amx_pack.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "quant/quant_internal.h"

typedef struct range {
    uintptr_t lo, hi;
} range;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static range *ranges;
static size_t n_ranges, cap_ranges;
static gemm_amx_q4k_pack **table; /* open addressing by weight address; NULL: empty */
static size_t n_packs, cap_table;
static size_t pack_bytes; /* allocated now, against the budget */

int gemm_amx_q4k_repack_on(void) {
    const char *e = getenv("CLOVER_AMX_Q4K_REPACK");
    return e && e[0] == '1' && e[1] == '\0';
}

int gemm_amx_q4k_pipe_on(void) {
    const char *e = getenv("CLOVER_AMX_Q4K_PIPE");
    return !(e && e[0] == '0' && e[1] == '\0');
}

/* The budget in bytes: CLOVER_AMX_Q4K_REPACK_MB, default 4096 MiB. */
static size_t budget(void) {
    const char *e = getenv("CLOVER_AMX_Q4K_REPACK_MB");
    const size_t mb = e && *e ? (size_t)strtoull(e, NULL, 10) : 4096;
    return mb > ((size_t)-1 >> 21) ? (size_t)-1 : mb << 20;
}

static size_t slot_of(uintptr_t w, size_t cap) { return (size_t)((w >> 6) * 0x9E3779B97F4A7C15ull) & (cap - 1); }

static void table_put(gemm_amx_q4k_pack **t, size_t cap, gemm_amx_q4k_pack *p) {
    size_t s = slot_of((uintptr_t)p->w, cap);
    while (t[s]) s = (s + 1) & (cap - 1);
    t[s] = p;
}

static gemm_amx_q4k_pack *table_get(uintptr_t w) {
    if (!cap_table) return NULL;
    for (size_t s = slot_of(w, cap_table);; s = (s + 1) & (cap_table - 1)) {
        if (!table[s]) return NULL;
        if ((uintptr_t)table[s]->w == w) return table[s];
    }
}

/* Rebuilds the table at capacity cap (a power of two above twice the packs). */
static int table_rebuild(size_t cap) {
    gemm_amx_q4k_pack **t = calloc(cap, sizeof *t);
    if (!t) return 0;
    for (size_t s = 0; s < cap_table; s++)
        if (table[s]) table_put(t, cap, table[s]);
    free(table);
    table = t, cap_table = cap;
    return 1;
}

static int in_stable(uintptr_t lo, uintptr_t hi) {
    for (size_t i = 0; i < n_ranges; i++)
        if (ranges[i].lo <= lo && hi <= ranges[i].hi) return 1;
    return 0;
}

static void pack_free(gemm_amx_q4k_pack *p) {
    pack_bytes -= p->bytes;
    mem_free(p->panels);
    free((void *)p->state);
    free(p);
}

static gemm_amx_q4k_pack *pack_make(const uint8_t *w, size_t n_out, size_t n_in) {
    const size_t tiles = (n_out + 15) / 16, nbk = n_in / QUANT_QK_K;
    size_t bytes;
    if (!mem_mul_ok(tiles * nbk, sizeof(gemm_amx_q4k_panel), &bytes) || bytes == 0) return NULL;
    const size_t cap = budget();
    if (pack_bytes > cap || bytes > cap - pack_bytes) return NULL;
    if (n_packs + 1 > cap_table / 2 && !table_rebuild(cap_table ? 2 * cap_table : 64)) return NULL;
    gemm_amx_q4k_pack *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->panels = mem_alloc(bytes); /* pages are touched only as tasks fill their tiles */
    p->state = calloc(tiles, sizeof *p->state);
    if (!p->panels || !p->state) {
        mem_free(p->panels);
        free((void *)p->state);
        free(p);
        return NULL;
    }
    for (size_t t = 0; t < tiles; t++) atomic_init(&p->state[t], GEMM_AMX_PACK_EMPTY);
    p->w = w, p->n_out = n_out, p->n_in = n_in, p->nbk = nbk, p->tiles = tiles, p->bytes = bytes;
    table_put(table, cap_table, p);
    n_packs++;
    pack_bytes += bytes;
    return p;
}

const gemm_amx_q4k_pack *gemm_amx_q4k_find(const void *w, size_t n_out, size_t n_in) {
    if (!w || !n_out || n_in % QUANT_QK_K || !gemm_amx_q4k_repack_on()) return NULL;
    const uintptr_t lo = (uintptr_t)w;
    pthread_mutex_lock(&lock);
    gemm_amx_q4k_pack *p = table_get(lo);
    if (!p && in_stable(lo, lo + n_out * quant_row_bytes(QUANT_Q4_K, n_in))) p = pack_make(w, n_out, n_in);
    pthread_mutex_unlock(&lock);
    /* the same address as another shape (a product over part of a weight): the unpacking path */
    return p && p->n_out == n_out && p->n_in == n_in ? p : NULL;
}

void gemm_amx_stable_add(const void *p, size_t bytes) {
    if (!p || !bytes) return;
    pthread_mutex_lock(&lock);
    if (n_ranges == cap_ranges) {
        const size_t cap = cap_ranges ? 2 * cap_ranges : 64;
        range *r = realloc(ranges, cap * sizeof *r);
        if (!r) { /* unregistered: that memory keeps the unpacking path */
            pthread_mutex_unlock(&lock);
            return;
        }
        ranges = r, cap_ranges = cap;
    }
    ranges[n_ranges++] = (range){(uintptr_t)p, (uintptr_t)p + bytes};
    pthread_mutex_unlock(&lock);
}

void gemm_amx_stable_remove(const void *p, size_t bytes) {
    const uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    pthread_mutex_lock(&lock);
    size_t k = 0;
    for (size_t i = 0; i < n_ranges; i++)
        if (!(lo <= ranges[i].lo && ranges[i].hi <= hi)) ranges[k++] = ranges[i];
    n_ranges = k;
    int freed = 0;
    for (size_t s = 0; s < cap_table; s++)
        if (table[s] && lo <= (uintptr_t)table[s]->w && (uintptr_t)table[s]->w < hi) {
            pack_free(table[s]);
            table[s] = NULL;
            n_packs--;
            freed = 1;
        }
    if (freed) table_rebuild(cap_table); /* the probe chains past the freed slots */
    if (n_ranges == 0 && n_packs == 0) { /* nothing left: no memory held (leak checkers) */
        free(ranges), free(table);
        ranges = NULL, table = NULL;
        cap_ranges = cap_table = 0;
    }
    pthread_mutex_unlock(&lock);
}

size_t gemm_amx_q4k_pack_bytes(void) {
    pthread_mutex_lock(&lock);
    const size_t b = pack_bytes;
    pthread_mutex_unlock(&lock);
    return b;
}
