#!/usr/bin/env python3
"""ncusrc.py CSV [N]: the top N lines of `ncu --page source --csv` (SASS or CUDA view) by warp stall samples.

Written for 2026-12-24-pdlrows24 (the column names of ncu's source page are read from its header, not assumed):
prints the header's columns once, the total samples, then per line: samples, share, the source text, and the
line's largest stall columns."""
import csv
import sys


def num(v):
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return None


def main():
    path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with open(path, newline="", errors="replace") as f:
        rows = list(csv.reader(f))
    hi = next((i for i, r in enumerate(rows) if any(c.strip() in ("Source", "Address", "# Address") for c in r)), None)
    if hi is None:
        print(f"{path}: no header row with Source/Address ({len(rows)} rows)")
        for r in rows[:5]:
            print("   ", ",".join(r)[:180])
        return
    head = [c.strip() for c in rows[hi]]
    body = [r for r in rows[hi + 1:] if len(r) == len(head)]
    samp = [i for i, c in enumerate(head) if "Sampling (All" in c and "Not" not in c]
    if not samp:
        samp = [i for i, c in enumerate(head) if "Sampl" in c]
    if not samp:
        print(f"{path}: no sampling column; columns: {head}")
        return
    si = samp[0]
    src = head.index("Source") if "Source" in head else max(range(len(head)), key=lambda i: len(body[0][i]) if body else 0)
    stall = [i for i, c in enumerate(head) if c.lower().startswith("stall") or "stall_" in c.lower()]
    tot = sum(num(r[si]) or 0 for r in body)
    print(f"{path}: {len(body)} lines, column '{head[si]}', total {tot:.0f} samples; stall columns: {len(stall)}")
    top = sorted(body, key=lambda r: -(num(r[si]) or 0))[:n]
    for r in top:
        s = num(r[si]) or 0
        st = sorted(((num(r[i]) or 0, head[i]) for i in stall), reverse=True)[:3]
        sts = " ".join(f"{h.split('(')[0].strip()[:22]}={v:.0f}" for v, h in st if v > 0)
        addr = r[head.index("Address")] if "Address" in head else (r[0] if head[0] in ("#", "Line", "# Address") else "")
        print(f"{s:8.0f} {100 * s / max(tot, 1):5.1f}% {addr[:10]:10s} {r[src].strip()[:90]:90s} {sts}")


main()
