#!/usr/bin/env python3
"""ncu_table.py CSV: one line a kernel of an `ncu --csv --page raw --metrics ...` file: the wanted metrics that the
file has (time in us, DRAM MB and % of peak, occupancy, SM %, registers, grid, waves; issue % and the stall reasons),
then the kernel's name. The raw page also carries every device attribute, the whole launch config and each metric's
avg / max / min / sum: only the columns listed in WANT are printed (a first version printed all ~180 of them).
prof26's step n prints both of its ncu passes with it."""
import csv
import sys

WANT = [("gpu__time_duration.sum", "us", 1e-3), ("dram__bytes.sum", "MB", 1e-6),
        ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram%", 1),
        ("sm__warps_active.avg.pct_of_peak_sustained_active", "occ%", 1),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm%", 1),
        ("launch__registers_per_thread", "regs", 1), ("launch__grid_size", "grid", 1),
        ("launch__waves_per_multiprocessor", "waves", 1),
        ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue%", 1)]
STALL = "smsp__warp_issue_stalled_"


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def main(path):
    rows = list(csv.reader(line for line in open(path) if line.startswith('"')))
    if len(rows) < 2 or "ID" not in rows[0] or "Kernel Name" not in rows[0]:
        print("no ncu rows in %s" % path)
        return 1
    head = rows[0]
    cols = [(head.index(k), lab, sc) for k, lab, sc in WANT if k in head]
    cols += [(i, k[len(STALL):].split("_per_warp")[0][:9], 1) for i, k in enumerate(head) if k.startswith(STALL)]
    print("%3s " % "#" + " ".join("%9s" % lab for _, lab, _ in cols) + "  kernel")
    kid, kname = head.index("ID"), head.index("Kernel Name")
    for n, r in enumerate(r for r in rows[1:] if r[kid].isdigit()):
        vals = [num(r[i]) for i, _, _ in cols]
        print("%3d " % n + " ".join("%9s" % ("-" if v is None else "%.4g" % (v * sc))
                                    for v, (_, _, sc) in zip(vals, cols)) + "  " + r[kname][:60])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
