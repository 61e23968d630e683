"""Issue 26's figures, measured with the clover binary alone on an exported
GGUF (no PyTorch): on the held-out prompts (heldout.txt; greedy, thinking off,
at most 96 tokens), per decoding (`--ar` and each threshold):

* tokens a pass: tokens emitted / passes, summed over the prompts; under the
  causal-fallback rule (--rules causal) also tokens / (passes + causal steps),
  each causal step being one autoregressive forward pass;
* answer NLL: the mean negative log-likelihood per answer token under the
  model's causal path, from `clover ppl --ids`: with n = prompt + answer ids and
  p = prompt ids, sum over the answer = mean(n) * (n-1) - mean(p) * (p-1);
  the block-diffusion answers' NLL is then compared with `--ar`'s;
* the answers themselves (the first few printed, all in --json).

    python3 tools/train/eval.py --gguf M.gguf [--thresholds 0.9 0.7 0.5 0.3]
        [--rules threshold causal] [--json OUT]

Runs are named by threshold ("0.9": the threshold rule, as before) and
"causal@0.9" (the causal-fallback rule at that threshold).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def heldout(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


def clover(args: list[str], exe: str) -> dict:
    r = subprocess.run([exe] + args, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"eval: clover {' '.join(args[:3])} failed: {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout)


def sum_nll(ids: list[int], gguf: str, exe: str, threads: int) -> float:
    """Summed NLL of ids[1:] given their prefixes (causal trunk)."""
    if len(ids) < 2:
        return 0.0
    r = clover(["ppl", "-m", gguf, "--ids", ",".join(map(str, ids)), "--json",
                "--threads", str(threads), "--device", "cpu"], exe)
    return r["mean_nll"] * (len(ids) - 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--clover", default=os.path.join(ROOT, "build", "clover"))
    ap.add_argument("--heldout", default=os.path.join(HERE, "heldout.txt"))
    ap.add_argument("--tok", default=os.path.join(HERE, "tok"), help="the GGUF's tokenizer folder")
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.9, 0.7, 0.5, 0.3])
    ap.add_argument("--rules", nargs="+", default=["threshold"], choices=["threshold", "causal"],
                    help="the decoding rules run at each threshold (clover run --rule)")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="the first N prompts")
    ap.add_argument("--show", type=int, default=4, help="answers printed per decoding")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if not os.path.exists(a.gguf):
        raise SystemExit(f"eval: no such model file: {a.gguf}")
    prompts = heldout(a.heldout)[:a.limit]
    runs = {"ar": ["--ar"]}
    names = []
    for rule in a.rules:
        for t in a.thresholds:
            name = str(t) if rule == "threshold" else f"causal@{t}"
            runs[name] = ["--threshold", str(t), "--rule", rule]
            names.append(name)
    out = {"gguf": os.path.basename(a.gguf), "max_tokens": a.max_tokens, "runs": {}}
    prompt_nll = {}
    # the training template (gen.py) must be what clover renders: checked per prompt
    # against clover's own prompt ids when the tokenizer library is at hand
    try:
        from tokenizers import Tokenizer
        sys.path.insert(0, HERE)
        from gen import Gen
        tok = Tokenizer.from_file(os.path.join(a.tok, "tokenizer.json"))
    except ImportError:
        tok = None
        print("eval: no tokenizers module; the template check is skipped", file=sys.stderr)
    for name, extra in runs.items():
        rows, toks, passes, steps, nll_sum = [], 0, 0, 0, 0.0
        for p in prompts:
            r = clover(["run", "-m", a.gguf, "-p", p, "--no-think", "--max-tokens", str(a.max_tokens),
                        "--json", "--threads", str(a.threads), "--no-visual"] + extra, a.clover)
            pid, aid = r["prompt_ids"], r["ids"]
            if tok is not None and tok.encode(Gen.render([("user", p), ("assistant", "")], None)[0]).ids != pid:
                raise SystemExit(f"eval: clover's prompt ids for {p!r} differ from gen.py's template")
            if p not in prompt_nll:
                prompt_nll[p] = sum_nll(pid, a.gguf, a.clover, a.threads)
            s = sum_nll(pid + aid, a.gguf, a.clover, a.threads) - prompt_nll[p]
            n = len(aid)
            cs = r["stats"].get("causal_steps", 0)
            rows.append({"prompt": p, "text": r["text"], "tokens": n, "passes": r["stats"]["passes"],
                         "causal_steps": cs, "nll": round(s / max(n, 1), 4)})
            toks, passes, steps, nll_sum = toks + n, passes + r["stats"]["passes"], steps + cs, nll_sum + s
        res = {"tokens": toks, "passes": passes, "causal_steps": steps,
               "tokens_per_pass": round(toks / max(passes, 1), 3),
               "tokens_per_pass_or_step": round(toks / max(passes + steps, 1), 3),
               "answer_nll": round(nll_sum / max(toks, 1), 4), "answers": rows}
        out["runs"][name] = res
        print(f"{name:>4}: {toks} tokens / {passes} passes = {res['tokens_per_pass']:.2f} tok/pass"
              + (f", / (passes + {steps} causal steps) = {res['tokens_per_pass_or_step']:.2f}" if steps else "")
              + f", answer NLL {res['answer_nll']:.3f}", flush=True)
        for row in rows[:a.show]:
            print(f"      {row['prompt']!r} -> {row['text'][:160]!r}", flush=True)
    ar = out["runs"]["ar"]["answer_nll"]
    print("run          tok/pass  tok/(pass+step)  answer-NLL  x AR")
    for t in names:
        r = out["runs"][t]
        r["nll_ratio"] = round(r["answer_nll"] / ar, 3) if ar > 0 else None
        print(f"{t:>11}  {r['tokens_per_pass']:8.2f}  {r['tokens_per_pass_or_step']:15.2f}  "
              f"{r['answer_nll']:10.3f}  {r['nll_ratio']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
