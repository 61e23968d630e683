#!/usr/bin/env python3
"""sass_phases.py CSV: a kernel's SASS (ncu --page source --csv --print-source sass) split at its barriers: per phase the
share of warp stall samples, instructions executed and the top stall reasons (written for pdlrows24)."""
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors='replace')))
hi = next(i for i, r in enumerate(rows) if r and r[0] == 'Address')
head = rows[hi]; body = [r for r in rows[hi+1:] if len(r) == len(head)]
si = head.index('Warp Stall Sampling (All Samples)'); ii = head.index('Instructions Executed'); src = head.index('Source')
stalls = [i for i, c in enumerate(head) if c.startswith('stall_') and 'Not Issued' not in c]
def n(v):
    try: return float(v.replace(',', ''))
    except: return 0.0
tot = sum(n(r[si]) for r in body)
print('total samples', tot, 'instructions', len(body))
# phases split at BAR.SYNC
seg = []; cur = {'start': 0, 'samp': 0, 'inst': 0, 'st': {}}
for k, r in enumerate(body):
    s = n(r[si]); cur['samp'] += s; cur['inst'] += n(r[ii])
    for i in stalls:
        cur['st'][head[i]] = cur['st'].get(head[i], 0) + n(r[i])
    if r[src].strip().startswith('BAR') or k == len(body) - 1:
        cur['end'] = k; cur['bar'] = r[src].strip()[:30]; seg.append(cur); cur = {'start': k+1, 'samp': 0, 'inst': 0, 'st': {}}
for c in seg:
    st = sorted(c['st'].items(), key=lambda x: -x[1])[:3]
    print(f"[{c['start']:5d}-{c['end']:5d}] {100*c['samp']/tot:5.1f}% samples, inst {c['inst']:10.0f}  {c['bar']:25s} " + ' '.join(f"{k[6:]}={v:.0f}" for k, v in st))
