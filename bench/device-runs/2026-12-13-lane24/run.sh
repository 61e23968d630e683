#!/usr/bin/env bash
# 2026-12-04 17:54 session (issue 24, the decode step's dense products): the lane-a-block Q8_0 dot
# (matmul_mmv.cuh mmv_row_q8l; CLOVER_CUDA_MMV_LANE=0 = the old 4-lanes-a-block dot), never run before this call.
#   cmake --build build -j2 && scripts/device-packs.sh build lane24
#   run(command="bash .gpu-lane24/run.sh", carry=[".gpu-lane24"], timeout_s=600)
# STEPS (default "t m d n r"):
#  t  test_cuda_matmul test_mmv_lane (lane vs old bit for bit + CPU), the whole test_cuda_matmul (lane on), the
#     backend's CUDA tests; the exact-rows router path (CLOVER_CUDA_EXACT_ROWS=1) on batch / preview / engine
#  m  memcheck + racecheck of test_mmv_lane
#  d  bench_cuda_decode ops at 1 row lane on / off; the step (35B-A3B AR file): new, lane off, exact rows
#  n  ncu of the head's one-row product (mmvs_kernel) lane on / off: SOL, occupancy, stalls, instructions
#  r  clover run --ar 64 ids lane on vs off (must be identical: same bits by construction)
#  a  bench_batch AR N=1..16 (lane on)
# Predictions (before: 2026-12-12-dec24 calls 3-6, H200):
#  - t: every test passes; test_mmv_lane bit-identical on all 146 dense cases and the MoE cases; CPU <= 1e-5.
#  - m: 0 errors, 0 hazards.
#  - d ops at 1 row: dense mixer products 0.95 -> ~0.65 ms a step (GDN in-proj 15.9 -> ~11 us, out 8.6 -> ~6.5);
#    head 238 -> ~175 us. Step, lone pass PDL on: 3.16-3.20 -> ~2.85 ms; lane off = 3.16-3.20.
#    exact rows: 16 stacked sequences 11.6 -> ~10.8 ms.
#  - n: head mmvs_kernel lane on: DRAM 36 -> ~50% at ncu clocks, issued instructions ~-50%.
#  - r: ids identical on and off.
set -uo pipefail
PACK=${PACK:-.gpu-lane24}
STEPS=${STEPS:-t m d n r}
. "$PACK/lib.sh"
dr_init lane24
unset CLOVER_CUDA_MMV_LANE CLOVER_CUDA_EXACT_ROWS
SPID=
if has d || has a || has r; then dr_synth35 --no-diffusion; fi
if has t; then
  tst test_cuda_matmul lane 120 CLOVER_TEST_ONLY=test_mmv_lane
  grep -cE "bit-identical" "$O/t_test_cuda_matmul_lane.log" | sed 's/^/  bit-identical cases: /' | tee -a "$S"
  tst test_cuda_matmul all 240
  for n in test_cuda_backend test_cuda_batch test_cuda_engine test_cuda_preview test_cuda_split test_cuda_gpumem test_cuda_ops; do
    tst $n new 120
  done
  tst test_cuda_backend laneoff 90 CLOVER_CUDA_MMV_LANE=0
  for n in test_cuda_batch test_cuda_preview test_cuda_engine; do tst $n exact 120 CLOVER_CUDA_EXACT_ROWS=1; done
fi
if has m; then
  if command -v compute-sanitizer > /dev/null; then
    for tool in memcheck racecheck; do
      s=$(date +%s)
      CLOVER_TEST_ONLY=test_mmv_lane timeout 150 compute-sanitizer --tool $tool "$D/bin/test_cuda_matmul" > "$O/${tool}_lane.log" 2>&1
      say "$tool test_mmv_lane rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY|HAZARD|RACECHECK SUMMARY' "$O/${tool}_lane.log" | tail -1) (predicted 0)"
      grep -m6 -E "Invalid|Error:|out of bounds|misaligned|hazard" "$O/${tool}_lane.log" | tee -a "$S"
    done
  else say "compute-sanitizer: not on PATH"; fi
fi
B=$D/bin/bench_cuda_decode
if has d; then
  for c in "new:" "laneoff:CLOVER_CUDA_MMV_LANE=0"; do
    tag=${c%%:*} envs=${c#*:}
    env $envs CLOVER_BENCH_DECODE_ROWS=1 timeout 60 "$B" > "$O/ops_$tag.log" 2>&1
    say "== ops at 1 row, $tag${envs:+ ($envs)}: rc=$? at +$(el)s"
    grep -E "q8_0|head|sums at|SUM|by kind" "$O/ops_$tag.log" | tee -a "$S"
  done
  wait $SPID; say "synth done at +$(el)s: $(tail -1 "$O/synth.log" 2>/dev/null)"
  for c in ${STEP_CONFIGS:-"new:" "laneoff:CLOVER_CUDA_MMV_LANE=0" "exact:CLOVER_CUDA_EXACT_ROWS=1"}; do
    tag=${c%%:*} envs=${c#*:}
    env $envs CLOVER_BENCH_DECODE_ROWS=0 timeout 90 "$B" $F > "$O/step_$tag.log" 2>&1
    say "== step, $tag${envs:+ ($envs)}: rc=$? at +$(el)s (dec24: 3.155-3.201 ms lone PDL on; predicted new ~2.85)"
    grep -E "STEP" "$O/step_$tag.log" | tee -a "$S"
  done
fi
if has n && command -v ncu > /dev/null; then
  STALLS=$(for r in long_scoreboard short_scoreboard barrier wait mio_throttle lg_throttle math_pipe_throttle not_selected selected no_instruction; do printf "smsp__average_warps_issue_stalled_%s_per_issue_active.ratio," $r; done | sed "s/,$//")
  for c in "new:" "laneoff:CLOVER_CUDA_MMV_LANE=0"; do
    tag=${c%%:*} envs=${c#*:}
    [ "$(el)" -lt 480 ] || { say "ncu: no time left for $tag"; continue; }
    env $envs CLOVER_BENCH_QUICK=1 CLOVER_BENCH_MMAROWS=1 CLOVER_BENCH_MMAROWS_ONLY=head CLOVER_BENCH_MMAROWS_ROWS=1 timeout 90 ncu \
      --kernel-name-base demangled -k "regex:mmvs" -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section WarpStateStats --section InstructionStats --metrics "$STALLS" "$D/bin/bench_cuda_matmul" > "$O/ncu_head_$tag.log" 2>&1
    say "ncu head mmvs ($tag) rc=$?:"
    grep -E "Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Grid Size|Warp Cycles Per Issued|Executed Instructions  |Issued Instructions  " "$O/ncu_head_$tag.log" | head -12 | tee -a "$S"
    grep -E "issue_stalled" "$O/ncu_head_$tag.log" | awk '{print $1, $NF}' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | sort -k2 -g -r | head -5 | tr '\n' ';' | sed 's/^/   stalls: /' | tee -a "$S"; echo | tee -a "$S"
  done
fi
if has r; then
  wait $SPID
  IDS=$(seq -s, 11 30)
  for c in "new:" "laneoff:CLOVER_CUDA_MMV_LANE=0"; do
    tag=${c%%:*} envs=${c#*:}
    [ "$(el)" -lt 560 ] || { say "no time left for clover run $tag"; continue; }
    env $envs timeout 40 "$D/bin/clover" run -m $F --device cuda --ids $IDS -n 64 --ignore-eos --no-visual --ar \
      > "$O/run_$tag.txt" 2> "$O/run_$tag.err"; echo "rc=$?" >> "$O/run_$tag.err"
  done
  a=$(grep "^ids:" "$O/run_new.txt" 2>/dev/null); b=$(grep "^ids:" "$O/run_laneoff.txt" 2>/dev/null)
  if [ -n "$a" ] && [ "$a" = "$b" ]; then say "clover run --ar: lane on and off give the same ids ($(echo $a | wc -w) words) (predicted: always)"
  else say "clover run --ar: DIFFER or failed: $(tail -2 "$O/run_new.err" | tr '\n' ' ') / $(tail -2 "$O/run_laneoff.err" | tr '\n' ' ')"; fi
  grep -hE "^time|tok/s" "$O/run_new.txt" "$O/run_new.err" "$O/run_laneoff.txt" "$O/run_laneoff.err" 2>/dev/null | head -6 | tee -a "$S"
fi
if has a; then
  wait $SPID
  left=$(( 560 - $(el) ))
  if [ $left -ge 40 ]; then
    timeout $left "$D/bin/bench_batch" $F --device cuda --mode ar --n 1,2,4,8,16 --prompt 32 --gen 64 > "$O/batch_new.log" 2>&1
    say "== bench_batch AR (lane on) rc=$? at +$(el)s (dec24: N=1 3.72-4.18 ms, 16 15.5-16.2)"
    grep -A8 "^autoregressive" "$O/batch_new.log" | head -9 | tee -a "$S"
  else say "no time left for bench_batch"; fi
fi
dr_end
