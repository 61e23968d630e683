"""`clover quantize IN OUT --type T` (GGUF to GGUF, as llama-quantize) on a
synthesised f32 model with 256-wide rows (so every K-quant fits) and the
Clover tensors: each tensor's output type is the table of `--help` (restated
here from the issue, not from the C code); the data, read back by llama.cpp's
`gguf` package, is the f32 original within each type's rounding (Q8_0 bit
for bit gguf-py's own quantiser); metadata is copied with general.file_type
set; a quantised input needs --allow-requantize; a split input works."""
import subprocess

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader
from gguf.quants import dequantize, quantize

import test_convert_support as cs

CLOVER = cs.BUILD / "clover"
# the table: (experts, token_embd, output, other matrices) per type
TABLE = {"q8_0": (Q.Q8_0, Q.Q8_0, Q.Q8_0, Q.Q8_0), "q6_k": (Q.Q6_K, Q.Q6_K, Q.Q6_K, Q.Q6_K),
         "q5_k_m": (Q.Q5_K, Q.Q8_0, Q.Q6_K, Q.Q8_0), "q4_k_m": (Q.Q4_K, Q.Q4_K, Q.Q6_K, Q.Q8_0)}
FILE_TYPE = {"q8_0": 7, "q6_k": 18, "q5_k_m": 17, "q4_k_m": 15}
# relative RMS error of a Gaussian tensor, with margin (measured: 0.0052, 0.018, 0.035, 0.069)
RMS = {Q.Q8_0: 0.008, Q.Q6_K: 0.025, Q.Q5_K: 0.05, Q.Q4_K: 0.1, Q.F32: 0.0}
BLOCK = {Q.Q8_0: 32, Q.Q6_K: 256, Q.Q5_K: 256, Q.Q4_K: 256}


def clover(*args):
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is not built")
    return subprocess.run([str(CLOVER), *map(str, args)], capture_output=True, text=True, timeout=300)


def expected_type(qtype, name, shape):
    if len(shape) < 2 or "ssm_conv1d" in name or "ffn_gate_inp" in name:
        return Q.F32
    exps, embd, out, other = TABLE[qtype]
    t = exps if "_exps" in name else embd if name == "token_embd.weight" else out if name == "output.weight" else other
    for cand in (t, Q.Q8_0):
        if shape[0] % BLOCK[cand] == 0:
            return cand
    return Q.F16


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    d = tmp_path_factory.mktemp("quantize")
    f = d / "f32.gguf"
    r = clover("synth", "-o", f, "--hidden", 256, "--expert-ff", 256, "--layers", 2, "--experts", 4)
    assert r.returncode == 0, r.stderr
    return f


@pytest.mark.parametrize("qtype", sorted(TABLE))
def test_types_and_values(source, tmp_path, qtype):
    out = tmp_path / f"{qtype}.gguf"
    r = clover("quantize", source, out, "--type", qtype)
    assert r.returncode == 0, r.stderr
    a = GGUFReader(str(source))
    b = GGUFReader(str(out))
    src = {t.name: t for t in a.tensors}
    assert [t.name for t in b.tensors] == [t.name for t in a.tensors]
    seen = set()
    for t in b.tensors:
        shape = [int(x) for x in t.shape]
        want = expected_type(qtype, t.name, shape)
        assert t.tensor_type == want, (t.name, t.tensor_type.name, want.name)
        seen.add(want)
        x = np.asarray(src[t.name].data, np.float32).reshape(-1)
        y = np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(-1)
        err = np.sqrt(np.mean((x - y) ** 2)) / max(np.sqrt(np.mean(x ** 2)), 1e-30)
        assert err <= RMS[want], (t.name, err)
        if want == Q.Q8_0:
            ref = quantize(np.asarray(src[t.name].data, np.float32), Q.Q8_0)
            assert np.array_equal(np.asarray(t.data).reshape(-1), ref.reshape(-1)), t.name
    assert Q.F32 in seen and TABLE[qtype][0] in seen
    assert any(t.name.startswith("blk.0.bd_") and t.tensor_type == Q.F32 for t in b.tensors)  # Clover tensors F32
    assert b.fields["general.file_type"].contents() == FILE_TYPE[qtype]
    for k in ("tokenizer.ggml.tokens", "clover.block_size", "qwen35moe.block_count"):
        assert b.fields[k].contents() == a.fields[k].contents(), k


def test_requantize_needs_the_flag(source, tmp_path):
    q8 = tmp_path / "q8.gguf"
    assert clover("quantize", source, q8, "--type", "q8_0").returncode == 0
    r = clover("quantize", q8, tmp_path / "q4.gguf", "--type", "q4_k_m")
    assert r.returncode == 1 and "--allow-requantize" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "q4.gguf").exists()
    r = clover("quantize", q8, tmp_path / "q4.gguf", "--type", "q4_k_m", "--allow-requantize")
    assert r.returncode == 0, r.stderr
    assert GGUFReader(str(tmp_path / "q4.gguf")).fields["general.file_type"].contents() == 15


def test_usage_errors(source, tmp_path):
    assert clover("quantize", source, tmp_path / "x.gguf").returncode == 2
    r = clover("quantize", source, tmp_path / "x.gguf", "--type", "q3_k")
    assert r.returncode == 2 and "q3_k" in r.stderr
    r = clover("quantize", tmp_path / "absent.gguf", tmp_path / "x.gguf", "--type", "q8_0")
    assert r.returncode == 1 and "absent.gguf" in r.stderr
    h = clover("quantize", "--help")
    assert h.returncode == 0 and "q5_k_m" in h.stdout and "routed experts" in h.stdout
