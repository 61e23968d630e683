"""`clover convert` on the reference's tiny Hugging Face models (tests/fixtures/,
written by tools/reference with transformers' own save_pretrained): each converts
in every --type and the result loads with every check a real run makes
(`clover info`); the f32 conversion is compared tensor by tensor with the
transformations computed in numpy from the checkpoint as the `safetensors`
package reads it. The engine's numbers are the golden tests' business."""
import json
import subprocess

import numpy as np
import pytest
import safetensors
from gguf import GGUFReader
from gguf.quants import dequantize

import test_convert_support as cs
from clover_paths import require_command, require_file


# The fixtures' Hugging Face directories, named here so that a missing one
# (or one without its weights) is a failure that names it, not an empty
# parametrisation.
FIXTURES = ("tiny_clover/hf", "tiny_ar/hf")
DIRS = [cs.SOURCE / "tests" / "fixtures" / d for d in FIXTURES]


def require_fixture(src):
    require_file(src / "config.json", "fixture config")
    if not any(src.glob("*.safetensors")):
        pytest.fail(f"missing fixture weights: {src} has no *.safetensors", pytrace=False)


@pytest.mark.parametrize("src", DIRS, ids=[str(d.relative_to(cs.SOURCE / "tests" / "fixtures")) for d in DIRS])
@pytest.mark.parametrize("qtype", ["f32", "bf16", "q8_0", "q4_k_m"])
def test_fixture_converts_and_loads(tmp_path, src, qtype):
    require_fixture(src)
    out = tmp_path / "model.gguf"
    r = cs.run_convert(src, out, "--type", qtype)
    assert r.returncode == 0, r.stderr
    reader = GGUFReader(str(out))
    assert reader.fields["general.architecture"].contents() == "qwen35moe"
    clover = require_command("clover")
    info = subprocess.run([str(clover), "info", str(out)], capture_output=True, text=True, timeout=300)
    assert info.returncode == 0, info.stderr
    assert "qwen35moe" in info.stdout


def read_checkpoint(src):
    """{trunk-relative name: float32 array} of every safetensors file, by the safetensors package."""
    out = {}
    for f in sorted(src.glob("*.safetensors")):
        for name, v in safetensors.deserialize(f.read_bytes()):
            if name.startswith(("model.visual.", "mtp.")):
                continue
            if v["dtype"] == "BF16":
                a = cs.from_bf16_bits(np.frombuffer(v["data"], np.uint16))
            else:
                a = np.frombuffer(v["data"], {"F32": np.float32, "F16": np.float16}[v["dtype"]]).astype(np.float32)
            key = name
            for p in ("model.language_model.", "model."):
                if key.startswith(p):
                    key = key[len(p):]
                    break
            out[key] = a.reshape(v["shape"])
    return out


def geometry_of(src):
    cfg = json.loads((src / "config.json").read_text())
    text = cfg.get("text_config", cfg)
    g = {k: text[k] for k in cs.geometry() if k != "full_attention_interval"}
    g["full_attention_interval"] = text.get("full_attention_interval", 4)  # transformers' default pattern
    if "layer_types" in text:
        g["layer_types"] = text["layer_types"]  # authoritative, as in transformers
    return g, text.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False))


@pytest.mark.parametrize("src", DIRS, ids=[str(d.relative_to(cs.SOURCE / "tests" / "fixtures")) for d in DIRS])
def test_fixture_values(tmp_path, src):
    require_fixture(src)
    out = tmp_path / "model.gguf"
    r = cs.run_convert(src, out, "--type", "f32")
    assert r.returncode == 0, r.stderr
    g, tie = geometry_of(src)
    exp = cs.expected_tensors(g, read_checkpoint(src), tie=tie)
    reader = GGUFReader(str(out))
    assert sorted(t.name for t in reader.tensors) == sorted(exp)
    for t in reader.tensors:
        ne, want, _ = exp[t.name]
        assert [int(x) for x in t.shape] == ne, t.name
        got = np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=2e-7, atol=0, err_msg=t.name)


@pytest.mark.parametrize("src", DIRS, ids=[str(d.relative_to(cs.SOURCE / "tests" / "fixtures")) for d in DIRS])
def test_fixture_scores_like_the_reference(tmp_path, src):
    """End to end: the f32 conversion, scored by the engine's causal trunk (`clover ppl`),
    gives the PyTorch reference's mean NLL from the fixture's manifest."""
    require_fixture(src)
    manifest = require_file(src.parent / "manifest.json", "fixture manifest")
    clover = require_command("clover")
    nll = json.loads(manifest.read_text()).get("nll")
    assert nll, f"{manifest} has no nll case"
    out = tmp_path / "model.gguf"
    r = cs.run_convert(src, out, "--type", "f32")
    assert r.returncode == 0, r.stderr
    p = subprocess.run([str(clover), "ppl", "-m", str(out), "--ids", ",".join(map(str, nll["ids"])), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["tokens"] == len(nll["ids"]) - 1
    assert got["mean_nll"] == pytest.approx(nll["mean_nll"], rel=1e-5)
