"""Clover's tensor types against llama.cpp's own Python package (gguf-py) and numpy.

gguf-py is an independent implementation of the same byte layouts (its numpy
dequantisers were written from ggml-quants.c), so agreement bit for bit on
random blocks pins down every nibble, high bit and packed scale. numpy's
float16 conversion is the independent oracle for IEEE half precision.

Driven through build/tests/tools/quant_tool (see its header for the protocol).
"""

import os
import subprocess

import numpy as np
import pytest

import gguf  # noqa: E402 (a missing test tool is a failure, not a skip)
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf import quants  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402

BUILD = os.environ.get("CLOVER_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
# Helper tools are documented to land in build/tests/tools/; accept build/tests/ too.
TOOL = next(
    (p for p in (os.path.join(BUILD, "tests", "tools", "quant_tool"), os.path.join(BUILD, "tests", "quant_tool"))
     if os.path.exists(p)),
    os.path.join(BUILD, "tests", "tools", "quant_tool"),
)

SUPPORTED = {T.F32: "f32", T.F16: "f16", T.BF16: "bf16", T.Q8_0: "q8_0", T.Q4_K: "q4_k", T.Q5_K: "q5_k", T.Q6_K: "q6_k"}
QUANTISED = [T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K]


def tool(*args, data=b"", env=None):
    run_env = dict(os.environ)
    if env:
        run_env.update(env)
    r = subprocess.run([TOOL, *map(str, args)], input=data, capture_output=True, env=run_env, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def f16_fields(qtype):
    """Byte offsets, within a block, of the f16 fields (scales) of a type."""
    return {T.Q8_0: [0], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}[qtype]


def random_blocks(rng, qtype, n_blocks):
    """Random bytes with every f16 field a finite value in [2^-24, 2^4], subnormals included."""
    _, block_bytes = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    for off in f16_fields(qtype):
        mant = rng.integers(0, 1024, size=n_blocks, dtype=np.uint16)
        exp = rng.integers(0, 20, size=n_blocks, dtype=np.uint16)
        sign = rng.integers(0, 2, size=n_blocks, dtype=np.uint16) << 15
        h = (mant | (exp << 10) | sign).astype("<u2")
        raw[:, off : off + 2] = h.view(np.uint8).reshape(n_blocks, 2)
    return raw


def test_type_geometry_matches_gguf_py():
    rows = [line.split() for line in tool("info").decode().splitlines()]
    ours = {int(r[0]): (r[1], int(r[2]), int(r[3]), r[4] == "1", r[5] == "1") for r in rows}
    assert len(ours) == 64
    for qtype, (elems, nbytes) in GGML_QUANT_SIZES.items():
        name, e, b, known, _ = ours[int(qtype)]
        assert known, qtype
        if qtype == T.Q8_1:
            # gguf-py still says 4 + 4 + 32 (the old f32 d and s); ggml's block_q8_1 has been
            # two f16 + 32 int8 = 36 bytes for a long time (static_assert in ggml-common.h).
            # Q8_1 is an activation type that never appears in files; clover follows ggml.
            assert (e, b) == (32, 36)
            continue
        assert (e, b) == (elems, nbytes), qtype
        assert name.lower() == qtype.name.lower()
    known_codes = {int(q) for q in GGML_QUANT_SIZES}
    for code, (_, _, _, known, supported) in ours.items():
        assert known == (code in known_codes), code
        assert supported == (code in {int(q) for q in SUPPORTED}), code


def test_f16_to_f32_every_value():
    h = np.arange(65536, dtype="<u2")
    ours = np.frombuffer(tool("f16_to_f32", 65536, data=h.tobytes()), dtype="<f4")
    ref = h.view(np.float16).astype(np.float32)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(ours), nan)
    assert np.array_equal(ours[~nan].view("<u4"), ref[~nan].view("<u4"))


def test_f32_to_f16_against_numpy():
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**32, size=200000, dtype=np.uint64).astype("<u4")
    # Concentrate on the half range and on exact ties (low 13 bits = 0x1000).
    near = rng.integers(0x33000000, 0x47800000, size=100000, dtype=np.uint64).astype("<u4")
    ties = (near & np.uint32(0xFFFFE000)) | np.uint32(0x1000)
    x = np.concatenate([bits, near, ties, near | np.uint32(0x80000000)]).view(np.float32)
    ours = np.frombuffer(tool("f32_to_f16", x.size, data=x.tobytes()), dtype="<u2")
    with np.errstate(over="ignore"):
        ref = x.astype(np.float16)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(ours.view(np.float16)), nan)
    assert np.array_equal(ours[~nan], ref[~nan].view("<u2"))


def test_bf16_against_gguf_py():
    rng = np.random.default_rng(6)
    x = rng.integers(0, 2**32, size=100000, dtype=np.uint64).astype("<u4").view(np.float32)
    ours = np.frombuffer(tool("f32_to_bf16", x.size, data=x.tobytes()), dtype="<u2")
    ref = quants.quantize(x.reshape(1, -1), T.BF16).view("<u2").reshape(-1)
    assert np.array_equal(ours, ref)
    back = np.frombuffer(tool("bf16_to_f32", ours.size, data=ours.tobytes()), dtype="<u4")
    ref_back = quants.dequantize(ref.view(np.uint8).reshape(1, -1), T.BF16).reshape(-1).view("<u4")
    assert np.array_equal(back, ref_back)


@pytest.mark.parametrize("qtype", QUANTISED, ids=lambda q: q.name)
@pytest.mark.parametrize("path", ["fast", "scalar"])
def test_dequantize_random_blocks_bit_exact(qtype, path):
    rng = np.random.default_rng(int(qtype) * 10 + (path == "scalar"))
    elems, _ = GGML_QUANT_SIZES[qtype]
    n_blocks = 37
    raw = random_blocks(rng, qtype, n_blocks)
    args = ["dequant", SUPPORTED[qtype], n_blocks * elems] + (["scalar"] if path == "scalar" else [])
    ours = np.frombuffer(tool(*args, data=raw.tobytes()), dtype="<f4")
    ref = quants.dequantize(raw.reshape(1, -1), qtype).reshape(-1).astype(np.float32)
    assert ours.shape == ref.shape
    mismatch = np.flatnonzero(ours.view("<u4") != ref.view("<u4"))
    assert mismatch.size == 0, f"first mismatch at {mismatch[:5]}: {ours[mismatch[:5]]} vs {ref[mismatch[:5]]}"


def test_quantize_q8_0_bit_exact():
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(64 * 32) * 0.02).astype(np.float32)
    x[:32] = 0  # an all-zero block
    x[32:64] = np.linspace(-1, 1, 32, dtype=np.float32)  # exact halves in x/d
    ours = np.frombuffer(tool("quant", "q8_0", x.size, data=x.tobytes()), dtype=np.uint8)
    ref = quants.quantize(x.reshape(1, -1), T.Q8_0).reshape(-1)
    assert np.array_equal(ours, ref)


# RMS error / RMS value on N(0,1) data; the bounds follow from each format's step
# size (see tests/unit/test_quant.c) and sit above llama.cpp's own quantisers.
ROUNDTRIP_BOUND = {T.Q8_0: 7e-3, T.Q6_K: 2.2e-2, T.Q5_K: 5e-2, T.Q4_K: 9.5e-2, T.F16: 4e-4, T.BF16: 3.5e-3}


@pytest.mark.parametrize("qtype", list(ROUNDTRIP_BOUND), ids=lambda q: q.name)
def test_quantize_roundtrip_decoded_by_gguf_py(qtype):
    """Our quantiser's bytes, decoded by gguf-py, are close to the input."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal(64 * 256).astype(np.float32)
    q = np.frombuffer(tool("quant", SUPPORTED[qtype], x.size, data=x.tobytes()), dtype=np.uint8)
    if qtype == T.F16:
        y = q.view("<f2").astype(np.float32)
    else:
        y = quants.dequantize(q.reshape(1, -1), qtype).reshape(-1)
    rel = np.sqrt(np.mean((y.astype(np.float64) - x) ** 2) / np.mean(x.astype(np.float64) ** 2))
    assert rel < ROUNDTRIP_BOUND[qtype], rel
    ours = np.frombuffer(tool("dequant", SUPPORTED[qtype], x.size, data=q.tobytes()), dtype="<f4")
    assert np.array_equal(ours.view("<u4"), y.astype(np.float32).view("<u4"))


@pytest.mark.parametrize("qtype", list(SUPPORTED), ids=lambda q: q.name)
@pytest.mark.parametrize("path", ["fast", "scalar", "no_simd"])
def test_dot_against_numpy(qtype, path):
    rng = np.random.default_rng(int(qtype) + 100)
    elems, _ = GGML_QUANT_SIZES[qtype]
    n = elems * 7 if elems > 1 else 1001
    if qtype in QUANTISED:
        raw = random_blocks(rng, qtype, n // elems).reshape(-1)
        w = quants.dequantize(raw.reshape(1, -1), qtype).reshape(-1).astype(np.float64)
    else:
        wf = rng.standard_normal(n).astype(np.float32)
        raw = {T.F32: wf, T.F16: wf.astype(np.float16), T.BF16: quants.quantize(wf.reshape(1, -1), T.BF16)}[qtype]
        raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
        w = quants.dequantize(raw.reshape(1, -1), qtype).reshape(-1).astype(np.float64) if qtype == T.BF16 else (
            wf.astype(np.float16).astype(np.float64) if qtype == T.F16 else wf.astype(np.float64))
    x = rng.standard_normal(n).astype(np.float32)
    args = ["dot", SUPPORTED[qtype], n] + (["scalar"] if path == "scalar" else [])
    env = {"CLOVER_NO_SIMD": "1"} if path == "no_simd" else None
    ours = np.frombuffer(tool(*args, data=raw.tobytes() + x.tobytes(), env=env), dtype="<f4")[0]
    ref = float(np.dot(w, x.astype(np.float64)))
    mag = float(np.sum(np.abs(w * x)))
    assert abs(float(ours) - ref) <= 1e-5 * mag, (ours, ref, mag)
