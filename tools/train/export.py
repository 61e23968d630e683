"""Export a CloverTrainModel to the Hugging Face form of SPEC 6 (what
`clover convert` and tools/reference's CloverModel read): a flat
`qwen3_5_moe_text` config with the `block_diffusion` record, transformers'
own `save_pretrained` for the trunk (`model.` prefix), the four extra tensors
per GDN layer added to the same safetensors file in float32, and the
tokenizer files beside it.

torch, safetensors and transformers are imported inside export(), so that
record() (the config's block_diffusion dict) can be imported and tested
without the training venv.
"""
from __future__ import annotations

import json
import os
import shutil

# The decode rules the C converter and engine know (clover.decode_rule). Kept
# here so a misspelt --decode-rule fails at export, not later at convert.
DECODE_RULES = ("threshold", "causal_fallback")


def check_rule(decode_rule: str | None) -> None:
    if decode_rule is not None and decode_rule not in DECODE_RULES:
        raise ValueError(f"export: unknown decode rule {decode_rule!r} "
                         f"(known: {', '.join(DECODE_RULES)})")


def record(tok_ids: dict, block: int, threshold: float, decode_rule: str | None = None) -> dict:
    """The block-diffusion record. The coreset is off: training routes every
    preview row as the trunk does, so inference must too. decode_rule is
    written only when given: without it the record (and so the GGUF) is the
    same as before the key existed, and the engine uses its default rule."""
    check_rule(decode_rule)
    r = {
        "algorithm": "low_confidence", "block_size": block, "threshold": threshold,
        "mask_token_id": tok_ids["<|mask|>"], "coreset_enabled": False, "coreset_top_p": 1.0,
        "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0,
        "length_penalty": 0.0, "length_penalty_start": 0, "length_penalty_window": 0,
        "think_end_bias": 0.0, "think_end_start": 0, "think_end_window": 0,
        "think_end_token_id": tok_ids["</think>"],
        "stop_token_ids": [tok_ids["<|im_end|>"], tok_ids["<|endoftext|>"]],
    }
    if decode_rule is not None:
        r["decode_rule"] = decode_rule
    return r


def export(model, tok_dir: str, out_dir: str, block: int, threshold: float,
           every: int, decode_rule: str | None = None) -> None:
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file
    from transformers import GenerationConfig

    check_rule(decode_rule)  # before any file is written
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(tok_dir, "tokenizer.json")) as f:
        tj = json.load(f)
    ids = {a["content"]: a["id"] for a in tj["added_tokens"]}
    lm = model.lm
    lm.generation_config = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"], eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"], do_sample=False)
    lm.save_pretrained(out_dir, safe_serialization=True)
    fn = os.path.join(out_dir, "model.safetensors")
    with safe_open(fn, "pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    for li in model.gdn_layers:
        base = f"model.layers.{li}.linear_attn."
        s = str(li)
        for name, p in (("conv_right_weight", model.conv_right[s]),
                        ("bd_softmax_logit_scale", model.logit_scale[s]),
                        ("bd_softmax_history_bias", model.history_bias[s]),
                        ("bd_softmax_history_c", model.history_c[s])):
            tensors[base + name] = p.detach().to(torch.float32).cpu().contiguous()
    save_file(dict(sorted(tensors.items())), fn, metadata=meta)
    cpath = os.path.join(out_dir, "config.json")
    with open(cpath) as f:
        c = json.load(f)
    c["block_diffusion"] = record(ids, block, threshold, decode_rule)
    c["full_attention_interval"] = every
    with open(cpath, "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")
    for n in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, n), os.path.join(out_dir, n))
