#!/usr/bin/env bash
# 2026-12-04 (helper moe1): a cheaper 1..8-row form of the routed experts' Q4_K / Q5_K decode products
# (src/cuda/moe_fast.cu; cuda_moe_decode and _glu take it with CLOVER_CUDA_MOE_FAST=1, OFF by default), written
# without a device. Same bits as mmv_kernel by construction: exact integer sums, mmv_block's term expression,
# mmv_row + mmv_reduce's even / odd order. What changes: 4 lanes a Q4_K super-block (16-byte shared loads, 2 shuffle
# rounds instead of 4 x 2), the 8-bit rows' 32-value sums made once when the row is quantised (not redone by dp4a in
# every weight block), a swizzled shared layout of the 8-bit rows, each warp staging its own rows (gate and up as two
# cp.async groups), the group's rows always quantised in the block (prefetched), 64 registers (4 blocks an SM: the
# 1-row grid of 512 blocks in one wave); the down product asks L2 for its expert's rows before its PDL wait (its ids
# were written before the gate + up product ran; a hint only, re-read after the wait).
# The index math (swizzle, sub-block sums, chunk lanes, term order) was checked against the Q4_K / Q5_K definition
# by a Python emulation on the dev VM (not committed); the kernel itself has never run before this script.
#   scripts/device-packs.sh build moe1      (the default pack set: nothing extra)
#   run(command="bash .gpu-moe1/run.sh", carry=[".gpu-moe1"], timeout_s=600)
# STEPS (default "t m b d n r"):
#  t  test_cuda_matmul's test_moe_fast (old form off vs fast form on, bit for bit, every row count 1..8, Q4_K / Q5_K
#     on the 35B shapes, Q6_K / Q8_0 kept on the old form, odd super-block counts, bad ids, poisoned outputs, the CPU
#     oracle) with test_moe_decode and test_glu; then the backend's CUDA tests with CLOVER_CUDA_MOE_FAST=1
#  m  memcheck of test_moe_fast (CLOVER_TEST_SMALL)
#  b  bench_cuda_matmul CLOVER_BENCH_MOEFAST=1: gate + up + swiglu and down at 1, 4, 8 rows, old vs new
#  d  bench_cuda_decode: ops at 1 row off / on; the backend's step on the 35B-A3B AR file off / on
#  n  ncu of moef_kernel at 1 row (gate + up, then down)
#  r  clover run --ar 64 tokens on the 35B file: ids off vs on
# Predictions (written before the run; "before" = 2026-12-09-moe24/out2, H200, 1 row):
#  - t: every test passes, "fast ... bit-identical" for every case (97 lines: 96 cases + the summary; ~50 took the
#    fast form); CPU err <= 1e-5.
#    Risk: a swizzle / sub-block-sum index slip shows as differing bits on every Q4_K case.
#  - m: 0 errors.
#    Model (warp-instructions a Q4_K super-block and row: old ~50, new ~11; 32 warps an SM at 1 row): the dot's
#    ~3.4 us (gate + up) and ~1.7 us (down) of a wave that waits for its loads first shrink to ~1 and ~0.6 us; the
#    loads (9.4 MB / 4.7 MB, ~2.5 / ~1.3 us at ~3.7 TB/s) and the launch + routing latency (~3 us) stay.
#  - b: gate + up + swiglu 1 row ~11.5 -> ~8.5 us (6.5-9.5); down ~8.3 -> ~6 (4.5-7.5; the L2 hint shows most here,
#    where each launch's ids are the last one's); both ~20 -> ~14.5.
#    4 rows: new ~0.7x old; 8 rows: new ~0.65x old (the old GLU takes a separate quantiser launch there).
#  - d: ops at 1 row: experts 20.0 -> ~15 us a layer; routed experts x40 0.80 -> ~0.60 ms.
#    STEP lone pass in our graph, PDL on: 4.00 -> ~3.80 ms (3.65-3.9); seq_commit 4.03 -> ~3.83.
#  - n: moef_kernel gate + up at 1 row: Duration ~6-7 us, DRAM ~30-40%, registers <= 64, achieved occupancy
#    ~35-45% (theoretical 50%: 4 blocks of 8 warps), top stall long scoreboard / barrier. Down: ~4-5 us, DRAM ~25%.
#  - r: the same ids off and on.
set -uo pipefail
PACK=${PACK:-.gpu-moe1}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/moe1logs; rm -rf $O; mkdir -p $O
D=/tmp/moe1; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$R/summary.txt"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
unset CLOVER_CUDA_MOE_FAST CLOVER_CUDA_MOE_DEC32
STEPS=${STEPS:-t m b d n r}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
say "start $(date -u +%T) steps: $STEPS pack $(cat "$PACK/COMMIT" 2>/dev/null); $(nproc) CPUs"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
F=/tmp/synth35-ar.gguf
SPID=
if has d || has r; then ( [ -s $F ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $F.part \
  > "$O/synth.log" 2>&1 && mv $F.part $F; } ) &
SPID=$!; fi
tst() { # NAME TAG LIMIT [ENV...]
  local n=$1 tag=$2 lim=$3; shift 3
  [ -x "$D/bin/$n" ] || { say "test $n: not in the pack"; return; }
  local s=$(date +%s); env "$@" timeout "$lim" "$D/bin/$n" > "$O/t_${n}_$tag.log" 2>&1; local rc=$?
  say "test $n ($tag${*:+: $*}) rc=$rc $(( $(date +%s) - s ))s $(tail -1 "$O/t_${n}_$tag.log")"
  [ $rc = 0 ] || grep -E "FAIL|differ|error|not finite|not taken" "$O/t_${n}_$tag.log" | head -8 | tee -a "$S"
}
if has t; then
  tst test_cuda_matmul fast 150 CLOVER_TEST_ONLY=test_moe_fast,test_moe_decode,test_glu
  say "     fast cases bit-identical: $(grep -c 'fast .*bit-identical' "$O/t_test_cuda_matmul_fast.log") (predicted 97: 96 cases + the summary line)"
  grep -E "^  fast  " "$O/t_test_cuda_matmul_fast.log" | tee -a "$S"
  for n in test_cuda_backend test_cuda_batch test_cuda_engine test_cuda_split; do
    tst $n fast 90 CLOVER_CUDA_MOE_FAST=1
  done
fi
if has m; then
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=test_moe_fast timeout 120 compute-sanitizer --tool memcheck \
      "$D/bin/test_cuda_matmul" > "$O/memcheck.log" 2>&1
    say "memcheck test_moe_fast rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1) (predicted 0 errors)"
    grep -m6 -E "Invalid|Error:|out of bounds|misaligned" "$O/memcheck.log" | tee -a "$S"
  else say "compute-sanitizer: not on PATH"; fi
fi
if has b; then
  CLOVER_BENCH_MOEFAST=1 timeout 90 "$D/bin/bench_cuda_matmul" > "$O/bench_moefast.log" 2>&1
  say "== bench_cuda_matmul CLOVER_BENCH_MOEFAST=1 rc=$? at +$(el)s"
  say "   (predicted 1 row: gate+up ~11.5 -> ~8.5 us, down ~8.3 -> ~6.5, both ~20 -> ~15; 4 rows new ~0.7x old; 8 rows ~0.65x)"
  grep -E "^moe fast" "$O/bench_moefast.log" | tee -a "$S"
  grep -v "^moe fast" "$O/bench_moefast.log" | tail -3 | tee -a "$S"
fi
B=$D/bin/bench_cuda_decode
PAT="experts|sums at|by kind"
if has d; then
  for sw in off on; do
    env $([ $sw = on ] && echo CLOVER_CUDA_MOE_FAST=1) CLOVER_BENCH_DECODE_ROWS=1 timeout 60 "$B" > "$O/ops_$sw.log" 2>&1
    say "== ops at 1 row, CLOVER_CUDA_MOE_FAST $sw: rc=$? at +$(el)s (predicted on: experts ~20.0 -> ~15 us, routed experts x40 0.80 -> ~0.60 ms)"
    grep -E "$PAT" "$O/ops_$sw.log" | tee -a "$S"
  done
  wait $SPID; say "synth done at +$(el)s: $(tail -1 "$O/synth.log" 2>/dev/null)"
  for sw in off on; do
    env $([ $sw = on ] && echo CLOVER_CUDA_MOE_FAST=1) CLOVER_BENCH_DECODE_ROWS=0 timeout 90 "$B" $F > "$O/step_$sw.log" 2>&1
    say "== step, CLOVER_CUDA_MOE_FAST $sw: rc=$? at +$(el)s (predicted: lone PDL on 4.00 -> ~3.80 ms with the switch; 16 stacked unchanged)"
    grep -E "STEP" "$O/step_$sw.log" | tee -a "$S"
  done
fi
if has n && command -v ncu > /dev/null && [ "$(el)" -lt 400 ]; then
  for form in "true:gate + up (GLU)" "false:down"; do
    g=${form%%:*}
    CLOVER_CUDA_MOE_FAST=1 CLOVER_BENCH_DECODE_ROWS=1 timeout 90 ncu --kernel-name-base demangled \
      -k "regex:moef_kernel<12, $g>" -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section WarpStateStats "$B" > "$O/ncu_$g.log" 2>&1
    say "ncu moef_kernel ${form#*:} at 1 row rc=$? (predicted gate + up ~6-7 us, DRAM ~30-40%; down ~4-5 us, DRAM ~25%; <= 64 registers, achieved occupancy ~35-45%, top stall long scoreboard / barrier):"
    grep -E "moef_kernel|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Grid Size|Warp Cycles Per Issued" "$O/ncu_$g.log" | head -12 | tee -a "$S"
    grep -iE "stall" "$O/ncu_$g.log" | head -4 | tee -a "$S"
  done
fi
if has r; then
  wait $SPID
  IDS=$(seq -s, 11 30)
  for mode in ar; do
    for sw in off on; do
      env $([ $sw = on ] && echo CLOVER_CUDA_MOE_FAST=1) timeout 60 "$D/bin/clover" run -m $F --device cuda \
        --ids $IDS -n 64 --ignore-eos --no-visual $([ $mode = ar ] && echo --ar) > "$O/run_${mode}_$sw.txt" 2> "$O/run_${mode}_$sw.err"
      echo "rc=$?" >> "$O/run_${mode}_$sw.err"
    done
    a=$(grep "^ids:" "$O/run_${mode}_off.txt"); b=$(grep "^ids:" "$O/run_${mode}_on.txt")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then
      say "clover run $mode: switch off and on give the same ids ($(echo $a | wc -w) words; predicted identical); off: $(grep -E '^time' "$O/run_${mode}_off.txt") on: $(grep -E '^time' "$O/run_${mode}_on.txt")"
    else
      say "clover run $mode: DIFFER or failed (predicted identical): $(tail -2 "$O/run_${mode}_off.err" | tr '\n' ' ') / $(tail -2 "$O/run_${mode}_on.err" | tr '\n' ' ')"
    fi
  done
fi
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
