"""Load a Clover (or plain Qwen3.5-MoE) checkpoint in Hugging Face form
(SPEC 6) into transformers' own Qwen3_5MoeForCausalLM.

The trunk goes through `from_pretrained` in float32 with eager attention and
eager experts, so transformers' torch fallbacks of the Gated DeltaNet run.
transformers ignores the block-diffusion tensors; they are read here from the
safetensors files beside it, and the record from config.json.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, fields

import numpy as np
import torch
from safetensors import safe_open
from transformers import Qwen3_5MoeForCausalLM

EXTRA_NAMES = ("conv_right_weight", "bd_softmax_logit_scale", "bd_softmax_history_bias",
               "bd_softmax_history_c")
PREFIXES = ("model.language_model.layers.", "model.layers.")


def f32(x) -> float:
    """A record value as the engine stores it: a float32, held exactly."""
    return float(np.float32(x))


@dataclass
class Record:
    """The block-diffusion record of SPEC 1.2 (float fields rounded to float32)."""
    algorithm: str = "low_confidence"
    block_size: int = 32
    threshold: float = 0.9
    mask_token_id: int = 0
    coreset_enabled: bool = False
    coreset_top_p: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    length_penalty: float = 0.0
    length_penalty_start: int = 0
    length_penalty_window: int = 0
    think_end_bias: float = 0.0
    think_end_start: int = 0
    think_end_window: int = 0
    think_end_token_id: int | None = None
    stop_token_ids: list = field(default_factory=list)

    FLOATS = ("threshold", "coreset_top_p", "presence_penalty", "frequency_penalty",
              "repetition_penalty", "length_penalty", "think_end_bias")

    @classmethod
    def from_dict(cls, d: dict) -> "Record":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"block_diffusion: unknown keys {unknown}")
        r = cls(**{k: v for k, v in d.items()})
        r.validate()
        for k in cls.FLOATS:
            setattr(r, k, f32(getattr(r, k)))
        r.stop_token_ids = [int(t) for t in r.stop_token_ids]
        if r.think_end_token_id is not None and int(r.think_end_token_id) < 0:
            r.think_end_token_id = None  # -1 is "none", as in the GGUF form
        return r

    def validate(self) -> None:
        if self.algorithm != "low_confidence":
            raise ValueError(f"block_diffusion.algorithm: '{self.algorithm}' is not supported "
                             "(expected 'low_confidence')")
        if int(self.block_size) <= 0:
            raise ValueError(f"block_diffusion.block_size: {self.block_size}, expected > 0")
        if not (0.0 <= float(self.threshold) <= 1.0) or math.isnan(float(self.threshold)):
            raise ValueError(f"block_diffusion.threshold: {self.threshold}, expected 0..1")

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class GdnExtra:
    conv_right: torch.Tensor     # [conv_dim][K-1]
    logit_scale: torch.Tensor    # [nv]
    history_bias: torch.Tensor   # [nv]
    history_c: torch.Tensor      # [nv]


def _safetensors_files(path: str) -> list[str]:
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            return sorted(set(os.path.join(path, v) for v in json.load(f)["weight_map"].values()))
    return sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".safetensors"))


def _load_extras(path: str, cfg, device) -> dict[int, GdnExtra]:
    want = {}
    for li, kind in enumerate(cfg.layer_types):
        if kind == "linear_attention":
            for n in EXTRA_NAMES:
                want[(li, n)] = None
    for fn in _safetensors_files(path):
        with safe_open(fn, "pt") as f:
            for key in f.keys():
                for pre in PREFIXES:
                    if not key.startswith(pre):
                        continue
                    rest = key[len(pre):]
                    li_s, _, tail = rest.partition(".linear_attn.")
                    if tail in EXTRA_NAMES and li_s.isdigit() and (int(li_s), tail) in want:
                        want[(int(li_s), tail)] = f.get_tensor(key).to(torch.float32)
    conv_dim = 2 * cfg.linear_num_key_heads * cfg.linear_key_head_dim + \
        cfg.linear_num_value_heads * cfg.linear_value_head_dim
    shapes = {"conv_right_weight": (conv_dim, cfg.linear_conv_kernel_dim - 1),
              "bd_softmax_logit_scale": (cfg.linear_num_value_heads,),
              "bd_softmax_history_bias": (cfg.linear_num_value_heads,),
              "bd_softmax_history_c": (cfg.linear_num_value_heads,)}
    out = {}
    for (li, n), t in sorted(want.items()):
        if t is None:
            raise ValueError(f"{path}: layer {li}: tensor 'linear_attn.{n}' is missing")
        if tuple(t.shape) != shapes[n]:
            raise ValueError(f"{path}: layer {li}: tensor 'linear_attn.{n}' has shape "
                             f"{tuple(t.shape)}, expected {shapes[n]}")
    for li in sorted({li for li, _ in want}):
        out[li] = GdnExtra(*(want[(li, n)].to(device) for n in EXTRA_NAMES))
    return out


def _token_id(tok_json: dict, content: str):
    for a in tok_json.get("added_tokens", []):
        if a["content"] == content:
            return a["id"]
    return tok_json.get("model", {}).get("vocab", {}).get(content)


def _eos_ids(path: str, raw_cfg: dict) -> list[int]:
    """The tokenizer's EOS ids: tokenizer_config's eos_token, the
    generation_config eos_token_id(s), the config's eos_token_id, and the
    ids of <|endoftext|> / <|im_end|> where the tokenizer defines them."""
    ids = set()
    tok_path = os.path.join(path, "tokenizer.json")
    tok = json.load(open(tok_path)) if os.path.exists(tok_path) else {}
    tc_path = os.path.join(path, "tokenizer_config.json")
    if os.path.exists(tc_path):
        eos = json.load(open(tc_path)).get("eos_token")
        if isinstance(eos, dict):
            eos = eos.get("content")
        if eos and _token_id(tok, eos) is not None:
            ids.add(_token_id(tok, eos))
    gc_path = os.path.join(path, "generation_config.json")
    if os.path.exists(gc_path):
        e = json.load(open(gc_path)).get("eos_token_id")
        ids.update([e] if isinstance(e, int) else (e or []))
    text = raw_cfg.get("text_config", raw_cfg)
    e = text.get("eos_token_id")
    ids.update([e] if isinstance(e, int) else (e or []))
    for name in ("<|endoftext|>", "<|im_end|>"):
        if _token_id(tok, name) is not None:
            ids.add(_token_id(tok, name))
    return sorted(ids)


class CloverModel:
    """The trunk (transformers), the record (or None), the extra tensors."""

    def __init__(self, path: str, device: str = "cpu"):
        pin_cpu()
        self.path = path
        self.device = torch.device(device)
        with open(os.path.join(path, "config.json")) as f:
            raw = json.load(f)
        self.raw_config = raw
        self.model = Qwen3_5MoeForCausalLM.from_pretrained(
            path, dtype=torch.float32, attn_implementation="eager",
            experts_implementation="eager").to(self.device).eval()
        self.config = self.model.config
        self.vocab_size = self.config.vocab_size
        bd = raw.get("block_diffusion")
        if bd is None and "text_config" in raw:
            bd = raw["text_config"].get("block_diffusion")
        self.record = Record.from_dict(bd) if bd is not None else None
        self.extras = _load_extras(path, self.config, self.device) if self.record else {}
        self.eos_ids = _eos_ids(path, raw)

    def stop_ids(self) -> list[int]:
        """Record stop ids + tokenizer EOS ids, deduplicated, < vocab."""
        s = set(self.eos_ids)
        if self.record is not None:
            s.update(self.record.stop_token_ids)
        return sorted(t for t in s if 0 <= t < self.vocab_size)


def pin_cpu() -> None:
    """One intra-op thread and deterministic algorithms. The thread count
    changes how MKL and ATen split (and so sum) float32 reductions: with two
    threads the fixture logits move by up to 7.6e-6 of their scale. Called by
    every entry point (CloverModel, the tiny-model builders, make_fixtures,
    the tests' conftest) before it computes anything, so a caller that set
    another count cannot get other numbers."""
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    if torch.get_num_threads() != 1:
        raise RuntimeError(f"torch.set_num_threads(1) left {torch.get_num_threads()} threads")


def set_deterministic() -> None:
    """pin_cpu() and a fixed torch seed (only module initialisation draws from
    it; every fixture weight is overwritten from numpy's seeded generator)."""
    pin_cpu()
    torch.manual_seed(0)
