"""The two tiny random fixture models, in Hugging Face form, written by
transformers' own `save_pretrained`.

* tiny_clover: a release-shaped Clover checkpoint. Nested config
  (`Qwen3_5MoeForConditionalGeneration`, `text_config`, a tiny vision tower
  the engine must skip), bfloat16 trunk (`model.language_model.` prefix),
  the four block-diffusion tensors per GDN layer in float32, and the
  `block_diffusion` record in config.json.
* tiny_ar: a plain autoregressive Qwen3.5-MoE. Flat `qwen3_5_moe_text`
  config (`model.` prefix), float32, sharded with an index file.
* tiny_interop: what a new user's own `save_pretrained` gives and llama.cpp
  takes: an irregular layer pattern (no full_attention_interval describes
  it), `rope_parameters` without `mrope_section`, tied embeddings (no
  `lm_head.weight`), one float32 file.

Weights come from numpy's PCG64 seeded per tensor name (independent of
module order), scaled so the outputs are not degenerate: peaked but varied
logits (confidences spread around the threshold), routers that prefer some
experts, GDN decays neither 0 nor 1.
"""
from __future__ import annotations

import json
import os
import zlib

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import (GenerationConfig, Qwen3_5MoeConfig, Qwen3_5MoeForCausalLM,
                          Qwen3_5MoeForConditionalGeneration, Qwen3_5MoeTextConfig)

from .checkpoint import EXTRA_NAMES, pin_cpu
from .tiny_tokenizer import ADDED, BPE_VOCAB

N_TOKENS = BPE_VOCAB + len(ADDED)       # ids the tokenizer defines
VOCAB = 448                             # padded, as the release pads 248077 -> 248320


def token_id(content: str) -> int:
    return BPE_VOCAB + [c for c, _ in ADDED].index(content)


CLOVER_TEXT = dict(
    vocab_size=VOCAB, hidden_size=64, num_hidden_layers=6,
    # full attention every 3rd layer (config.json also gets full_attention_interval 3)
    layer_types=["linear_attention", "linear_attention", "full_attention",
                 "linear_attention", "linear_attention", "full_attention"],
    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
    linear_value_head_dim=12, linear_conv_kernel_dim=4,
    num_experts=8, num_experts_per_tok=2, moe_intermediate_size=24,
    shared_expert_intermediate_size=32, rms_norm_eps=1e-6, max_position_embeddings=4096,
    tie_word_embeddings=False,
    rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                     "partial_rotary_factor": 0.25, "mrope_section": [2, 1, 1],
                     "mrope_interleaved": True},
    bos_token_id=token_id("<|endoftext|>"), eos_token_id=token_id("<|endoftext|>"),
    pad_token_id=None,
)

AR_TEXT = dict(
    vocab_size=VOCAB, hidden_size=48, num_hidden_layers=4,
    layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    num_attention_heads=4, num_key_value_heads=1, head_dim=16,
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
    linear_value_head_dim=8, linear_conv_kernel_dim=4,
    num_experts=6, num_experts_per_tok=3, moe_intermediate_size=16,
    shared_expert_intermediate_size=24, rms_norm_eps=1e-6, max_position_embeddings=4096,
    tie_word_embeddings=False,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                     "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 0],
                     "mrope_interleaved": True},
    bos_token_id=token_id("<|endoftext|>"), eos_token_id=token_id("<|endoftext|>"),
    pad_token_id=None,
)

INTEROP_TEXT = dict(
    vocab_size=VOCAB, hidden_size=32, num_hidden_layers=5,
    # full attention at layers 1 and 4: no interval k gives this pattern
    layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention",
                 "full_attention"],
    num_attention_heads=2, num_key_value_heads=1, head_dim=16,
    linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=16,
    linear_value_head_dim=16, linear_conv_kernel_dim=4,
    num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
    shared_expert_intermediate_size=16, rms_norm_eps=1e-6, max_position_embeddings=4096,
    tie_word_embeddings=True,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    bos_token_id=token_id("<|endoftext|>"), eos_token_id=token_id("<|endoftext|>"),
    pad_token_id=None,
)

# tiny_clover_k: 256 wide, so q4_k_m's K-quant rows (256 per block) fit where
# convert_policy.c puts them: routed experts' gate/up/down (moe_intermediate
# 256) and token_embd Q4_K, output Q6_K; attention, GDN and the shared expert
# (intermediate 32: Q8_0 either way) stay Q8_0, norms/router/conv F32. Two
# layers (one GDN, one gated attention) and four experts keep it small.
CLOVER_K_TEXT = dict(CLOVER_TEXT, hidden_size=256, num_hidden_layers=2,
                     layer_types=["linear_attention", "full_attention"],
                     num_experts=4, num_experts_per_tok=2, moe_intermediate_size=256,
                     shared_expert_intermediate_size=32)
SEED_CLOVER_K = 20240614

TINY_VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=2,
                   temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=64,
                   num_position_embeddings=16)

CLOVER_RECORD = {
    "algorithm": "low_confidence",
    "block_size": 8,
    "threshold": 0.5,
    "mask_token_id": token_id("<|mask|>"),
    "coreset_enabled": True,
    "coreset_top_p": 0.8,
    "presence_penalty": 0.25,
    "frequency_penalty": 0.125,
    "repetition_penalty": 1.1,
    "length_penalty": 6.0,
    "length_penalty_start": 8,
    "length_penalty_window": 16,
    "think_end_bias": 4.0,
    "think_end_start": 2,
    "think_end_window": 8,
    "think_end_token_id": token_id("</think>"),
    # <|endoftext|> is an EOS id too (deduplicated); VOCAB + 7 is past the
    # vocabulary and must be dropped.
    "stop_token_ids": [token_id("<|endoftext|>"), VOCAB + 7],
}

# Special tokens tied to frequent winners (see _tie_specials), and how strongly.
CLOVER_SPECIAL_SCALES = {token_id("</think>"): 0.8, token_id("<|im_end|>"): 0.8,
                         token_id("<|endoftext|>"): 0.7}
AR_SPECIAL_SCALES = {token_id("<|im_end|>"): 0.97}

SEED_CLOVER = 20240611
SEED_AR = 20240612
SEED_INTEROP = 20240613


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _fill(name: str, shape, seed: int, head_gain: float) -> np.ndarray:
    """Deterministic values for one tensor, by its (trunk-relative) name."""
    g = _rng(seed, name)
    normal = lambda: g.standard_normal(shape)  # noqa: E731
    if name.endswith("embed_tokens.weight"):
        w = normal()
        w[N_TOKENS:] = 0.0
        return w
    if name == "lm_head.weight":
        w = normal() * head_gain / np.sqrt(shape[1])
        w[N_TOKENS:] = 0.0
        return w
    if name.endswith("linear_attn.norm.weight"):
        return 1.0 + 0.1 * normal()
    if "norm" in name and name.endswith("weight") and len(shape) == 1:
        return 0.1 * normal()                       # zero-centred (1 + w) norms
    if name.endswith("A_log"):
        return np.log(g.uniform(0.5, 4.0, shape))
    if name.endswith("dt_bias"):
        return 0.5 * normal()
    if name.endswith("conv1d.weight"):
        return 0.5 * normal()
    if name.endswith("mlp.gate.weight"):
        return 2.5 * normal() / np.sqrt(shape[1])
    if name.endswith("experts.gate_up_proj"):
        return normal() / np.sqrt(shape[2])
    if name.endswith("experts.down_proj"):
        return normal() / np.sqrt(shape[2])
    if len(shape) == 2:
        return normal() / np.sqrt(shape[1])
    return 0.02 * normal()


def _set_weights(model, seed: int, prefix_strip: str, head_gain: float) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            rel = name[len(prefix_strip):] if name.startswith(prefix_strip) else name
            v = _fill(rel, tuple(p.shape), seed, head_gain)
            p.copy_(torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)))


def _tie_specials(text_model, lm_head, seed: int, scales: dict) -> None:
    """Give chosen special tokens a fighting chance: random rows would leave
    their logits far below the top, so that no ramp or penalty ever made a
    difference. Each one gets a scaled copy of the lm_head row of one of the
    tokens that most often wins on a fixed random calibration sequence (the
    most frequent winner goes to the first entry of `scales`, and so on)."""
    calib = _rng(seed, "calibration").integers(0, BPE_VOCAB, 96)
    with torch.no_grad():
        h = text_model(input_ids=torch.from_numpy(calib)[None]).last_hidden_state[0]
        logits = lm_head(h)[:, :BPE_VOCAB]
        wins = np.bincount(logits.argmax(dim=-1).numpy(), minlength=BPE_VOCAB)
        order = np.lexsort((np.arange(BPE_VOCAB), -wins))
        for (tok, scale), partner in zip(scales.items(), order):
            lm_head.weight[tok] = scale * lm_head.weight[int(partner)]


def _extras(seed: int, text: dict) -> dict[str, np.ndarray]:
    nk, nv = text["linear_num_key_heads"], text["linear_num_value_heads"]
    dk, dv = text["linear_key_head_dim"], text["linear_value_head_dim"]
    conv_dim = 2 * nk * dk + nv * dv
    k = text["linear_conv_kernel_dim"]
    out = {}
    for li, kind in enumerate(text["layer_types"]):
        if kind != "linear_attention":
            continue
        base = f"layers.{li}.linear_attn."
        out[base + "conv_right_weight"] = 0.3 * _rng(seed, base + "cr").standard_normal((conv_dim, k - 1))
        out[base + "bd_softmax_logit_scale"] = _rng(seed, base + "ls").uniform(2.0, 8.0, nv)
        out[base + "bd_softmax_history_bias"] = 0.5 + 0.5 * _rng(seed, base + "hb").standard_normal(nv)
        out[base + "bd_softmax_history_c"] = _rng(seed, base + "hc").uniform(0.2, 1.0, nv)
    assert len(out) == 4 * sum(t == "linear_attention" for t in text["layer_types"])
    assert all(any(k.endswith(n) for n in EXTRA_NAMES) for k in out)
    return out


def _dump_json(obj, path: str) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def generation_config() -> GenerationConfig:
    return GenerationConfig(bos_token_id=token_id("<|endoftext|>"),
                            eos_token_id=[token_id("<|im_end|>"), token_id("<|endoftext|>")],
                            pad_token_id=token_id("<|endoftext|>"), do_sample=True,
                            temperature=1.0, top_k=20, top_p=0.95)


def build_clover(out_dir: str, head_gain: float = 6.0, seed: int = SEED_CLOVER,
                 record: dict | None = None, text: dict | None = None,
                 full_attention_interval: int = 3) -> None:
    pin_cpu()   # _tie_specials runs the model: its argmax must not depend on threads
    text = dict(text or CLOVER_TEXT)
    vision = dict(TINY_VISION, out_hidden_size=text["hidden_size"])
    cfg = Qwen3_5MoeConfig(text_config=text, vision_config=vision,
                           image_token_id=token_id("<|image_pad|>"),
                           video_token_id=token_id("<|video_pad|>"),
                           vision_start_token_id=token_id("<|vision_start|>"),
                           vision_end_token_id=token_id("<|vision_end|>"),
                           tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = Qwen3_5MoeForConditionalGeneration(cfg)
    _set_weights(model, seed, "model.language_model.", head_gain)
    _tie_specials(model.model.language_model, model.lm_head, seed, CLOVER_SPECIAL_SCALES)
    model = model.to(torch.bfloat16)
    model.generation_config = generation_config()
    model.save_pretrained(out_dir)
    # The block-diffusion tensors, float32, beside the trunk in the same file.
    fn = os.path.join(out_dir, "model.safetensors")
    with safe_open(fn, "pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    for k, v in _extras(seed, text).items():
        tensors["model.language_model." + k] = torch.from_numpy(np.ascontiguousarray(v, np.float32))
    save_file(dict(sorted(tensors.items())), fn, metadata=meta)
    cpath = os.path.join(out_dir, "config.json")
    with open(cpath) as f:
        c = json.load(f)
    c["block_diffusion"] = dict(record or CLOVER_RECORD)
    # Released configs carry the interval beside the explicit layer_types
    # (transformers reads layer_types and does not write the interval back).
    c["text_config"]["full_attention_interval"] = full_attention_interval
    _dump_json(c, cpath)


def build_ar(out_dir: str, head_gain: float = 4.0, seed: int = SEED_AR) -> None:
    pin_cpu()
    cfg = Qwen3_5MoeTextConfig(**AR_TEXT)
    torch.manual_seed(seed)
    model = Qwen3_5MoeForCausalLM(cfg)
    _set_weights(model, seed, "model.", head_gain)
    _tie_specials(model.model, model.lm_head, seed, AR_SPECIAL_SCALES)
    model.generation_config = generation_config()
    model.save_pretrained(out_dir, max_shard_size="400KB")


def build_interop(out_dir: str, seed: int = SEED_INTEROP) -> None:
    pin_cpu()
    cfg = Qwen3_5MoeTextConfig(**INTEROP_TEXT)
    torch.manual_seed(seed)
    model = Qwen3_5MoeForCausalLM(cfg)
    _set_weights(model, seed, "model.", 1.0)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(), "tied"
    model.generation_config = generation_config()
    model.save_pretrained(out_dir)
    with open(os.path.join(out_dir, "config.json")) as f:
        c = json.load(f)
    # what makes this fixture: transformers wrote none of these
    assert "full_attention_interval" not in c and "mrope_section" not in c["rope_parameters"], c
    assert c["tie_word_embeddings"] is True
    with safe_open(os.path.join(out_dir, "model.safetensors"), "pt") as f:
        assert "lm_head.weight" not in f.keys()
