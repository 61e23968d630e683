#!/usr/bin/env bash
# Issue 24, branch dec: where a decode step's ~5.6 ms go (bench/bench_cuda_decode.c), measurement only: no kernel
# and no default changed, so nothing to switch off.
# Run from the source root on the device (the pack is .gpu-dec/, ignored by git; this file is also committed as
# bench/device-runs/2026-12-06-dec/run.sh):
#   run(command="bash .gpu-dec/run.sh", carry=[".gpu-dec"], timeout_s=300)      ~2-2.5 min
# STEPS (default "o s n"):
#  o  bench_cuda_decode without a model: every op of a GDN and an attention layer of the 35B-A3B geometry at 1 row
#     and at 16 rows (the stacked AR step), each in a CUDA graph over weight copies, with bytes and % of the copy
#     bandwidth, and the sums x 30 GDN + x 10 attention layers (runs while the file is synthesised)
#  s  bench_cuda_decode MODEL (the 35B-A3B AR synthetic file, made here first): the backend's decode step after a
#     512-token prompt (max_context 4096): seq_commit with the logits back; the batched commit of 1 and of 16
#     sequences with device picks (the stacked pass that serve and bench_batch take, replayed from its graphs);
#     the lone pass captured into a graph of our own (node count; replay time with PDL on / off); eager
#  n  ncu --metrics gpu__time_duration.sum over ONE eager decode pass (CLOVER_BENCH_DECODE_NCU=1, profile from
#     start off), summed per kernel name by python (top 25 + the total), if the run is under 75 s so far
#     (SM clocks not locked: --clock-control none)
# Outputs: $OUT/summary.txt and $OUT/logs.tgz.
# Predictions (read from the kernels, before any run; "before": bench/device-runs/2026-12-05-verify serve25,
# bench_batch AR N=1 pass 5.609 ms, N=16 21.41 ms), also printed as [pred ...] beside each bench line:
#  - o, 1 row: the ops sum to ~3.4 ms a step: a GDN layer ~77 us (in-proj 27 MB ~16 us, out ~8, mix ~10, the MoE
#    half ~37: router f32 2.1 MB ~5, experts gate+up fused ~9, down ~8, shexp ~9, route/combine/norms ~3 each),
#    an attention layer ~82 us, the head (540 MB) ~300 us (41% of copy bw, as the 1/4-head line of
#    cuda-matmul-notes.md), the logits copy ~25 us. Small products far below the copy bw (launch + tail bound).
#    The attention forward at max_kv 262144 (the preset's n_ctx: the backend's max_context unless the caller sets
#    one) slower than at max_kv 513 if its split count follows max_kv.
#  - o, 16 rows: ~10.5 ms (~100 distinct experts a layer: gate+up pair ~75 us, down ~45; the four GDN in-proj
#    chunk products ~43 us, alpha and beta ~8 us each for 0.1 MB; the head in chunk form ~500 us) against
#    bench_batch's 21.4 ms.
#  - s: seq_commit ~5.6 ms; batched 1 sequence ~5.5 ms, 16 ~21 ms (as bench_batch); the replayed pass ~4.5 ms with PDL, ~4.9 without; ~540 nodes
#    (13 kernels a GDN layer, 14 an attention one: the mmv quantises x inside, no separate kernel), + ~4 copies;
#    eager: enqueue ~2.5 ms, ~6.5 ms to the sync. The gap sum-of-ops (~3.4)
#    -> replay (~4.5) = dependent-kernel latency the op bench hides (8 copies of one op back to back overlap).
#  - n: ~540 kernels summing to ~3-3.5 ms; the largest totals: the head, the Q8_0 mmv (in-proj, out), the Q4_K
#    expert kernels, the GDN recurrence.
set -uo pipefail
PACK=${PACK:-.gpu-dec}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/declogs; rm -rf $O; mkdir -p $O
D=/tmp/dec; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$R/summary.txt"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
STEPS=${STEPS:-o s n}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
B=$D/bin/bench_cuda_decode
say "start $(date -u +%T) steps: $STEPS pack $(cat "$PACK/COMMIT" 2>/dev/null)"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
F=/tmp/synth35-ar.gguf # serve25's name: reused when a warm machine still has it (~35 s to make: written to .part first)
if has s || has n; then ( [ -s $F ] || { timeout 100 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion \
  -o $F.part > "$O/synth.log" 2>&1 && mv $F.part $F; } ) & fi
if has o; then
  timeout 60 "$B" > "$O/ops.log" 2>&1; say "== ops (bench_cuda_decode) rc=$? at +$(el)s"
  grep -vE "^$" "$O/ops.log" | tee -a "$S" > /dev/null
fi
if has s || has n; then wait; say "synth done at +$(el)s: $(tail -1 "$O/synth.log")"; fi
if has s && [ -s $F ]; then
  CLOVER_BENCH_DECODE_ROWS=0 timeout 60 "$B" $F > "$O/step.log" 2>&1; say "== step (bench_cuda_decode MODEL) rc=$? at +$(el)s"
  grep -E "==|STEP|graphs replayed|error|fail" "$O/step.log" | tee -a "$S"
fi
if has n && [ -s $F ] && [ "$(el)" -lt 75 ] && command -v ncu > /dev/null; then
  CLOVER_BENCH_DECODE_ROWS=0 CLOVER_BENCH_DECODE_NCU=1 timeout 70 ncu --profile-from-start off --clock-control none --csv \
    --metrics gpu__time_duration.sum "$B" $F > "$O/ncu.csv" 2> "$O/ncu.err"; say "== ncu one eager decode pass rc=$? at +$(el)s"
  python3 - "$O/ncu.csv" <<'PY' 2>&1 | tee -a "$S"
import csv, sys, collections
rows = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
tot = collections.defaultdict(float); cnt = collections.Counter(); scale = {"nsecond": 1e-3, "usecond": 1, "msecond": 1e3}
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum": continue
    k = r["Kernel Name"].strip(); d = 0  # drop the trailing argument list (parens may nest in it)
    for j in range(len(k) - 1, -1, -1):
        d += (k[j] == ")") - (k[j] == "(")
        if d == 0: k = k[:j] if j else k; break
    k = k.replace("void ", "")[:80]
    tot[k] += float(r["Metric Value"].replace(",", "")) * scale.get(r["Metric Unit"], 1); cnt[k] += 1
print("ncu: %d kernels, %.1f us summed GPU time (eager, one decode pass; pred ~540 kernels, ~3-3.5 ms)" % (sum(cnt.values()), sum(tot.values())))
for k, v in sorted(tot.items(), key=lambda x: -x[1])[:25]:
    print("  %9.1f us  %4d x %7.2f us  %s" % (v, cnt[k], v / cnt[k], k))
PY
  tail -3 "$O/ncu.err" | tee -a "$S"
fi
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
