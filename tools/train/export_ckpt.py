"""A training checkpoint (train.py --ckpt) to the Hugging Face form of SPEC 6
(export.py), ready for `clover convert`.

    python3 tools/train/export_ckpt.py --tok T --ckpt K --out HF [--geometry small]
        [--threshold 0.9] [--decode-rule threshold|causal_fallback]

--decode-rule writes block_diffusion.decode_rule (clover convert turns it into
clover.decode_rule); left out, the key is not written and the export is what
it was before the option existed.
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from tokenizers import Tokenizer  # noqa: E402

from export import DECODE_RULES, export  # noqa: E402
from model import GEOMETRIES, CloverTrainModel, text_config  # noqa: E402
from train import load_ckpt  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tok", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--geometry", default="small", choices=sorted(GEOMETRIES))
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--threshold", type=float, default=0.9)
    ap.add_argument("--decode-rule", default=None, choices=DECODE_RULES,
                    help="the record's decode rule (default: not written; the engine's default)")
    a = ap.parse_args()
    tok = Tokenizer.from_file(os.path.join(a.tok, "tokenizer.json"))
    cfg = text_config(a.geometry, tok.get_vocab_size(), tok.token_to_id("<|endoftext|>"),
                      tok.token_to_id("<|im_end|>"))
    m = CloverTrainModel(cfg)
    step, _ = load_ckpt(m, a.ckpt)
    if step == 0:
        raise SystemExit(f"export_ckpt: no checkpoint in {a.ckpt}")
    export(m, a.tok, a.out, a.block, a.threshold, GEOMETRIES[a.geometry]["full_attention_interval"],
           a.decode_rule)
    print(f"export_ckpt: step {step} -> {a.out}")


if __name__ == "__main__":
    main()
