"""`clover convert`: Hugging Face-style checkpoints built with numpy + safetensors,
converted, then read back with llama.cpp's `gguf` package and compared with the
transformations computed independently in numpy (test_convert_support.py)."""
import numpy as np
import pytest
from gguf import GGUFReader
from gguf.quants import dequantize

import test_convert_support as cs
from clover_paths import shared_file

RECORD = dict(algorithm="low_confidence", block_size=32, threshold=0.9, mask_token_id=299, coreset_enabled=True,
              coreset_top_p=0.85, presence_penalty=0.5, frequency_penalty=0.25, repetition_penalty=1.1,
              length_penalty=2.0, length_penalty_start=100, length_penalty_window=50, think_end_bias=3.0,
              think_end_start=200, think_end_window=64, think_end_token_id=274, stop_token_ids=[272, 270])

# GGUF value types
U32, I32, F32V, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9


def convert(tmp_path, src, *args):
    out = tmp_path / "out.gguf"
    r = cs.run_convert(src, out, *args)
    assert r.returncode == 0, r.stderr
    return GGUFReader(str(out)), r


def values(t):
    """A reader tensor as float32 in numpy (row-major) order."""
    shape = tuple(reversed([int(x) for x in t.shape]))
    if int(t.tensor_type) == cs.BF16:
        return cs.from_bf16_bits(np.asarray(t.data).view(np.uint16)).reshape(shape)
    return np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)


def check_names_shapes(reader, exp):
    got = {t.name: [int(x) for x in t.shape] for t in reader.tensors}
    assert sorted(got) == sorted(exp)
    for name, (ne, _, _) in exp.items():
        assert got[name] == ne, name


def check_hparams(r, g):
    a = "qwen35moe."
    assert cs.field(r, "general.architecture") == "qwen35moe"
    want_u32 = {
        "block_count": g["num_hidden_layers"], "context_length": 4096, "embedding_length": g["hidden_size"],
        "attention.head_count": g["num_attention_heads"], "attention.head_count_kv": g["num_key_value_heads"],
        "attention.key_length": g["head_dim"], "attention.value_length": g["head_dim"],
        "expert_count": g["num_experts"], "expert_used_count": g["num_experts_per_tok"],
        "expert_feed_forward_length": g["moe_intermediate_size"],
        "expert_shared_feed_forward_length": g["shared_expert_intermediate_size"],
        "ssm.conv_kernel": g["linear_conv_kernel_dim"], "ssm.state_size": g["linear_key_head_dim"],
        "ssm.group_count": g["linear_num_key_heads"], "ssm.time_step_rank": g["linear_num_value_heads"],
        "ssm.inner_size": g["linear_num_value_heads"] * g["linear_value_head_dim"],
        "full_attention_interval": g["full_attention_interval"],
        "rope.dimension_count": int(g["head_dim"] * 0.25),
    }
    for k, v in want_u32.items():
        assert cs.field(r, a + k) == v, k
        assert cs.field_type(r, a + k) == [U32], k
    assert cs.field(r, a + "rope.freq_base") == pytest.approx(1e7)
    assert cs.field(r, a + "attention.layer_norm_rms_epsilon") == pytest.approx(1e-6)
    assert cs.field_type(r, a + "rope.freq_base") == [F32V]
    assert cs.field(r, a + "rope.dimension_sections") == [2, 1, 1, 0]
    assert cs.field_type(r, a + "rope.dimension_sections") == [ARRAY, I32]
    assert cs.field(r, "general.quantization_version") == 2


def check_tokenizer(r, g, pre="qwen35", merges_pairs=True):
    V = g["vocab_size"]
    assert cs.field(r, "tokenizer.ggml.model") == "gpt2"
    assert cs.field(r, "tokenizer.ggml.pre") == pre
    toks = cs.field(r, "tokenizer.ggml.tokens")
    types = cs.field(r, "tokenizer.ggml.token_type")
    assert cs.field_type(r, "tokenizer.ggml.token_type") == [ARRAY, I32]
    assert len(toks) == V and len(types) == V
    vocab = cs.tokenizer_vocab()
    for s, i in vocab.items():
        assert toks[i] == s and types[i] == 1
    for i, c, special in cs.ADDED:
        assert toks[i] == c
        looks = c.startswith("<|") and c.endswith("|>")
        assert types[i] == (3 if special or looks else 4), c
    holes = set(range(V)) - set(vocab.values()) - {i for i, _, _ in cs.ADDED}
    assert 260 in holes
    for i in holes:
        assert toks[i] == f"[PAD{i}]" and types[i] == 5
    merges = cs.field(r, "tokenizer.ggml.merges")
    if merges_pairs:
        assert merges == ["Ġ t", "h e", "Ġt he", "a\u0120b c"]
    else:
        assert merges == ["Ġ t", "h e", "Ġt he"]
    assert cs.field(r, "tokenizer.ggml.eos_token_id") == 272  # tokenizer_config's <|im_end|>
    assert cs.field(r, "tokenizer.ggml.padding_token_id") == 270
    assert cs.field(r, "tokenizer.ggml.bos_token_id") == 270  # config.json's bos_token_id
    assert cs.field_type(r, "tokenizer.ggml.eos_token_id") == [U32]
    assert cs.field(r, "tokenizer.ggml.add_bos_token") is False
    assert cs.field(r, "tokenizer.chat_template").startswith("{% for m in messages %}")


def check_record(r, rec):
    f32_keys = ["threshold", "coreset_top_p", "presence_penalty", "frequency_penalty", "repetition_penalty",
                "length_penalty", "think_end_bias"]
    u32_keys = ["block_size", "mask_token_id", "length_penalty_start", "length_penalty_window", "think_end_start",
                "think_end_window"]
    assert cs.field(r, "clover.algorithm") == rec["algorithm"]
    assert cs.field_type(r, "clover.algorithm") == [STRING]
    for k in f32_keys:
        assert cs.field_type(r, "clover." + k) == [F32V], k
        assert cs.field(r, "clover." + k) == pytest.approx(rec[k]), k
    for k in u32_keys:
        assert cs.field_type(r, "clover." + k) == [U32], k
        assert cs.field(r, "clover." + k) == rec[k], k
    assert cs.field_type(r, "clover.coreset_enabled") == [BOOL]
    assert cs.field(r, "clover.coreset_enabled") == rec["coreset_enabled"]
    assert cs.field_type(r, "clover.think_end_token_id") == [I32]
    assert cs.field(r, "clover.think_end_token_id") == rec.get("think_end_token_id", -1)
    stops = rec.get("stop_token_ids", [])
    # the reader records an array's element type only when it has elements
    assert cs.field_type(r, "clover.stop_token_ids") == ([ARRAY, U32] if stops else [ARRAY])
    assert cs.field(r, "clover.stop_token_ids") == stops
    # clover's optional decode_rule: written only when the config has it
    assert cs.field(r, "clover.decode_rule") == rec.get("decode_rule")


def test_decode_rule_passes_through(tmp_path):
    g = cs.geometry(num_hidden_layers=2)
    w = cs.hf_weights(g, seed=3)
    src = tmp_path / "hf"
    rec = dict(RECORD, decode_rule="causal_fallback")
    cs.write_checkpoint(src, g, w, record=rec)
    r, _ = convert(tmp_path, src)
    assert cs.field_type(r, "clover.decode_rule") == [STRING]
    check_record(r, rec)


def test_fused_experts_language_model_prefix_bf16_source_to_f32(tmp_path):
    g = cs.geometry()
    w = cs.hf_weights(g, seed=1, fused=True, clover=True)
    extra = {"model.visual.blocks.0.attn.qkv.weight": np.ones((8, 8)), "model.visual.merger.fc.weight": np.ones(4),
             "mtp.fc.weight": np.ones((4, 4)), "mtp.layers.0.input_layernorm.weight": np.ones(4),
             "mtp.norm.weight": np.ones(4)}
    seen = cs.write_checkpoint(tmp_path / "hf", g, w, prefix="model.language_model.", dtype="bf16", nested=True,
                               record=RECORD, extra=extra)
    r, proc = convert(tmp_path, tmp_path / "hf", "--type", "f32")
    assert "skipped 2 vision tensors (model.visual.*) and 3 MTP tensors (mtp.*)" in proc.stderr
    exp = cs.expected_tensors(g, seen)
    check_names_shapes(r, exp)
    for t in r.tensors:
        assert int(t.tensor_type) == cs.F32, t.name
        _, want, _ = exp[t.name]
        got = values(t)
        if t.name.endswith("ssm_a"):
            np.testing.assert_allclose(got, want, rtol=2e-7, err_msg=t.name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=t.name)
    check_hparams(r, g)
    check_tokenizer(r, g)
    check_record(r, RECORD)
    assert cs.field(r, "general.file_type") == 0


def test_per_expert_model_prefix_sharded_mixed_dtypes_to_bf16(tmp_path):
    g = cs.geometry(full_attention_interval=4, num_hidden_layers=4)
    w = cs.hf_weights(g, seed=2, fused=False, clover=False)
    dts = ["f16", "f32", "bf16"]
    dtype_of = {k: dts[i % 3] for i, k in enumerate(sorted(w))}
    seen = cs.write_checkpoint(tmp_path / "hf", g, w, prefix="model.", shards=3, nested=False, dtype_of=dtype_of)
    cs.write_tokenizer(tmp_path / "hf", regex=cs.QWEN2_REGEX, merges_as_pairs=False)
    assert len(list((tmp_path / "hf").glob("model-0000*-of-00003.safetensors"))) == 3
    r, proc = convert(tmp_path, tmp_path / "hf", "--type", "bf16")
    assert "skipped" not in proc.stderr
    exp = cs.expected_tensors(g, seen)
    check_names_shapes(r, exp)
    for t in r.tensors:
        _, want, kind = exp[t.name]
        if kind in ("small", "router"):
            assert int(t.tensor_type) == cs.F32, t.name
            if t.name.endswith("ssm_a"):
                np.testing.assert_allclose(values(t), want, rtol=2e-7, err_msg=t.name)
            else:
                np.testing.assert_array_equal(values(t), want, err_msg=t.name)
        else:
            assert int(t.tensor_type) == cs.BF16, t.name
            bits = np.asarray(t.data).view(np.uint16).reshape(want.shape)
            np.testing.assert_array_equal(bits, cs.to_bf16_bits(want).reshape(want.shape), err_msg=t.name)
    check_hparams(r, g)
    check_tokenizer(r, g, pre="qwen2", merges_pairs=False)
    assert cs.field(r, "clover.algorithm") is None
    assert not any(k.startswith("clover.") for k in r.fields)
    assert cs.field(r, "general.file_type") == 32


def q8_0_bound(want):
    """|error| per element for Q8_0: half a step of d = amax/127 per block of 32, d rounded to f16."""
    blocks = want.reshape(-1, 32)
    d = np.abs(blocks).max(axis=1, keepdims=True) / 127.0
    return np.broadcast_to(d * 0.51 + d * 127 * 2.0 ** -11 + 1e-12, blocks.shape).reshape(want.shape)


def test_q8_0(tmp_path):
    g = cs.geometry()
    w = cs.hf_weights(g, seed=3, fused=True, clover=True)
    seen = cs.write_checkpoint(tmp_path / "hf", g, w, dtype="bf16", record=RECORD)
    r, _ = convert(tmp_path, tmp_path / "hf", "--type", "q8_0")
    exp = cs.expected_tensors(g, seen)
    check_names_shapes(r, exp)
    n_q8 = 0
    for t in r.tensors:
        _, want, kind = exp[t.name]
        if kind in ("small", "router"):
            assert int(t.tensor_type) == cs.F32, t.name
            continue
        assert int(t.tensor_type) == cs.Q8_0, t.name
        n_q8 += 1
        err = np.abs(values(t) - want)
        assert np.all(err <= q8_0_bound(want)), (t.name, float(err.max()))
    assert n_q8 > 20
    assert cs.field(r, "general.file_type") == 7


def rel_rmse(got, want):
    return float(np.sqrt(np.mean((got - want) ** 2)) / np.sqrt(np.mean(want ** 2)))


def test_q4_k_m(tmp_path):
    g = cs.geometry(hidden_size=256, moe_intermediate_size=256)
    w = cs.hf_weights(g, seed=4, fused=True, clover=True)
    seen = cs.write_checkpoint(tmp_path / "hf", g, w, dtype="bf16", record=RECORD)
    r, _ = convert(tmp_path, tmp_path / "hf", "--type", "q4_k_m")
    exp = cs.expected_tensors(g, seen)
    check_names_shapes(r, exp)
    want_type = {"small": cs.F32, "router": cs.F32, "experts": cs.Q4_K, "embed": cs.Q4_K, "head": cs.Q6_K,
                 "matrix": cs.Q8_0}
    for t in r.tensors:
        _, want, kind = exp[t.name]
        assert int(t.tensor_type) == want_type[kind], (t.name, int(t.tensor_type))
        got = values(t)
        if kind in ("small", "router"):
            continue
        if kind == "matrix":
            assert np.all(np.abs(got - want) <= q8_0_bound(want)), t.name
        elif kind == "head":
            assert rel_rmse(got, want) < 0.03, t.name
        else:
            # 4-bit codes over (max - min) of 32 values: about 0.1 of the RMS on Gaussian data
            assert rel_rmse(got, want) < 0.13, (t.name, rel_rmse(got, want))
    assert cs.field(r, "general.file_type") == 15


def test_tied_embeddings_without_lm_head(tmp_path):
    g = cs.geometry(num_hidden_layers=2)
    w = cs.hf_weights(g, seed=5)
    del w["lm_head.weight"]
    seen = cs.write_checkpoint(tmp_path / "hf", g, w, tie=True, record=RECORD)
    r, _ = convert(tmp_path, tmp_path / "hf", "--type", "f32")
    names = {t.name for t in r.tensors}
    assert "output.weight" not in names and "token_embd.weight" in names
    check_names_shapes(r, cs.expected_tensors(g, seen, tie=True))


def test_record_defaults(tmp_path):
    g = cs.geometry(num_hidden_layers=2)
    w = cs.hf_weights(g, seed=6)
    rec = dict(algorithm="low_confidence", block_size=16, threshold=0.5, mask_token_id=298)
    cs.write_checkpoint(tmp_path / "hf", g, w, record=rec)
    r, _ = convert(tmp_path, tmp_path / "hf", "--type", "bf16")
    check_record(r, dict(rec, coreset_enabled=False, coreset_top_p=1.0, presence_penalty=0.0, frequency_penalty=0.0,
                         repetition_penalty=1.0, length_penalty=0.0, length_penalty_start=0,
                         length_penalty_window=1, think_end_bias=0.0, think_end_start=0, think_end_window=1))


def test_single_shard_without_index_and_default_type(tmp_path):
    """A directory with shards but no index: every *.safetensors is read."""
    g = cs.geometry(num_hidden_layers=2)
    w = cs.hf_weights(g, seed=7)
    seen = cs.write_checkpoint(tmp_path / "hf", g, w, shards=2, record=RECORD)
    (tmp_path / "hf" / "model.safetensors.index.json").unlink()
    r, proc = convert(tmp_path, tmp_path / "hf")
    assert "wrote" in proc.stdout
    check_names_shapes(r, cs.expected_tensors(g, seen))
    assert cs.field(r, "general.file_type") == 32  # bf16 is the default


def test_help_and_usage_errors(tmp_path):
    import subprocess
    exe = cs.converter()
    r = subprocess.run(exe + ["--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--type" in r.stdout
    r = subprocess.run(exe + [str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2
    r = subprocess.run(exe + [str(tmp_path), "-o", str(tmp_path / "x.gguf"), "--type", "q3_k"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "q3_k" in r.stderr


def test_real_qwen3_tokenizer_matches_hugging_face(tmp_path):
    """The 151k-token Qwen3 tokenizer (the shared directory's data/qwen3-tokenizer, see clover_paths.py):
    every token string and type against Hugging Face `tokenizers`, merges, special ids."""
    import json
    import shutil
    from tokenizers import Tokenizer
    tdir = shared_file("data/qwen3-tokenizer/tokenizer.json", "Qwen3's tokenizer.json").parent
    V = 151936
    g = cs.geometry(num_hidden_layers=2, vocab_size=V)
    w = cs.hf_weights(g, seed=8)
    cs.write_checkpoint(tmp_path / "hf", g, w, tokenizer=False, record=dict(algorithm="low_confidence",
                        block_size=32, threshold=0.9, mask_token_id=151935))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tdir / f, tmp_path / "hf" / f)
    r, _ = convert(tmp_path, tmp_path / "hf", "--type", "bf16")

    hf = Tokenizer.from_file(str(tdir / "tokenizer.json"))
    raw = json.loads((tdir / "tokenizer.json").read_text())
    added = {a["id"]: a for a in raw["added_tokens"]}
    toks = cs.field(r, "tokenizer.ggml.tokens")
    types = cs.field(r, "tokenizer.ggml.token_type")
    assert len(toks) == V
    n_defined = 0
    for i in range(V):
        s = hf.id_to_token(i)
        if s is None:
            assert toks[i] == f"[PAD{i}]" and types[i] == 5
            continue
        n_defined += 1
        assert toks[i] == s, i
        if i in added:
            c = added[i]["content"]
            assert types[i] == (3 if added[i]["special"] or (c.startswith("<|") and c.endswith("|>")) else 4), c
        else:
            assert types[i] == 1, i
    assert n_defined == hf.get_vocab_size(with_added_tokens=True) == 151669
    merges = cs.field(r, "tokenizer.ggml.merges")
    assert merges == [" ".join(m) if isinstance(m, list) else m for m in raw["model"]["merges"]]
    assert len(merges) == 151387
    assert cs.field(r, "tokenizer.ggml.pre") == "qwen2"
    assert cs.field(r, "tokenizer.ggml.eos_token_id") == hf.token_to_id("<|im_end|>")
    assert cs.field(r, "tokenizer.ggml.padding_token_id") == hf.token_to_id("<|endoftext|>")
    assert cs.field(r, "tokenizer.ggml.bos_token_id") == 270  # tokenizer_config has none: config.json's
    assert cs.field(r, "tokenizer.chat_template") == json.loads((tdir / "tokenizer_config.json").read_text())[
        "chat_template"]
