"""The trainer learns and its export is what clover runs (CPU, tiny shapes):

* a few optimizer steps on one repeated batch lower both the causal and the
  preview loss (the backward of the fast forward is wired);
* the exported model converted by `clover convert` (f32) scores a sequence in
  `clover ppl` with the NLL PyTorch computes for it (relative 1e-4).
"""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "reference"))
sys.path.insert(0, HERE)

import torch.nn.functional as F  # noqa: E402

from test_model import B, tiny  # noqa: E402
from train import mask_batch  # noqa: E402


def test_losses_fall_on_a_repeated_batch():
    m, tok = tiny(seed=2)
    m.train()
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, 400, (2, 2 * B), generator=g)
    noisy, masked = mask_batch(ids, B, 0.6, tok.token_to_id("<|mask|>"), g)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    first = None
    for _ in range(12):
        lc, ln = m(ids, noisy, B)
        lcs = F.cross_entropy(lc[:, :-1].reshape(-1, lc.shape[-1]), ids[:, 1:].reshape(-1))
        lps = F.cross_entropy(ln[masked], ids[masked])
        first = first or (lcs.item(), lps.item())
        opt.zero_grad()
        (lcs + lps).backward()
        opt.step()
    assert lcs.item() < 0.7 * first[0], (first, lcs.item())
    assert lps.item() < 0.7 * first[1], (first, lps.item())


def test_clover_scores_the_export_as_pytorch_does(tmp_path):
    from clover_ref.tiny_tokenizer import write_tokenizer
    from export import export
    clover = os.path.join(ROOT, "build", "clover")
    if not os.path.exists(clover):
        pytest.fail(f"{clover} is not built: the reference has nothing to compare with")
    m, tok = tiny(seed=4)
    (tmp_path / "tok").mkdir()
    write_tokenizer(tok, str(tmp_path / "tok"))
    export(m, str(tmp_path / "tok"), str(tmp_path / "hf"), block=B, threshold=0.9, every=2)
    gguf = str(tmp_path / "m.gguf")
    subprocess.run([clover, "convert", str(tmp_path / "hf"), "-o", gguf, "--type", "f32"],
                   check=True, capture_output=True)
    ids = torch.randint(0, 400, (1, 3 * B), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        lc, _ = m(ids, None, B)
    want = F.cross_entropy(lc[0, :-1].double(), ids[0, 1:]).item()
    r = subprocess.run([clover, "ppl", "-m", gguf, "--threads", "1", "--json", "--ids",
                        ",".join(str(int(x)) for x in ids[0])], check=True,
                       capture_output=True, text=True)
    got = json.loads(r.stdout)["mean_nll"]
    assert abs(got - want) <= 1e-4 * abs(want), (got, want)
