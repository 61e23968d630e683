#!/usr/bin/env python3
"""record.py (run by scripts/interop.sh): makes every file of
tests/interop/cases.json with clover, runs llama.cpp on it (llama_probe:
teacher-forced NLL and greedy ids; llama-perplexity: the perplexity of a
text) and writes tests/interop/llamacpp_expected.json.

A quantised file is also dequantised by llama.cpp's `gguf` package into an
f32 file of exactly the same weights, and llama.cpp runs that too: its
figures there are the same weights in f32 arithmetic, which clover's
quantised kernels (f32 activations against the exact weights) must match as
closely as the f32 files; llama.cpp's own quantised kernels round the
activations too (q8_K / q8_0 / bf16), which moves its NLL and, on these tiny
random models with close logits, its greedy ids."""
import argparse
import json
import pathlib
import re
import subprocess
import tempfile

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize

ROOT = pathlib.Path(__file__).resolve().parents[2]


def make(clover, commands, out):
    for argv in commands:
        args = [a.replace("OUT", str(out)).replace("TMP", f"{out}.tmp").replace("SRC", str(ROOT)) for a in argv]
        subprocess.run([clover, *args], check=True, capture_output=True, text=True)


def dequantized_copy(src, dst):
    """The same model with every tensor dequantised to f32 by gguf-py."""
    r = GGUFReader(str(src))
    w = GGUFWriter(str(dst), r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type"):
            continue
        if f.types[0] == GGUFValueType.ARRAY and not f.data:
            # gguf-py writes no empty array; a merge naming no token is ignored by both engines
            w.add_key_value(name, ["x y"], f.types[0], sub_type=GGUFValueType.STRING)
        elif f.types[0] == GGUFValueType.ARRAY:
            w.add_key_value(name, f.contents(), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(name, f.contents(), f.types[0])
    w.add_file_type(0)
    for t in r.tensors:
        w.add_tensor(t.name, np.asarray(dequantize(t.data, t.tensor_type), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def probe(a, f, ids, n):
    p = subprocess.run([a.probe, str(f), ids, str(n)], check=True, capture_output=True, text=True)
    r = json.loads(p.stdout)
    return {"mean_nll": r["mean_nll"], "nll": r["nll"], "greedy": r["greedy"]}


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
            rec = probe(a, f, ids, cases["n_greedy"])
            print(f"{name}: llama.cpp mean NLL {rec['mean_nll']:.6f}, greedy {rec['greedy']}")
            if not name.endswith("f32"):
                deq = pathlib.Path(tmp) / f"{name}.dequantized.gguf"
                dequantized_copy(f, deq)
                rec["dequantized_f32"] = probe(a, deq, ids, cases["n_greedy"])
                print(f"{name} dequantised to f32: llama.cpp mean NLL {rec['dequantized_f32']['mean_nll']:.6f}, "
                      f"greedy {rec['dequantized_f32']['greedy']}")
            out["models"][name] = rec
        for c in cases["perplexity"]:
            cmd = [a.perplexity, "-m", str(files[c["model"]]), "-f", str(ROOT / c["text"]), "-t", "2",
                   "--no-warmup"]
            if c["ctx"]:
                cmd += ["-c", str(c["ctx"]), "-b", str(c["ctx"])]
            # llama.cpp logs from a thread that exit can cut short: the final line is sometimes lost
            for _ in range(5):
                p = subprocess.run(cmd, check=True, capture_output=True, text=True)
                log = p.stdout + p.stderr
                if "Final estimate" in log:
                    break
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
