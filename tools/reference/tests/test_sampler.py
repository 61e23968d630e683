"""SPEC 3.2: the SplitMix64 stream and the pick, on hand-computed cases."""
import math

import numpy as np
import pytest

from clover_ref.sampler import SplitMix64, greedy_pick, pick, sample_pick, softmax_prob


def test_splitmix64_published_vectors():
    # SplitMix64 seeded with 0 (Vigna's reference splitmix64.c): the first outputs.
    r = SplitMix64(0)
    assert [r.next() for _ in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
                                            0x06C45D188009454F]


def test_uniform_is_the_top_24_bits():
    r = SplitMix64(0)
    u = r.uniform()
    assert u == (0xE220A8397B1DCDAF >> 40) / 2 ** 24
    assert u == 14819496 / 16777216


def test_seed_is_64_bit():
    a, b = SplitMix64(0x0123456789ABCDEF), SplitMix64(0x0123456789ABCDEF + (1 << 64))
    assert a.next() == b.next()


def test_greedy_takes_the_first_maximum():
    row = np.array([1.0, 3.0, 3.0, -np.inf], np.float32)
    idx, conf = greedy_pick(row)
    assert idx == 1
    expected = math.exp(0) / (math.exp(-2) + 1 + 1)
    assert conf == pytest.approx(expected, rel=1e-7)


class FixedDraw:
    """A stand-in stream returning chosen u values."""

    def __init__(self, *us):
        self.us = list(us)

    def uniform(self):
        return self.us.pop(0)


def test_top_k_keeps_ties_at_the_cut():
    # logits 2, 1, 1, 0 with top_k 2: the k-th is 1, both 1s stay (3 candidates).
    row = np.array([2.0, 1.0, 1.0, 0.0], np.float32)
    z = math.exp(0) + 2 * math.exp(-1)
    p0, p1 = 1 / z, math.exp(-1) / z
    # u just past p0 + p1 lands on id 2 (ties: lower id first, so 1 before 2).
    idx, _ = sample_pick(row, 1.0, 2, 1.0, FixedDraw(p0 + p1 + 1e-6))
    assert idx == 2
    # and id 3 is never reachable: u close to 1 still gives id 2
    idx, _ = sample_pick(row, 1.0, 2, 1.0, FixedDraw(0.999999))
    assert idx == 2


def test_top_p_keeps_until_the_mass_before_exceeds_p():
    # probs 0.5, 0.3, 0.2 (logits ln). top_p 0.55: before = 0 (keep), 0.5 (keep),
    # 0.8 (> 0.55: drop). Kept 0.5 / 0.3 renormalised to 0.625 / 0.375.
    row = np.log(np.array([0.5, 0.3, 0.2], np.float32)).astype(np.float32)
    idx, _ = sample_pick(row, 1.0, 0, 0.55, FixedDraw(0.62))
    assert idx == 0
    idx, _ = sample_pick(row, 1.0, 0, 0.55, FixedDraw(0.63))
    assert idx == 1
    idx, _ = sample_pick(row, 1.0, 0, 0.55, FixedDraw(0.9999))
    assert idx == 1
    # top_p 0.85: the mass before id 2 is 0.8, not above 0.85: all three stay.
    idx, _ = sample_pick(row, 1.0, 0, 0.85, FixedDraw(0.9999))
    assert idx == 2
    # top_p 0.4: before 0 keeps id 0, before 0.5 > 0.4 drops the rest.
    idx, _ = sample_pick(row, 1.0, 0, 0.4, FixedDraw(0.9999))
    assert idx == 0


def test_temperature_divides_and_confidence_is_t1():
    row = np.array([0.0, math.log(3.0)], np.float32)
    # T = 0.5: logits 0, 2 ln 3 -> probs 1/10, 9/10; candidates in descending
    # order: id 1 (0.9) then id 0 (0.1).
    idx, conf = sample_pick(row, 0.5, 0, 1.0, FixedDraw(0.89))
    assert idx == 1
    assert conf == pytest.approx(0.75, rel=1e-6)  # the T = 1 probability
    idx, conf = sample_pick(row, 0.5, 0, 1.0, FixedDraw(0.91))
    assert idx == 0
    assert conf == pytest.approx(0.25, rel=1e-6)


def test_forbidden_ids_are_never_sampled():
    row = np.array([-np.inf, 0.0, -np.inf, 0.0], np.float32)
    for u in (0.0, 0.49, 0.51, 0.999):
        idx, _ = sample_pick(row, 1.0, 0, 1.0, FixedDraw(u))
        assert idx in (1, 3)


def test_greedy_below_threshold_temperature_takes_no_draw():
    r = SplitMix64(5)
    row = np.array([0.0, 1.0], np.float32)
    pick(row, 1e-7, 0, 1.0, r)
    assert r.next() == SplitMix64(5).next()


def test_softmax_prob_sums_to_one():
    row = np.array([0.3, -1.0, 2.0, -np.inf], np.float32)
    total = sum(float(softmax_prob(row, i)) for i in range(3))
    assert total == pytest.approx(1.0, abs=1e-6)
