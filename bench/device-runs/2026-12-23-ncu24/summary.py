#!/usr/bin/env python3
"""summary.py NCU.csv: ncu --csv --page raw rows (one per kernel launch) grouped by kernel name and grid, in order of
their total time: count, us each, DRAM % of peak, DRAM and L2 bytes, achieved occupancy, issue-active %, registers,
the occupancy limits, and the three largest stall reasons (warp cycles stalled per issued instruction)."""
import csv, sys
from collections import OrderedDict

rows = list(csv.reader(open(sys.argv[1], errors="replace")))
hdr_i = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
if hdr_i is None:
    print("no ncu table in", sys.argv[1]); sys.exit(0)
hdr = rows[hdr_i]
data = [r for r in rows[hdr_i + 1:] if len(r) == len(hdr) and r[hdr.index("ID")].strip().isdigit()]
col = {h: i for i, h in enumerate(hdr)}
def f(r, k):
    try: return float(r[col[k]].replace(",", ""))
    except (KeyError, ValueError): return float("nan")
groups = OrderedDict()
for r in data:
    key = (r[col["Kernel Name"]][:60], r[col.get("Grid Size", col["Kernel Name"])] if "Grid Size" in col else "")
    groups.setdefault(key, []).append(r)
stall = [h for h in hdr if h.startswith("smsp__average_warps_issue_stalled_") and "selected" not in h]
out = []
for (name, grid), rs in groups.items():
    n = len(rs)
    avg = lambda k: sum(f(r, k) for r in rs) / n
    t = avg("gpu__time_duration.sum") / 1e3  # ns -> us
    st = sorted(((avg(h), h.replace("smsp__average_warps_issue_stalled_", "").replace("_per_issue_active.ratio", ""))
                 for h in stall), reverse=True)[:3]
    out.append((t * n, "%-60s %-14s %4d %8.2f us  dram %5.1f%% %7.2f MB  l2 %8.2f MB  occ %5.1f%%  issue %5.1f%%  "
                "regs %3.0f lim r/s %2.0f/%2.0f  stalls %s" % (
                    name, grid, n, t, avg("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
                    avg("dram__bytes_read.sum") / 1e6, avg("lts__t_bytes.sum") / 1e6,
                    avg("sm__warps_active.avg.pct_of_peak_sustained_active"),
                    avg("smsp__issue_active.avg.pct_of_peak_sustained_active"),
                    avg("launch__registers_per_thread"), avg("launch__occupancy_limit_registers"),
                    avg("launch__occupancy_limit_shared_mem"), " ".join("%s %.1f" % (s, v) for v, s in st))))
total = sum(x for x, _ in out)
print("%d launches, %.1f us in all (ncu's serialized durations)" % (len(data), total))
for tt, line in sorted(out, reverse=True):
    print("%6.1f%% %s" % (100 * tt / total if total else 0, line))
