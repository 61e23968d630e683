"""SPEC 3 / 4 rules of the generation loop, on a stub backend whose logits
are chosen by hand so every expected token, confidence and pass count is
known in advance."""
import math

import numpy as np
import pytest

from clover_ref.checkpoint import Record
from clover_ref.generate import Options, generate_block_diffusion, prepare_prompt
from clover_ref.sampler import SplitMix64

V = 6          # ids 0..3 ordinary, 4 stop, 5 mask
STOP, MASK = 4, 5


def logits_for(tok, conf, n_free=5):
    """A row whose greedy pick is `tok` with softmax probability `conf` once the
    mask id is forbidden (n_free ids left, the others at logit 0)."""
    row = np.zeros(V, np.float32)
    row[tok] = math.log(conf * (n_free - 1) / (1 - conf))
    return row


class Stub:
    """A backend whose preview returns script(block, committed) rows."""

    def __init__(self, script):
        self.script = script
        self.committed = []
        self.vocab = V
        self.previews = 0

    def reset(self):
        self.committed = []

    def commit(self, ids, chunk=0):
        self.committed = self.committed + [int(t) for t in ids]

    def preview(self, block):
        self.previews += 1
        return np.stack([self.script(r, block, self.committed) for r in range(len(block))])


def rec(**kw):
    base = dict(block_size=4, threshold=0.5, mask_token_id=MASK)
    base.update(kw)
    return Record.from_dict(base)


def test_threshold_fixes_the_sure_rows_then_the_most_confident():
    confs = {0: (1, 0.9), 1: (2, 0.4), 2: (3, 0.6), 3: (0, 0.3)}
    second = {1: (2, 0.25), 3: (0, 0.25)}   # tie: the lower row wins

    def script(r, block, committed):
        table = confs if block.count(MASK) == 4 else second
        if block[r] != MASK:
            return np.zeros(V, np.float32)
        if r in table:
            return logits_for(*table[r])
        return logits_for(0, 0.2)

    res = generate_block_diffusion(Stub(script), rec(), [STOP], [0, 1], Options(max_tokens=4))
    assert res.tokens == [1, 2, 3, 0]
    assert res.passes_per_block == [3]
    p = res.blocks[0]
    assert [sorted(r for r, _, _ in x.fixed) for x in p] == [[0, 2], [1], [3]]
    assert [x.fallback for x in p] == [False, True, True]
    assert res.confidences[0] == pytest.approx(0.9, rel=1e-6)
    assert res.confidences[1] == pytest.approx(0.25, rel=1e-6)


def test_threshold_is_strict():
    def script(r, block, committed):
        return logits_for(r % 4, 0.5)
    # conf exactly 0.5 (as float32) is not > 0.5: one row per pass.
    res = generate_block_diffusion(Stub(script), rec(), [STOP], [0], Options(max_tokens=4))
    assert res.passes_per_block == [4]


def test_stop_inside_a_block_ends_the_answer_and_is_not_committed():
    # pass 1 fixes the stop at row 1 (row 0 still masked); pass 2 resolves the rest.
    def script(r, block, committed):
        if block.count(MASK) == 4:
            return logits_for(STOP, 0.9) if r == 1 else logits_for(2, 0.3)
        return logits_for(3, 0.8)
    stub = Stub(script)
    res = generate_block_diffusion(stub, rec(), [STOP], [0, 1, 2], Options(max_tokens=12))
    assert res.tokens == [3, STOP]
    assert res.finish_reason == "stop"
    assert stub.committed == [0, 1, 2]          # the prompt only
    ign = generate_block_diffusion(Stub(script), rec(), [STOP], [0, 1, 2],
                                   Options(max_tokens=6, ignore_eos=True))
    assert ign.tokens[:4] == [3, STOP, 3, 3] and ign.finish_reason == "length"


def test_max_tokens_cuts_the_last_block_which_is_not_committed():
    stub = Stub(lambda r, block, committed: logits_for(r % 4, 0.9))
    res = generate_block_diffusion(stub, rec(), [STOP], [3], Options(max_tokens=6))
    assert res.tokens == [0, 1, 2, 3, 0, 1]
    assert res.finish_reason == "length"
    assert res.passes_per_block == [1, 1]
    assert stub.committed == [3, 0, 1, 2, 3]


def test_penalties_count_committed_response_tokens_only():
    # Token 1 leads token 2 by 0.5. A frequency penalty of 1 per occurrence flips it
    # once 1 has been committed in the response, but not within the block that
    # produces it, nor because of the prompt.
    def script(r, block, committed):
        row = np.zeros(V, np.float32)
        row[1], row[2] = 3.0, 2.5
        return row
    r = rec(threshold=0.0, frequency_penalty=1.0)
    res = generate_block_diffusion(Stub(script), r, [STOP], [1, 1, 1], Options(max_tokens=8))
    assert res.tokens == [1, 1, 1, 1, 2, 2, 2, 2]


def test_length_ramp_row_positions():
    # length ramp from response position 2 over 2 positions, strength 10, on the stop id:
    # rows at positions 1..4 get clamp((pos - 2) / 2) * 10 = 0, 0, 5, 10 added.
    def script(r, block, committed):
        row = np.zeros(V, np.float32)
        row[0], row[STOP] = 7.0, 0.0
        return row
    r = rec(threshold=0.0, length_penalty=10.0, length_penalty_start=2, length_penalty_window=2)
    res = generate_block_diffusion(Stub(script), r, [STOP], [0], Options(max_tokens=4))
    assert res.tokens == [0, 0, 0, STOP]


def test_think_ramp_stops_once_think_end_is_in_the_block():
    # </think> is id 3. The ramp makes it the single most confident row in pass 1
    # (rows differ only by their position); from pass 2 on it is in the block.
    def script(r, block, committed):
        row = np.zeros(V, np.float32)
        row[0] = 1.0
        return row
    r = rec(threshold=0.99, think_end_token_id=3, think_end_bias=5.0, think_end_start=0,
            think_end_window=4)
    res = generate_block_diffusion(Stub(script), r, [STOP], [0], Options(max_tokens=4))
    assert [p.close_open for p in res.blocks[0]] == [True, False, False, False]
    assert res.tokens[3] == 3 and res.tokens[:3] == [0, 0, 0]


def test_mask_and_suppressed_ids_are_never_picked():
    def script(r, block, committed):
        row = np.zeros(V, np.float32)
        row[MASK], row[1], row[2] = 50.0, 40.0, 30.0
        return row
    res = generate_block_diffusion(Stub(script), rec(threshold=0.0), [STOP], [0],
                                   Options(max_tokens=4, suppress=(1,)))
    assert res.tokens == [2, 2, 2, 2]


def test_sampling_draws_once_per_pending_row_in_row_order():
    def script(r, block, committed):
        row = np.zeros(V, np.float32)
        row[0] = row[1] = 10.0
        return row
    seed = 0x0123456789ABCDEF
    res = generate_block_diffusion(Stub(script), rec(threshold=0.4), [STOP], [0],
                                   Options(max_tokens=8, temperature=1.0, seed=seed))
    rng = SplitMix64(seed)
    expected = [0 if rng.uniform() < 0.5 else 1 for _ in range(8)]
    assert res.tokens == expected
    assert res.passes_per_block == [1, 1]


def test_overrides_are_validated():
    stub = Stub(lambda r, block, committed: logits_for(0, 0.9))
    with pytest.raises(ValueError, match="divisor"):
        generate_block_diffusion(stub, rec(), [STOP], [0], Options(block_size=3))
    with pytest.raises(ValueError, match="threshold"):
        generate_block_diffusion(stub, rec(), [STOP], [0], Options(threshold=1.5))
    res = generate_block_diffusion(stub, rec(), [STOP], [0], Options(max_tokens=4, block_size=2))
    assert res.passes_per_block == [1, 1]


def test_record_validation():
    with pytest.raises(ValueError, match="algorithm"):
        Record.from_dict({"algorithm": "random"})
    with pytest.raises(ValueError, match="block_size"):
        Record.from_dict({"block_size": 0})
    with pytest.raises(ValueError, match="threshold"):
        Record.from_dict({"threshold": 1.5})


def test_prefix_reuse_only_when_the_prompt_extends_the_committed_sequence():
    stub = Stub(lambda r, block, committed: logits_for(0, 0.9))
    assert prepare_prompt(stub, [1, 2, 3]) == 0
    assert prepare_prompt(stub, [1, 2, 3, 4]) == 3
    assert stub.committed == [1, 2, 3, 4]
    assert prepare_prompt(stub, [1, 2, 9]) == 0        # diverges: start afresh
    assert stub.committed == [1, 2, 9]
    assert prepare_prompt(stub, [1, 2]) == 0           # shorter: start afresh
    assert stub.committed == [1, 2]


def test_a_failed_request_leaves_nothing_to_reuse():
    def script(r, block, committed):
        raise RuntimeError("boom")
    stub = Stub(script)
    with pytest.raises(RuntimeError):
        generate_block_diffusion(stub, rec(), [STOP], [1, 2], Options(max_tokens=4))
    assert stub.committed == []
