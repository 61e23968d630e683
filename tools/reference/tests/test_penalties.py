"""SPEC 3.1, seed 000's hand-checked case and the ramps."""
import numpy as np

from clover_ref.checkpoint import Record
from clover_ref.penalties import Penalties, ramp


def test_penalties_follow_the_vendor_order():
    # seed 000 `penalties_follow_the_vendor_order`
    rec = Record(presence_penalty=0.5, frequency_penalty=0.25, repetition_penalty=2.0,
                 length_penalty=4.0, length_penalty_start=2, length_penalty_window=4,
                 think_end_bias=8.0, think_end_start=0, think_end_window=2, think_end_token_id=3)
    p = Penalties()
    p.commit([1, 1, 2])
    row = np.array([1.0, 2.0, -1.0, 0.0, 0.0], np.float32)
    # row position 4: length ramp (4-2)/4*4 = 2 on stop id 4; think ramp min(4/2,1)*8 = 8 on 3.
    p.apply(rec, row, 4, [4], True)
    # id 1: 2 - 2*0.25 - 0.5 = 1.0, positive -> /2 = 0.5
    # id 2: -1 - 0.25 - 0.5 = -1.75, negative -> *2 = -3.5
    assert row.tolist() == [1.0, 0.5, -3.5, 8.0, 2.0]


def test_think_ramp_only_while_open():
    rec = Record(think_end_bias=8.0, think_end_start=0, think_end_window=2, think_end_token_id=3)
    row = np.zeros(5, np.float32)
    Penalties().apply(rec, row, 4, [], False)
    assert row.tolist() == [0.0] * 5


def test_ramp_clamps_and_window_zero_is_a_step():
    assert ramp(1, 2, 4, 4.0) == 0.0
    assert ramp(2, 2, 4, 4.0) == 0.0
    assert ramp(3, 2, 4, 4.0) == 1.0
    assert ramp(100, 2, 4, 4.0) == 4.0
    assert ramp(1, 2, 0, 4.0) == 0.0
    assert ramp(2, 2, 0, 4.0) == 4.0


def test_forbidden_stays_forbidden():
    rec = Record(presence_penalty=0.5, repetition_penalty=2.0, length_penalty=3.0,
                 length_penalty_start=0, length_penalty_window=1)
    p = Penalties()
    p.commit([0])
    row = np.array([-np.inf, 1.0], np.float32)
    p.apply(rec, row, 5, [0], False)
    assert row[0] == -np.inf
