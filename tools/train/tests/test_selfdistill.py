"""selfdistill.py (train.py --sd-p) against independent recomputations (CPU,
tiny shapes, a few seconds):

* Decoder's next-token logits, one token at a time with its caches, equal the
  full causal forward's (model.forward(ids, None, block)) at every position;
* greedy_answers equals a greedy loop over the full forward (diag.ar_answer's
  method), stops included, and drops an answer with no stop;
* pack_rows lays out [pad] prompt | answer [pad] as hand-computed;
* losses(selfgen=...) leaves the answer out of the causal loss only;
* the rows saved for a later call (--sd-rows) read back equal; a wrong shape is refused.

    python3 -m pytest -q tools/train/tests/test_selfdistill.py   (needs torch)
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

from selfdistill import Decoder, greedy_answers, pack_rows  # noqa: E402
from test_model import B, tiny  # noqa: E402
from train import losses  # noqa: E402


def full_logits(model, ids):
    t = -(-ids.shape[1] // B) * B
    x = torch.cat([ids, ids[:, -1:].expand(-1, t - ids.shape[1])], 1)
    with torch.no_grad():
        lc, _ = model(x, None, B)
    return lc[:, :ids.shape[1]]


def test_decoder_equals_the_full_forward():
    model, tok = tiny(3)
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, tok.get_vocab_size(), (3, 2 * B + 5), generator=g)
    want = full_logits(model, ids)
    dec = Decoder(model, 3)
    got = torch.stack([dec.step(ids[:, t]) for t in range(ids.shape[1])], 1)
    assert got.shape == want.shape
    assert torch.allclose(got, want, atol=2e-4, rtol=1e-4), (got - want).abs().max()
    # a mutated cache (one row's GDN convolution ring, or its attention keys,
    # zeroed) must fail the comparison
    kinds = {model.lm.model.layers[i].block_type: i for i in range(len(dec.state))}
    for kind, key in (("linear_attention", "ring"), ("full_attention", "k")):
        dec = Decoder(model, 3)
        for t in range(B):
            dec.step(ids[:, t])
        dec.state[kinds[kind]][key][1].zero_()
        bad = dec.step(ids[:, B])
        assert not torch.allclose(bad[1], want[1, B], atol=2e-4), kind
        assert torch.allclose(bad[0], want[0, B], atol=2e-4, rtol=1e-4)


def greedy_ref(model, prompt, stops, max_new):
    seq, out = list(prompt), []
    while len(out) < max_new:
        t = int(full_logits(model, torch.tensor([seq]))[0, -1].argmax())
        seq.append(t)
        out.append(t)
        if t in stops:
            break
    return out


def test_greedy_answers_equal_a_full_forward_loop():
    model, tok = tiny(4)
    im_end, eot = tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")
    nl = tok.encode("\n").ids
    g = torch.Generator().manual_seed(9)
    v = tok.get_vocab_size()
    prompts = [torch.randint(0, v, (n,), generator=g).tolist() for n in (B, B, 2 * B, B, 2 * B)]
    # swap the head's rows of <|im_end|> and the first prompt's third greedy
    # token, so that at least that answer stops within the cap
    third = greedy_ref(model, prompts[0], set(), 3)[2]
    with torch.no_grad():
        w = model.lm.lm_head.weight
        w[[im_end, third]] = w[[third, im_end]]
    got = greedy_answers(model, prompts, tok, 12, batch=2)
    stopped = 0
    for p, a in zip(prompts, got):
        ref = greedy_ref(model, p, {im_end, eot}, 12)
        if ref[-1] != im_end:
            assert a is None
        else:
            stopped += 1
            assert a == ref + nl
    assert stopped >= 1, got


def test_pack_rows_layout():
    pad = 0
    p1 = [pad, pad, 5, 6]            # a prompt left-padded to the block (4)
    a1 = [7, 8, 9]                   # answer: padded to 4
    p2 = [pad, 11, 12, 13]
    a2 = [14, 15, 16, 17, 18]        # padded to 8
    ids, real, selfgen = pack_rows([p1, p2, p1], [a1, a2, None], seq=16, block=4, pad=pad)
    assert ids.shape == (2, 16)
    assert ids[0].tolist() == [0, 0, 5, 6, 7, 8, 9, 0] + [0] * 8
    assert real[0].tolist() == [0, 0, 1, 1, 1, 1, 1, 0] + [0] * 8
    assert selfgen[0].tolist() == [0, 0, 0, 0, 1, 1, 1, 0] + [0] * 8
    assert ids[1].tolist() == [0, 11, 12, 13, 14, 15, 16, 17, 18, 0, 0, 0] + [0] * 4
    assert real[1].tolist() == [0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0] + [0] * 4
    assert selfgen[1].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0] + [0] * 4


def test_losses_keep_selfgen_out_of_the_causal_loss_only():
    g = torch.Generator().manual_seed(2)
    n, t, v = 2, 2 * B, 11
    lc = torch.randn(n, t, v, generator=g)
    ln = torch.randn(n, t, v, generator=g)
    ids = torch.randint(0, v, (n, t), generator=g)
    real = torch.ones(n, t, dtype=torch.bool)
    masked = torch.rand(n, t, generator=g) < 0.5
    selfgen = torch.zeros(n, t, dtype=torch.bool)
    selfgen[0, 5:12] = True
    c0, p0, d0, _ = losses(lc, ln, ids, real, masked, 0.5)
    c1, p1, d1, _ = losses(lc, ln, ids, real, masked, 0.5, selfgen=selfgen)
    ok = (real & ~selfgen)[:, 1:]
    want = F.cross_entropy(lc[:, :-1][ok], ids[:, 1:][ok])
    assert torch.allclose(c1, want) and not torch.allclose(c0, c1)
    assert torch.equal(p0, p1) and torch.equal(d0, d1)


def test_sd_rows_round_trip_and_a_wrong_shape(tmp_path):
    from train import load_sd_rows, save_sd_rows
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 8192, (3, 16), generator=g)
    real = torch.rand(3, 16, generator=g) < 0.5
    selfgen = real & (torch.rand(3, 16, generator=g) < 0.5)
    p = str(tmp_path / "d" / "sd-rows.pt")
    save_sd_rows(p, ids, real, selfgen)
    i2, r2, s2 = load_sd_rows(p, 16)
    assert torch.equal(i2, ids) and i2.dtype == torch.long
    assert torch.equal(r2, real) and torch.equal(s2, selfgen)
    with pytest.raises(SystemExit, match="not \\[N, 32\\]"):
        load_sd_rows(p, 32)
