#!/usr/bin/env python3
"""ncu_table.py CSV: one line a kernel of an `ncu --csv --page raw --metrics ...` file: every metric column (its
name shortened, its unit from ncu's units row), then the kernel's name. prof26's step n prints both of its ncu
passes (the sizes and the stall reasons) with it."""
import csv
import sys

SHORT = [("smsp__warp_issue_stalled_", ""), ("_per_warp_active.pct", ""), ("gpu__time_duration.sum", "time"),
         ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram%"), ("dram__bytes.sum", "dram"),
         ("sm__warps_active.avg.pct_of_peak_sustained_active", "occ%"),
         ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm%"), ("launch__registers_per_thread", "regs"),
         ("launch__grid_size", "grid"), ("launch__occupancy_limit_registers", "lim_reg"),
         ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue%")]


def short(name):
    for a, b in SHORT:
        name = name.replace(a, b)
    return name[:10]


def main(path):
    rows = list(csv.reader(line for line in open(path) if line.startswith('"')))
    if len(rows) < 2 or "ID" not in rows[0] or "Kernel Name" not in rows[0]:
        print("no ncu rows in %s" % path)
        return 1
    head, units = rows[0], rows[1]
    cols = [i for i, k in enumerate(head) if "__" in k]
    print("%3s " % "#" + " ".join("%10s" % short(head[i]) for i in cols) + "  kernel")
    print("%3s " % "" + " ".join("%10s" % units[i][:10] for i in cols))
    kid, kname = head.index("ID"), head.index("Kernel Name")
    for n, r in enumerate(r for r in rows[1:] if r[kid].isdigit()):
        print("%3d " % n + " ".join("%10s" % r[i][:10] for i in cols) + "  " + r[kname][:70])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
