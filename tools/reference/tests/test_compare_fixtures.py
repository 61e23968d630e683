"""compare_fixtures.py: identical trees pass; every kind of content it
promises to hold exactly fails when changed; float data passes within its
tolerance and fails beyond it (perturbations computed here, by hand)."""
import json
import os
import shutil
import struct
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.dirname(HERE)
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(REF)), "tests", "fixtures")
sys.path.insert(0, REF)

from compare_fixtures import compare_trees  # noqa: E402


@pytest.fixture
def trees(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for t in (a, b):
        for name in ("tiny_clover", "tiny_ar", "tokenizer"):
            shutil.copytree(os.path.join(FIXTURES, name), t / name)
    return str(a), str(b)


def edit_manifest(root, name, fn):
    path = os.path.join(root, name, "manifest.json")
    with open(path) as f:
        m = json.load(f)
    fn(m)
    with open(path, "w") as f:
        json.dump(m, f, indent=1, ensure_ascii=False)


def scale_array(root, rel, fn):
    path = os.path.join(root, rel)
    a = np.fromfile(path, dtype="<f4")
    fn(a)
    a.tofile(path)


def test_identical_trees_pass(trees):
    assert compare_trees(*trees) == 0


def test_missing_or_extra_file_fails(trees):
    a, b = trees
    os.remove(os.path.join(b, "tiny_ar", "data", "causal_logits.f32"))
    assert compare_trees(a, b) == 1
    open(os.path.join(b, "tokenizer", "extra.txt"), "w").close()
    assert compare_trees(a, b) == 2


@pytest.mark.parametrize("rel_err, fails", [(1e-6, False), (9e-5, False), (1.1e-4, True)])
def test_float_arrays_within_1e4_of_their_scale(trees, rel_err, fails):
    a, b = trees
    rel = os.path.join("tiny_clover", "data", "causal_logits.f32")
    scale = float(np.abs(np.fromfile(os.path.join(a, rel), dtype="<f4")).max())
    assert scale > 1

    def bump(x):
        x[17] += np.float32(rel_err * scale)
    scale_array(b, rel, bump)
    assert compare_trees(a, b) == int(fails)


def test_shape_change_fails(trees):
    a, b = trees
    path = os.path.join(b, "tiny_clover", "data", "state_L0_state.f32")
    x = np.fromfile(path, dtype="<f4")
    x[:-1].tofile(path)
    assert compare_trees(a, b) == 1


@pytest.mark.parametrize("edit", [
    lambda m: m["generate"][0]["expected"]["tokens"].__setitem__(3, m["generate"][0]["expected"]["tokens"][3] + 1),
    lambda m: m["generate"][1]["expected"].__setitem__("finish_reason", "length"
                                                       if m["generate"][1]["expected"]["finish_reason"] == "stop" else "stop"),
    lambda m: m["generate"][0]["expected"]["passes"][0][0].__setitem__("fallback", not m["generate"][0]["expected"]["passes"][0][0]["fallback"]),
    lambda m: m["preview"][0]["coreset_layers"][0]["kept"].append(99),
    lambda m: m["record"].__setitem__("threshold", m["record"]["threshold"] + 1e-7),
    lambda m: m["causal"]["logits"]["shape"].reverse(),
    lambda m: m["generate"][0].__setitem__("new_key", 1),
])
def test_non_float_content_and_inputs_must_be_identical(trees, edit):
    a, b = trees
    edit_manifest(b, "tiny_clover", edit)
    assert compare_trees(a, b) == 1


@pytest.mark.parametrize("delta, fails", [(4e-6, False), (2e-5, True)])
def test_confidences_within_1e5(trees, delta, fails):
    a, b = trees
    edit_manifest(b, "tiny_ar", lambda m: m["generate"][0]["expected"]["confidences"].__setitem__(
        0, m["generate"][0]["expected"]["confidences"][0] - delta))
    assert compare_trees(a, b) == int(fails)


@pytest.mark.parametrize("rel_err, fails", [(5e-5, False), (2e-4, True)])
def test_nll_within_1e4(trees, rel_err, fails):
    a, b = trees

    def edit(m):
        nll = m["nll"]["per_token_nll"]
        i = int(np.argmax(nll))
        nll[i] *= 1 + rel_err * max(1.0, max(nll)) / nll[i]
    edit_manifest(b, "tiny_ar", edit)
    assert compare_trees(a, b) == int(fails)


def test_tokenizer_encodings_must_be_identical(trees):
    a, b = trees
    edit_manifest(b, "tokenizer", lambda m: m["encode"][5]["ids"].append(0))
    assert compare_trees(a, b) == 1


def test_a_changed_weight_fails(trees):
    # one bfloat16 weight of tiny_clover one unit in the last place up
    a, b = trees
    path = os.path.join(b, "tiny_clover", "hf", "model.safetensors")
    with open(path, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        lo, _ = header["model.language_model.embed_tokens.weight"]["data_offsets"]
        assert header["model.language_model.embed_tokens.weight"]["dtype"] == "BF16"
        f.seek(8 + n + lo)
        v = struct.unpack("<H", f.read(2))[0]
        f.seek(8 + n + lo)
        f.write(struct.pack("<H", v ^ 1))
    assert compare_trees(a, b) == 1


def test_a_changed_tokenizer_file_fails(trees):
    a, b = trees
    path = os.path.join(b, "tiny_ar", "hf", "tokenizer.json")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace('"<|im_end|>"', '"<|im_stop|>"', 1))
    assert compare_trees(a, b) == 1
