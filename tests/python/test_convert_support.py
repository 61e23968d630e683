"""Helpers for the `clover convert` tests (no tests here).

Builds small Hugging Face-style Qwen3.5-MoE checkpoint directories with numpy
and the `safetensors` package, runs the converter, and computes what llama.cpp's
qwen35moe conversion must produce from the same arrays, in numpy, independently
of the C code: names, ggml shapes, +1 on zero-centred norms, -exp(A_log), the
grouped -> tiled value-head reorder, expert stacking.
"""
import json
import os
import pathlib
import subprocess

import numpy as np
import safetensors
from safetensors import TensorSpec

SOURCE = pathlib.Path(os.environ.get("CLOVER_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BUILD = pathlib.Path(os.environ.get("CLOVER_BUILD_DIR", SOURCE / "build"))

# ggml type codes
F32, F16, Q8_0, Q4_K, Q6_K, BF16 = 0, 1, 8, 12, 14, 30

QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def converter():
    """The `clover` binary, or the stand-alone test tool with the same command."""
    for p in (BUILD / "clover", BUILD / "tests" / "tools" / "convert_cli"):
        if p.exists():
            return [str(p)] + (["convert"] if p.name == "clover" else [])
    raise FileNotFoundError(f"neither {BUILD}/clover nor {BUILD}/tests/tools/convert_cli is built")


def run_convert(src, out, *args):
    cmd = converter() + [str(src), "-o", str(out)] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


# ---------------------------------------------------------------- geometry

def geometry(**over):
    g = dict(vocab_size=300, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
             head_dim=16, linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=16,
             linear_value_head_dim=32, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
             moe_intermediate_size=32, shared_expert_intermediate_size=64, full_attention_interval=2)
    g.update(over)
    return g


def layer_is_linear(g, i):
    """layer_types when the geometry has them (transformers' own rule), else the interval."""
    if g.get("layer_types"):
        return g["layer_types"][i] == "linear_attention"
    return (i + 1) % g["full_attention_interval"] != 0


def conv_dim(g):
    return 2 * g["linear_num_key_heads"] * g["linear_key_head_dim"] + \
        g["linear_num_value_heads"] * g["linear_value_head_dim"]


# ---------------------------------------------------------------- weights

def hf_weights(g, seed=0, fused=True, clover=True):
    """Trunk weights by trunk-relative name (no prefix), float32 values."""
    rng = np.random.default_rng(seed)
    H, V = g["hidden_size"], g["vocab_size"]
    nh, nkv, hd = g["num_attention_heads"], g["num_key_value_heads"], g["head_dim"]
    nk, nv, dk, dv = (g["linear_num_key_heads"], g["linear_num_value_heads"], g["linear_key_head_dim"],
                      g["linear_value_head_dim"])
    K, E, I, S = g["linear_conv_kernel_dim"], g["num_experts"], g["moe_intermediate_size"], \
        g["shared_expert_intermediate_size"]
    C = conv_dim(g)

    def m(*shape, scale=0.1):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {"embed_tokens.weight": m(V, H), "norm.weight": m(H, scale=0.05), "lm_head.weight": m(V, H)}
    for i in range(g["num_hidden_layers"]):
        p = f"layers.{i}."
        w[p + "input_layernorm.weight"] = m(H, scale=0.05)
        w[p + "post_attention_layernorm.weight"] = m(H, scale=0.05)
        if layer_is_linear(g, i):
            a = p + "linear_attn."
            w[a + "in_proj_qkv.weight"] = m(C, H)
            w[a + "in_proj_z.weight"] = m(nv * dv, H)
            w[a + "in_proj_b.weight"] = m(nv, H)
            w[a + "in_proj_a.weight"] = m(nv, H)
            w[a + "conv1d.weight"] = m(C, 1, K, scale=0.3)
            w[a + "A_log"] = rng.uniform(0.01, 3.0, nv).astype(np.float32)
            w[a + "dt_bias"] = m(nv, scale=1.0)
            w[a + "norm.weight"] = (1.0 + m(dv, scale=0.05)).astype(np.float32)
            w[a + "out_proj.weight"] = m(H, nv * dv)
            if clover:
                w[a + "conv_right_weight"] = m(C, K - 1, scale=0.3)
                w[a + "bd_softmax_logit_scale"] = m(nv, scale=1.0)
                w[a + "bd_softmax_history_bias"] = m(nv, scale=1.0)
                w[a + "bd_softmax_history_c"] = m(nv, scale=1.0)
        else:
            a = p + "self_attn."
            w[a + "q_proj.weight"] = m(2 * nh * hd, H)
            w[a + "k_proj.weight"] = m(nkv * hd, H)
            w[a + "v_proj.weight"] = m(nkv * hd, H)
            w[a + "o_proj.weight"] = m(H, nh * hd)
            w[a + "q_norm.weight"] = m(hd, scale=0.05)
            w[a + "k_norm.weight"] = m(hd, scale=0.05)
        w[p + "mlp.gate.weight"] = m(E, H)
        if fused:
            w[p + "mlp.experts.gate_up_proj"] = m(E, 2 * I, H)
            w[p + "mlp.experts.down_proj"] = m(E, H, I)
        else:
            for e in range(E):
                w[p + f"mlp.experts.{e}.gate_proj.weight"] = m(I, H)
                w[p + f"mlp.experts.{e}.up_proj.weight"] = m(I, H)
                w[p + f"mlp.experts.{e}.down_proj.weight"] = m(H, I)
        w[p + "mlp.shared_expert.gate_proj.weight"] = m(S, H)
        w[p + "mlp.shared_expert.up_proj.weight"] = m(S, H)
        w[p + "mlp.shared_expert.down_proj.weight"] = m(H, S)
        w[p + "mlp.shared_expert_gate.weight"] = m(1, H)
    return w


def to_bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (NaN-free input)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def stored(x, dtype):
    """(bytes-holder array, safetensors dtype name, the float32 values a reader sees)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if dtype == "bf16":
        b = to_bf16_bits(x)
        return b, "bfloat16", from_bf16_bits(b).reshape(x.shape)
    if dtype == "f16":
        h = x.astype(np.float16)
        return h, "float16", h.astype(np.float32)
    if dtype == "f32":
        return x, "float32", x
    if dtype == "i32":
        i = np.round(x * 100).astype(np.int32)
        return i, "int32", None
    raise ValueError(dtype)


def full_name(key, prefix):
    return key if key.startswith("lm_head.") else prefix + key


def write_checkpoint(d, g, weights, prefix="model.language_model.", dtype="bf16", shards=1, nested=True,
                     record=None, extra=None, dtype_of=None, tokenizer=True, tie=False):
    """Writes config.json, safetensors (sharded with an index when shards > 1)
    and the tokenizer files. Returns {trunk name: float32 values as stored}."""
    d = pathlib.Path(d)
    d.mkdir(parents=True, exist_ok=True)
    text = dict(g, model_type="qwen3_5_moe_text", rms_norm_eps=1e-6, max_position_embeddings=4096,
                hidden_act="silu", tie_word_embeddings=tie, bos_token_id=270, eos_token_id=270,
                rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
                                     mrope_section=[2, 1, 1], mrope_interleaved=True))
    if nested:
        cfg = dict(model_type="qwen3_5_moe", architectures=["Qwen3_5MoeForConditionalGeneration"], text_config=text,
                   image_token_id=1, vision_config={"depth": 1})
    else:
        cfg = dict(text, architectures=["Qwen3_5MoeForCausalLM"])
    if record is not None:
        cfg["block_diffusion"] = record
    (d / "config.json").write_text(json.dumps(cfg, indent=1))

    seen, holders, specs = {}, [], {}
    items = [(full_name(k, prefix), k, v) for k, v in weights.items()]
    for name, key, v in items:
        dt = (dtype_of or {}).get(key, dtype)
        arr, stname, vals = stored(v, dt)
        holders.append(arr)
        specs[name] = TensorSpec(dtype=stname, shape=arr.shape, data_ptr=arr.ctypes.data, data_len=arr.nbytes)
        seen[key] = vals
    for name, v in (extra or {}).items():
        arr = np.ascontiguousarray(v, dtype=np.float32)
        holders.append(arr)
        specs[name] = TensorSpec(dtype="float32", shape=arr.shape, data_ptr=arr.ctypes.data, data_len=arr.nbytes)

    names = list(specs)
    if shards == 1:
        safetensors.serialize_file(specs, str(d / "model.safetensors"), metadata={"format": "pt"})
    else:
        weight_map = {}
        for s in range(shards):
            fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: specs[n] for n in names[s::shards]}
            safetensors.serialize_file(part, str(d / fname), metadata={"format": "pt"})
            weight_map.update({n: fname for n in part})
        (d / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}, indent=1))
    if tokenizer:
        write_tokenizer(d)
    return seen


# ---------------------------------------------------------------- tokenizer

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


ADDED = [  # id, content, special
    (270, "<|endoftext|>", True), (271, "<|im_start|>", True), (272, "<|im_end|>", True),
    (273, "<think>", False), (274, "</think>", False), (275, "<|fake_special|>", False),
]
MERGES = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["a b", "c"]]  # the last has a space inside a part


def tokenizer_vocab():
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    for i, (a, b) in enumerate(MERGES[:3]):
        vocab[a + b] = 256 + i
    vocab["a bc"] = 259
    vocab["xyz"] = 261  # id 260 left out: a hole
    return vocab


def write_tokenizer(d, regex=QWEN35_REGEX, merges_as_pairs=True):
    d = pathlib.Path(d)
    merges = MERGES if merges_as_pairs else [" ".join(p) for p in MERGES[:3]]
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [dict(id=i, content=c, single_word=False, lstrip=False, rstrip=False, normalized=False,
                              special=s) for i, c, s in ADDED],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": None, "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": tokenizer_vocab(), "merges": merges},
    }
    (d / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    (d / "tokenizer_config.json").write_text(json.dumps({
        "add_bos_token": False, "add_prefix_space": False, "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}))
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [272, 270], "pad_token_id": 270,
                                                           "bos_token_id": 270}))


# ---------------------------------------------------------------- expected GGUF

def tiled_heads(nk, nv):
    """tiled position p -> grouped (Hugging Face) head: p = j*nk + k holds key group k's j-th value head."""
    r = nv // nk
    return [(p % nk) * r + p // nk for p in range(nv)]


def tiled_index(nk, nv, hs):
    """Element permutation over nv heads of hs entries: out[i] = in[perm[i]]."""
    heads = tiled_heads(nk, nv)
    return np.array([heads[i // hs] * hs + i % hs for i in range(nv * hs)], dtype=np.int64)


def expected_tensors(g, w, tie=False):
    """{gguf name: (ggml ne list, float32 array in numpy (row-major) order, kind)}.
    kind: 'small' (always F32), 'router' (F32), 'matrix', 'experts', 'embed', 'head'."""
    H, V = g["hidden_size"], g["vocab_size"]
    nk, nv, dk, dv = (g["linear_num_key_heads"], g["linear_num_value_heads"], g["linear_key_head_dim"],
                      g["linear_value_head_dim"])
    E, I = g["num_experts"], g["moe_intermediate_size"]
    qk = 2 * nk * dk
    vperm = tiled_index(nk, nv, dv)
    hperm = tiled_index(nk, nv, 1)
    out = {}

    def put(name, arr, kind):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        out[name] = (list(reversed(arr.shape)), arr, kind)

    put("token_embd.weight", w["embed_tokens.weight"], "embed")
    put("output_norm.weight", w["norm.weight"] + np.float32(1), "small")
    if not tie or "lm_head.weight" in w:
        put("output.weight", w["lm_head.weight"], "head")
    for i in range(g["num_hidden_layers"]):
        p, b = f"layers.{i}.", f"blk.{i}."
        put(b + "attn_norm.weight", w[p + "input_layernorm.weight"] + np.float32(1), "small")
        put(b + "post_attention_norm.weight", w[p + "post_attention_layernorm.weight"] + np.float32(1), "small")
        if layer_is_linear(g, i):
            a = p + "linear_attn."
            qkv = w[a + "in_proj_qkv.weight"]
            put(b + "attn_qkv.weight", np.concatenate([qkv[:qk], qkv[qk:][vperm]]), "matrix")
            put(b + "attn_gate.weight", w[a + "in_proj_z.weight"][vperm], "matrix")
            put(b + "ssm_beta.weight", w[a + "in_proj_b.weight"][hperm], "matrix")
            put(b + "ssm_alpha.weight", w[a + "in_proj_a.weight"][hperm], "matrix")
            conv = w[a + "conv1d.weight"][:, 0, :]
            put(b + "ssm_conv1d.weight", np.concatenate([conv[:qk], conv[qk:][vperm]]), "small")
            put(b + "ssm_a", -np.exp(w[a + "A_log"][hperm].astype(np.float64)), "small")
            put(b + "ssm_dt.bias", w[a + "dt_bias"][hperm], "small")
            put(b + "ssm_norm.weight", w[a + "norm.weight"], "small")
            put(b + "ssm_out.weight", w[a + "out_proj.weight"][:, vperm], "matrix")
            if a + "conv_right_weight" in w:
                cr = w[a + "conv_right_weight"]
                put(b + "ssm_conv1d_right", np.concatenate([cr[:qk], cr[qk:][vperm]]), "small")
                put(b + "bd_logit_scale", w[a + "bd_softmax_logit_scale"][hperm], "small")
                put(b + "bd_history_bias", w[a + "bd_softmax_history_bias"][hperm], "small")
                put(b + "bd_history_c", w[a + "bd_softmax_history_c"][hperm], "small")
        else:
            a = p + "self_attn."
            put(b + "attn_q.weight", w[a + "q_proj.weight"], "matrix")
            put(b + "attn_k.weight", w[a + "k_proj.weight"], "matrix")
            put(b + "attn_v.weight", w[a + "v_proj.weight"], "matrix")
            put(b + "attn_output.weight", w[a + "o_proj.weight"], "matrix")
            put(b + "attn_q_norm.weight", w[a + "q_norm.weight"] + np.float32(1), "small")
            put(b + "attn_k_norm.weight", w[a + "k_norm.weight"] + np.float32(1), "small")
        put(b + "ffn_gate_inp.weight", w[p + "mlp.gate.weight"], "router")
        if p + "mlp.experts.gate_up_proj" in w:
            gu = w[p + "mlp.experts.gate_up_proj"]
            put(b + "ffn_gate_exps.weight", gu[:, :I, :], "experts")
            put(b + "ffn_up_exps.weight", gu[:, I:, :], "experts")
            put(b + "ffn_down_exps.weight", w[p + "mlp.experts.down_proj"], "experts")
        else:
            for proj, nm in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"),
                             ("down_proj", "ffn_down_exps")):
                put(b + nm + ".weight", np.stack([w[p + f"mlp.experts.{e}.{proj}.weight"] for e in range(E)]),
                    "experts")
        put(b + "ffn_gate_shexp.weight", w[p + "mlp.shared_expert.gate_proj.weight"], "matrix")
        put(b + "ffn_up_shexp.weight", w[p + "mlp.shared_expert.up_proj.weight"], "matrix")
        put(b + "ffn_down_shexp.weight", w[p + "mlp.shared_expert.down_proj.weight"], "matrix")
        # [1, H] kept 2-D, as llama.cpp's converter (which no longer squeezes) writes it
        put(b + "ffn_gate_inp_shexp.weight", w[p + "mlp.shared_expert_gate.weight"].reshape(1, H), "router")
    return out


def field(reader, key):
    """A metadata value as Python data (scalars, str, lists)."""
    f = reader.fields.get(key)
    if f is None:
        return None
    return f.contents()


def field_type(reader, key):
    f = reader.fields[key]
    return [int(t) for t in f.types]


# ---------------------------------------------------------------- the helpers' own checks
# (this file is also collected by pytest: these pin the oracles above to hand-computed cases)

def test_tiled_order_by_hand():
    # 2 key heads, 6 value heads: HF groups [G0: 0 1 2 | G1: 3 4 5];
    # llama.cpp's tiled order is [G0_v0, G1_v0, G0_v1, G1_v1, G0_v2, G1_v2].
    assert tiled_heads(2, 6) == [0, 3, 1, 4, 2, 5]
    assert tiled_heads(3, 3) == [0, 1, 2]
    assert list(tiled_index(2, 4, 2)) == [0, 1, 4, 5, 2, 3, 6, 7]


def test_bf16_rounding_by_hand():
    x = np.array([1.0, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, -2.0, 65504.0], dtype=np.float32)
    # halfway cases round to the even mantissa
    assert [int(b) for b in to_bf16_bits(x)] == [0x3F80, 0x3F80, 0x3F82, 0xC000, 0x4780]
    assert list(from_bf16_bits(np.array([0x3F80, 0xC0A0], np.uint16))) == [1.0, -5.0]
