"""Summaries of diag.py's JSON files (PLAN.md, "Diagnosis at step 1257").

    python3 tools/train/diag_report.py traces tools/train/runs/diag-1257-traces.json
    python3 tools/train/diag_report.py calib tools/train/runs/diag-1257-calib-gen.json
    python3 tools/train/diag_report.py table tools/train/runs/diag-2400-k*.json
"""
from __future__ import annotations

import gzip
import json
import sys
from collections import defaultdict

def load(path: str) -> dict:
    """A diag.py JSON, plain or gzipped (the runs/ copies of the larger ones)."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


DISTS = ["1-1", "2-2", "3-3", "4-7", "8-15", "16-32"]


def dist_bin(d: int) -> str:
    for k in DISTS:
        lo, hi = map(int, k.split("-"))
        if lo <= d <= hi:
            return k
    return "16-32"


def traces(path: str) -> None:
    d = load(path)
    for th in map(str, d["thresholds"]):
        ev = [e for p in d["prompts"] for e in p["runs"][th]["events"]]
        st = [s for p in d["prompts"] for s in p["runs"][th]["stutters"]]
        passes = sum(p["runs"][th]["passes"] for p in d["prompts"])
        ar_nll = sum(sum(p["ar_nll"]) for p in d["prompts"]) / sum(len(p["ar_nll"]) for p in d["prompts"])
        tot = sum(e["nll"] for e in ev)
        if d.get("max_distance") is not None:
            print(f"(experiment: threshold fixes within {d['max_distance']} rows of a fixed row"
                  f"{', the fallback too' if d.get('window_fallback') else ''})")
        if d.get("fallback", "best") != "best":
            print(f"(experiment: fallback {d['fallback']})")
        steps = sum(p["runs"][th].get("causal_steps", 0) for p in d["prompts"])
        print(f"== threshold {th}: {len(ev)} tokens, {passes} passes ({len(ev) / passes:.2f} tok/pass), "
              f"answer NLL {tot / len(ev):.3f} (AR {ar_nll:.3f}, x{tot / len(ev) / ar_nll:.1f})")
        if steps:
            print(f"  + {steps} causal steps (fallback causal): {len(ev) / (passes + steps):.2f} tokens "
                  f"a pass or step")
        for name, f in (("above threshold", lambda e: not e["fallback"]), ("fallback", lambda e: e["fallback"])):
            es = [e for e in ev if f(e)]
            if not es:
                continue
            s = sum(e["nll"] for e in es)
            bad = sum(e["nll"] > 2.3 for e in es)
            print(f"  {name:16s}: {len(es):4d} tokens ({len(es) / len(ev):.0%}), mean NLL {s / len(es):.2f}, "
                  f"{s / tot:.0%} of the answers' NLL, {bad} with causal p < 0.1")
        gap = [e for e in ev if e["fallback"] and e["right"] > 0]
        fb = [e for e in ev if e["fallback"]]
        if fb:
            gs = sum(e["nll"] for e in gap)
            same = sum(e["tok"] == e["causal_top"] for e in gap)
            far = sum(e["conf"] > float(th) for e in fb)
            print(f"  gap fills (fallback, a fixed row to the right): {len(gap)} tokens "
                  f"({len(gap) / len(ev):.0%} of the tokens, {len(gap) / len(fb):.0%} of the fallback), "
                  f"{gs / tot:.0%} of the answers' NLL, = causal pick {same / max(len(gap), 1):.0%}"
                  + (f"; fallback rows above the threshold (out of the window): {far}" if far else ""))
        print("  by rows since the last fixed row at fix time (1 = adjacent):  n  / mean NLL / share of NLL / fallback share")
        by = defaultdict(list)
        for e in ev:
            by[dist_bin(e["dist"])].append(e)
        for k in DISTS:
            es = by.get(k, [])
            if es:
                s = sum(e["nll"] for e in es)
                print(f"    {k:>6}: {len(es):4d} / {s / len(es):5.2f} / {s / tot:4.0%} / "
                      f"{sum(e['fallback'] for e in es) / len(es):.0%}")
        same = sum(s["same_pass"] for s in st)
        later = [s for s in st if not s["same_pass"]]
        print(f"  stutters (a word repeated 1-2 rows on, a span the AR answer lacks): {len(st)}; "
              f"fixed in the same pass as the twin {same}, later {len(later)}")
        if later:
            fb = sum(s["second"]["fallback"] for s in later)
            gap = sum(s["second"]["dist"] > 1 for s in later)
            print(f"    later ones: {fb} by the fallback (no row above the threshold), "
                  f"{gap} with a masked row between it and the last fixed row; second's confidence "
                  f"median {sorted(s['second']['conf'] for s in later)[len(later) // 2]:.3f}")


def table(paths: list[str]) -> None:
    """One line per (traces file, threshold): the rule, tokens a pass (and a
    pass or causal step), answer NLL x AR, the fallback's share of the tokens
    and of the NLL, the gap fills' (fallback rows with a fixed row to their
    right) share of the tokens and of the NLL, and how often they equal the
    causal pick. A markdown table for PLAN.md."""
    print("| rule | th | tokens a pass | NLL x `--ar` | fallback: tokens; NLL | gap fills: tokens; NLL; = causal pick |")
    print("|---|---|---|---|---|---|")
    for path in paths:
        d = load(path)
        k = d.get("max_distance")
        rule = "SPEC 3" if k is None or k >= 32 else f"K={k}" + (" (+fallback)" if d.get("window_fallback") else "")
        if d.get("fallback", "best") != "best":
            rule += f", fallback {d['fallback']}"
        for th in map(str, d["thresholds"]):
            ev = [e for p in d["prompts"] for e in p["runs"][th]["events"]]
            passes = sum(p["runs"][th]["passes"] for p in d["prompts"])
            steps = sum(p["runs"][th].get("causal_steps", 0) for p in d["prompts"])
            ar = sum(sum(p["ar_nll"]) for p in d["prompts"]) / sum(len(p["ar_nll"]) for p in d["prompts"])
            tot = sum(e["nll"] for e in ev)
            fb = [e for e in ev if e["fallback"]]
            gap = [e for e in fb if e["right"] > 0]
            same = sum(e["tok"] == e["causal_top"] for e in gap)
            # "causal": an AR step after each pass that fixed nothing (counted apart:
            # an engine could make it in the same forward as that pass)
            tpp = f"{len(ev) / passes:.2f}" + (f" ({len(ev) / (passes + steps):.2f} with {steps} AR steps)"
                                              if steps else "")
            print(f"| {rule} | {th} | {tpp} | {tot / len(ev) / ar:.1f}x | "
                  f"{len(fb) / len(ev):.0%}; {sum(e['nll'] for e in fb) / tot:.0%} | "
                  f"{len(gap) / len(ev):.0%}; {sum(e['nll'] for e in gap) / tot:.0%}; "
                  f"{same / len(gap):.0%} |" if gap else
                  f"| {rule} | {th} | {tpp} | {tot / len(ev) / ar:.1f}x | "
                  f"{len(fb) / len(ev):.0%}; {sum(e['nll'] for e in fb) / max(tot, 1e-9):.0%} | 0 |")


def calib(path: str) -> None:
    d = load(path)
    T = d["tally"]

    def agg(filt, key):
        out = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
        for r in T:
            if filt(r):
                a = out[key(r)]
                for i, f in enumerate(("n", "conf", "correct", "nll")):
                    a[i] += r[f]
        return out

    pats = sorted({r["pattern"] for r in T})
    print(f"source {d['source']}, {d['n']} exchanges, step {d['step']}")
    print(f"{'pattern':12s} {'rows':>7s} conf   acc    NLL  | acc if conf>0.9 (rows) | >0.99 (rows) | ECE")
    for p in pats:
        a = agg(lambda r: r["pattern"] == p, lambda r: 0)[0]
        h = agg(lambda r: r["pattern"] == p and r["bin"][0] >= 0.9, lambda r: 0)[0]
        h2 = agg(lambda r: r["pattern"] == p and r["bin"][0] >= 0.99, lambda r: 0)[0]
        bins = agg(lambda r: r["pattern"] == p, lambda r: tuple(r["bin"]))
        ece = sum(abs(b[1] - b[2]) for b in bins.values()) / a[0]
        print(f"{p:12s} {a[0]:7d} {a[1] / a[0]:.3f} {a[2] / a[0]:.3f} {a[3] / a[0]:5.2f} | "
              f"{h[2] / max(h[0], 1):.3f} ({h[0]:6d})        | {h2[2] / max(h2[0], 1):.3f} ({h2[0]:6d}) | {ece:.3f}")
    print("\nby rows since the last fixed row (R0: nothing fixed to the right in the block, R1: something):")
    print("  conf/acc [acc among conf>0.9, rows]")
    for p in pats:
        if p == "causal":
            continue
        for rf in (False, True):
            o = agg(lambda r: r["pattern"] == p and r["right_fixed"] == rf, lambda r: r["dist"])
            h = agg(lambda r: r["pattern"] == p and r["right_fixed"] == rf and r["bin"][0] >= 0.9,
                    lambda r: r["dist"])
            cells = []
            for k in DISTS:
                if k in o and o[k][0] >= 30:
                    a, hh = o[k], h.get(k, [0, 0, 0, 0])
                    cells.append(f"{k}: {a[1] / a[0]:.2f}/{a[2] / a[0]:.2f} [{hh[2] / max(hh[0], 1):.2f} {hh[0]}]")
            if cells:
                print(f"  {p:11s} R{int(rf)} " + "  ".join(cells))
    print("\nreliability: bin: mean conf / accuracy (rows)")
    for p in pats:
        o = agg(lambda r: r["pattern"] == p, lambda r: tuple(r["bin"]))
        print(f"  {p:11s} " + "  ".join(f"{k[0]:.2f}+: {a[1] / a[0]:.3f}/{a[2] / a[0]:.3f} ({a[0]})"
                                        for k, a in sorted(o.items())))


if __name__ == "__main__":
    if sys.argv[1] == "table":
        table(sys.argv[2:])
    else:
        {"traces": traces, "calib": calib}[sys.argv[1]](sys.argv[2])
