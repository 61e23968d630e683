#!/usr/bin/env python3
"""Compare two fixture trees as make_fixtures.py writes them (A = the
reference, e.g. tests/fixtures; B = a regeneration, e.g. on another machine):

    python3 tools/reference/compare_fixtures.py A B [--quiet]

Regenerating on another CPU or BLAS build changes the last bits of float32
results (see clover_ref/tolerance.py), so bytes are the wrong test across
machines; everything that is not a computed float must still be identical:

* the file lists;
* the model directories (hf/: weights, configs, tokenizer) byte for byte:
  they are seeded inputs, not results (safetensors mismatches are itemised
  per tensor);
* in each manifest.json every key, string, integer, boolean and null (ids,
  tokens, passes, fixed rows, finish reasons, coreset sets, routed experts,
  encodings, shapes, input floats such as the record and the options);
* `data/*.f32` arrays within TRUNK_REL (1e-4) of each array's scale,
  max |b - a| <= 1e-4 * max(1, max |a|), the bound SPEC 1.1 sets the engine;
* computed floats inline in the manifests: `confidences` within 1e-5
  (absolute), `per_token_nll` / coreset `totals` within 1e-4 of the list's
  scale, `mean_nll` / `perplexity` within 1e-4 relative, and the decision
  `margins` / `coreset_margin` (how far each decision was from flipping:
  diagnostics, not engine outputs) within 1e-4 * max(1, |a|) + 1e-5.

Prints one line per file with the worst difference, and exits 1 when
anything differs beyond its tolerance (2 on a usage error). Needs numpy only.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clover_ref.tolerance import CONFIDENCE_ABS, TRUNK_REL, scale_error  # noqa: E402

# Floats inline in a manifest that the reference computed; any other float
# (record, options, overrides: inputs) must be identical.
#   key -> (kind, tolerance)   kind: "abs" per element, "scale" of the list,
#   "rel" of max(1, |a|) per value
COMPUTED = {
    "confidences": ("abs", CONFIDENCE_ABS),
    "per_token_nll": ("scale", TRUNK_REL),
    "totals": ("scale", TRUNK_REL),
    "mean_nll": ("rel", TRUNK_REL),
    "perplexity": ("rel", TRUNK_REL),
}
# What make_fixtures writes under its --out directory (tests/fixtures also
# holds a README.md, which is not generated).
NAMES = ("tiny_clover", "tiny_ar", "tokenizer")


class Report:
    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.failed = 0

    def line(self, ok: bool, rel: str, what: str) -> None:
        if not ok:
            self.failed += 1
        if not ok or not self.quiet:
            print(f"{'ok  ' if ok else 'FAIL'} {rel}: {what}")


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def list_files(root: str) -> list[str]:
    out = []
    for d, _, fs in os.walk(root):
        for f in fs:
            out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


# --- safetensors (no torch needed) -------------------------------------------

DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "F16": np.dtype("<f2"),
          "BF16": np.dtype("<u2"), "I64": np.dtype("<i8"), "I32": np.dtype("<i4")}


def read_safetensors(path: str):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", None)
    tensors = {}
    for name, h in header.items():
        lo, hi = h["data_offsets"]
        dt = DTYPES.get(h["dtype"])
        raw = body[lo:hi]
        if dt is None:
            tensors[name] = (h["dtype"], h["shape"], raw)
            continue
        a = np.frombuffer(raw, dt)
        if h["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = (h["dtype"], h["shape"], a)
    return meta, tensors


def compare_safetensors(a: str, b: str) -> list[str]:
    meta_a, ta = read_safetensors(a)
    meta_b, tb = read_safetensors(b)
    problems = []
    if meta_a != meta_b:
        problems.append(f"metadata {meta_a} != {meta_b}")
    if sorted(ta) != sorted(tb):
        problems.append(f"tensor names differ: only in A {sorted(set(ta) - set(tb))}, "
                        f"only in B {sorted(set(tb) - set(ta))}")
    for name in sorted(set(ta) & set(tb)):
        (da, sa, xa), (db, sb, xb) = ta[name], tb[name]
        if (da, sa) != (db, sb):
            problems.append(f"{name}: {da}{sa} != {db}{sb}")
        elif isinstance(xa, bytes) or isinstance(xb, bytes):
            if xa != xb:
                problems.append(f"{name}: bytes differ")
        elif xa.tobytes() != xb.tobytes():
            diff = int(np.count_nonzero(xa.view(np.uint8) != xb.view(np.uint8)))
            problems.append(f"{name}: values differ (max |b - a| "
                            f"{float(np.max(np.abs(xb.astype(np.float64) - xa))):.3g}, "
                            f"{diff} bytes)")
    return problems


# --- manifests --------------------------------------------------------------


class ManifestDiff:
    """Walks two parsed manifests in step; collects mismatches (exact content
    and floats beyond tolerance separately) and the worst tolerance use of
    the computed floats."""

    def __init__(self):
        self.mismatches: list[str] = []         # content that must be identical
        self.float_mismatches: list[str] = []   # computed floats beyond tolerance
        self.worst: dict[str, tuple[float, float]] = {}   # kind -> (used fraction, error)

    def note(self, what: str, err: float, tol: float) -> bool:
        used = err / tol if tol > 0 else (0.0 if err == 0 else math.inf)
        if what not in self.worst or used > self.worst[what][0]:
            self.worst[what] = (used, err)
        return err <= tol

    def walk(self, a, b, path: list) -> None:
        where = "/".join(str(p) for p in path) or "(top)"
        key = next((p for p in reversed(path) if isinstance(p, str)), "")
        if isinstance(a, dict) and isinstance(b, dict):
            if list(a) != list(b):
                self.mismatches.append(f"{where}: keys {list(a)} != {list(b)}")
                return
            for k in a:
                self.walk(a[k], b[k], path + [k])
            return
        if isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                self.mismatches.append(f"{where}: {len(a)} entries != {len(b)}")
                return
            if key in COMPUTED and COMPUTED[key][0] in ("abs", "scale") and a and \
                    all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in a + b):
                kind, tol = COMPUTED[key]
                if kind == "abs":
                    err = float(np.max(np.abs(np.float64(b) - np.float64(a))))
                else:
                    err = scale_error(b, a)
                if not self.note(key, err, tol):
                    self.float_mismatches.append(
                        f"{where}: {key} differ by {err:.3g} ({kind} tolerance {tol:g})")
                return
            for i, (x, y) in enumerate(zip(a, b)):
                self.walk(x, y, path + [i])
            return
        if isinstance(a, float) or isinstance(b, float):
            self.walk_float(a, b, path, where, key)
            return
        if type(a) is not type(b) or a != b:
            self.mismatches.append(f"{where}: {a!r} != {b!r}")

    def walk_float(self, a, b, path, where, key) -> None:
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b)):
            self.mismatches.append(f"{where}: {a!r} != {b!r}")
            return
        in_margins = "margins" in path or key == "coreset_margin"
        if in_margins or key in COMPUTED:
            tol = TRUNK_REL * max(1.0, abs(float(a)))
            if in_margins:
                # a margin moves with the quantity it measures: confidences
                # (threshold, fallback, sample boundary) by CONFIDENCE_ABS,
                # logit gaps by the trunk tolerance of their value.
                tol += CONFIDENCE_ABS
            err = abs(float(b) - float(a))
            label = f"margins.{key}" if in_margins else key
            if not self.note(label, err, tol):
                self.float_mismatches.append(f"{where}: {a!r} != {b!r} (tolerance {tol:.3g})")
            return
        if a != b:
            self.mismatches.append(f"{where}: input float {a!r} != {b!r} (must be identical)")


def compare_manifest(root_a: str, root_b: str, rel: str, report: Report) -> None:
    pa, pb = os.path.join(root_a, rel), os.path.join(root_b, rel)
    with open(pa, encoding="utf-8") as f:
        ma = json.load(f)
    with open(pb, encoding="utf-8") as f:
        mb = json.load(f)
    d = ManifestDiff()
    d.walk(ma, mb, [])
    worst = ", ".join(f"{k} {e:.2e} ({u:.0%} of tolerance)" for k, (u, e) in sorted(d.worst.items()))
    identical = read_bytes(pa) == read_bytes(pb)
    found = d.mismatches + d.float_mismatches
    if found:
        shown = "; ".join(found[:8]) + (f"; ... {len(found) - 8} more" if len(found) > 8 else "")
        if not d.mismatches:
            shown += (" -- every id, token, pass, finish reason and set is identical: only "
                      f"computed floats exceed their tolerance (worst: {worst})")
        report.line(False, rel, shown)
    else:
        report.line(True, rel, "identical bytes" if identical else
                    f"non-float content identical; computed floats: {worst or 'none'}")


def compare_array(root_a: str, root_b: str, rel: str, report: Report) -> None:
    a = np.fromfile(os.path.join(root_a, rel), dtype="<f4")
    b = np.fromfile(os.path.join(root_b, rel), dtype="<f4")
    if a.shape != b.shape:
        report.line(False, rel, f"{a.size} floats != {b.size}")
        return
    if a.tobytes() == b.tobytes():
        report.line(True, rel, "identical bytes")
        return
    err = scale_error(b, a)
    scale = max(1.0, float(np.max(np.abs(a)))) if a.size else 1.0
    report.line(err <= TRUNK_REL, rel,
                f"max |b - a| = {err:.2e} of the scale {scale:.3g} (tolerance {TRUNK_REL:g})")


def compare_trees(root_a: str, root_b: str, quiet: bool = False) -> int:
    """Returns the number of files that differ beyond tolerance (0: same)."""
    report = Report(quiet)
    fa, fb = [], []
    for name in NAMES:
        for root, files in ((root_a, fa), (root_b, fb)):
            if os.path.isdir(os.path.join(root, name)):
                files += [os.path.join(name, f) for f in list_files(os.path.join(root, name))]
            else:
                report.line(False, name, f"missing in {root}")
    for rel in sorted(set(fa) ^ set(fb)):
        report.line(False, rel, f"only in {'A' if rel in fa else 'B'}")
    for rel in sorted(set(fa) & set(fb)):
        pa, pb = os.path.join(root_a, rel), os.path.join(root_b, rel)
        if rel.endswith(".f32"):
            compare_array(root_a, root_b, rel, report)
        elif os.path.basename(rel) == "manifest.json":
            compare_manifest(root_a, root_b, rel, report)
        elif rel.endswith(".safetensors"):
            problems = compare_safetensors(pa, pb)
            report.line(not problems, rel, "identical bytes" if not problems else
                        "; ".join(problems[:6]) + ("" if len(problems) <= 6 else
                                                   f"; ... {len(problems) - 6} more"))
        else:
            xa, xb = read_bytes(pa), read_bytes(pb)
            if xa == xb:
                report.line(True, rel, "identical bytes")
            else:
                la, lb = xa.decode("utf-8", "replace").splitlines(), \
                    xb.decode("utf-8", "replace").splitlines()
                i = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
                report.line(False, rel, f"differs from line {i + 1}: "
                            f"{(la[i] if i < len(la) else '<end>')[:80]!r} != "
                            f"{(lb[i] if i < len(lb) else '<end>')[:80]!r}")
    n = len(set(fa) | set(fb))
    print(f"compare_fixtures: {n} files, {report.failed} differ beyond tolerance")
    return report.failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="reference fixture tree (e.g. tests/fixtures)")
    ap.add_argument("b", help="fixture tree to check (e.g. make_fixtures --out DIR)")
    ap.add_argument("--quiet", action="store_true", help="print only mismatches and the total")
    args = ap.parse_args()
    for d in (args.a, args.b):
        if not os.path.isdir(d):
            print(f"compare_fixtures: {d}: not a directory", file=sys.stderr)
            return 2
    return 1 if compare_trees(args.a, args.b, args.quiet) else 0


if __name__ == "__main__":
    sys.exit(main())
