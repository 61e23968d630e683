#!/usr/bin/env bash
# Issue 24, branch k4l: the wide-row integer product (src/cuda/matmul_igemm_wide.cu: Q8_0 64 outputs x 64 rows a
# block, Q4_K/Q5_K 128 x 64; dense, 64+ rows, rows pre-quantised; meant to give matmul_igemm.cu's bits by construction). Written on
# 2026-12-03 with no device time left: UNVERIFIED, OFF by default; CLOVER_CUDA_IGEMM_WIDE=1 turns it on.
# Run from the source root on the device (the pack is .gpu-k4l/, ignored by git; this file is also committed as
# bench/device-runs/2026-12-06-k4l/run.sh):
#   run(command="bash .gpu-k4l/run.sh", carry=[".gpu-k4l"], timeout_s=300)      ~2-3 min, <= 200 s by its limits
# STEPS (default "t m r l e n"):
#  t  test_cuda_matmul as is (test_igemm_wide toggles the switch itself: wide vs old bit for bit), then the whole
#     test_cuda_matmul, _backend, _engine with CLOVER_CUDA_IGEMM_WIDE=1 (every 64+-row Q8_0 chunk_ws product
#     through the wide kernel: test_row_invariance's 64-row case then checks it against the 1-row decode bits)
#  m  compute-sanitizer memcheck: test_cuda_matmul test_igemm_wide (CLOVER_TEST_SMALL: 2 cases)
#  r  racecheck: the same
#  l  CLOVER_BENCH_LAYER=1 bench_cuda_matmul with the switch off, then on (the 512-row lines print the old
#     kernels and the wide one side by side in both runs; the 32-row layer lines do not change: < 64 rows)
#  e  bench_cuda_backend --prompt-only 1 on the 35B-A3B synthetic file (made here first, in the background):
#     prompt 512 / 2048 (best of 3) and a 32-row commit, switch off then on
#  n  ncu of the wide kernels (their first 3 launches: q8_0 qkv, out, q4_K at 512 rows: SOL, occupancy) when the run is under 160 s so far
# Outputs: $OUT/summary.txt and $OUT/logs.tgz.
# Predictions (written before any run; "before" = bench/device-runs/2026-12-05-verify/out/k3, H200):
#  - t: every test passes; test_igemm_wide prints "bit-identical" for every case (13 geometries x Q8_0, Q4_K,
#    Q5_K = 39). Risk: a fragment or reduction index wrong (then many outputs differ, named by geometry), a case
#    with a partial last chunk (Q8_0 n_in 608) or an odd number of super-blocks (K-quants 768) wrong.
#  - m: 0 errors. r: 0 hazards.
#  - l: "qkv 8192x2048 at 512 rows (prompt)" 194 us (old, as before); ", WIDE" 55-75 us (~3x);
#    "out 2048x4096 at 512 rows" old ~100 us, WIDE 30-40 us; "q4_K 8192x2048 at 512 rows" old ~150-250 us (not
#    measured before), WIDE 45-70 us. The rest unchanged.
#  - e: prompt of 512, switch off: as the last measurement of this bench (3,380 tok/s on 2026-12-03-verify;
#    the issue's 2,032 is clover bench's cold figure); on: +5-10% (the dense Q8_0 products at 512 rows take
#    ~0.45 ms a layer with the old kernels, ~0.15 ms wide: ~12 ms saved of ~150 ms; the experts (q4_K, ~16
#    rows an expert: the old kernels) and the mixers are unchanged). The 32-row commit unchanged (< 64 rows).
set -uo pipefail
PACK=${PACK:-.gpu-k4l}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/k4llogs; rm -rf $O; mkdir -p $O
D=/tmp/k4l; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$R/summary.txt"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
unset CLOVER_CUDA_IGEMM_WIDE
STEPS=${STEPS:-t m r l e n}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
say "start $(date -u +%T) steps: $STEPS pack $(cat "$PACK/COMMIT" 2>/dev/null)"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
F=/tmp/q35d.gguf
if has e; then ( [ -s $F ] || timeout 90 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $F > "$O/synth.log" 2>&1 ) & fi
tst() { # NAME LOGTAG [ENV...]
  local n=$1 tag=$2; shift 2
  [ -x "$D/bin/$n" ] || { say "test $n: not in the pack"; return; }
  local s=$(date +%s); env "$@" timeout 60 "$D/bin/$n" > "$O/t_${n}_$tag.log" 2>&1; local rc=$?
  say "test $n ($tag${*:+: $*}) rc=$rc $(( $(date +%s) - s ))s $(tail -1 "$O/t_${n}_$tag.log")"
  [ $rc = 0 ] || grep -E "FAIL|differ|error|not finite" "$O/t_${n}_$tag.log" | head -8 | tee -a "$S"
}
if has t; then
  tst test_cuda_matmul off
  grep -E "^  wide x" "$O/t_test_cuda_matmul_off.log" | grep -c "bit-identical" | sed 's/^/     wide cases bit-identical to the old kernels: /;s/$/ (predicted 39)/' | tee -a "$S"
  tst test_cuda_matmul on CLOVER_CUDA_IGEMM_WIDE=1
  tst test_cuda_backend on CLOVER_CUDA_IGEMM_WIDE=1
  tst test_cuda_engine on CLOVER_CUDA_IGEMM_WIDE=1
fi
SAN_OK=1
command -v compute-sanitizer > /dev/null || { SAN_OK=0; { has m || has r; } && say "compute-sanitizer: not on PATH"; }
san() { # TOOL LIMIT
  local tool=$1 lim=$2 log="$O/$1-wide.log" s=$(date +%s)
  [ $SAN_OK = 1 ] || return 1
  env CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=test_igemm_wide timeout "$lim" compute-sanitizer --tool "$tool" \
    "$D/bin/test_cuda_matmul" > "$log" 2>&1; local rc=$?
  say "$tool test_cuda_matmul [test_igemm_wide] small rc=$rc $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1) $(grep -E 'passed, [0-9]+ failed|SKIP' "$log" | tail -1)"
  if grep -qE "Device not supported|not supported on this|Unable to|LibraryNotLoaded" "$log"; then
    SAN_OK=0; say "compute-sanitizer cannot run here: $(grep -m1 -E 'not supported|Unable|Library' "$log")"; return 1
  fi
  [ $rc = 124 ] && say "  ($tool hit its ${lim}s limit: a partial run)"
  grep -m6 -E "Invalid|Race|Hazard|hazard|Error:|out of bounds|misaligned" "$log" | tee -a "$S"
}
has m && san memcheck 40
has r && san racecheck 50
annot() {
  awk '
    /qkv 8192x2048 at 512 rows \(prompt\)/ { $0 = $0 "   [before 194.3 us; predicted ~194, the old kernels]" }
    /qkv 8192x2048 at 512 rows, WIDE/      { $0 = $0 "   [old 194.3 us; predicted 55-75 us]" }
    /out 2048x4096 at 512 rows \(prompt\)/ { $0 = $0 "   [not measured before; predicted ~100 us]" }
    /out 2048x4096 at 512 rows, WIDE/      { $0 = $0 "   [predicted 30-40 us]" }
    /q4_K 8192x2048 at 512 rows \(prompt\)/ { $0 = $0 "   [not measured before; predicted 150-250 us]" }
    /q4_K 8192x2048 at 512 rows, WIDE/      { $0 = $0 "   [predicted 45-70 us]" }
    /dense q8_0 qkv 8192x2048 \(chunk_ws\)/ { $0 = $0 "   [before 16.86 us; 32 rows: unchanged]" }
    { print }'
}
if has l; then
  say "== layer bench, switch off (the 512-row lines toggle it themselves)"
  timeout 40 env CLOVER_BENCH_LAYER=1 "$D/bin/bench_cuda_matmul" 2>&1 | annot | tee "$O/layer_off.log" | grep -E "512 rows|chunk_ws|sums" | tee -a "$S"
  say "== layer bench, CLOVER_CUDA_IGEMM_WIDE=1"
  timeout 40 env CLOVER_CUDA_IGEMM_WIDE=1 CLOVER_BENCH_LAYER=1 "$D/bin/bench_cuda_matmul" 2>&1 | annot | tee "$O/layer_on.log" | grep -E "512 rows|chunk_ws|sums" | tee -a "$S"
fi
pannot() { # $1: off|on
  awk -v f="$1" '
    /prompt of 512/  { $0 = $0 "   [before 3380 tok/s (2026-12-03); predicted " (f == "on" ? "+5-10% over the off line" : "~3400") "]" }
    /prompt of 2048/ { $0 = $0 "   [predicted " (f == "on" ? "+5-10% over the off line" : "as before") "]" }
    /32-row chunk commit/ { $0 = $0 "   [predicted unchanged by the switch (32 rows < 64)]" }
    { print }'
}
if has e; then
  wait; say "synth done $(date -u +%T) ($(el)s)"
  for sw in off on; do
    timeout 60 env $([ $sw = on ] && echo CLOVER_CUDA_IGEMM_WIDE=1) "$D/bin/bench_cuda_backend" $F --prompt-only 1 \
      > "$O/backend_$sw.log" 2>&1
    say "bench_cuda_backend --prompt-only, switch $sw rc=$?"; grep -E "prompt of|chunk commit" "$O/backend_$sw.log" | pannot $sw | tee -a "$S"
  done
fi
if has n && [ "$(el)" -lt 160 ] && command -v ncu > /dev/null; then
  CLOVER_BENCH_LAYER=1 timeout 45 ncu -k regex:'igw_' -c 3 \
    --section SpeedOfLight --section Occupancy --section LaunchStats "$D/bin/bench_cuda_matmul" > "$O/ncu.log" 2>&1
  say "ncu rc=$? (the wide kernels: q8_0 qkv and out, q4_K, at 512 rows, one launch each):"
  grep -E "igw_|Duration|Achieved Occupancy|Compute \(SM\) Throughput|Registers Per" "$O/ncu.log" | head -16 | tee -a "$S"
fi
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
