"""export.py's block_diffusion record and its optional decode_rule key.

CPU only, no torch (`.venv/bin/python -m pytest -q tools/train/tests/test_export_record.py`):
record() is importable without the training venv. Without a rule the record
must be exactly what it was before the option existed (the keys below are
written out here, from the record the step-2400 default was exported with), so
a default export's GGUF is unchanged; with one, the key is written as given;
an unknown name is refused before anything is written. The end-to-end check
(export_ckpt.py --decode-rule -> config.json) needs torch and a checkpoint:
see test_export_ckpt_cli_carries_the_rule, skipped without them."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..")
sys.path.insert(0, TRAIN)

from export import record  # noqa: E402

IDS = {"<|mask|>": 8191, "</think>": 8183, "<|im_end|>": 8160, "<|endoftext|>": 8158}

# The record's keys as export.py wrote them before decode_rule existed.
KEYS_BEFORE = {
    "algorithm", "block_size", "threshold", "mask_token_id", "coreset_enabled", "coreset_top_p",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "length_penalty",
    "length_penalty_start", "length_penalty_window", "think_end_bias", "think_end_start",
    "think_end_window", "think_end_token_id", "stop_token_ids",
}


def test_no_rule_no_key():
    r = record(IDS, 32, 0.95)
    assert set(r) == KEYS_BEFORE
    assert "decode_rule" not in r
    assert r["threshold"] == 0.95 and r["block_size"] == 32
    assert r["mask_token_id"] == 8191 and r["stop_token_ids"] == [8160, 8158]


@pytest.mark.parametrize("rule", ["threshold", "causal_fallback"])
def test_rule_written_as_given(rule):
    r = record(IDS, 32, 0.95, rule)
    assert r["decode_rule"] == rule
    assert set(r) == KEYS_BEFORE | {"decode_rule"}
    # the rest of the record does not move
    base = record(IDS, 32, 0.95)
    assert {k: v for k, v in r.items() if k != "decode_rule"} == base
    assert json.loads(json.dumps(r))["decode_rule"] == rule


@pytest.mark.parametrize("bad", ["", "causal-fallback", "Threshold", "greedy"])
def test_unknown_rule_refused(bad):
    with pytest.raises(ValueError, match="unknown decode rule"):
        record(IDS, 32, 0.95, bad)


def test_export_ckpt_cli_carries_the_rule(tmp_path):
    """export_ckpt.py on the restored checkpoint (tools/train/ckpt_git.sh
    restore) with --decode-rule: config.json's record carries it; without it,
    it does not. Skipped where torch or the checkpoint is absent."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    root = os.path.abspath(os.path.join(TRAIN, "..", ".."))
    ck = os.path.join(root, ".gpu-train", "ckpt")
    if not os.path.exists(os.path.join(ck, "state.json")):
        pytest.skip("no checkpoint (bash tools/train/ckpt_git.sh restore)")
    for rule in (None, "causal_fallback"):
        out = tmp_path / f"hf-{rule}"
        cmd = [sys.executable, os.path.join(TRAIN, "export_ckpt.py"), "--tok",
               os.path.join(TRAIN, "tok"), "--ckpt", ck, "--out", str(out), "--geometry", "demo",
               "--threshold", "0.95"] + (["--decode-rule", rule] if rule else [])
        subprocess.run(cmd, check=True, capture_output=True)
        bd = json.load(open(out / "config.json"))["block_diffusion"]
        assert bd.get("decode_rule") == rule
        assert bd["threshold"] == 0.95
    r = subprocess.run([sys.executable, os.path.join(TRAIN, "export_ckpt.py"), "--tok", "x",
                        "--ckpt", ck, "--out", str(tmp_path / "bad"), "--decode-rule", "nope"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "invalid choice" in r.stderr
    assert not (tmp_path / "bad").exists()
