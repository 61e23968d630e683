#!/usr/bin/env bash
# Issue 24, branch k3: the preview pass's coreset kernel (moe_coreset_warp.cu: 32 row warps at once, the same
# float64 sums in the same order; CLOVER_CUDA_CORESET=0 = the previous kernel) and the GDN block operator in two
# launches (gdn_block_fused.cu: conv + L2 norm, then heads + gated norm with the state and v staged by cp.async;
# CLOVER_CUDA_GDN_BLOCK=0 = the previous four launches). Both new forms are meant to give the old forms' bits.
# Run from the source root on the device (the pack is .gpu-k3/, ignored by git; this file is also committed as
# bench/device-runs/2026-12-05-k3/run.sh):
#   run(command="bash .gpu-k3/run.sh", carry=[".gpu-k3"], timeout_s=300)      ~2-3 min, <= 240 s by its limits
# STEPS (default "t m r l e n"):
#  t  test_cuda_preview (with the new cases coreset_forms and gdn_block_forms), test_cuda_gdn, _matmul, _backend,
#     _engine, _batch; then test_cuda_preview's backend cases with both switches at 0 (the old forms still pass)
#  m  compute-sanitizer memcheck: test_cuda_preview coreset_forms,gdn_block_forms (CLOVER_TEST_SMALL: a few
#     cases each), golden_previews, batched_equals_alone
#  r  racecheck: test_cuda_preview coreset_forms,gdn_block_forms (CLOVER_TEST_SMALL)
#  l  CLOVER_BENCH_LAYER=1 bench_cuda_matmul: new forms, then both switches 0 (the old forms)
#  e  bench_cuda_preview on the 35B-A3B synthetic file (made here first, ~25 s, in the background): new, old
#  n  ncu of the new kernels (one launch each, SOL + occupancy) when the run is under 180 s so far
# Outputs: $OUT/summary.txt and $OUT/logs.tgz.
# Predictions (written before any run; "before" = bench/device-runs/2026-12-04-verify/RESULTS.md, H200):
#  - t: every test passes; coreset_forms and gdn_block_forms report every case bit for bit equal to the old
#    kernels and within the oracle bounds. Risk: a contraction the compiler makes differently in the fused
#    kernels (then gdn_block_forms names the geometry; the bound vs the oracle still holds).
#  - m: 0 errors. r: 0 hazards.
#  - l: "coreset + routing inside it" 45.3 -> ~10 us (the coreset ~5 us, the routing 4 us as before);
#    "gdn block operator" 40.1 -> ~10 us; with the switches at 0 both as before (~45, ~40); the rest unchanged.
#  - e: preview 32 rows first pass with coreset 11.75 -> ~9.3 ms, without 10.28 -> ~9.1 ms; half fixed
#    11.77 -> ~9.3 / 10.41 -> ~9.2 ms; commit 16.49 unchanged; block-diffusion 80.1 -> ~95 tok/s. Old switches:
#    as before (11.75 / 10.28 ms).
set -uo pipefail
PACK=${PACK:-.gpu-k3}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/k3logs; rm -rf $O; mkdir -p $O
D=/tmp/k3; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$R/summary.txt"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
STEPS=${STEPS:-t m r l e n}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
OLD="CLOVER_CUDA_CORESET=0 CLOVER_CUDA_GDN_BLOCK=0"
say "start $(date -u +%T) steps: $STEPS pack $(cat "$PACK/COMMIT" 2>/dev/null)"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
F=/tmp/q35d.gguf
if has e; then ( [ -s $F ] || timeout 90 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $F > "$O/synth.log" 2>&1 ) & fi
if has t; then
  for n in test_cuda_preview test_cuda_gdn test_cuda_matmul test_cuda_backend test_cuda_engine test_cuda_batch; do
    [ -x "$D/bin/$n" ] || { say "test $n: not in the pack"; continue; }
    s=$(date +%s); timeout 60 "$D/bin/$n" > "$O/t_$n.log" 2>&1; rc=$?
    say "test $n rc=$rc $(( $(date +%s) - s ))s $(tail -1 "$O/t_$n.log")"
    [ $rc = 0 ] || grep -E "FAIL|differ|error" "$O/t_$n.log" | head -8 | tee -a "$S"
  done
  grep -E "coreset kernel vs|two launches vs four" "$O/t_test_cuda_preview.log" | tee -a "$S"
  s=$(date +%s)
  env $OLD CLOVER_TEST_ONLY=golden_previews,batched_equals_alone,graph_equals_eager,resolve_vs_cpu \
    timeout 60 "$D/bin/test_cuda_preview" > "$O/t_preview_old.log" 2>&1; rc=$?
  say "test test_cuda_preview (switches 0: old forms) rc=$rc $(( $(date +%s) - s ))s $(tail -1 "$O/t_preview_old.log")"
fi
SAN_OK=1
command -v compute-sanitizer > /dev/null || { SAN_OK=0; { has m || has r; } && say "compute-sanitizer: not on PATH"; }
san() { # TOOL LIMIT CASES [small]
  local tool=$1 lim=$2 cases=$3 small=${4:-} log="$O/$1-$3.log" s=$(date +%s)
  [ $SAN_OK = 1 ] || return 1
  env ${small:+CLOVER_TEST_SMALL=1} CLOVER_TEST_ONLY=$cases timeout "$lim" compute-sanitizer --tool "$tool" \
    "$D/bin/test_cuda_preview" > "$log" 2>&1; local rc=$?
  say "$tool test_cuda_preview [$cases]${small:+ small} rc=$rc $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1) $(grep -E 'passed, [0-9]+ failed|SKIP' "$log" | tail -1)"
  if grep -qE "Device not supported|not supported on this|Unable to|LibraryNotLoaded" "$log"; then
    SAN_OK=0; say "compute-sanitizer cannot run here: $(grep -m1 -E 'not supported|Unable|Library' "$log")"; return 1
  fi
  [ $rc = 124 ] && say "  ($tool hit its ${lim}s limit: a partial run)"
  grep -m6 -E "Invalid|Race|Hazard|hazard|Error:|out of bounds|misaligned" "$log" | tee -a "$S"
}
if has m; then
  san memcheck 45 coreset_forms,gdn_block_forms small
  san memcheck 30 golden_previews,batched_equals_alone
fi
has r && san racecheck 50 coreset_forms,gdn_block_forms small
# the layer lines with the before figure and the prediction beside them
annot() { # $1: new|old
  awk -v f="$1" '
    /coreset \+ routing inside it/ { $0 = $0 "   [before 45.3 us; predicted " (f == "new" ? "~10" : "~45") " us]" }
    /gdn block operator/           { $0 = $0 "   [before 40.1 us; predicted " (f == "new" ? "~10" : "~40") " us]" }
    /routing \(no coreset\)/       { $0 = $0 "   [before 4.05 us; predicted ~4 us, unchanged]" }
    { print }'
}
if has l; then
  say "== layer bench, new forms"
  timeout 40 env CLOVER_BENCH_LAYER=1 "$D/bin/bench_cuda_matmul" 2>&1 | annot new | tee -a "$S" > "$O/layer_new.log"
  say "== layer bench, old forms ($OLD)"
  timeout 40 env $OLD CLOVER_BENCH_LAYER=1 "$D/bin/bench_cuda_matmul" 2>&1 | annot old | tee -a "$S" > "$O/layer_old.log"
fi
pannot() { # $1: new|old
  awk -v f="$1" '
    /first pass, coreset/    { $0 = $0 "   [before 11.75 ms; predicted " (f == "new" ? "~9.3" : "~11.7") "]" }
    /first pass, no coreset/ { $0 = $0 "   [before 10.28 ms; predicted " (f == "new" ? "~9.1" : "~10.3") "]" }
    /half fixed, coreset/    { $0 = $0 "   [before 11.77 ms; predicted " (f == "new" ? "~9.3" : "~11.8") "]" }
    /half fixed, no coreset/ { $0 = $0 "   [before 10.41 ms; predicted " (f == "new" ? "~9.2" : "~10.4") "]" }
    /commit of a 32-row/     { $0 = $0 "   [before 16.49 ms; predicted ~16.5, unchanged]" }
    /block-diffusion tokens/ { $0 = $0 "   [before 80.1; predicted " (f == "new" ? "~95" : "~80") "]" }
    { print }'
}
if has e; then
  wait; say "synth done $(date -u +%T) ($(el)s)"
  timeout 60 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_new.log" 2>&1
  say "bench_cuda_preview, new forms rc=$?"; grep -E "ms|tok/s" "$O/preview_new.log" | pannot new | tee -a "$S"
  timeout 60 env $OLD "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_old.log" 2>&1
  say "bench_cuda_preview, old forms ($OLD) rc=$?"; grep -E "ms|tok/s" "$O/preview_old.log" | pannot old | tee -a "$S"
fi
if has n && [ "$(el)" -lt 180 ] && command -v ncu > /dev/null; then
  CLOVER_BENCH_LAYER=1 timeout 45 ncu -k regex:'k_coreset_warp|k_block_conv_l2|k_block_head_fused' -c 3 \
    --section SpeedOfLight --section Occupancy "$D/bin/bench_cuda_matmul" > "$O/ncu.log" 2>&1
  say "ncu rc=$? (durations of the new kernels, one eager launch each):"
  grep -E "k_coreset_warp|k_block_conv_l2|k_block_head_fused|Duration|Achieved Occupancy" "$O/ncu.log" | head -12 | tee -a "$S"
fi
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
