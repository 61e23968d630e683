/*
 * expert_split.c: the host-or-link plan of a layer's missed experts and its
 * measured rates (expert_split.h has the model and why).
 */
#include "backend/expert_split.h"

#include <math.h>
#include <string.h>

/* The host's fit works in megabytes so that its sums stay near one in scale. */
#define MB 1e6
/* Weight of the starting guesses in the host's fit (pseudo-observations of 1 MB alone and of 1 row alone) */
#define PRIOR 0.05

static const char *const mode_names[] = {"off", "auto", "all"};

int expert_split_mode_from_name(const char *name) {
    for (int i = 0; name && i < 3; i++)
        if (!strcmp(name, mode_names[i])) return i;
    return -1;
}

const char *expert_split_mode_name(expert_split_mode m) {
    return (unsigned)m < 3 ? mode_names[m] : "?";
}

static void host_solve(expert_split *s) {
    const double det = s->sbb * s->srr - s->sbr * s->sbr;
    double a = det > 0 ? (s->sbt * s->srr - s->srt * s->sbr) / det : -1;
    double b = det > 0 ? (s->srt * s->sbb - s->sbt * s->sbr) / det : -1;
    /* least squares with one coefficient held at 0 when the free solution makes it negative */
    if (a < 0 && b < 0) a = b = 0;
    if (a < 0) a = 0, b = s->srr > 0 ? s->srt / s->srr : 0;
    if (b < 0) b = 0, a = s->sbb > 0 ? s->sbt / s->sbb : 0;
    s->host_spb = a / MB;
    s->host_row_s = b;
}

void expert_split_init(expert_split *s, expert_split_mode mode, double link_bps, double host_bps, double host_row_s,
                       double fixed_s) {
    memset(s, 0, sizeof *s);
    s->mode = mode;
    s->copy_spb = link_bps > 0 ? 1.0 / link_bps : 0;
    s->fixed_s = fixed_s > 0 ? fixed_s : 0;
    s->keep = 0.95;
    const double a = host_bps > 0 ? MB / host_bps : 0; /* seconds a megabyte */
    s->prior_a = a;
    s->prior_b = host_row_s > 0 ? host_row_s : 0;
    s->sbb = s->srr = PRIOR;
    s->sbt = PRIOR * s->prior_a;
    s->srt = PRIOR * s->prior_b;
    host_solve(s);
}

/* order[0..n) = 0..n-1 sorted by rows ascending, ties by index (insertion sort: a layer's misses are at most
 * its experts, a few hundred, and in a decode step a handful) */
static void by_rows(const uint32_t *rows, size_t n, uint32_t *order) {
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        while (j > 0 && rows[order[j - 1]] > rows[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = (uint32_t)i;
    }
}

double expert_split_wait(const expert_split *s, uint64_t bytes, const uint32_t *rows, size_t n,
                         const uint8_t *to_host) {
    double host = 0, copy = 0;
    size_t nh = 0;
    for (size_t i = 0; i < n; i++) {
        if (to_host[i]) {
            host += (double)bytes * s->host_spb + (double)rows[i] * s->host_row_s;
            nh++;
        } else {
            copy += (double)bytes * s->copy_spb;
        }
    }
    if (nh) host += s->fixed_s;
    return host > copy ? host : copy;
}

size_t expert_split_plan(const expert_split *s, uint64_t bytes, const uint32_t *rows, size_t n, uint8_t *to_host,
                         uint32_t *order) {
    memset(to_host, 0, n);
    if (n == 0 || s->mode == EXPERT_SPLIT_OFF) return 0;
    if (s->mode == EXPERT_SPLIT_ALL) {
        memset(to_host, 1, n);
        return n;
    }
    by_rows(rows, n, order);
    const double per_copy = (double)bytes * s->copy_spb, per_host = (double)bytes * s->host_spb;
    double best = (double)n * per_copy, host = s->fixed_s;
    size_t best_c = 0;
    for (size_t c = 1; c <= n; c++) {
        host += per_host + (double)rows[order[c - 1]] * s->host_row_s;
        const double copy = (double)(n - c) * per_copy, wait = host > copy ? host : copy;
        if (wait < best) best = wait, best_c = c;
    }
    for (size_t c = 0; c < best_c; c++) to_host[order[c]] = 1;
    return best_c;
}

void expert_split_observe_copy(expert_split *s, uint64_t bytes, double seconds) {
    if (!(seconds > 0) || !isfinite(seconds) || bytes == 0) return;
    const double spb = seconds / (double)bytes;
    s->copy_spb = s->n_copy_obs ? s->keep * s->copy_spb + (1 - s->keep) * spb : spb;
    s->n_copy_obs++;
}

void expert_split_observe_host(expert_split *s, uint64_t bytes, uint64_t rows, double seconds) {
    if (!(seconds > 0) || !isfinite(seconds) || (bytes == 0 && rows == 0)) return;
    /* the guesses keep their weight (PRIOR in steady state, a ridge toward them): decay everything, then put back
     * (1 - keep) of the pseudo-observations */
    const double k = s->keep, B = (double)bytes / MB, R = (double)rows;
    s->sbb = k * s->sbb + B * B + (1 - k) * PRIOR;
    s->srr = k * s->srr + R * R + (1 - k) * PRIOR;
    s->sbr = k * s->sbr + B * R;
    s->sbt = k * s->sbt + B * seconds + (1 - k) * PRIOR * s->prior_a;
    s->srt = k * s->srt + R * seconds + (1 - k) * PRIOR * s->prior_b;
    s->n_host_obs++;
    host_solve(s);
}
