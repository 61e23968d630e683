#!/usr/bin/env python3
"""Write tests/fixtures/tiny_clover_quant/: what the reference computes on
the quantised conversions of tests/fixtures/tiny_clover/hf (clover convert
--type q8_0 and --type q4_k_m), for tests/unit/test_golden_quant.c.

    python3 tools/reference/make_quant_fixtures.py [--out DIR] [--clover build/clover]

(make_fixtures.py runs this after the float fixtures.) The expected values
are independent of clover's arithmetic: transformers runs on the file's own
weights, dequantised by llama.cpp's `gguf` package, with clover's 8-bit
activation rounding applied where clover applies it (clover_ref/quant.py
states the rule), so SPEC's 1e-4 bound applies again. Two sets per file:
`act8` (a CPU with AVX2, the integer path on) and `f32` (CLOVER_NO_SIMD or
another CPU). Passes: the causal commit of tiny_clover's prompt and its
three previews (the same ids as tiny_clover/manifest.json).

tiny_clover is 64 wide, so q4_k_m falls back to Q8_0 there; the K-quant
path is tests/fixtures/tiny_clover_k/ (k_fixture): a 256-wide model whose
q4_k_m file has Q4_K experts and token_embd and a Q6_K output, committed as
the GGUF clover wrote, with the same two sets of expected values.

Rows whose router top-k gap (k-th minus (k+1)-th router logit, over the
experts the row may use) is below MIN_ROUTER_GAP in some layer could route
differently under a last-bit difference; they are listed (`loose_rows`),
and the test checks only that they are finite. Every other row is checked
at 1e-4 of the logit scale.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from clover_ref import quant  # noqa: E402
from clover_ref.checkpoint import CloverModel, set_deterministic  # noqa: E402
from clover_ref.fixture_io import FixtureDir, finite_or_none  # noqa: E402
from clover_ref.preview import preview  # noqa: E402
from clover_ref.session import Session  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
MIN_ROUTER_GAP = 1e-3   # router logits; last-bit differences are ~1e-6 of them
TYPES = ("q8_0", "q4_k_m")
RULES = ("act8", "f32")


def convert(clover: str, hf_dir: str, qtype: str, path: str) -> None:
    r = subprocess.run([clover, "convert", hf_dir, "-o", path, "--type", qtype], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"clover convert --type {qtype}: {r.stderr.strip()}")


def tensor_digest(path: str) -> str:
    """sha256 over every tensor's name, type and bytes: two files with the same digest compute the same."""
    from gguf import GGUFReader
    h = hashlib.sha256()
    for t in GGUFReader(path).tensors:
        h.update(t.name.encode() + b"\0" + t.tensor_type.name.encode() + b"\0")
        h.update(np.ascontiguousarray(t.data).tobytes())
    return h.hexdigest()


@torch.no_grad()
def router_gaps(cm, inputs, k: int, allowed_per_layer=None) -> np.ndarray:
    """[rows]: each row's smallest top-k router gap over the layers."""
    gaps = None
    for li, x in inputs:
        w = cm.model.model.layers[li].mlp.gate.weight
        logits = torch.nn.functional.linear(x, w).double()
        if allowed_per_layer is not None:
            allowed = torch.as_tensor(allowed_per_layer[li], dtype=torch.bool)
            logits = logits.masked_fill(~allowed[None, :], float("-inf"))
        top = torch.sort(logits, dim=-1, descending=True).values
        g = (top[:, k - 1] - top[:, k]).numpy()
        g = np.where(np.isfinite(g), g, np.inf)   # fewer than k+1 allowed experts: nothing to flip
        gaps = g if gaps is None else np.minimum(gaps, g)
    return gaps


@torch.no_grad()
def run_rule(cm, qw, rule, causal_ids, previews):
    k = cm.config.num_experts_per_tok
    out = {}
    with quant.activation_rule(cm, qw, rule):
        quant.EXPERT_INPUTS.clear()
        s = Session(cm)
        logits = s.commit(causal_ids, want_logits=True)
        gaps = router_gaps(cm, quant.EXPERT_INPUTS, k)
        out["causal"] = (logits, gaps)
        for pc in previews:
            quant.EXPERT_INPUTS.clear()
            trace = {}
            top_p = "record" if pc["coreset"] else None
            lg = preview(cm, s, pc["block_ids"], record_block_size=pc["record_block_size"],
                         coreset_top_p=top_p, trace=trace)
            allowed = [lt["allowed"] for lt in trace["layers"]] if pc["coreset"] else None
            out[pc["name"]] = (lg, router_gaps(cm, quant.EXPERT_INPUTS, k, allowed))
    return out


SPREAD_SEEDS = 3


def act8_spread(cm, qw, rule, causal_ids, previews, res, loose_of=None) -> dict:
    """Under act8, {case: the largest change of the logits (relative to the
    case's logit scale, rows with a small router gap left out, as the test
    does) when every rounded input moves by one float32 ulp}, over
    SPREAD_SEEDS draws: what float summation order alone does through the
    code flips of the 8-bit rounding, so no correct implementation can be
    held closer than this. {} for the f32 rule."""
    if rule != "act8":
        return {}
    worst = {case: 0.0 for case in res}
    for seed in range(1, SPREAD_SEEDS + 1):
        quant.PERTURB = torch.Generator().manual_seed(seed)
        try:
            pert = run_rule(cm, qw, rule, causal_ids, previews)
        finally:
            quant.PERTURB = None
        for case, (lg, gaps) in res.items():
            keep = gaps >= MIN_ROUTER_GAP
            a, b = np.asarray(lg, dtype=np.float64), np.asarray(pert[case][0], dtype=np.float64)
            scale = max(1.0, float(np.max(np.abs(a))))
            d = np.abs(a - b)[keep]
            worst[case] = max(worst[case], float(d.max()) / scale if d.size else 0.0)
    return worst


def quant_fixture(out: str, clover: str) -> None:
    set_deterministic()
    src = os.path.join(out, "tiny_clover")
    hf_dir = os.path.join(src, "hf")
    with open(os.path.join(src, "manifest.json")) as f:
        base = json.load(f)
    causal_ids = base["causal"]["ids"]
    previews = [{k: p[k] for k in ("name", "block_ids", "record_block_size", "coreset")} for p in base["preview"]]
    fx = FixtureDir(os.path.join(out, "tiny_clover_quant"))
    man = {
        "format": 1,
        "description": "The reference on tiny_clover's quantised conversions: transformers with the file's "
                       "own weights dequantised by llama.cpp's gguf package, and clover's 8-bit activation "
                       "rounding where clover applies it (rule act8) or nowhere (rule f32). Written by "
                       "tools/reference/make_quant_fixtures.py.",
        "source": "tiny_clover",
        "activation_rule": quant.__doc__.split("Activations (", 1)[1].split('`rule="act8"`', 1)[0].strip(),
        "min_router_gap": MIN_ROUTER_GAP,
        "causal_ids": causal_ids,
        "previews": previews,
        "types": {},
    }
    seen = {}   # tensor digest -> type name whose arrays it shares
    with tempfile.TemporaryDirectory() as tmp:
        for qtype in TYPES:
            path = os.path.join(tmp, f"{qtype}.gguf")
            convert(clover, hf_dir, qtype, path)
            digest = tensor_digest(path)
            entry = {"tensor_digest": digest}
            if digest in seen:
                entry["same_tensors_as"] = seen[digest]
                man["types"][qtype] = entry
                print(f"{qtype}: the same tensors as {seen[digest]}")
                continue
            seen[digest] = qtype
            cm = CloverModel(hf_dir)
            qw = quant.QuantisedWeights(cm, path)
            qw.load()
            entry["tensors"] = {n: t for n, t, _ in qw.report}
            entry["worst_weight_rel_rms"] = max(r for _, _, r in qw.report)
            for rule in RULES:
                res = run_rule(cm, qw, rule, causal_ids, previews)
                spread = act8_spread(cm, qw, rule, causal_ids, previews, res)
                r_entry = {}
                for case, (lg, gaps) in res.items():
                    loose = [int(i) for i in np.nonzero(gaps < MIN_ROUTER_GAP)[0]]
                    r_entry[case] = {"logits": fx.array(f"{qtype}_{rule}_{case}_logits", lg),
                                     "loose_rows": loose, "min_router_gap": finite_or_none(float(np.min(gaps)))}
                    if spread:
                        r_entry[case]["act8_spread"] = spread[case]
                    print(f"{qtype} {rule} {case}: {len(lg)} rows, smallest router gap {np.min(gaps):.3g}, "
                          f"loose rows {loose}" + (f", act8 spread {spread[case]:.3g}" if spread else ""))
                entry[rule] = r_entry
            man["types"][qtype] = entry
    fx.manifest(man)


def k_fixture(out: str, clover: str) -> None:
    """tests/fixtures/tiny_clover_k/: a 256-wide model (tiny_models.CLOVER_K_TEXT)
    converted by clover --type q4_k_m, so its experts and token_embd really are
    Q4_K and output Q6_K (tiny_clover is too narrow for any K-quant). The file
    itself is committed (model.gguf; the bf16 checkpoint would be ~3 MB), with
    the reference's logits on its dequantised weights, both rules."""
    from clover_ref import tiny_models
    set_deterministic()
    with open(os.path.join(out, "tiny_clover", "manifest.json")) as f:
        base = json.load(f)
    causal_ids = base["causal"]["ids"]
    previews = [{k: p[k] for k in ("name", "block_ids", "record_block_size", "coreset")} for p in base["preview"]]
    # A two-row preview: every product in it has at most two rows, so under
    # act8 clover's integer path runs everywhere a quantised weight is (Q4_K
    # experts, Q8_0 attention/GDN/shared expert, Q6_K output); the 31-, 8-
    # and 4-row passes keep f32 activations throughout (no expert gets <= 2
    # rows there: their act8 and f32 sets are the same numbers).
    previews.append({"name": "preview_b2", "block_ids": previews[-1]["block_ids"][:2],
                     "record_block_size": 8, "coreset": False})
    fx = FixtureDir(os.path.join(out, "tiny_clover_k"))
    gguf_path = os.path.join(fx.path, "model.gguf")
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = os.path.join(tmp, "hf")
        tiny_models.build_clover(hf_dir, seed=tiny_models.SEED_CLOVER_K, text=tiny_models.CLOVER_K_TEXT,
                                 full_attention_interval=2)
        for fn in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(out, "tiny_clover", "hf", fn), "rb") as src, \
                    open(os.path.join(hf_dir, fn), "wb") as dst:
                dst.write(src.read())
        convert(clover, hf_dir, "q4_k_m", gguf_path)
        cm = CloverModel(hf_dir)
        qw = quant.QuantisedWeights(cm, gguf_path)
        qw.load()
        types = {n: t for n, t, _ in qw.report}
        for need, t in (("blk.0.ffn_gate_exps.weight", "Q4_K"), ("blk.1.ffn_down_exps.weight", "Q4_K"),
                        ("token_embd.weight", "Q4_K"), ("output.weight", "Q6_K")):
            if types.get(need) != t:
                raise SystemExit(f"tiny_clover_k: {need} is {types.get(need)}, want {t}")
        man = {
            "format": 1,
            "description": "A 256-wide tiny Clover model converted by clover --type q4_k_m (model.gguf), "
                           "and the reference on it: transformers with the file's own weights dequantised "
                           "by llama.cpp's gguf package, clover's 8-bit activation rounding where clover "
                           "applies it (rule act8) or nowhere (rule f32). Written by "
                           "tools/reference/make_quant_fixtures.py.",
            "gguf": "model.gguf",
            "tensor_digest": tensor_digest(gguf_path),
            "tensors": types,
            "worst_weight_rel_rms": max(r for _, _, r in qw.report),
            "min_router_gap": MIN_ROUTER_GAP,
            "causal_ids": causal_ids,
            "previews": previews,
        }
        for rule in RULES:
            res = run_rule(cm, qw, rule, causal_ids, previews)
            spread = act8_spread(cm, qw, rule, causal_ids, previews, res)
            r_entry = {}
            for case, (lg, gaps) in res.items():
                loose = [int(i) for i in np.nonzero(gaps < MIN_ROUTER_GAP)[0]]
                r_entry[case] = {"logits": fx.array(f"{rule}_{case}_logits", lg),
                                 "loose_rows": loose, "min_router_gap": finite_or_none(float(np.min(gaps)))}
                if spread:
                    r_entry[case]["act8_spread"] = spread[case]
                print(f"tiny_clover_k {rule} {case}: {len(lg)} rows, smallest router gap {np.min(gaps):.3g}, "
                      f"loose rows {loose}" + (f", act8 spread {spread[case]:.3g}" if spread else ""))
            man[rule] = r_entry
    fx.manifest(man)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures"))
    ap.add_argument("--clover", default=os.path.join(REPO, "build", "clover"),
                    help="the clover binary whose converter writes the quantised files")
    ap.add_argument("--k-only", action="store_true", help="write only tests/fixtures/tiny_clover_k")
    args = ap.parse_args()
    if not os.path.exists(args.clover):
        raise SystemExit(f"{args.clover}: no clover binary (build it, or pass --clover)")
    hf_logging.set_verbosity_error()
    if not args.k_only:
        quant_fixture(args.out, args.clover)
    k_fixture(args.out, args.clover)


if __name__ == "__main__":
    main()
