/*
 * test_penalties.c: SPEC.md 3.1. Seed 000's hand-checked case
 * `penalties_follow_the_vendor_order` with its own numbers, then the ramp
 * rules (clamping, window 0 as a step), the </think> rule and the
 * response-only counts.
 */
#include <math.h>
#include <string.h>

#include "backend/penalties.h"
#include "test.h"

static penalty_config seed_config(void) {
    penalty_config c;
    memset(&c, 0, sizeof c);
    c.p.presence_penalty = 0.5f;
    c.p.frequency_penalty = 0.25f;
    c.p.repetition_penalty = 2.0f;
    c.p.length_penalty = 4.0f;
    c.p.length_penalty_start = 2;
    c.p.length_penalty_window = 4;
    c.p.think_end_bias = 8.0f;
    c.p.think_end_start = 0;
    c.p.think_end_window = 2;
    c.think_end_id = 3;
    return c;
}

static void penalties_follow_the_vendor_order(void) {
    penalty_config c = seed_config();
    penalty_state st;
    CHECK_EQ_INT(penalty_state_init(&st, 5, NULL), 0);
    const int32_t committed[3] = {1, 1, 2};
    penalty_state_commit(&st, committed, 3);
    float l[5] = {1.0f, 2.0f, -1.0f, 0.0f, 0.0f};
    const int32_t stop[1] = {4};
    /* Row position 4: length ramp (4-2)/4*4 = 2 on stop id 4; think ramp
     * min(4/2, 1)*8 = 8 on id 3. id 1: 2 - 2*.25 - .5 = 1, positive: /2 =
     * .5; id 2: -1 - .25 - .5 = -1.75, negative: *2 = -3.5. */
    penalty_apply(&c, &st, l, 4, stop, 1, true);
    const float want[5] = {1.0f, 0.5f, -3.5f, 8.0f, 2.0f};
    for (int i = 0; i < 5; i++)
        CHECK_MSG(l[i] == want[i], "id %d: %g, expected %g", i, (double)l[i], (double)want[i]);
    penalty_state_free(&st);
}

static void ramps_clamp_and_a_zero_window_is_a_step(void) {
    CHECK(penalty_ramp(1, 2, 4, 4.0f) == 0.0f); /* before the start */
    CHECK(penalty_ramp(3, 2, 4, 4.0f) == 1.0f); /* (3-2)/4*4 */
    CHECK(penalty_ramp(100, 2, 4, 4.0f) == 4.0f);
    CHECK(penalty_ramp(1, 2, 0, 4.0f) == 0.0f);
    CHECK(penalty_ramp(2, 2, 0, 4.0f) == 4.0f);
    CHECK(penalty_ramp(9, 2, 0, -3.0f) == -3.0f);
}

static void think_ramp_only_while_open(void) {
    penalty_config c = seed_config();
    penalty_state st;
    CHECK_EQ_INT(penalty_state_init(&st, 5, NULL), 0);
    const int32_t block_open[2] = {4, 4};
    const int32_t block_closed[2] = {4, 3};
    CHECK(penalty_think_open(&c, &st, block_open, 2));
    CHECK(!penalty_think_open(&c, &st, block_closed, 2)); /* </think> fixed in the block */
    const int32_t think = 3;
    penalty_state_commit(&st, &think, 1);
    CHECK(!penalty_think_open(&c, &st, block_open, 2)); /* </think> committed */
    penalty_state_reset(&st);
    CHECK(penalty_think_open(&c, &st, block_open, 2));
    c.think_end_id = -1;
    CHECK(!penalty_think_open(&c, &st, block_open, 2)); /* no think-end id */
    /* Closed: no bias on id 3. */
    c = seed_config();
    float l[5] = {0};
    penalty_apply(&c, &st, l, 4, NULL, 0, false);
    CHECK(l[3] == 0.0f);
    penalty_state_free(&st);
}

static void counts_are_per_request_and_forbidden_stays_forbidden(void) {
    penalty_config c = seed_config();
    c.p.length_penalty = 0.0f;
    c.p.think_end_bias = 0.0f;
    penalty_state st;
    CHECK_EQ_INT(penalty_state_init(&st, 5, NULL), 0);
    const int32_t ids[2] = {0, 2};
    penalty_state_commit(&st, ids, 2);
    CHECK_EQ_INT(st.length, 2);
    float l[5] = {-INFINITY, 1.0f, 4.0f, 1.0f, 1.0f};
    penalty_apply(&c, &st, l, 3, NULL, 0, false);
    CHECK(isinf(l[0]) && l[0] < 0);
    CHECK(l[2] == (4.0f - 0.25f - 0.5f) / 2.0f);
    CHECK(l[1] == 1.0f && l[3] == 1.0f);
    penalty_state_reset(&st);
    CHECK_EQ_INT(st.length, 0);
    CHECK_EQ_INT(st.n_seen, 0);
    float l2[5] = {1, 1, 1, 1, 1};
    penalty_apply(&c, &st, l2, 1, NULL, 0, false);
    for (int i = 0; i < 5; i++)
        CHECK(l2[i] == 1.0f);
    penalty_state_free(&st);
}

int main(void) {
    RUN(penalties_follow_the_vendor_order);
    RUN(ramps_clamp_and_a_zero_window_is_a_step);
    RUN(think_ramp_only_while_open);
    RUN(counts_are_per_request_and_forbidden_stays_forbidden);
    return TEST_EXIT();
}
