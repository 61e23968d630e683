"""diag.py (issue 26's diagnosis at step 1257) against independent values:

* preview_at (one block right after an UNALIGNED prefix, as clover starts its
  first block) equals tools/reference's clover_ref.preview on a session that
  committed that prefix, after a round trip through export;
* the SPEC 3 trace fixes rows as the rule says on hand-made confidences;
* the distance and right-context helpers on hand-written masks.

    python3 -m pytest -q tools/train/tests/test_diag.py   (needs torch)
"""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "reference"))
sys.path.insert(0, HERE)

import diag  # noqa: E402
from test_model import B, tiny  # noqa: E402


def test_preview_at_an_unaligned_prefix_equals_the_reference(tmp_path):
    from clover_ref.checkpoint import CloverModel
    from clover_ref.preview import preview
    from clover_ref.session import Session
    from clover_ref.tiny_tokenizer import write_tokenizer
    from export import export

    m, tok = tiny(seed=6)
    mask_id = tok.token_to_id("<|mask|>")
    (tmp_path / "tok").mkdir()
    write_tokenizer(tok, str(tmp_path / "tok"))
    export(m, str(tmp_path / "tok"), str(tmp_path / "hf"), block=B, threshold=0.9, every=2)
    cm = CloverModel(str(tmp_path / "hf"))
    g = torch.Generator().manual_seed(9)
    for plen in (1, 2, 5, 11, 13):           # none a multiple of the block (8)
        prefix = torch.randint(0, 400, (plen,), generator=g).tolist()
        rows = [mask_id if x < 0.6 else int(t) for x, t in
                zip(torch.rand(B, generator=g), torch.randint(0, 400, (B,), generator=g))]
        got = diag.preview_at(m, prefix, rows).numpy()
        s = Session(cm)
        s.commit(prefix)
        want = preview(cm, s, rows, coreset_top_p=None)
        err = abs(got - want).max()
        assert err < 1e-4 * max(1.0, abs(want).max()), (plen, err)


def test_distance_and_right_context_by_hand():
    # one row, two blocks of 4; True = masked
    masked = torch.tensor([[True, True, False, True, False, True, True, True]])
    assert diag.dist_from_fixed(masked, 4).tolist() == [[1, 2, 0, 1, 0, 1, 2, 3]]   # fixed: 0
    assert diag.right_fixed(masked, 4).tolist() == [[True, True, False, False,
                                                     False, False, False, False]]


def test_pick_forbids_the_mask_id():
    lg = torch.tensor([[0.0, 5.0, 1.0], [3.0, 3.0, 0.0]])
    conf, ids, _ = diag.pick(lg, 1)            # id 1 forbidden
    assert ids.tolist() == [2, 0]              # row 1: the first maximum
    e = torch.tensor(1.0).exp()
    assert abs(conf[0].item() - e / (1 + e)) < 1e-6
    assert abs(conf[1].item() - 0.5 / (0.5 + 0.5 * torch.tensor(-3.0).exp().item())) < 1e-6


def test_prefix_masks_are_left_to_right_states():
    from train import mask_batch
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(2, 300, (64, 128), generator=g)
    _, masked = mask_batch(ids, 32, 1.0, 299, g, prefix_p=1.0)
    blocks = masked.reshape(-1, 32)
    j = 32 - blocks.sum(-1)                              # rows left clean
    want = torch.arange(32)[None] >= j[:, None]          # a clean prefix, a masked suffix
    assert torch.equal(blocks, want)
    assert j.min() >= 1 and j.max() <= 31
    assert len(set(j.tolist())) > 25                     # j ~ U{1..31}
    # with full blocks too: the full ones stay full, about prefix_p of the rest are prefixes
    _, masked = mask_batch(ids, 32, 0.5, 299, g, full_p=0.25, prefix_p=0.5)
    blocks = masked.reshape(-1, 32)
    full = blocks.all(-1)
    k = 32 - blocks.sum(-1)
    pre = ~full & (blocks == (torch.arange(32)[None] >= k[:, None])).all(-1)
    assert 0.15 < full.float().mean() < 0.35
    assert 0.25 < pre[~full].float().mean() < 0.75


def test_prefix_p_zero_keeps_the_masks_it_always_gave():
    from train import mask_batch
    ids = torch.randint(2, 300, (8, 64), generator=torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(7)
    _, got = mask_batch(ids, 16, 0.8, 299, g, full_p=0.25, r_min=0.05, prefix_p=0.0)
    # the documented draws, in order: the ratios, the full-block coins, the row uniforms
    g = torch.Generator().manual_seed(7)
    ratio = 0.05 + 0.75 * torch.rand(8, 4, 1, generator=g)
    full = torch.rand(8, 4, 1, generator=g) < 0.25
    ratio = torch.where(full, torch.full_like(ratio, 1.01), ratio)
    want = (torch.rand(8, 4, 16, generator=g) < ratio).reshape(8, 64)
    assert torch.equal(got, want)


def test_distill_near_adds_the_kl_of_rows_with_the_causal_context():
    from train import losses
    g = torch.Generator().manual_seed(3)
    n, t, v, blk = 1, 8, 5, 4
    ids = torch.randint(0, v, (n, t), generator=g)
    real = torch.ones(n, t, dtype=torch.bool)
    lc = torch.randn(n, t, v, generator=g)
    ln = torch.randn(n, t, v, generator=g)
    # block 0: rows 0..3 = clean, M, M, M; block 1: rows 4..7 = M, clean, M, M
    masked = torch.tensor([[False, True, True, True, True, False, True, True]])
    base = losses(lc, ln, ids, real, masked, 0.5)
    got = losses(lc, ln, ids, real, masked, 0.5, near=2.0, block=blk)
    assert torch.equal(base[0], got[0]) and torch.equal(base[1], got[1])
    # near rows, by hand: 1 (row 0 clean, 2-3 masked), 6 (row 5 clean, 7 masked); not 4: it
    # opens its block but row 5 after it is clean (more context than the causal path's)
    def kl(row):
        p = torch.softmax(lc[0, row - 1], -1)
        return float((p * (p.log() - torch.log_softmax(ln[0, row], -1))).sum())
    want = float(base[2]) + 2.0 * (kl(1) + kl(6)) / 2
    assert abs(float(got[2]) - want) < 1e-5, (float(got[2]), want)
    # and near 0 changes nothing
    assert torch.equal(losses(lc, ln, ids, real, masked, 0.5, near=0.0, block=blk)[2], base[2])


def test_max_distance_rule_by_hand():
    F_, T_ = False, True
    fixed = [F_, F_, T_, F_, F_, F_, F_, F_]          # row 2 fixed
    above = [T_, F_, F_, T_, T_, F_, T_, T_]          # rows above the threshold
    assert diag.threshold_fixes(fixed, above) == [0, 3, 4, 6, 7]            # SPEC 3
    assert diag.threshold_fixes(fixed, above, 8) == [0, 3, 4, 6, 7]         # K >= B: SPEC 3
    assert diag.threshold_fixes(fixed, above, 1) == [0, 3, 4]               # 4 chains on 3
    assert diag.threshold_fixes(fixed, above, 2) == [0, 3, 4, 6, 7]         # 6 is 2 past 4
    assert diag.threshold_fixes([F_] * 4, [F_, T_, T_, T_], 1) == []         # row 0 blocks
    assert diag.window_rows(fixed, 1) == [0, 3]
    assert diag.window_rows(fixed, 2) == [0, 1, 3, 4]


def test_a_cached_prefix_serves_every_pass():
    m, tok = tiny(seed=6)
    mask_id = tok.token_to_id("<|mask|>")
    g = torch.Generator().manual_seed(2)
    prefix = torch.randint(0, 400, (11,), generator=g).tolist()
    cache = diag.prefix_cache(m, prefix)
    for _ in range(3):                                  # the cache is read, never changed
        rows = [mask_id if x < 0.5 else int(t) for x, t in
                zip(torch.rand(B, generator=g), torch.randint(0, 400, (B,), generator=g))]
        assert torch.equal(diag.preview_block(m, cache, rows), diag.preview_at(m, prefix, rows))


class _Tok:
    """The three ids trace() asks a tokenizer for."""

    def __init__(self, tok):
        self.t = tok

    def token_to_id(self, s):
        return self.t.token_to_id(s)


def test_trace_with_the_causal_fallback_runs_left_to_right():
    # K = 1 with the window fallback and the causal fallback: the fixed rows of a
    # block are always a run from its start, each pass fixes a run grown from it
    # (threshold) or, if none, the first pending row with the causal path's
    # greedy token given the prefix and the run (an independent forward here:
    # the causal stream at chunk 1, no padding)
    m, tok = tiny(seed=5)
    mask_id = tok.token_to_id("<|mask|>")
    prompt = torch.randint(0, 400, (9,), generator=torch.Generator().manual_seed(4)).tolist()
    c = diag.pick(diag.preview_at(m, prompt, [mask_id] * B), mask_id)[0].sort().values
    th = float(c[B // 2] + c[B // 2 + 1]) / 2          # about half the first pass's rows pass
    tr = diag.trace(m, _Tok(tok), prompt, th, max_tokens=2 * B, block=B, fallback="causal",
                    max_distance=1, window_fallback=True)
    prefix, n_fallback, n_run = list(prompt), 0, 0
    for b in tr["blocks"]:
        done = 0
        for ps in b["passes"]:
            fix = sorted(ps["fixed"])
            assert fix == list(range(done, done + len(fix)))        # a run from the fixed rows
            if ps["by_fallback"]:
                assert len(fix) == 1
                with torch.no_grad():
                    lc, _ = m(torch.tensor([prefix + b["rows"][:done]]), None, 1)
                lg = lc[0, -1].clone()
                lg[mask_id] = -float("inf")
                assert b["rows"][done] == int(lg.argmax())
                assert ps["causal_pick"] == {done: int(lg.argmax())}
                n_fallback += 1
            else:
                confs = {e["row"]: e["conf"] for e in ps["pending"]}
                assert all(confs[r] > th for r in fix)
                n_run += len(fix)
            done += len(fix)
        assert done == B
        prefix += b["rows"]
    assert tr["causal_steps"] == n_fallback
    assert n_fallback > 0 and n_run > 0                       # both kinds of pass happened
