"""Issue 16's Done-when figures, measured with the clover binary on the 20
held-out prompts (greedy, 96 tokens, thinking off): tokens per pass at each
threshold (tokens emitted / passes, summed over the prompts), and the mean NLL
per answer token under the model's own causal path (PyTorch, the checkpoint
the GGUF came from; tests/test_train.py ties PyTorch's causal NLL to
`clover ppl`) of the block-diffusion answers against the `--ar` answers.

    python3 tools/train/measure.py --gguf M.gguf --ckpt K --tok T --thresholds 0.9 0.5 \
        [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

from evaluate import answer_nll, chat_prompt, heldout  # noqa: E402
from model import CloverTrainModel, text_config  # noqa: E402
from train import load_ckpt  # noqa: E402


def clover_answer(clover, gguf, prompt, extra, threads):
    r = subprocess.run([clover, "run", "-m", gguf, "-p", prompt, "--no-think", "--max-tokens", "96",
                        "--json", "--threads", str(threads)] + extra,
                       check=True, capture_output=True, text=True, timeout=600)
    return json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tok", required=True)
    ap.add_argument("--geometry", default="small")
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.9, 0.5])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clover", default=os.path.join(ROOT, "build", "clover"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--run-block", type=int, default=None,
                    help="clover run --block N (a divisor of the record's block size)")
    a = ap.parse_args()
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(a.tok, "tokenizer.json"))
    cfg = text_config(a.geometry, tok.get_vocab_size(), tok.token_to_id("<|endoftext|>"),
                      tok.token_to_id("<|im_end|>"))
    model = CloverTrainModel(cfg)
    step, _ = load_ckpt(model, a.ckpt)
    model.eval()
    pad = tok.token_to_id("<|endoftext|>")
    ps = heldout()
    runs = {"ar": ["--ar"]}
    blk = ["--block", str(a.run_block)] if a.run_block else []
    runs.update({str(t): ["--threshold", str(t)] + blk for t in a.thresholds})
    out = {"step": step, "gguf": os.path.basename(a.gguf), "block": a.run_block or a.block,
           "runs": {}}
    for name, extra in runs.items():
        res = [clover_answer(a.clover, a.gguf, p["prompt"], extra, a.threads) for p in ps]
        prompts = [r["prompt_ids"] for r in res]
        mine = [tok.encode(chat_prompt(p["prompt"])).ids for p in ps]
        if prompts != mine:
            raise SystemExit("measure: clover's prompt ids differ from the trainer's template")
        answers = [r["ids"] for r in res]
        with torch.no_grad():
            nll = answer_nll(model, prompts, answers, a.block, pad)
        toks = sum(len(x) for x in answers)
        passes = sum(r["stats"]["passes"] for r in res)
        out["runs"][name] = {
            "tokens": toks, "passes": passes,
            "tokens_per_pass": round(toks / max(passes, 1), 3),
            "mean_nll": round(sum(nll) / len(nll), 4),
            "answers": [{"prompt": p["prompt"], "text": r["text"], "tokens": len(r["ids"]),
                         "passes": r["stats"]["passes"], "nll": round(n, 4)}
                        for p, r, n in zip(ps, res, nll)]}
        print(f"{name}: {toks} tokens / {passes} passes = {toks / max(passes, 1):.2f} tok/pass, "
              f"answer NLL {sum(nll) / len(nll):.3f}", flush=True)
    ar = out["runs"]["ar"]["mean_nll"]
    for t in map(str, a.thresholds):
        r = out["runs"][t]
        r["nll_ratio"] = round(r["mean_nll"] / ar, 3)
        print(f"threshold {t}: {r['tokens_per_pass']:.2f} tok/pass, NLL x{r['nll_ratio']} of AR's")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
