#!/usr/bin/env python3
"""The llama.cpp-converted fixture (tests/fixtures/llamacpp_bf16/): a tiny
random Qwen3.5-MoE with Qwen3's real tokenizer, saved by transformers'
save_pretrained in bfloat16, converted by llama.cpp's own convert_hf_to_gguf.py
(--outtype bf16 --no-mtp, the checkpoint has no MTP head: the GGUF holds exactly
the checkpoint's weights), plus what
transformers computes with the checkpoint (float32 arithmetic on those bf16
weights): the token ids of a text (Hugging Face tokenizers), their NLL and
greedy continuation. CI then runs the GGUF in clover against these numbers
without torch or llama.cpp.

    python3 tools/reference/make_llamacpp_fixture.py --llama-cpp DIR
    # DIR: llama.cpp's source, e.g. llama-cpp-python 0.3.36's sdist vendor/llama.cpp
    # (scripts/interop.sh fetches it); needs torch, transformers

Hidden 8 keeps the 151,936-row embedding (and so the file) small: the
tokenizer's metadata is most of the file's ~8 MB.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig  # noqa: E402

from clover_ref import tiny_models  # noqa: E402
from clover_ref.checkpoint import pin_cpu, set_deterministic  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
TOKENIZER = os.path.join(REPO, "..", "shared", "data", "qwen3-tokenizer")
OUT = os.path.join(REPO, "tests", "fixtures", "llamacpp_bf16")
SEED = 20240614
TEXT = ("The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the "
        "steps as his father had taught him.")

CONFIG = dict(
    vocab_size=151936, hidden_size=8, num_hidden_layers=4,
    layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    num_attention_heads=2, num_key_value_heads=1, head_dim=64,
    linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=16,
    linear_value_head_dim=16, linear_conv_kernel_dim=4,
    num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
    shared_expert_intermediate_size=16, rms_norm_eps=1e-6, max_position_embeddings=4096,
    tie_word_embeddings=True,
    # no mrope_section: llama.cpp's converter writes its 11, 11, 10, 0 (32 rotary dims fit them)
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    bos_token_id=None, eos_token_id=151645, pad_token_id=None,
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp source directory (has convert_hf_to_gguf.py)")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    set_deterministic()
    pin_cpu()
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        torch.manual_seed(SEED)
        model = Qwen3_5MoeForCausalLM(Qwen3_5MoeTextConfig(**CONFIG))
        tiny_models._set_weights(model, SEED, "model.", 1.0)
        model = model.to(torch.bfloat16)
        model.save_pretrained(hf)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(TOKENIZER, f), hf)
        gguf_path = os.path.join(tmp, "model.gguf")
        env = dict(os.environ, PYTHONPATH=os.path.join(a.llama_cpp, "gguf-py"))
        p = subprocess.run([sys.executable, os.path.join(a.llama_cpp, "convert_hf_to_gguf.py"), hf, "--outtype",
                            "bf16", "--no-mtp", "--outfile", gguf_path], env=env, capture_output=True, text=True)
        if p.returncode:
            raise SystemExit(f"convert_hf_to_gguf.py failed:\n{p.stderr[-3000:]}")
        tok = Tokenizer.from_file(os.path.join(hf, "tokenizer.json"))
        ids = tok.encode(TEXT, add_special_tokens=False).ids
        model = model.float().eval()
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0].double()
            nll = -torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
            out = model.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False, eos_token_id=None,
                                 pad_token_id=0)
        greedy = out[0, len(ids):].tolist()
        os.makedirs(a.out, exist_ok=True)
        shutil.copy(gguf_path, os.path.join(a.out, "model.gguf"))
        man = {
            "format": 1,
            "description": "A tiny random Qwen3.5-MoE with Qwen3's tokenizer, saved by transformers "
                           "(bfloat16, tied embeddings, no mrope_section) and converted by llama.cpp's "
                           "convert_hf_to_gguf.py --outtype bf16; numbers from transformers (float32 "
                           "arithmetic on the bf16 weights). tools/reference/make_llamacpp_fixture.py.",
            "llama_cpp": os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(a.llama_cpp)))),
            "config": CONFIG,
            "text": TEXT,
            "ids": ids,
            "per_token_nll": [float(x) for x in nll],
            "mean_nll": float(nll.mean()),
            "greedy": greedy,
        }
        with open(os.path.join(a.out, "manifest.json"), "w") as f:
            json.dump(man, f, indent=2)
            f.write("\n")
    print(f"wrote {a.out}: {os.path.getsize(os.path.join(a.out, 'model.gguf'))} bytes of GGUF, "
          f"mean NLL {man['mean_nll']:.6f}, greedy {greedy}")


if __name__ == "__main__":
    main()
