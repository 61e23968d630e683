"""train.py's engine-pattern masks (PLAN.md, "Next training call (gap fills)")
against an independent recomputation (CPU, tiny shapes, a few seconds):

* spec3_fixes (SPEC 3's rule on all blocks at once, optionally diag.py's
  max-distance window) equals diag.py's one-block Python rule
  (threshold_fixes + the most-confident fallback) on random confidences;
* engine_masks' masked rows are exactly the rows still unfixed after each
  block's own stop pass, recomputed block by block: one forward per pass with
  only that block in its state (every other block fully masked: a block's
  preview sees only the clean prefix), diag.pick's confidences, the Python
  rule; the fixed rows hold the true tokens (fill "true") or the picks of the
  pass that fixed them (fill "own");
* model.preview_cached (the clean stream once, then only the noisy one)
  equals the full forward's preview, pass after pass;
* mix_engine_masks leaves the masks and the generator alone at p 0, and
  otherwise replaces only the chosen rows, the second view by the complement;
* a few optimizer steps with engine masks lower the preview loss.

    python3 -m pytest -q tools/train/tests/test_engine_masks.py   (needs torch)
"""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "reference"))
sys.path.insert(0, HERE)

import torch.nn.functional as F  # noqa: E402

import diag  # noqa: E402
from test_model import B, tiny  # noqa: E402
from train import engine_masks, mask_batch, mix_engine_masks, spec3_fixes  # noqa: E402


def python_rule(conf, pending, threshold, k=None):
    """One block, one pass, as diag.trace decides it."""
    fixed = [not p for p in pending]
    fix = diag.threshold_fixes(fixed, [c > threshold for c in conf], k)
    if not fix:
        pend = [r for r in range(len(conf)) if pending[r]]
        if pend:
            fix = [max(pend, key=lambda r: (conf[r], -r))]
    return fix


def test_spec3_fixes_equals_the_python_rule():
    g = torch.Generator().manual_seed(4)
    conf = torch.rand(64, 3, B, generator=g, dtype=torch.float64)
    conf[0, 0] = 0.5                                    # a tie: the first row wins
    pending = torch.rand(64, 3, B, generator=g) < 0.6
    pending[1, 1] = False                               # a finished block fixes nothing
    for k in (None, 1, 2, 4, B):
        got = spec3_fixes(conf, pending, 0.7, k)
        for i in range(64):
            for b in range(3):
                want = python_rule(conf[i, b].tolist(), pending[i, b].tolist(), 0.7, k)
                assert torch.nonzero(got[i, b])[:, 0].tolist() == sorted(want), (k, i, b)
    # the window matters for this draw (else the test would not tell)
    assert not torch.equal(spec3_fixes(conf, pending, 0.7, 1), spec3_fixes(conf, pending, 0.7))


def recompute(m, ids, stop, threshold, mask_id, fill, k=None):
    """Block by block: the state after min(stop, last pass that leaves a gap)."""
    n, t = ids.shape
    nb = t // B
    masked = torch.zeros(n, t, dtype=torch.bool)
    noisy = ids.clone()
    for i in range(n):
        for b in range(nb):
            sl = slice(b * B, (b + 1) * B)
            rows = [mask_id] * B
            pending = [True] * B
            state, srows = list(pending), list(rows)
            for _ in range(int(stop[i, b])):
                x = torch.full((1, t), mask_id)          # every other block fully masked
                x[0, sl] = torch.tensor(rows)
                with torch.no_grad():
                    _, ln = m(ids[i:i + 1], x, B)
                conf, pk, _ = diag.pick(ln[0, sl], mask_id)
                # float32 forwards of one row vs the batch differ in the last bits:
                # the comparison is only meaningful away from the threshold
                assert (conf - threshold).abs().min() > 1e-5, "a near tie: change the seed"
                for r in python_rule(conf.tolist(), pending, threshold, k):
                    pending[r] = False
                    rows[r] = int(pk[r]) if fill == "own" else int(ids[i, b * B + r])
                if not any(pending):
                    break
                state, srows = list(pending), list(rows)
            masked[i, sl] = torch.tensor(state)
            noisy[i, sl] = torch.tensor(srows)
    return noisy, masked


@pytest.mark.parametrize("fill,k", [("true", None), ("own", None), ("true", 2)])
def test_engine_masks_are_the_unfixed_rows_of_the_traced_pass(fill, k):
    m, tok = tiny(seed=3)
    mask_id = tok.token_to_id("<|mask|>")
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(0, 400, (2, 4 * B), generator=g)
    # a threshold between two first-pass confidences, near the top: several rows
    # pass it in some passes, the fallback decides others
    with torch.no_grad():
        _, ln = m(ids, torch.full_like(ids, mask_id), B)
    c = diag.pick(ln, mask_id)[0].flatten().sort().values
    th = float(c[int(0.8 * len(c))] + c[int(0.8 * len(c)) + 1]) / 2
    noisy, masked, stop, passes = engine_masks(m, ids, B, mask_id, torch.Generator().manual_seed(5),
                                               threshold=th, max_pass=6, fill=fill, max_distance=k)
    # the documented draw: the stop passes first, U{1..max_pass} per block
    want_stop = torch.randint(1, 7, (2, 4), generator=torch.Generator().manual_seed(5))
    assert torch.equal(stop, want_stop)
    assert masked.shape == ids.shape and masked.dtype == torch.bool and noisy.shape == ids.shape
    want_noisy, want_masked = recompute(m, ids, stop, th, mask_id, fill, k)
    assert torch.equal(masked, want_masked)
    assert torch.equal(noisy == mask_id, masked)
    assert torch.equal(noisy, want_noisy)
    blocks = masked.view(-1, B)
    assert blocks.any(-1).all()                          # every block keeps a gap to train on
    assert (~blocks).any(-1).float().mean() > 0.5        # and most have fixed rows
    assert 1 <= passes <= 6
    if fill == "own":
        assert not torch.equal(noisy[~masked], ids[~masked])   # a random model's picks differ


def test_preview_cached_equals_the_forward():
    m, tok = tiny(seed=3)
    mask_id = tok.token_to_id("<|mask|>")
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 400, (3, 4 * B), generator=g)
    cache = m.clean_cache(ids, B)
    for _ in range(3):
        noisy = torch.where(torch.rand(3, 4 * B, generator=g) < 0.6, torch.full_like(ids, mask_id), ids)
        with torch.no_grad():
            _, want = m(ids, noisy, B)
        got = m.preview_cached(cache, noisy)
        assert (got - want).abs().max() <= 1e-5 * want.abs().max()


def test_mix_engine_masks():
    m, tok = tiny(seed=2)
    mask_id = tok.token_to_id("<|mask|>")
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 400, (8, 2 * B), generator=g)
    noisy, masked = mask_batch(ids, B, 1.0, mask_id, g, 0.25, 0.05, complementary=True)
    g2 = torch.Generator().manual_seed(9)
    before = g2.get_state()
    out = mix_engine_masks(m, ids, noisy, masked, B, mask_id, g2, 0.0)
    assert out[0] is noisy and out[1] is masked and out[2:] == (0, 0)
    assert torch.equal(g2.get_state(), before)           # p 0: no draw
    n2, m2, rows, _ = mix_engine_masks(m, ids, noisy, masked, B, mask_id, g2, 0.5, threshold=0.5,
                                       max_pass=3)
    sel = ~(m2[:8] == masked[:8]).all(-1) | ~(m2[8:] == masked[8:]).all(-1)
    assert 0 < rows < 8 and int(sel.sum()) <= rows
    same = torch.ones(8, dtype=torch.bool)
    same[sel] = False
    assert torch.equal(m2[:8][same], masked[:8][same]) and torch.equal(n2[:8][same], noisy[:8][same])
    assert torch.equal(m2[8:], ~m2[:8])                   # the complement, every row
    for v in (slice(0, 8), slice(8, 16)):
        assert torch.equal(n2[v], torch.where(m2[v], torch.full_like(ids, mask_id), ids))


def test_preview_loss_falls_with_engine_masks():
    m, tok = tiny(seed=2)
    m.train()
    mask_id = tok.token_to_id("<|mask|>")
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, 400, (4, 2 * B), generator=g)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    seen = []
    for _ in range(10):
        noisy, masked = mask_batch(ids, B, 1.0, mask_id, g, 0.25, 0.05, complementary=True)
        noisy, masked, _, _ = mix_engine_masks(m, ids, noisy, masked, B, mask_id, g, 1.0,
                                               threshold=0.3, max_pass=3)
        lc, ln = m(ids, noisy, B)
        lps = F.cross_entropy(ln[masked], ids.repeat(2, 1)[masked])
        lcs = F.cross_entropy(lc[:, :-1].reshape(-1, lc.shape[-1]), ids[:, 1:].reshape(-1))
        assert torch.isfinite(lps) and torch.isfinite(lcs)
        seen.append(lps.item())
        opt.zero_grad()
        (lcs + lps).backward()
        opt.step()
    assert seen[-1] < 0.8 * seen[0], seen


def test_lr_factor_keeps_the_old_curve_and_restarts_one():
    import math
    from train import lr_factor
    # cosine_from 0: the formula every call so far ran (train.py before it was a function)
    for start, warm in ((0, 100), (1800, 30), (2134, 30)):
        for step in range(start, 2400, 37):
            old = min(1.0, (step - start + 1) / warm, (step + 1) / 100) * \
                (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / 2400)))
            assert lr_factor(step, start, 2400, 100, warm) == old
    # a fresh warm-up and cosine over [2400, 2760] from the step-2400 checkpoint
    f = [lr_factor(s, 2400, 2760, 100, 30, 2400) for s in range(2400, 2761)]
    assert abs(f[0] - 0.01) < 1e-9 and abs(f[99] - max(f)) < 1e-9   # (s+1)/100, top at 100 steps
    assert 0.8 < max(f) < 0.9 and abs(f[-1] - 0.1) < 1e-9           # the 0.1x floor at STEPS
