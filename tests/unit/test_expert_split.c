/*
 * test_expert_split.c: the host-or-link plan of --gpu-mem's misses (backend/expert_split.h) against cases worked
 * out by hand, and its rate estimates against timings generated from known rates:
 *  - modes by name; off copies everything, all gives the host everything;
 *  - six one-row misses where the host and the link share the work (the best count by hand: 3, a wait of 60 us),
 *    misses of unequal rows (the host takes the few-row ones), a tie that keeps the expert on the device;
 *  - the host's fit recovers time = bytes * a + rows * b from varied shapes, from guesses 10x off; with only
 *    decode-like shapes (rows proportional to bytes) it stays finite, non-negative and predicts those shapes; a
 *    cost with no byte term gives a = 0, not a negative rate; the link's average converges; bad timings ignored.
 */
#include "backend/expert_split.h"

#include <math.h>
#include <string.h>

#include "base/rng.h"
#include "test.h"

#define US 1e-6

static void modes(void) {
    CHECK(expert_split_mode_from_name("off") == EXPERT_SPLIT_OFF);
    CHECK(expert_split_mode_from_name("auto") == EXPERT_SPLIT_AUTO);
    CHECK(expert_split_mode_from_name("all") == EXPERT_SPLIT_ALL);
    CHECK(expert_split_mode_from_name("half") == -1 && expert_split_mode_from_name(NULL) == -1);
    CHECK(!strcmp(expert_split_mode_name(EXPERT_SPLIT_AUTO), "auto"));
    expert_split s;
    const uint32_t rows[3] = {1, 1, 1};
    uint8_t h[3];
    uint32_t ord[3];
    expert_split_init(&s, EXPERT_SPLIT_OFF, 1e9, 1e12, 0, 0); /* a host this fast would take all in auto */
    CHECK(expert_split_plan(&s, 1000000, rows, 3, h, ord) == 0 && !h[0] && !h[1] && !h[2]);
    expert_split_init(&s, EXPERT_SPLIT_ALL, 1e12, 1e6, 1, 1); /* a host this slow would take none in auto */
    CHECK(expert_split_plan(&s, 1000000, rows, 3, h, ord) == 3 && h[0] && h[1] && h[2]);
    CHECK(expert_split_plan(&s, 1000000, rows, 0, h, ord) == 0);
}

/* link 50 GB/s: 20 us a 1 MB expert; host 100 GB/s (10 us) + 5 us a row; fixed 10 us.
 * c host misses: host(c) = 10 + 15 c, copy(c) = 20 (6 - c): c = 0..6 -> 120, 100, 80, 60, 70, 85, 100: c = 3 */
static void hand_plan(void) {
    expert_split s;
    expert_split_init(&s, EXPERT_SPLIT_AUTO, 50e9, 100e9, 5 * US, 10 * US);
    const uint32_t rows[6] = {1, 1, 1, 1, 1, 1};
    uint8_t h[6];
    uint32_t ord[6];
    const size_t c = expert_split_plan(&s, 1000000, rows, 6, h, ord);
    CHECK_EQ_INT(c, 3);
    CHECK(h[0] && h[1] && h[2] && !h[3] && !h[4] && !h[5]); /* ties by index */
    const double w = expert_split_wait(&s, 1000000, rows, 6, h);
    CHECK_MSG(fabs(w - 60 * US) < 1e-9, "wait %.3g", w);
    /* rows {40, 1, 1, 40}: host costs 15 (1 row) and 210 (40 rows); order idx 1, 2, 0, 3:
     * c = 0..4 -> 80, max(25, 60) = 60, max(40, 40) = 40, max(250, 20) = 250, 460: c = 2, the one-row misses */
    const uint32_t r2[4] = {40, 1, 1, 40};
    CHECK_EQ_INT(expert_split_plan(&s, 1000000, r2, 4, h, ord), 2);
    CHECK(!h[0] && h[1] && h[2] && !h[3]);
    /* one miss: copy 20 us against the host's fixed + 10 + 5: the host takes it only when strictly faster */
    const uint32_t r1[1] = {1};
    expert_split_init(&s, EXPERT_SPLIT_AUTO, 50e9, 100e9, 5 * US, 5.01 * US);
    CHECK_EQ_INT(expert_split_plan(&s, 1000000, r1, 1, h, ord), 0);
    expert_split_init(&s, EXPERT_SPLIT_AUTO, 50e9, 100e9, 5 * US, 4.99 * US);
    CHECK_EQ_INT(expert_split_plan(&s, 1000000, r1, 1, h, ord), 1);
    /* a prompt's chunk: 64 rows an expert make the host slower than the link: nothing to the host */
    const uint32_t r64[8] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t h8[8];
    uint32_t o8[8];
    CHECK_EQ_INT(expert_split_plan(&s, 1000000, r64, 8, h8, o8), 0);
}

static double host_time(double a_spb, double b_row, uint64_t bytes, uint64_t rows) {
    return (double)bytes * a_spb + (double)rows * b_row;
}

static void fit(void) {
    const double a = 8e-12, b = 3 * US; /* 125 GB/s, 3 us a row */
    expert_split s;
    expert_split_init(&s, EXPERT_SPLIT_AUTO, 50e9, 12.5e9, 30 * US, 10 * US); /* guesses 10x off */
    rng_state r;
    rng_seed(&r, 7);
    for (int i = 0; i < 200; i++) {
        const uint64_t experts = 1 + (uint32_t)rng_next(&r) % 8, rows = experts * (1 + (uint32_t)rng_next(&r) % 64);
        const uint64_t bytes = experts * 1769472;
        expert_split_observe_host(&s, bytes, rows, host_time(a, b, bytes, rows));
    }
    CHECK_MSG(fabs(s.host_spb / a - 1) < 0.01 && fabs(s.host_row_s / b - 1) < 0.01, "fit %.4g s/B %.4g s/row",
              s.host_spb, s.host_row_s);
    /* decode-like shapes only: rows = experts, so bytes and rows are proportional */
    expert_split_init(&s, EXPERT_SPLIT_AUTO, 50e9, 12.5e9, 30 * US, 10 * US);
    for (int i = 0; i < 200; i++) {
        const uint64_t experts = 1 + (uint32_t)rng_next(&r) % 8, bytes = experts * 1769472;
        expert_split_observe_host(&s, bytes, experts, host_time(a, b, bytes, experts));
    }
    CHECK(isfinite(s.host_spb) && isfinite(s.host_row_s) && s.host_spb >= 0 && s.host_row_s >= 0);
    for (uint64_t e = 1; e <= 8; e++) {
        const uint64_t bytes = e * 1769472;
        const double want = host_time(a, b, bytes, e), got = host_time(s.host_spb, s.host_row_s, bytes, e);
        CHECK_MSG(fabs(got / want - 1) < 0.05, "%llu experts: predicted %.3g s, true %.3g", (unsigned long long)e,
                  got, want);
    }
    /* a cost of rows only: the byte rate is 0, never negative */
    expert_split_init(&s, EXPERT_SPLIT_AUTO, 50e9, 100e9, 1 * US, 0);
    for (int i = 0; i < 300; i++) {
        const uint64_t bytes = (1 + (uint32_t)rng_next(&r) % 8) * 1769472, rows = 1 + (uint32_t)rng_next(&r) % 100;
        expert_split_observe_host(&s, bytes, rows, (double)rows * 5 * US);
    }
    CHECK_MSG(s.host_spb >= 0 && s.host_spb < 1e-13 && fabs(s.host_row_s / (5 * US) - 1) < 0.02,
              "rows-only fit %.4g s/B %.4g s/row", s.host_spb, s.host_row_s);
}

static void link(void) {
    expert_split s;
    expert_split_init(&s, EXPERT_SPLIT_AUTO, 10e9, 100e9, US, 0);
    CHECK(fabs(s.copy_spb * 10e9 - 1) < 1e-12);
    for (int i = 0; i < 100; i++) expert_split_observe_copy(&s, 1 << 24, (double)(1 << 24) / 40e9);
    CHECK_MSG(fabs(s.copy_spb * 40e9 - 1) < 0.01, "link %.4g s/B", s.copy_spb);
    const double before = s.copy_spb, ha = s.host_spb, hb = s.host_row_s;
    expert_split_observe_copy(&s, 1 << 24, 0);
    expert_split_observe_copy(&s, 1 << 24, -1);
    expert_split_observe_copy(&s, 1 << 24, NAN);
    expert_split_observe_copy(&s, 0, 1);
    expert_split_observe_host(&s, 1 << 20, 1, INFINITY);
    expert_split_observe_host(&s, 0, 0, 1);
    CHECK(s.copy_spb == before && s.host_spb == ha && s.host_row_s == hb);
}

int main(void) {
    RUN(modes);
    RUN(hand_plan);
    RUN(fit);
    RUN(link);
    return TEST_EXIT();
}
