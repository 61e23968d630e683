"""`clover convert` on bad input: every failure is exit code 1, one line on
stderr naming the file and the tensor or field, and no output file."""
import json
import struct

import numpy as np
import pytest

import test_convert_support as cs

RECORD = dict(algorithm="low_confidence", block_size=32, threshold=0.9, mask_token_id=299)


def make(tmp_path, **kw):
    g = cs.geometry(num_hidden_layers=2)
    w = cs.hf_weights(g, seed=11)
    mutate = kw.pop("mutate", None)
    if mutate:
        mutate(w)
    src = tmp_path / "hf"
    cs.write_checkpoint(src, g, w, record=kw.pop("record", RECORD), **kw)
    return src


def fails(tmp_path, src, *needles, args=()):
    out = tmp_path / "out.gguf"
    r = cs.run_convert(src, out, *args)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert not out.exists()
    return lines[0]


def test_missing_tensor(tmp_path):
    src = make(tmp_path, mutate=lambda w: w.pop("layers.0.linear_attn.A_log"))
    fails(tmp_path, src, "missing tensor 'model.language_model.layers.0.linear_attn.A_log'", str(src))


def test_missing_clover_tensor_when_the_record_is_present(tmp_path):
    src = make(tmp_path, mutate=lambda w: w.pop("layers.0.linear_attn.bd_softmax_history_c"))
    fails(tmp_path, src, "missing tensor 'model.language_model.layers.0.linear_attn.bd_softmax_history_c'",
          "block_diffusion")


def test_missing_lm_head(tmp_path):
    src = make(tmp_path, mutate=lambda w: w.pop("lm_head.weight"))
    fails(tmp_path, src, "missing tensor 'lm_head.weight'")


def test_missing_expert_in_a_per_expert_checkpoint(tmp_path):
    g = cs.geometry(num_hidden_layers=2)
    w = cs.hf_weights(g, seed=12, fused=False)
    del w["layers.1.mlp.experts.3.up_proj.weight"]
    cs.write_checkpoint(tmp_path / "hf", g, w, prefix="model.", record=RECORD)
    fails(tmp_path, tmp_path / "hf", "missing tensor 'model.layers.1.mlp.experts.3.up_proj.weight'")


def test_wrong_shape(tmp_path):
    def bad(w):
        w["layers.1.self_attn.k_proj.weight"] = np.zeros((31, 64), np.float32)
    src = make(tmp_path, mutate=bad)
    fails(tmp_path, src, "model.safetensors", "tensor 'model.language_model.layers.1.self_attn.k_proj.weight'",
          "shape [31, 64], expected [32, 64]")


def test_unsupported_dtype(tmp_path):
    src = make(tmp_path, dtype_of={"layers.0.post_attention_layernorm.weight": "i32"})
    fails(tmp_path, src, "model.safetensors", "'model.language_model.layers.0.post_attention_layernorm.weight'",
          "dtype I32 is not supported")


def test_unknown_tensor(tmp_path):
    src = make(tmp_path, extra={"model.language_model.layers.0.mlp.mystery.weight": np.ones((2, 2))})
    fails(tmp_path, src, "model.language_model.layers.0.mlp.mystery.weight", "not a weight")


def test_same_weight_under_both_prefixes(tmp_path):
    src = make(tmp_path, extra={"model.norm.weight": np.ones(64)})
    fails(tmp_path, src, "model.norm.weight", "model.language_model.norm.weight", "same weight")


def header_len(path):
    with open(path, "rb") as f:
        return struct.unpack("<Q", f.read(8))[0]


def test_truncated_header(tmp_path):
    src = make(tmp_path)
    st = src / "model.safetensors"
    n = header_len(st)
    st.write_bytes(st.read_bytes()[: 8 + n - 10])
    fails(tmp_path, src, str(st), "header length", "runs past the end")


def test_truncated_data(tmp_path):
    src = make(tmp_path)
    st = src / "model.safetensors"
    st.write_bytes(st.read_bytes()[:-100])
    fails(tmp_path, src, str(st), "past the", "truncated")


def test_file_shorter_than_the_length_field(tmp_path):
    src = make(tmp_path)
    (src / "model.safetensors").write_bytes(b"\x10\x00\x00")
    fails(tmp_path, src, "model.safetensors", "truncated: 3 bytes")


@pytest.mark.parametrize("header,needle", [
    (b"[1, 2]", "header is an array, expected a JSON object"),
    (b"{\"a\": {\"dtype\": \"F32\", \"shape\": [2]}}", "tensor 'a': header entry lacks 'data_offsets'"),
    (b"{\"a\": {\"dtype\": \"F33\", \"shape\": [2], \"data_offsets\": [0, 8]}}", "unknown dtype 'F33'"),
    (b"{\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", "span 8 bytes"),
    (b"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
     b" \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", "overlap"),
    (b"{\"a\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", "shape[0]"),
    (b"{\"a\": 1, \"a\": 2}", "not valid JSON"),
])
def test_malformed_header(tmp_path, header, needle):
    src = make(tmp_path)
    st = src / "model.safetensors"
    st.write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))
    fails(tmp_path, src, str(st), needle)


def test_index_names_a_tensor_the_shard_lacks(tmp_path):
    src = make(tmp_path, shards=2)
    idx = json.loads((src / "model.safetensors.index.json").read_text())
    idx["weight_map"]["model.language_model.ghost.weight"] = "model-00001-of-00002.safetensors"
    (src / "model.safetensors.index.json").write_text(json.dumps(idx))
    fails(tmp_path, src, "model-00001-of-00002.safetensors", "missing tensor 'model.language_model.ghost.weight'")


def test_index_cannot_point_outside(tmp_path):
    src = make(tmp_path, shards=2)
    idx = json.loads((src / "model.safetensors.index.json").read_text())
    idx["weight_map"]["x"] = "../elsewhere.safetensors"
    (src / "model.safetensors.index.json").write_text(json.dumps(idx))
    fails(tmp_path, src, "model.safetensors.index.json", "'../elsewhere.safetensors'")


def edit_config(src, fn):
    cfg = json.loads((src / "config.json").read_text())
    fn(cfg)
    (src / "config.json").write_text(json.dumps(cfg))


def test_config_missing_field(tmp_path):
    src = make(tmp_path)
    edit_config(src, lambda c: c["text_config"].pop("linear_num_value_heads"))
    fails(tmp_path, src, "config.json", "missing field 'linear_num_value_heads'")


def test_config_wrong_type(tmp_path):
    src = make(tmp_path)
    edit_config(src, lambda c: c["text_config"].update(num_experts="4"))
    fails(tmp_path, src, "config.json", "field 'num_experts' is a string, expected a non-negative integer")


def test_config_record_wrong_type(tmp_path):
    src = make(tmp_path, record=dict(RECORD, coreset_enabled="yes"))
    fails(tmp_path, src, "config.json", "block_diffusion.coreset_enabled", "expected a boolean")


def test_config_record_bad_decode_rule(tmp_path):
    src = make(tmp_path, record=dict(RECORD, decode_rule="causal"))
    fails(tmp_path, src, "config.json", "block_diffusion.decode_rule 'causal'", "causal_fallback")
    src2 = make(tmp_path / "b", record=dict(RECORD, decode_rule=1))
    fails(tmp_path, src2, "config.json", "decode_rule", "a string")


def test_config_record_missing_field(tmp_path):
    rec = dict(RECORD)
    del rec["mask_token_id"]
    src = make(tmp_path, record=rec)
    fails(tmp_path, src, "config.json", "missing field 'mask_token_id' in block_diffusion")


def test_config_not_json(tmp_path):
    src = make(tmp_path)
    (src / "config.json").write_text("{\"hidden_size\": 64,")
    fails(tmp_path, src, "config.json", "not valid JSON")


def test_config_other_model_type(tmp_path):
    src = make(tmp_path)
    edit_config(src, lambda c: c.update(model_type="llama"))
    fails(tmp_path, src, "config.json", "model_type 'llama'")


def test_missing_tokenizer(tmp_path):
    src = make(tmp_path)
    (src / "tokenizer.json").unlink()
    fails(tmp_path, src, "tokenizer.json", "cannot open")


def test_tokenizer_id_beyond_vocab_size(tmp_path):
    src = make(tmp_path)
    tok = json.loads((src / "tokenizer.json").read_text())
    tok["added_tokens"].append(dict(id=300, content="<|late|>", special=True))
    (src / "tokenizer.json").write_text(json.dumps(tok))
    fails(tmp_path, src, "tokenizer.json", "'<|late|>' has id 300", "vocab_size is 300")


def test_no_safetensors(tmp_path):
    src = make(tmp_path)
    (src / "model.safetensors").unlink()
    fails(tmp_path, src, str(src), "no model.safetensors")


def test_existing_output_is_kept_on_failure(tmp_path):
    src = make(tmp_path, mutate=lambda w: w.pop("norm.weight"))
    out = tmp_path / "keep.gguf"
    out.write_bytes(b"old")
    r = cs.run_convert(src, out)
    assert r.returncode == 1 and "missing tensor 'model.language_model.norm.weight'" in r.stderr
    assert out.read_bytes() == b"old"
