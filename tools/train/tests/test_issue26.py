"""Issue 26's trainer pieces that need torch (run with the training venv or on
the device: `python3 -m pytest -q tools/train/tests/test_issue26.py`):
the complementary-view forward equals separate forwards, the 8-bit checkpoint
round trip stays within half a quantization step, the demo geometry's size."""
from __future__ import annotations

import json
import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import ckpt  # noqa: E402
from model import CloverTrainModel, text_config  # noqa: E402
from train import losses, mask_batch  # noqa: E402


def tiny(seed=0):
    torch.manual_seed(seed)
    m = CloverTrainModel(text_config("tiny", 300, 0, 1), seed=seed).eval()
    with torch.no_grad():                       # extras away from their init: a real test
        for p in m.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return m


def test_two_views_equal_two_forwards():
    m = tiny()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(2, 300, (3, 64), generator=g)
    noisy, masked = mask_batch(ids, 16, 1.0, 299, g, full_p=0.3, complementary=True)
    assert noisy.shape == (6, 64)
    assert torch.equal(masked[:3], ~masked[3:])            # m and 1-m
    with torch.no_grad():
        lc, ln = m(ids, noisy, 16)
        lc0, ln0 = m(ids, noisy[:3], 16)
        lc1, ln1 = m(ids, noisy[3:], 16)
    assert torch.allclose(lc, lc0, atol=1e-5) and torch.allclose(lc, lc1, atol=1e-5)
    assert torch.allclose(ln[:3], ln0, atol=1e-4)
    assert torch.allclose(ln[3:], ln1, atol=1e-4)


def test_full_mask_probability_masks_whole_blocks():
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(2, 300, (64, 256), generator=g)
    _, masked = mask_batch(ids, 32, 0.3, 299, g, full_p=0.5)
    per_block = masked.reshape(64, 8, 32).float().mean(-1)
    full = (per_block == 1).float().mean().item()
    assert 0.4 < full < 0.6                                 # r_max 0.3 alone never fills a block
    assert per_block[per_block < 1].max() < 0.7


def test_losses_with_two_views_are_finite_and_train():
    m = tiny().train()
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(2, 300, (2, 64), generator=g)
    real = torch.ones_like(ids, dtype=torch.bool)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    first = None
    for _ in range(12):
        noisy, masked = mask_batch(ids, 16, 1.0, 299, torch.Generator().manual_seed(4),
                                   full_p=0.25, complementary=True)
        lc, ln = m(ids, noisy, 16)
        lcau, lp, ld, le = losses(lc, ln, ids, real, masked, 0.5, 0.05)
        loss = lcau + lp + 0.5 * ld + 0.05 * le
        assert torch.isfinite(loss)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.8 * first


def test_int8_checkpoint_round_trip(tmp_path):
    m = tiny(5)
    ckpt.save(m, str(tmp_path), 7, [{"step": 7}], int8=True)
    m2 = tiny(6)
    step, log, st = ckpt.load(m2, str(tmp_path))
    assert step == 7 and log == [{"step": 7}] and st["int8"] is True
    for (k, a), (_, b) in zip(m.state_dict().items(), m2.state_dict().items()):
        if a.dim() >= 2 and a.numel() % 64 == 0:
            blk = a.reshape(-1, 64)
            bound = blk.abs().amax(1, keepdim=True) / 254 * 1.01 + 1e-7
            assert ((blk - b.reshape(-1, 64)).abs() <= bound).all(), k
        else:
            assert torch.equal(a.float(), b), k
    with open(tmp_path / "state.json") as f:
        assert json.load(f)["step"] == 7


def test_demo_geometry_size_and_checkpoint_files(tmp_path):
    m = CloverTrainModel(text_config("demo", 8192, 8158, 8160))
    n = sum(p.numel() for p in m.parameters())
    assert 20e6 <= n <= 40e6, n
    names = ckpt.save(m, str(tmp_path), 1, [], int8=True)
    sizes = [os.path.getsize(tmp_path / x) for x in names]
    assert len(names) + 1 <= 8 and max(sizes) <= 16 * 2**20
    assert sum(sizes) < 1.15 * n                           # ~1.06 bytes a parameter


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_two_views_grouped_moe_cuda():
    m = tiny().cuda()
    m.grouped = True
    g = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(2, 300, (2, 64), generator=g, device="cuda")
    noisy, _ = mask_batch(ids, 16, 1.0, 299, g, complementary=True)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        _, ln = m(ids, noisy, 16)
        _, ln0 = m(ids, noisy[:2], 16)
    assert (ln[:2].float() - ln0.float()).abs().max() < 0.1
