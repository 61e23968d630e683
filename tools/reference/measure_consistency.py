#!/usr/bin/env python3
"""How far apart the reference's own float32 evaluation orders land on this
machine, against the tolerance its checks use (clover_ref/tolerance.py):

    python3 tools/reference/measure_consistency.py

For both committed fixture models: one commit vs chunked commits (the
chunkings make_fixtures.py and tests/test_commit.py use), the cached path vs
transformers' cache-free forward, a decode step vs the full forward, the
cache (conv rings, states, KV) after chunked vs one commit, chunked vs one
NLL, and this machine's logits vs the committed ones. Every figure is
max |a - b| / max(1, max |b|). A diagnostic: run it on a new machine to see
the headroom before trusting the checks there; exits 1 if a figure exceeds
the tolerance.
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from clover_ref import machine  # noqa: E402
from clover_ref.checkpoint import CloverModel, set_deterministic  # noqa: E402
from clover_ref.fixture_io import read_array  # noqa: E402
from clover_ref.generate import TrunkBackend, score_nll  # noqa: E402
from clover_ref.session import Session  # noqa: E402
from clover_ref.tiny_tokenizer import build_tokenizer  # noqa: E402
from clover_ref.tolerance import TRUNK_REL, scale_error  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "fixtures")
TEST_PROMPT = ("<|im_start|>user\nWrite a short poem about the sea.<|im_end|>\n"
               "<|im_start|>assistant\n<think>\n")   # tests/conftest.py's prompt_ids


def commit_in(cm, ids, chunks):
    """Commit ids in pieces of the given sizes, then the rest; logits and session."""
    s, parts, i = Session(cm), [], 0
    for n in chunks:
        parts.append(s.commit(ids[i:i + n], want_logits=True))
        i += n
    parts.append(s.commit(ids[i:], want_logits=True))
    return np.concatenate(parts), s


def cache_error(cm, a: Session, b: Session) -> float:
    worst = 0.0
    for li, kind in enumerate(cm.config.layer_types):
        pairs = zip(a.gdn_state(li), b.gdn_state(li)) if kind == "linear_attention" \
            else zip(a.kv(li), b.kv(li))
        worst = max([worst] + [scale_error(y, x) for x, y in pairs])
    return worst


def measure(name: str, prompt: list) -> dict:
    base = os.path.join(FIXTURES, name)
    with open(os.path.join(base, "manifest.json")) as f:
        man = json.load(f)
    cm = CloverModel(os.path.join(base, "hf"))
    ids = man["causal"]["ids"]
    one_s = Session(cm)
    one = one_s.commit(ids, want_logits=True)
    with torch.no_grad():
        nocache = cm.model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].numpy()
        ref = cm.model(input_ids=torch.tensor([prompt]), use_cache=False).logits[0].numpy()
    r = {"vs committed logits": scale_error(one, read_array(base, man["causal"]["logits"])),
         "chunks of 5 (make_fixtures)": scale_error(Session(cm).commit_chunks(ids, 5, True), one),
         "cache-free forward": scale_error(nocache, one)}
    a, sa = commit_in(cm, prompt, [])
    worst, worst_cache = 0.0, 0.0
    for chunks in ([5, 1, 7], [1] * 6, [len(prompt) - 1]):
        b, sb = commit_in(cm, prompt, chunks)
        worst = max(worst, scale_error(b, a))
        worst_cache = max(worst_cache, cache_error(cm, sa, sb))
    r["test chunkings: logits"] = worst
    r["test chunkings: rings/states/KV"] = worst_cache
    s = Session(cm)
    s.commit(prompt[:9])
    r["9 then rest vs cache-free"] = scale_error(s.commit(prompt[9:], want_logits=True), ref[9:])
    s = Session(cm)
    s.commit(prompt[:-1])
    r["decode step vs full forward"] = scale_error(s.commit(prompt[-1:], want_logits=True)[0],
                                                   ref[-1])
    nll_ids = man["nll"]["ids"]
    nll, _, _ = score_nll(TrunkBackend(cm), nll_ids)
    nll_c, _, _ = score_nll(TrunkBackend(cm), nll_ids, chunk=7)
    r["NLL chunks of 7"] = scale_error(nll_c, nll)
    return r


def main() -> int:
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    set_deterministic()
    print("machine:", json.dumps(machine.fingerprint(), sort_keys=True))
    prompt = build_tokenizer().encode(TEST_PROMPT).ids
    bad = 0
    for name in ("tiny_clover", "tiny_ar"):
        for what, err in measure(name, prompt).items():
            flag = "ok  " if err <= TRUNK_REL else "OVER"
            bad += err > TRUNK_REL
            print(f"{flag} {name:12s} {what:32s} {err:.2e}  ({err / TRUNK_REL:4.0%} of {TRUNK_REL:g})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
