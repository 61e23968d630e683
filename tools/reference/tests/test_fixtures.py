"""The committed fixtures (tests/fixtures): they load in transformers, their
numbers are what the reference computes from the committed files, the
tokenizer cases agree with transformers' tokenizer, they stay small, and
regenerating them gives the same fixtures: everything but computed floats
identical and floats within tolerance on any machine, every byte identical
on the machine that wrote them (fixtures_recorded_on.json)."""
import filecmp
import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors import safe_open
from tokenizers import Tokenizer
from transformers import AutoTokenizer

from clover_ref import machine
from clover_ref.checkpoint import CloverModel
from clover_ref.fixture_io import read_array
from clover_ref.generate import Options, TrunkBackend, generate_block_diffusion
from clover_ref.preview import preview
from clover_ref.session import Session
from clover_ref.tolerance import TRUNK_REL, scale_error

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.dirname(HERE)
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(REF)), "tests", "fixtures")
NAMES = ("tiny_clover", "tiny_ar", "tokenizer")


def manifest(name):
    with open(os.path.join(FIXTURES, name, "manifest.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def committed_clover():
    return CloverModel(os.path.join(FIXTURES, "tiny_clover", "hf"))


def test_fixtures_are_small():
    total = sum(os.path.getsize(os.path.join(d, f))
                for n in NAMES for d, _, fs in os.walk(os.path.join(FIXTURES, n)) for f in fs)
    assert total < 5 * 1024 * 1024


def test_clover_checkpoint_is_release_shaped(committed_clover):
    d = os.path.join(FIXTURES, "tiny_clover", "hf")
    cfg = json.load(open(os.path.join(d, "config.json")))
    assert "text_config" in cfg and "block_diffusion" in cfg
    with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
        keys = list(f.keys())
        assert f.get_tensor("model.language_model.embed_tokens.weight").dtype == torch.bfloat16
        extra = "model.language_model.layers.0.linear_attn.conv_right_weight"
        assert f.get_tensor(extra).dtype == torch.float32
    assert any(k.startswith("model.visual.") for k in keys)
    assert committed_clover.record.block_size == 8
    assert sorted(committed_clover.extras) == [0, 1, 3, 4]


def test_ar_checkpoint_is_flat_and_sharded():
    d = os.path.join(FIXTURES, "tiny_ar", "hf")
    assert json.load(open(os.path.join(d, "config.json")))["model_type"] == "qwen3_5_moe_text"
    index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    assert len(set(index["weight_map"].values())) == 2
    assert all(k.startswith(("model.layers.", "model.embed_tokens", "model.norm", "lm_head"))
               for k in index["weight_map"])
    assert CloverModel(d).record is None


def test_arrays_have_their_shapes_and_are_consistent(committed_clover):
    for name in ("tiny_clover", "tiny_ar"):
        base = os.path.join(FIXTURES, name)
        m = manifest(name)
        for d, _, fs in os.walk(os.path.join(base, "data")):
            assert all(f.endswith(".f32") for f in fs)
        hidden = read_array(base, m["causal"]["hidden_states"])
        logits = read_array(base, m["causal"]["logits"])
        assert hidden.shape[:2] == (m["num_layers"] + 1, len(m["causal"]["ids"]))
        assert logits.shape == (len(m["causal"]["ids"]), m["vocab_size"])
    # the last hidden state through the final norm and the head gives the logits
    cm = committed_clover
    m = manifest("tiny_clover")
    base = os.path.join(FIXTURES, "tiny_clover")
    h = torch.from_numpy(read_array(base, m["causal"]["hidden_states"])[-1])
    with torch.no_grad():
        lg = cm.model.lm_head(cm.model.model.norm(h)).numpy()
    # one norm and one product from the stored input: float32 rounding only
    assert scale_error(lg, read_array(base, m["causal"]["logits"])) <= 1e-5


def test_committed_numbers_are_what_the_reference_computes(committed_clover):
    # Recomputed on this machine: another CPU's kernels move the float32
    # results by up to a few 1e-5 of their scale (clover_ref/tolerance.py),
    # never the tokens (the margins recorded with every case).
    cm = committed_clover
    m = manifest("tiny_clover")
    base = os.path.join(FIXTURES, "tiny_clover")
    s = Session(cm)
    lg = s.commit(m["causal"]["ids"], want_logits=True)
    err = scale_error(lg, read_array(base, m["causal"]["logits"]))
    assert err <= TRUNK_REL, f"causal logits: {err:.2e} of the scale"
    p = m["preview"][0]
    assert p["prefix_ids"] == m["causal"]["ids"]
    got = preview(cm, s, p["block_ids"])
    err = scale_error(got, read_array(base, p["logits"]))
    assert err <= TRUNK_REL, f"preview logits: {err:.2e} of the scale"
    case = m["generate"][0]
    o = case["options"]
    res = generate_block_diffusion(TrunkBackend(cm), cm.record, cm.stop_ids(), case["prompt_ids"],
                                   Options(max_tokens=o["max_tokens"]))
    assert res.tokens == case["expected"]["tokens"]
    assert res.passes_per_block == case["expected"]["passes_per_block"]


def test_tokenizer_cases_agree_with_transformers():
    m = manifest("tokenizer")
    d = os.path.join(FIXTURES, "tiny_clover", "hf")
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(d)
    assert len(m["encode"]) >= 30
    for case in m["encode"]:
        assert tok.encode(case["text"], add_special_tokens=False).ids == case["ids"]
        assert auto(case["text"], add_special_tokens=False).input_ids == case["ids"]
    for chat in m["chat"]:
        kw = {k: v for k, v in chat.items() if k not in ("messages", "text", "ids")}
        assert auto.apply_chat_template(chat["messages"], tokenize=False, **kw) == chat["text"]
    # the two model directories ship the same tokenizer
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert filecmp.cmp(os.path.join(d, f), os.path.join(FIXTURES, "tiny_ar", "hf", f),
                           shallow=False)


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    out = tmp_path_factory.mktemp("regenerated") / "fixtures"
    r = subprocess.run([sys.executable, os.path.join(REF, "make_fixtures.py"), "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return str(out)


def test_regenerating_gives_the_same_fixtures(regenerated):
    # Every file present; models, tokenizer, ids, tokens, passes, finish
    # reasons, coreset sets, encodings identical; float32 arrays within
    # TRUNK_REL of their scale, confidences within 1e-5 (compare_fixtures.py).
    sys.path.insert(0, REF)
    from compare_fixtures import compare_trees
    assert compare_trees(FIXTURES, regenerated, quiet=True) == 0


def test_regenerating_on_the_recording_machine_gives_identical_bytes(regenerated):
    rec, here = machine.recorded(), machine.fingerprint()
    if rec is None:
        pytest.skip("no fixtures_recorded_on.json: run make_fixtures.py to write tests/fixtures")
    if rec != here:
        pytest.skip("tests/fixtures was written on another machine or software ("
                    + "; ".join(machine.differences(rec, here)) + "): float32 bytes may differ "
                    "in the last bits there; test_regenerating_gives_the_same_fixtures holds")
    for name in NAMES:
        a, b = os.path.join(FIXTURES, name), os.path.join(regenerated, name)
        files_a = sorted(os.path.relpath(os.path.join(d, f), a) for d, _, fs in os.walk(a) for f in fs)
        files_b = sorted(os.path.relpath(os.path.join(d, f), b) for d, _, fs in os.walk(b) for f in fs)
        assert files_a == files_b
        match, mismatch, errors = filecmp.cmpfiles(a, b, files_a, shallow=False)
        assert not mismatch and not errors, (
            f"{name}: {mismatch + errors} differ although this machine's fingerprint matches "
            "fixtures_recorded_on.json: the reference changed (then regenerate), or a setting "
            "the fingerprint does not record picks other kernels")
