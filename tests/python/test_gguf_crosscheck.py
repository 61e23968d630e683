"""
Cross-check of clover's GGUF reader and writer against llama.cpp's own Python
package `gguf` (pinned in tests/requirements.txt), an implementation written
independently of clover:

(a) a file written by clover's writer (tests/tools/gguf_write_sample.c) is
    read by gguf.GGUFReader: metadata of every type, tensor infos and
    offsets, and gguf.quants.dequantize of every tensor equal to what clover
    dequantises; where gguf can quantise a type (F16 via numpy, BF16, Q8_0),
    clover's bytes equal gguf's for the same f32 source.
(b) a file written by gguf.GGUFWriter (tensors quantised by gguf.quants, or,
    for the K-quants gguf cannot quantise, random blocks with finite f16
    scales) is read by clover (tests/tools/gguf_dump.c): the same metadata,
    tensor infos, and clover's dequantisation (dispatching and scalar paths)
    equal to gguf.quants.dequantize.
(c) a 248k-entry string array (a tokenizer vocabulary) written by GGUFWriter
    reads back entry for entry; the load time is printed, not asserted.

Values are compared exactly (bit for bit, NaN matching NaN): every supported
dequantisation is exact in f32 whatever the order of operations. An f16 or
bf16 scale has 11 significant bits, a K-quant sub-scale at most 6 bits and a
quant at most 6 bits, so d*sc, dmin*m and d*sc*q are exact products (at most
23 bits) and only the final subtraction rounds, once, in every formulation
(fused or not). Q8_0 is d*q (18 bits), F16/BF16 widen exactly.
"""
import json
import os
import subprocess
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

SOURCE = Path(os.environ.get("CLOVER_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("CLOVER_BUILD_DIR", SOURCE / "build"))
SUPPORTED = {QT.F32, QT.F16, QT.BF16, QT.Q8_0, QT.Q4_K, QT.Q5_K, QT.Q6_K}


def tool(name):
    for p in (BUILD / "tests" / "tools" / name, BUILD / "tests" / name):
        if p.exists():
            return str(p)
    pytest.fail(f"{name} not built under {BUILD} (cmake --build {BUILD} --target {name})")


def same_floats(a, b):
    """Bit-exact equality of two float32 arrays, any NaN matching any NaN."""
    a = np.asarray(a, dtype=np.float32).ravel()
    b = np.asarray(b, dtype=np.float32).ravel()
    if a.shape != b.shape:
        return False
    nan = np.isnan(a)
    return bool(np.array_equal(nan, np.isnan(b)) and np.array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32)))


def padded(n, align):
    return (n + align - 1) // align * align


# ---------------------------------------------------------------- (a)

# What gguf_write_sample.c writes, spelled out independently here.
SAMPLE_KV = [
    ("general.architecture", VT.STRING, None, "qwen35moe"),
    ("general.name", VT.STRING, None, "clover sample"),
    ("s.u8", VT.UINT8, None, 250),
    ("s.i8", VT.INT8, None, -7),
    ("s.u16", VT.UINT16, None, 65000),
    ("s.i16", VT.INT16, None, -32000),
    ("s.u32", VT.UINT32, None, 3000000000),
    ("s.i32", VT.INT32, None, -123456789),
    ("s.u64", VT.UINT64, None, 18000000000000000000),
    ("s.i64", VT.INT64, None, -9000000000000000000),
    ("s.f32", VT.FLOAT32, None, float(np.float32(0.1))),
    ("s.f64", VT.FLOAT64, None, 1e-310),
    ("s.bool_true", VT.BOOL, None, True),
    ("s.bool_false", VT.BOOL, None, False),
    ("s.string", VT.STRING, None, "Hello, 世界!"),
    ("s.string_nul", VT.STRING, None, "a\x00b"),
    ("a.u8", VT.ARRAY, VT.UINT8, [1, 2, 255]),
    ("a.i8", VT.ARRAY, VT.INT8, [-128, 127]),
    ("a.u16", VT.ARRAY, VT.UINT16, [65535, 0, 7]),
    ("a.i16", VT.ARRAY, VT.INT16, [-32768, 32767]),
    ("a.u32", VT.ARRAY, VT.UINT32, [151643, 151645, 4294967295]),
    ("a.i32", VT.ARRAY, VT.INT32, [-1, 0, 2147483647, -2147483648]),
    ("a.f32", VT.ARRAY, VT.FLOAT32, [float(np.float32(x)) for x in (0.5, -1.25, 1e-7, 3.0e38)]),
    ("a.bool", VT.ARRAY, VT.BOOL, [True, False, False, True]),
    ("a.u64", VT.ARRAY, VT.UINT64, [18446744073709551615, 0, 1099511627776]),
    ("a.i64", VT.ARRAY, VT.INT64, [-9223372036854775808, 9223372036854775807, -5]),
    ("a.f64", VT.ARRAY, VT.FLOAT64, [2.718281828459045, -1e300, 5e-324]),
    ("a.string", VT.ARRAY, VT.STRING, ["<|im_start|>", "", "Ġthe", "你好", "tab\there", "😀"]),
]

# name, ggml shape (ne), type
SAMPLE_TENSORS = [
    ("t.f32", [512, 3], QT.F32),
    ("t.f16", [512, 3], QT.F16),
    ("t.bf16", [512, 3], QT.BF16),
    ("t.q8_0", [512, 3], QT.Q8_0),
    ("t.q4_k", [512, 3], QT.Q4_K),
    ("t.q5_k", [512, 3], QT.Q5_K),
    ("t.q6_k", [512, 3], QT.Q6_K),
    ("odd.f32", [7, 3, 2], QT.F32),
    ("odd.f16", [5], QT.F16),
    ("odd.bf16", [2, 2, 2, 2], QT.BF16),
    ("zero.q8_0", [64, 2], QT.Q8_0),
    ("zero.q4_k", [256], QT.Q4_K),
    ("special.f16", [24], QT.F16),
    ("special.bf16", [24], QT.BF16),
    ("big.q6_k", [256, 2, 2], QT.Q6_K),
]


@pytest.fixture(scope="module", params=[None, 64], ids=["align32", "align64"])
def clover_sample(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("clover_sample")
    path, src, deq = d / "sample.gguf", d / "src.f32", d / "deq.f32"
    cmd = [tool("gguf_write_sample"), str(path), str(src), str(deq)]
    if request.param:
        cmd += ["--align", str(request.param)]
    subprocess.run(cmd, check=True)
    return {
        "align": request.param or 32,
        "reader": gguf.GGUFReader(path),
        "src": np.fromfile(src, dtype=np.float32),
        "deq": np.fromfile(deq, dtype=np.float32),
    }


def test_a_metadata(clover_sample):
    r = clover_sample["reader"]
    expected = list(SAMPLE_KV)
    if clover_sample["align"] != 32:
        expected.append(("general.alignment", VT.UINT32, None, clover_sample["align"]))
    fields = [(k, f) for k, f in r.fields.items() if not k.startswith("GGUF.")]
    assert [k for k, _ in fields] == [e[0] for e in expected]
    assert r.fields["GGUF.version"].contents() == 3
    assert r.fields["GGUF.kv_count"].contents() == len(expected)
    assert r.fields["GGUF.tensor_count"].contents() == len(SAMPLE_TENSORS)
    for (key, field), (_, vtype, sub, value) in zip(fields, expected):
        assert field.types[0] == vtype, key
        if vtype == VT.ARRAY:
            assert field.types[-1] == sub, key
        assert field.contents() == value, key
    assert r.alignment == clover_sample["align"]


def test_a_tensor_infos(clover_sample):
    r, align = clover_sample["reader"], clover_sample["align"]
    assert r.data_offset % align == 0
    assert [t.name for t in r.tensors] == [t[0] for t in SAMPLE_TENSORS]
    offset = 0
    for t, (name, ne, qtype) in zip(r.tensors, SAMPLE_TENSORS):
        assert t.shape.tolist() == ne, name
        assert t.tensor_type == qtype, name
        block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
        nbytes = int(np.prod(ne)) // block * block_bytes
        assert t.n_bytes == nbytes, name
        assert t.data_offset == r.data_offset + offset, name
        offset += padded(nbytes, align)
    # the last tensor is padded too, as llama.cpp writes it
    assert r.data.shape[0] == r.data_offset + offset  # r.data maps the whole file


def tensor_slices(tensors):
    at = 0
    for name, ne, qtype in tensors:
        n = int(np.prod(ne))
        yield name, qtype, slice(at, at + n)
        at += n


def test_a_dequantised_values(clover_sample):
    r, deq = clover_sample["reader"], clover_sample["deq"]
    assert deq.size == sum(int(np.prod(ne)) for _, ne, _ in SAMPLE_TENSORS)
    for t, (name, qtype, sl) in zip(r.tensors, tensor_slices(SAMPLE_TENSORS)):
        theirs = gguf.quants.dequantize(t.data, qtype)
        assert theirs.shape == tuple(reversed(t.shape.tolist())), name
        assert same_floats(theirs, deq[sl]), f"{name}: gguf and clover dequantise differently"


def test_a_quantised_bytes_match_gguf(clover_sample):
    """Clover's F32/F16/BF16/Q8_0 bytes are what llama.cpp's reference
    quantisers make of the same source (numpy's IEEE f16 for F16)."""
    r, src = clover_sample["reader"], clover_sample["src"]
    for t, (name, qtype, sl) in zip(r.tensors, tensor_slices(SAMPLE_TENSORS)):
        x = src[sl].reshape(tuple(reversed(t.shape.tolist())))
        ours = np.asarray(t.data).view(np.uint8).ravel()
        if qtype == QT.F32:
            theirs = x.astype(np.float32)
        elif qtype == QT.F16:
            with np.errstate(over="ignore"):  # 65520 and 1e5 round to inf on purpose
                theirs = x.astype(np.float16)
        elif qtype in (QT.BF16, QT.Q8_0):
            theirs = gguf.quants.quantize(x, qtype)
        else:
            continue
        theirs = np.asarray(theirs).view(np.uint8).ravel()
        if qtype in (QT.F16, QT.BF16):  # NaN payloads may differ: compare NaN-ness there
            a, b = ours.view(np.uint16), theirs.view(np.uint16)
            exp_mask, man_mask = (0x7C00, 0x03FF) if qtype == QT.F16 else (0x7F80, 0x007F)
            nan_a = ((a & exp_mask) == exp_mask) & ((a & man_mask) != 0)
            nan_b = ((b & exp_mask) == exp_mask) & ((b & man_mask) != 0)
            assert np.array_equal(nan_a, nan_b), name
            assert np.array_equal(a[~nan_a], b[~nan_b]), f"{name}: bytes differ from gguf's"
        else:
            assert np.array_equal(ours, theirs), f"{name}: bytes differ from gguf's"


def test_a_kquants_reconstruct_source(clover_sample):
    """No reference quantiser for K-quants in gguf; a loose sanity bound on
    the reconstruction error (relative RMS over each normal tensor)."""
    r, src, deq = clover_sample["reader"], clover_sample["src"], clover_sample["deq"]
    bounds = {QT.Q4_K: 0.15, QT.Q5_K: 0.08, QT.Q6_K: 0.04, QT.Q8_0: 0.01}
    for name, qtype, sl in tensor_slices(SAMPLE_TENSORS):
        if qtype not in bounds or name.startswith("zero"):
            continue
        x, y = src[sl].astype(np.float64), deq[sl].astype(np.float64)
        rel = np.sqrt(np.mean((x - y) ** 2) / np.mean(x**2))
        assert rel < bounds[qtype], f"{name}: relative RMS error {rel:.4f}"
    for name, qtype, sl in tensor_slices(SAMPLE_TENSORS):
        if name.startswith("zero"):
            assert not np.any(deq[sl]), name


# ---------------------------------------------------------------- (b)


def random_f16(rng, n):
    """n random finite f16 values (any sign, zeros and subnormals included)."""
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    bits = np.where((bits & 0x7C00) == 0x7C00, bits & 0xBFFF, bits)  # exponent 31 -> 15
    return bits.view(np.float16)


def random_kquant_blocks(rng, qtype, n_blocks):
    """Random blocks of a K-quant with every f16 field finite."""
    _, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint16).astype(np.uint8)
    if qtype in (QT.Q4_K, QT.Q5_K):  # d, dmin lead the block
        b[:, 0:4] = random_f16(rng, 2 * n_blocks).reshape(n_blocks, 2).view(np.uint8)
    else:  # Q6_K: d trails the block
        b[:, -2:] = random_f16(rng, n_blocks).reshape(n_blocks, 1).view(np.uint8)
    return b


def write_with_gguf(path, align, rng):
    w = gguf.GGUFWriter(path, arch="clover-test")
    if align:
        w.add_custom_alignment(align)
    w.add_uint8("m.u8", 255)
    w.add_int8("m.i8", -128)
    w.add_uint16("m.u16", 1234)
    w.add_int16("m.i16", -1234)
    w.add_uint32("m.u32", 4294967295)
    w.add_int32("m.i32", -2147483648)
    w.add_float32("m.f32", 1.0e-3)
    w.add_uint64("m.u64", 18446744073709551615)
    w.add_int64("m.i64", -9223372036854775808)
    w.add_float64("m.f64", -0.1)
    w.add_bool("m.bool", True)
    w.add_string("m.str", "qwen35moe 🍀 ünïcode")
    w.add_array("m.strs", ["a", "", "Ġb", "\n", "🍀"])
    w.add_array("m.ints", [1, -2, 3])  # gguf picks INT32
    w.add_array("m.floats", [0.5, -0.25])  # gguf picks FLOAT32
    w.add_array("m.bools", [True, False])
    for vt, vals in [
        (VT.UINT8, [0, 255]),
        (VT.INT8, [-1, 1]),
        (VT.UINT16, [65535]),
        (VT.INT16, [-32768]),
        (VT.UINT32, [7, 8, 9]),
        (VT.UINT64, [2**64 - 1, 2**40]),
        (VT.INT64, [-(2**63), 5]),
        (VT.FLOAT64, [1e300, -2.5]),
    ]:
        w.add_key_value(f"m.arr_{vt.name.lower()}", vals, VT.ARRAY, sub_type=vt)

    tensors = {}  # name -> (ne, qtype, raw numpy array as stored)
    x = rng.standard_normal((3, 40)).astype(np.float32)
    tensors["w.f32"] = ([40, 3], QT.F32, x)
    x = (rng.standard_normal((2, 3, 8)) * 100).astype(np.float16)
    tensors["w.f16"] = ([8, 3, 2], QT.F16, x)
    x = gguf.quants.quantize((rng.standard_normal((4, 64)) * 1e3).astype(np.float32), QT.BF16)
    tensors["w.bf16"] = ([64, 4], QT.BF16, x)
    x = gguf.quants.quantize(rng.standard_normal((3, 64)).astype(np.float32), QT.Q8_0)
    tensors["w.q8_0"] = ([64, 3], QT.Q8_0, x)
    x = gguf.quants.quantize(rng.standard_normal((2, 32)).astype(np.float32), QT.Q4_0)
    tensors["w.q4_0"] = ([32, 2], QT.Q4_0, x)  # known to GGUF, not supported by clover
    tensors["w.i32"] = ([5], QT.I32, np.arange(5, dtype=np.int32))
    for qtype, name in [(QT.Q4_K, "w.q4_k"), (QT.Q5_K, "w.q5_k"), (QT.Q6_K, "w.q6_k")]:
        blocks = random_kquant_blocks(rng, qtype, 2 * 3)  # 3 rows of 512
        tensors[name] = ([512, 3], qtype, blocks.reshape(3, -1))
    x = random_kquant_blocks(rng, QT.Q6_K, 4).reshape(2, 2, -1)
    tensors["w.q6_k.3d"] = ([256, 2, 2], QT.Q6_K, x)
    for name, (ne, qtype, arr) in tensors.items():
        raw = None if qtype in (QT.F32, QT.F16, QT.I32) else qtype
        w.add_tensor(name, arr, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tensors


def expected_json_value(field):
    """A GGUFReader field as gguf_dump spells it (u64 as a decimal string)."""
    vtype, sub = field.types[0], field.types[-1]
    v = field.contents()
    if vtype == VT.UINT64:
        return str(v)
    if vtype == VT.ARRAY and sub == VT.UINT64:
        return [str(i) for i in v]
    return v


@pytest.mark.parametrize("align", [None, 64], ids=["align32", "align64"])
def test_b_gguf_written_read_by_clover(tmp_path, align):
    rng = np.random.default_rng(20240610 + (align or 0))
    path = tmp_path / "from_gguf.gguf"
    tensors = write_with_gguf(path, align, rng)
    d1, d2 = tmp_path / "deq.f32", tmp_path / "deq_scalar.f32"
    out = subprocess.run(
        [tool("gguf_dump"), str(path), "--dequant", str(d1), "--dequant-scalar", str(d2)],
        check=True, capture_output=True, text=True,
    ).stdout
    dump = json.loads(out)
    r = gguf.GGUFReader(path)

    # header and metadata, in file order, against gguf's own reader
    assert dump["version"] == 3
    assert dump["alignment"] == (align or 32)
    assert dump["data_offset"] == r.data_offset
    assert dump["file_size"] == os.path.getsize(path)
    fields = [(k, f) for k, f in r.fields.items() if not k.startswith("GGUF.")]
    assert [kv["key"] for kv in dump["kv"]] == [k for k, _ in fields]
    type_names = {VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16", VT.UINT32: "u32",
                  VT.INT32: "i32", VT.FLOAT32: "f32", VT.BOOL: "bool", VT.STRING: "string", VT.ARRAY: "array",
                  VT.UINT64: "u64", VT.INT64: "i64", VT.FLOAT64: "f64"}
    for kv, (key, field) in zip(dump["kv"], fields):
        assert kv["type"] == type_names[field.types[0]], key
        if field.types[0] == VT.ARRAY:
            assert kv["elem_type"] == type_names[field.types[-1]], key
        assert kv["value"] == expected_json_value(field), key
    # f32 values reach JSON as the exact double of the f32
    m_f32 = next(kv for kv in dump["kv"] if kv["key"] == "m.f32")
    assert m_f32["value"] == float(np.float32(1.0e-3))

    # tensor infos
    assert [t["name"] for t in dump["tensors"]] == [t.name for t in r.tensors] == list(tensors)
    for t, rt in zip(dump["tensors"], r.tensors):
        ne, qtype, _ = tensors[t["name"]]
        assert t["ne"] == ne == rt.shape.tolist(), t["name"]
        assert t["type"] == int(qtype) == int(rt.tensor_type), t["name"]
        assert t["nbytes"] == rt.n_bytes, t["name"]
        assert dump["data_offset"] + t["offset"] == rt.data_offset, t["name"]

    # values: clover's dequantisation (dispatching and scalar) against gguf's
    deq, deq_scalar = np.fromfile(d1, dtype=np.float32), np.fromfile(d2, dtype=np.float32)
    n_supported = 0
    for t, rt in zip(dump["tensors"], r.tensors):
        if rt.tensor_type not in SUPPORTED:
            assert "dequant_at" not in t, t["name"]
            continue
        n_supported += 1
        theirs = gguf.quants.dequantize(rt.data, rt.tensor_type).ravel()
        sl = slice(t["dequant_at"], t["dequant_at"] + theirs.size)
        assert same_floats(theirs, deq_scalar[sl]), f"{t['name']}: scalar dequantisation differs from gguf's"
        assert same_floats(theirs, deq[sl]), f"{t['name']}: dequantisation differs from gguf's"
    assert n_supported == 8
    assert deq.size == deq_scalar.size == sum(t.n_elements for t in r.tensors if t.tensor_type in SUPPORTED)


# ---------------------------------------------------------------- (c)


def test_c_large_vocabulary(tmp_path):
    n = 248_320
    rng = np.random.default_rng(7)
    tokens = [f"tok{i}" + "é" * (i % 5) + ("Ġ" if i % 3 == 0 else "") for i in range(n)]
    tokens[5] = ""
    scores = rng.standard_normal(n).astype(np.float32)
    path = tmp_path / "vocab.gguf"
    w = gguf.GGUFWriter(path, arch="qwen35moe")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_key_value("tokenizer.ggml.scores", scores.tolist(), VT.ARRAY, sub_type=VT.FLOAT32)
    w.add_key_value("tokenizer.ggml.token_type", [1 + i % 4 for i in range(n)], VT.ARRAY, sub_type=VT.INT32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = subprocess.run([tool("gguf_dump"), str(path), "--time"], check=True, capture_output=True, text=True).stdout
    dump = json.loads(out)
    kv = {k["key"]: k for k in dump["kv"]}
    assert kv["tokenizer.ggml.tokens"]["elem_type"] == "string"
    assert kv["tokenizer.ggml.tokens"]["value"] == tokens
    assert np.array_equal(np.array(kv["tokenizer.ggml.scores"]["value"], dtype=np.float32), scores)
    assert kv["tokenizer.ggml.token_type"]["value"] == [1 + i % 4 for i in range(n)]
    print(f"\nclover read a {n}-entry vocabulary ({os.path.getsize(path)} bytes) in {dump['load_seconds'] * 1e3:.1f} ms")
