#!/usr/bin/env python3
"""record.py (run by scripts/interop.sh): makes every file of
tests/interop/cases.json with clover, runs llama.cpp on it (llama_probe:
teacher-forced NLL and greedy ids; llama-perplexity: the perplexity of a
text) and writes tests/interop/llamacpp_expected.json."""
import argparse
import json
import pathlib
import re
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]


def make(clover, argv, out):
    args = [a.replace("OUT", str(out)).replace("SRC", str(ROOT)) for a in argv]
    subprocess.run([clover, *args], check=True, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clover", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--perplexity", required=True)
    ap.add_argument("--llama-version", required=True)
    a = ap.parse_args()
    cases = json.loads((ROOT / "tests/interop/cases.json").read_text())
    ids = ",".join(map(str, cases["ids"]))
    out = {"llama_cpp": a.llama_version, "models": {}, "perplexity": []}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, argv in cases["models"].items():
            f = pathlib.Path(tmp) / f"{name}.gguf"
            make(a.clover, argv["make"], f)
            files[name] = f
            p = subprocess.run([a.probe, str(f), ids, str(cases["n_greedy"])], check=True, capture_output=True,
                               text=True)
            r = json.loads(p.stdout)
            out["models"][name] = {"mean_nll": r["mean_nll"], "nll": r["nll"], "greedy": r["greedy"]}
            print(f"{name}: llama.cpp mean NLL {r['mean_nll']:.6f}, greedy {r['greedy']}")
        for c in cases["perplexity"]:
            cmd = [a.perplexity, "-m", str(files[c["model"]]), "-f", str(ROOT / c["text"]), "-t", "2",
                   "--no-warmup"]
            if c["ctx"]:
                cmd += ["-c", str(c["ctx"]), "-b", str(c["ctx"])]
            p = subprocess.run(cmd, check=True, capture_output=True, text=True)
            log = p.stdout + p.stderr
            chunks = int(re.search(r"calculating perplexity over (\d+) chunks, n_ctx=(\d+)", log).group(1))
            n_ctx = int(re.search(r"calculating perplexity over \d+ chunks, n_ctx=(\d+)", log).group(1))
            m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", log)
            if not m:
                raise SystemExit(f"record.py: no perplexity in the output of {cmd}:\n{log[-2000:]}")
            out["perplexity"].append({**c, "n_ctx": n_ctx, "chunks": chunks,
                                      "tokens_scored": chunks * (n_ctx - n_ctx // 2 - 1),
                                      "ppl": float(m.group(1)), "ppl_error": float(m.group(2))})
            print(f"perplexity {c}: {m.group(1)} +/- {m.group(2)} over {chunks} chunks of {n_ctx}")
    dst = ROOT / "tests/interop/llamacpp_expected.json"
    dst.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
