"""`clover info` and `clover synth` as a user runs them, and synthetic files
checked against llama.cpp's own gguf package (its tensor-name table for the
qwen35moe architecture, its reader) and GPT-2's byte-to-unicode map.

Needs the build's `clover` binary (CLOVER_BUILD_DIR) and the test venv."""

import os
import subprocess
from pathlib import Path

import gguf
import numpy as np
import pytest

BUILD = Path(os.environ.get("CLOVER_BUILD_DIR", "build"))
CLOVER = BUILD / "clover"
DEFAULT_MODEL = BUILD / "models" / "clover-tiny.gguf"


def run(*args, env=None):
    return subprocess.run([str(CLOVER), *map(str, args)], capture_output=True, text=True, timeout=300, env=env)


def fields(stdout):
    """`label   value` lines of clover info into a dict (first occurrence)."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("  "):
            continue
        label, _, value = line.partition("  ")
        out.setdefault(label.strip(), value.strip())
    return out


@pytest.fixture(scope="module", autouse=True)
def need_binary():
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is missing: build the clover target first")


def test_info_default_model():
    """No FILE: the default model, here the tiny one named by $CLOVER_DEFAULT_MODEL (as ctest sets it;
    test_default_model.py checks the embedded one)."""
    r = run("info", env=dict(os.environ, CLOVER_DEFAULT_MODEL=str(DEFAULT_MODEL)))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    f = fields(r.stdout)
    assert f["architecture"] == "qwen35moe"
    assert f["name"] == "clover-tiny"
    assert f["layers"] == "4: 3 Gated DeltaNet + 1 full attention (full_attention_interval 4)"
    assert f["layer pattern"] == "GGGA"
    assert f["hidden"] == "64"
    assert f["vocabulary"] == "290"
    assert f["attention"] == "4 query heads, 2 kv heads, head dim 32, rotary 8 dims, rope base 1e+07"
    assert f["gated deltanet"] == "2 key heads x 16, 4 value heads x 16, conv kernel 4"
    assert f["experts"] == "8 routed, top 2, width 32; shared expert width 32"
    assert f["mode"] == "block diffusion (Clover record)"
    assert f["algorithm"] == "low_confidence, block size 32, threshold 0.9, mask id 289"
    assert f["expert coreset"] == "on, top_p 0.9"
    assert f["stop ids"] == "258 256"
    assert f["tokenizer"] == "gpt2 (pre qwen35), 290 tokens, 0 merges"
    assert f["special ids"] == "bos 256, eos 258, pad 256, add bos no"
    assert f["file"] == f"{DEFAULT_MODEL} ({DEFAULT_MODEL.stat().st_size} bytes)"


def test_info_help():
    r = run("info", "--help")
    assert r.returncode == 0
    assert r.stdout.startswith("usage: clover info [FILE")


def test_info_counts_match_gguf_py():
    """Tensor count, parameters and bytes per type as llama.cpp's reader sees the file."""
    r = run("info", DEFAULT_MODEL)
    assert r.returncode == 0, r.stderr
    reader = gguf.GGUFReader(DEFAULT_MODEL)
    n_params = sum(int(np.prod(t.shape)) for t in reader.tensors)
    n_bytes = sum(int(t.n_bytes) for t in reader.tensors)
    f = fields(r.stdout)
    assert f["tensors"].startswith(f"{len(reader.tensors)} tensors, {n_params} parameters")
    assert f" {n_bytes} bytes" in f["tensors"]
    by_type = {}
    for t in reader.tensors:
        name = t.tensor_type.name.lower().replace("_k", "_K")
        by_type.setdefault(name, [0, 0, 0])
        by_type[name][0] += 1
        by_type[name][1] += int(np.prod(t.shape))
        by_type[name][2] += int(t.n_bytes)
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("  ")]
    assert {row[0]: [int(row[1]), int(row[3]), int(row[5])] for row in rows} == by_type


@pytest.mark.parametrize("content", [b"", b"GGUF", b"not a model at all\n" * 10])
def test_info_bad_file(tmp_path, content):
    p = tmp_path / "bad.gguf"
    p.write_bytes(content)
    r = run("info", p)
    assert r.returncode == 1
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("clover info: ") and str(p) in lines[0]


def test_info_truncated_file(tmp_path):
    p = tmp_path / "cut.gguf"
    p.write_bytes(DEFAULT_MODEL.read_bytes()[:-1000])
    r = run("info", p)
    assert r.returncode == 1
    assert len(r.stderr.splitlines()) == 1 and str(p) in r.stderr


def test_info_missing_file(tmp_path):
    r = run("info", tmp_path / "nope.gguf")
    assert r.returncode == 1
    assert len(r.stderr.splitlines()) == 1 and "nope.gguf" in r.stderr


def test_info_bad_record(tmp_path):
    """A valid file whose clover.threshold is 1.5, rewritten with llama.cpp's gguf writer."""
    src = gguf.GGUFReader(DEFAULT_MODEL)
    p = tmp_path / "bad-record.gguf"
    w = gguf.GGUFWriter(p, "qwen35moe", use_temp_file=False)
    for name, field in src.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        if name == "clover.threshold":
            w.add_float32(name, 1.5)
        elif name == "tokenizer.ggml.merges":
            w.add_array(name, ["\u0120 \u0120"])  # gguf-py does not write an empty array; one merge is as valid
        elif vtype == gguf.GGUFValueType.ARRAY:
            w.add_array(name, field.contents())
        else:
            w.add_key_value(name, field.contents(), vtype)
    for t in src.tensors:
        w.add_tensor(t.name, np.asarray(t.data), raw_shape=list(reversed(t.shape.tolist())), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = run("info", p)
    assert r.returncode == 1
    assert len(r.stderr.splitlines()) == 1
    assert "clover.threshold = 1.5" in r.stderr and str(p) in r.stderr


def test_synth_matches_the_tiny_model(tmp_path):
    p = tmp_path / "tiny.gguf"
    r = run("synth", "--preset", "tiny", "--seed", "0", "-o", p)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"wrote {p} (")
    assert p.read_bytes() == DEFAULT_MODEL.read_bytes()


def test_synth_autoregressive_info(tmp_path):
    p = tmp_path / "ar.gguf"
    assert run("synth", "--no-diffusion", "--type", "bf16", "-o", p).returncode == 0
    r = run("info", p)
    assert r.returncode == 0, r.stderr
    f = fields(r.stdout)
    assert f["mode"] == "autoregressive (no Clover record)"
    assert "algorithm" not in f


def test_synth_usage_errors(tmp_path):
    r = run("synth", "--preset", "huge", "-o", tmp_path / "x.gguf")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "huge" in r.stderr and "synth: synth" not in r.stderr
    assert not (tmp_path / "x.gguf").exists()
    assert run("synth").returncode == 2
    assert run("synth", "-o").returncode == 2
    assert run("synth", "--layers", "zero", "-o", tmp_path / "y.gguf").returncode == 2
    assert run("synth", "--help").returncode == 0


def gpt2_bytes_to_unicode():
    """GPT-2's published byte -> unicode map (openai/gpt-2 encoder.py), in its order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


QWEN35_ADDED = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>",
    "</think>", "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>",
    "<tts_text_eod>", "<tts_text_bos_single>", "<|audio_pad|>",
]
NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}


@pytest.mark.parametrize("diffusion", [True, False])
def test_synth_file_is_llama_cpp_qwen35moe(tmp_path, diffusion):
    """Names from gguf-py's QWEN35MOE tensor table, ggml shapes from its metadata, the tokenizer by hand."""
    p = tmp_path / "m.gguf"
    args = ["synth", "--type", "q8_0", "--seed", "5", "-o", p] + ([] if diffusion else ["--no-diffusion"])
    assert run(*args).returncode == 0
    r = gguf.GGUFReader(p)
    kv = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
    arch = "qwen35moe"
    assert kv["general.architecture"] == arch
    n_layer = kv[f"{arch}.block_count"]
    E = kv[f"{arch}.embedding_length"]
    hd = kv[f"{arch}.attention.key_length"]
    nh, nkv = kv[f"{arch}.attention.head_count"], kv[f"{arch}.attention.head_count_kv"]
    dk, nk = kv[f"{arch}.ssm.state_size"], kv[f"{arch}.ssm.group_count"]
    nv, inner = kv[f"{arch}.ssm.time_step_rank"], kv[f"{arch}.ssm.inner_size"]
    K = kv[f"{arch}.ssm.conv_kernel"]
    X, I = kv[f"{arch}.expert_count"], kv[f"{arch}.expert_feed_forward_length"]
    S = kv[f"{arch}.expert_shared_feed_forward_length"]
    interval = kv[f"{arch}.full_attention_interval"]
    V = len(kv["tokenizer.ggml.tokens"])
    C = 2 * nk * dk + inner

    # every name the file uses is one llama.cpp's qwen35moe table has (or a Clover one)
    allowed = set()
    for t in gguf.MODEL_TENSORS[gguf.MODEL_ARCH.QWEN35MOE]:
        for bid in range(n_layer):
            base = gguf.TENSOR_NAMES[t].format(bid=bid)
            allowed |= {base, base + ".weight", base + ".bias"}
    clover = {f"blk.{i}.{n}" for i in range(n_layer) for n in
              ("ssm_conv1d_right", "bd_logit_scale", "bd_history_bias", "bd_history_c")}
    shapes = {t.name: t.shape.tolist() for t in r.tensors}
    unknown = set(shapes) - allowed - clover
    assert not unknown, unknown
    assert bool(set(shapes) & clover) == diffusion

    want = {"token_embd.weight": [E, V], "output_norm.weight": [E], "output.weight": [E, V]}
    for i in range(n_layer):
        b = f"blk.{i}."
        want |= {b + "attn_norm.weight": [E], b + "post_attention_norm.weight": [E],
                 b + "ffn_gate_inp.weight": [E, X], b + "ffn_gate_exps.weight": [E, I, X],
                 b + "ffn_up_exps.weight": [E, I, X], b + "ffn_down_exps.weight": [I, E, X],
                 b + "ffn_gate_inp_shexp.weight": [E], b + "ffn_gate_shexp.weight": [E, S],
                 b + "ffn_up_shexp.weight": [E, S], b + "ffn_down_shexp.weight": [S, E]}
        if (i + 1) % interval == 0:
            want |= {b + "attn_q.weight": [E, 2 * hd * nh], b + "attn_k.weight": [E, hd * nkv],
                     b + "attn_v.weight": [E, hd * nkv], b + "attn_output.weight": [hd * nh, E],
                     b + "attn_q_norm.weight": [hd], b + "attn_k_norm.weight": [hd]}
        else:
            want |= {b + "attn_qkv.weight": [E, C], b + "attn_gate.weight": [E, inner],
                     b + "ssm_conv1d.weight": [K, C], b + "ssm_dt.bias": [nv], b + "ssm_a": [nv],
                     b + "ssm_alpha.weight": [E, nv], b + "ssm_beta.weight": [E, nv],
                     b + "ssm_norm.weight": [inner // nv], b + "ssm_out.weight": [inner, E]}
            if diffusion:
                want |= {b + "ssm_conv1d_right": [K - 1, C], b + "bd_logit_scale": [nv],
                         b + "bd_history_bias": [nv], b + "bd_history_c": [nv]}
    assert shapes == want

    # values llama.cpp's dequantiser reads: finite, decays in (0, 1), norms near 1
    for t in r.tensors:
        x = gguf.dequantize(t.data, t.tensor_type)
        assert np.isfinite(x).all(), t.name
        if t.name.endswith("ssm_a"):
            assert (x < 0).all()
        if t.name.endswith("_norm.weight"):
            assert abs(float(x.mean()) - 1.0) < 0.1, t.name

    # tokenizer: GPT-2 bytes, then Qwen3.5's added tokens and the mask
    tokens = kv["tokenizer.ggml.tokens"]
    types = kv["tokenizer.ggml.token_type"]
    assert tokens[:256] == gpt2_bytes_to_unicode()
    assert tokens[256:256 + 33] == QWEN35_ADDED
    assert tokens[289] == "<|mask|>"
    control, user_defined, normal = int(gguf.TokenType.CONTROL), int(gguf.TokenType.USER_DEFINED), int(gguf.TokenType.NORMAL)
    assert types[:256] == [normal] * 256
    assert types[256:289] == [user_defined if t in NOT_SPECIAL else control for t in QWEN35_ADDED]
    assert kv["tokenizer.ggml.model"] == "gpt2" and kv["tokenizer.ggml.pre"] == "qwen35"
    assert kv["tokenizer.ggml.eos_token_id"] == tokens.index("<|im_end|>")
    assert kv["tokenizer.ggml.padding_token_id"] == tokens.index("<|endoftext|>")
    if diffusion:
        assert kv["clover.mask_token_id"] == tokens.index("<|mask|>")
        assert kv["clover.stop_token_ids"] == [tokens.index("<|im_end|>"), tokens.index("<|endoftext|>")]
        assert kv["clover.think_end_token_id"] == tokens.index("</think>")
    else:
        assert not any(k.startswith("clover.") for k in kv)
