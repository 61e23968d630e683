"""The trainer's fast forward against the reference (CPU, small shapes):
its causal stream equals transformers' Qwen3_5MoeForCausalLM, its chunked
delta rule equals the one-step recurrence, and its preview stream, block by
block, equals clover_ref.preview on a session that committed the clean
prefix, after a round trip through export (so the export is checked too).

    .venv-less: python3 -m pytest -q tools/train/tests   (needs torch)
"""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "reference"))

from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import \
    torch_recurrent_gated_delta_rule  # noqa: E402

from clover_ref.tiny_tokenizer import build_tokenizer, write_tokenizer  # noqa: E402
from model import CloverTrainModel, text_config  # noqa: E402

B = 8


def tiny(seed=1):
    tok = build_tokenizer()
    v = tok.get_vocab_size()
    cfg = text_config("tiny", v, tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>"))
    m = CloverTrainModel(cfg, seed=seed)
    # move every weight off its init so that nothing passes by symmetry
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() >= 2:
                p.normal_(0, 1.0 / p.shape[-1] ** 0.5, generator=g)
            else:
                p.add_(0.3 * torch.randn(p.shape, generator=g))
    return m.eval(), tok


def test_chunk_delta_equals_recurrence():
    g = torch.Generator().manual_seed(3)
    n, t, h, dk, dv = 2, 24, 3, 8, 5
    q = torch.nn.functional.normalize(torch.randn(n, t, h, dk, generator=g), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(n, t, h, dk, generator=g), dim=-1)
    v = torch.randn(n, t, h, dv, generator=g)
    beta = torch.rand(n, t, h, generator=g)
    decay = -torch.rand(n, t, h, generator=g)
    want, _ = torch_recurrent_gated_delta_rule(q, k, v, g=decay, beta=beta, initial_state=None,
                                               output_final_state=True,
                                               use_qk_l2norm_in_kernel=False)
    got, states = CloverTrainModel.chunk_delta(q * dk ** -0.5, k, v, beta, decay, 8)
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
    _, s16 = torch_recurrent_gated_delta_rule(q[:, :16], k[:, :16], v[:, :16], g=decay[:, :16],
                                              beta=beta[:, :16], initial_state=None,
                                              output_final_state=True,
                                              use_qk_l2norm_in_kernel=False)
    assert torch.allclose(states[:, 2], s16, atol=1e-5)


def test_causal_and_preview_equal_reference(tmp_path):
    from clover_ref.checkpoint import CloverModel
    from clover_ref.preview import preview
    from clover_ref.session import Session
    from export import export

    m, tok = tiny()
    g = torch.Generator().manual_seed(5)
    t = 3 * B
    ids = torch.randint(0, 400, (2, t), generator=g)
    mask_id = tok.token_to_id("<|mask|>")
    noisy = torch.where(torch.rand(2, t, generator=g) < 0.5, torch.full_like(ids, mask_id), ids)
    with torch.no_grad():
        lc, ln = m(ids, noisy, B)
        want = m.lm(input_ids=ids).logits
    assert torch.allclose(lc, want, atol=1e-4), (lc - want).abs().max()

    tdir = tmp_path / "tok"
    tdir.mkdir()
    write_tokenizer(tok, str(tdir))
    export(m, str(tdir), str(tmp_path / "hf"), block=B, threshold=0.9, every=2)
    cm = CloverModel(str(tmp_path / "hf"))
    for row in range(2):
        for kb in range(t // B):
            s = Session(cm)
            if kb:
                s.commit([int(x) for x in ids[row, :kb * B]])
            got = preview(cm, s, [int(x) for x in noisy[row, kb * B:(kb + 1) * B]],
                          coreset_top_p=None)
            ref = ln[row, kb * B:(kb + 1) * B].numpy()
            err = abs(got - ref).max()
            assert err < 1e-4 * max(1.0, abs(ref).max()), (row, kb, err)


def moe_pair(device="cpu"):
    """One MoE layer of the `small` geometry (its widths are what the grouped
    GEMM's 16-byte rule needs) with weights off their init."""
    from model import GEOMETRIES  # noqa: F401
    cfg = text_config("small", 512, 0, 1)
    m = CloverTrainModel(cfg, seed=3)
    mlp = m.lm.model.layers[0].mlp.to(device)
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for p in mlp.parameters():
            p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
    x = torch.randn(3, 37, cfg.hidden_size, generator=g).to(device)
    return m, mlp, x


def test_grouped_moe_equals_loop():
    """The grouped-GEMM MoE (bf16, what the H200 trains with) against the
    float loop, which test_causal_and_preview_equal_reference ties to
    transformers. Bound: normalised error 2e-2 for the output and every
    gradient; bf16 rounds inputs and weights at 2^-9 relative, through two
    GEMMs and the gate that is a few 2^-9, so 2e-2 leaves room and a wrong
    row order or a dropped expert (errors of order 1) still fails."""
    m, mlp, x = moe_pair()
    outs = []
    for grouped in (False, True):
        m.grouped = grouped
        xx = x.clone().requires_grad_(True)
        y = m.moe(mlp, xx)
        mlp.zero_grad()
        (y * torch.linspace(-1, 1, y.shape[-1])).sum().backward()
        outs.append([y.detach(), xx.grad] + [p.grad.clone() for p in mlp.parameters()
                                             if p.grad is not None])
    for want, got in zip(*outs):
        err = ((got.float() - want) .norm() / want.norm()).item()
        assert err < 2e-2, err
