"""The causal-fallback rule in clover (`clover run --rule causal`,
src/engine/generate_causal.c) against its PyTorch reference, diag.py's
trace(fallback="causal", max_distance=1, window_fallback=True), token for
token on the held-out prompts (greedy, thinking off, at most 96 tokens), at
each threshold. Needs torch (.venv-train) and the checkpoint the GGUF was
exported from (float32 export: `clover convert --type f32`).

For each prompt the prompt ids are clover's (--json prompt_ids), checked
against gen.py's template; the answers, passes and causal steps are compared.
Where the answers differ, the first differing token's margins are printed:
in the reference's trace, the pass that fixed that row, whether by the
fallback, its confidence against the threshold and its top-2 probabilities;
and clover's confidence for its own token there.

    .venv-train/bin/python tools/train/check_rule.py --gguf /tmp/demo-f32.gguf \\
        --ckpt .gpu-train/ckpt [--thresholds 0.95 0.9] [--limit 8] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)


def clover_run(exe, gguf, prompt, threshold, max_tokens, threads):
    r = subprocess.run([exe, "run", "-m", gguf, "-p", prompt, "--no-think", "--max-tokens", str(max_tokens),
                        "--json", "--threads", str(threads), "--no-visual", "--device", "cpu",
                        "--rule", "causal", "--threshold", str(threshold)],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"check_rule: clover run failed: {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout)


def margins(tr, i, threshold, block):
    """The reference's record of answer row i: the pass that fixed it and its margins."""
    b = tr["blocks"][i // block]
    r = i % block
    for k, ps in enumerate(b["passes"]):
        if r in ps["fixed"]:
            ent = next((e for e in ps["pending"] if e["row"] == r), None)
            top = ent["top"] if ent else []
            return {"block": i // block, "row": r, "pass": k + 1, "by_fallback": ps["by_fallback"],
                    "preview_pick": ent["pick"] if ent else None, "conf": ent["conf"] if ent else None,
                    "conf_minus_threshold": round(ent["conf"] - threshold, 4) if ent else None,
                    "top2_gap": round(top[0][1] - top[1][1], 4) if len(top) > 1 else None,
                    "causal_pick": ps.get("causal_pick", {}).get(r)}
    return {"block": i // block, "row": r}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--ckpt", default=os.path.join(ROOT, ".gpu-train", "ckpt"))
    ap.add_argument("--clover", default=os.path.join(ROOT, "build", "clover"))
    ap.add_argument("--heldout", default=os.path.join(HERE, "heldout.txt"))
    ap.add_argument("--geometry", default="demo")
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.95, 0.9])
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    import torch
    import diag
    from eval import heldout
    from gen import Gen
    torch.set_num_threads(a.threads)
    model, tok, step = diag.load(a.ckpt, geometry=a.geometry)
    prompts = heldout(a.heldout)[:a.limit]
    out = {"gguf": os.path.basename(a.gguf), "step": step, "max_tokens": a.max_tokens, "runs": []}
    agree = total = 0
    for t in a.thresholds:
        for p in prompts:
            c = clover_run(a.clover, a.gguf, p, t, a.max_tokens, a.threads)
            pid = c["prompt_ids"]
            if tok.encode(Gen.render([("user", p), ("assistant", "")], None)[0]).ids != pid:
                raise SystemExit(f"check_rule: clover's prompt ids for {p!r} differ from gen.py's template")
            tr = diag.trace(model, tok, pid, t, a.max_tokens, block=a.block, fallback="causal",
                            max_distance=1, window_fallback=True)
            ca, ra = c["ids"], tr["answer"]
            first = next((i for i in range(min(len(ca), len(ra))) if ca[i] != ra[i]),
                         None if len(ca) == len(ra) else min(len(ca), len(ra)))
            row = {"threshold": t, "prompt": p, "tokens": len(ca), "ref_tokens": len(ra),
                   "passes": c["stats"]["passes"], "ref_passes": tr["passes"],
                   "causal_steps": c["stats"].get("causal_steps", 0), "ref_causal_steps": tr["causal_steps"],
                   "same": first is None}
            if first is not None:
                row["first_difference"] = first
                row["clover_token"] = ca[first] if first < len(ca) else None
                row["ref_token"] = ra[first] if first < len(ra) else None
                row["clover_conf"] = round(c["confidences"][first], 4) if first < len(ca) else None
                row["ref"] = margins(tr, first, t, a.block) if first < len(ra) else None
            out["runs"].append(row)
            total += 1
            agree += first is None
            same = row["same"] and row["passes"] == row["ref_passes"] and \
                row["causal_steps"] == row["ref_causal_steps"]
            print(f"{t:<5} {p[:40]!r:44} {'same' if same else 'DIFF'}: {len(ca)} tokens, "
                  f"{row['passes']} passes + {row['causal_steps']} steps (ref {len(ra)}, {tr['passes']} + "
                  f"{tr['causal_steps']})" + ("" if first is None else
                                               f"; first difference at {first}: {json.dumps(row.get('ref'))}"
                                               f", clover conf {row.get('clover_conf')}"), flush=True)
    out["agree"], out["total"] = agree, total
    print(f"check_rule: {agree} of {total} answers identical token for token")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
