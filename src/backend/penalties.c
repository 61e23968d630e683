/*
 * penalties.c: SPEC.md 3.1 in the seed's order. float32 throughout: the
 * reference rounds after every operation, and so does C on x86-64 (SSE,
 * FLT_EVAL_METHOD 0, no contraction under -std=c11), so the results agree
 * bit for bit.
 */
#include "backend/penalties.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

int penalty_state_init(penalty_state *st, size_t n_vocab, clover_error *err) {
    memset(st, 0, sizeof *st);
    st->counts = mem_calloc(n_vocab ? n_vocab : 1, sizeof *st->counts);
    st->seen = mem_calloc(n_vocab ? n_vocab : 1, sizeof *st->seen);
    if (!st->counts || !st->seen) {
        penalty_state_free(st);
        return error_set(err, CLOVER_E_NOMEM, "penalties: no memory for %zu counts", n_vocab);
    }
    st->n_vocab = n_vocab;
    return CLOVER_OK;
}

void penalty_state_free(penalty_state *st) {
    mem_free(st->counts);
    mem_free(st->seen);
    memset(st, 0, sizeof *st);
}

void penalty_state_reset(penalty_state *st) {
    for (size_t i = 0; i < st->n_seen; i++)
        st->counts[st->seen[i]] = 0;
    st->n_seen = 0;
    st->length = 0;
}

void penalty_state_commit(penalty_state *st, const int32_t *ids, size_t n) {
    st->length += n;
    for (size_t i = 0; i < n; i++) {
        int32_t t = ids[i];
        if (t < 0 || (size_t)t >= st->n_vocab) continue; /* the caller validated; never counted */
        if (st->counts[t] == 0) st->seen[st->n_seen++] = t;
        st->counts[t]++;
    }
}

float penalty_ramp(size_t pos, uint32_t start, uint32_t window, float strength) {
    if (window == 0) return pos >= start ? strength : 0.0f;
    float f = ((float)pos - (float)start) / (float)window;
    if (f < 0.0f) f = 0.0f;
    if (f > 1.0f) f = 1.0f;
    return f * strength;
}

bool penalty_think_open(const penalty_config *cfg, const penalty_state *st, const int32_t *block, size_t b) {
    int32_t c = cfg->think_end_id;
    if (c < 0) return false;
    if ((size_t)c < st->n_vocab && st->counts[c] != 0) return false;
    for (size_t i = 0; i < b; i++)
        if (block[i] == c) return false;
    return true;
}

void penalty_apply(const penalty_config *cfg, const penalty_state *st, float *row, size_t row_pos,
                   const int32_t *stop_ids, size_t n_stop, bool think_open) {
    const float freq = cfg->p.frequency_penalty;
    const float pres = cfg->p.presence_penalty;
    const float rep = cfg->p.repetition_penalty;
    for (size_t i = 0; i < st->n_seen; i++) {
        int32_t t = st->seen[i];
        float l = row[t];
        float f = (float)st->counts[t] * freq;
        l = l - f;
        l = l - pres;
        if (rep != 1.0f) l = l < 0.0f ? l * rep : l / rep;
        row[t] = l;
    }
    if (cfg->p.length_penalty != 0.0f) {
        float add = penalty_ramp(row_pos, cfg->p.length_penalty_start, cfg->p.length_penalty_window,
                                 cfg->p.length_penalty);
        for (size_t i = 0; i < n_stop; i++)
            row[stop_ids[i]] = row[stop_ids[i]] + add;
    }
    int32_t c = cfg->think_end_id;
    if (think_open && cfg->p.think_end_bias != 0.0f && c >= 0 && (size_t)c < st->n_vocab)
        row[c] = row[c] + penalty_ramp(row_pos, cfg->p.think_end_start, cfg->p.think_end_window,
                                       cfg->p.think_end_bias);
}
