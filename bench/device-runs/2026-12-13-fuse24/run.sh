#!/usr/bin/env bash
# 2026-12-04 17:54 session, call 2 (issues 24, 25): two fusions never run before this call, each with a switch back,
# plus the rest of call 1's test_cuda_matmul, the routed experts' ncu, and the serve bench of issue 25.
#  - the router product + routing in one launch for 1..8 rows (src/cuda/moe_router.cu, helper route24;
#    CLOVER_CUDA_ROUTER_FUSED=0 = two launches, =2 = fused without shared-memory staging)
#  - attention's split merge inside the decode kernel (attention_forward.cu, helper comb24 + the tickets moved into
#    the caller's workspace; CLOVER_CUDA_ATTN_FUSED_COMBINE=0 = the separate combine, 2/4/8 = cluster forms)
#   cmake --build build -j2 && scripts/device-packs.sh build fuse24
#   run(command="bash .gpu-fuse24/run.sh", carry=[".gpu-fuse24"], timeout_s=600)
# STEPS (default "t m d n s"):
#  t  test_cuda_attention (every case, fused modes 0/1/2/4/8 bit for bit, graph replay, ticket bound), test_cuda_ops
#     (router fused vs two launches, graph, CPU), test_cuda_backend (router_fused_equals_two_launches), the rest of
#     test_cuda_matmul (moe_fast, glu, multi, graph_capture), batch/engine/preview/split/gpumem
#  m  memcheck + racecheck: test_router_small; memcheck of test_cuda_attention's fused cases (CLOVER_TEST_SMALL)
#  d  step (35B-A3B AR file): new, router two launches, separate combine, cluster 8, router unstaged; ops at 1 row
#  n  ncu of the routed experts' kernels at 1 and 16 rows (the next target: 14.8 us a layer at 1 row, 25% of copy)
#  s  clover serve --device cuda: 16 x 64 AR and 8 x 32 diffusion, sequential vs concurrent (issue 25's bar 8x / 4x)
# Predictions (call 1 of this session: step 2.768 ms lone PDL on, seq_commit 2.776):
#  - t: all pass; m: 0 errors / hazards.
#  - d: router fused -0.06 ms (helper: 1-2.5 us a layer), fused combine -0.02..-0.035 ms (mode 8 -0.035):
#    new ~2.68-2.70 ms; rf0 ~2.74; fc0 ~2.71; 16 stacked sequences unchanged 11.6 (router fused only <= 8 rows; fc
#    ~-0.03).
#  - s: AR 16 concurrent ~3.8x sequential (bar 8x: not met; the 16-row expert products); diffusion ~2x (bar 4x).
set -uo pipefail
PACK=${PACK:-.gpu-fuse24}
STEPS=${STEPS:-t m d n s}
. "$PACK/lib.sh"
dr_init fuse24
unset CLOVER_CUDA_ROUTER_FUSED CLOVER_CUDA_ATTN_FUSED_COMBINE
SPID=
if has d || has n || has s; then dr_synth35 --no-diffusion; fi
if has s; then CL=/tmp/synth35-clover.gguf; ( [ -s $CL ] || { sleep 20; timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!; fi
if has t; then
  tst test_cuda_attention new 180
  grep -cE "bit|identical" "$O/t_test_cuda_attention_new.log" | sed 's/^/  lines with bit-identical checks: /' | tee -a "$S"
  tst test_cuda_ops new 120
  tst test_cuda_backend new 120
  tst test_cuda_matmul rest 300 CLOVER_TEST_ONLY=test_glu,test_multi,test_graph_capture,test_moe_fast
  for n in test_cuda_batch test_cuda_engine test_cuda_preview test_cuda_split test_cuda_gpumem test_cuda_gdn; do tst $n new 120; done
  tst test_cuda_batch rf0fc0 120 CLOVER_CUDA_ROUTER_FUSED=0 CLOVER_CUDA_ATTN_FUSED_COMBINE=0
  tst test_cuda_engine fc8 120 CLOVER_CUDA_ATTN_FUSED_COMBINE=8
fi
if has m && command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    s=$(date +%s)
    CLOVER_TEST_ONLY=test_router_small timeout 120 compute-sanitizer --tool $tool "$D/bin/test_cuda_ops" > "$O/${tool}_router.log" 2>&1
    say "$tool test_router_small rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/${tool}_router.log" | tail -1)"
  done
  s=$(date +%s)
  CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=fused_combine_graph_replay,operators_match_cpu timeout 200 compute-sanitizer --tool memcheck "$D/bin/test_cuda_attention" > "$O/memcheck_attn.log" 2>&1
  say "memcheck test_cuda_attention (fused) rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_attn.log" | tail -1)"
  grep -m6 -E "Invalid|out of bounds|misaligned|hazard" "$O"/memcheck_*.log "$O"/racecheck_*.log | tee -a "$S"
fi
B=$D/bin/bench_cuda_decode
if has d; then
  wait $SPID; say "synth done at +$(el)s"
  for c in ${STEP_CONFIGS:-"new:" "rf0:CLOVER_CUDA_ROUTER_FUSED=0" "fc0:CLOVER_CUDA_ATTN_FUSED_COMBINE=0" "fc8:CLOVER_CUDA_ATTN_FUSED_COMBINE=8" "rf2:CLOVER_CUDA_ROUTER_FUSED=2" "old:CLOVER_CUDA_ROUTER_FUSED=0 CLOVER_CUDA_ATTN_FUSED_COMBINE=0"}; do
    tag=${c%%:*} envs=${c#*:}
    env $envs CLOVER_BENCH_DECODE_ROWS=0 timeout 90 "$B" $F > "$O/step_$tag.log" 2>&1
    say "== step, $tag${envs:+ ($envs)}: rc=$? at +$(el)s"
    grep -E "STEP (seq_commit|batched commit, 16|lone pass in our graph, PDL on)" "$O/step_$tag.log" | tee -a "$S"
  done
  env CLOVER_BENCH_DECODE_ROWS=1 timeout 60 "$B" > "$O/ops_new.log" 2>&1
  say "== ops at 1 row (new) rc=$?"; grep -E "attn forward|sums at|SUM|by kind" "$O/ops_new.log" | tee -a "$S"
fi
if has n && command -v ncu > /dev/null; then
  STALLS=$(for r in long_scoreboard short_scoreboard barrier wait mio_throttle lg_throttle math_pipe_throttle not_selected selected no_instruction; do printf "smsp__average_warps_issue_stalled_%s_per_issue_active.ratio," $r; done | sed "s/,$//")
  for rows in 1 16; do
    [ "$(el)" -lt 420 ] || { say "ncu: no time left for $rows rows"; continue; }
    CLOVER_BENCH_DECODE_ROWS=$rows timeout 100 ncu --kernel-name-base demangled -k "regex:moe|moef|moed" -c 4 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section InstructionStats \
      --section MemoryWorkloadAnalysis --metrics "$STALLS" "$B" > "$O/ncu_moe_$rows.log" 2>&1
    say "ncu experts at $rows rows rc=$?:"
    grep -E "^  [a-zA-Z_]+.*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Grid Size|Block Size|Dynamic Shared|Warp Cycles Per Issued|Executed Instructions  |L2 Hit" "$O/ncu_moe_$rows.log" | head -60 | tee -a "$S"
    grep -E "issue_stalled|^  [a-zA-Z_]+.*\(" "$O/ncu_moe_$rows.log" | awk '/\(/ {print "  >", $1; next} {print $1, $NF}' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | tr '\n' ';' | tee -a "$S"; echo | tee -a "$S"
  done
fi
if has s; then
  SR=bench/device-runs/2026-12-05-serve25
  serve() {
    local M=$1 label=$2 n=$3 tok=$4; shift 4
    [ -s "$M" ] || { say "serve $label: no model"; return; }
    local log=$O/serve-$label.log
    env "$@" "$D/bin/clover" serve -m "$M" --device cuda --port 0 --max-batch 16 --sessions 1 --ctx 1024 > "$log" 2>&1 &
    local pid=$! port=""
    for _ in $(seq 1 240); do
      port=$(grep -o 'listening on http://[^:]*:[0-9]*' "$log" | grep -o '[0-9]*$')
      [ -n "$port" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.25
    done
    if [ -z "$port" ]; then say "serve $label: did not start: $(tail -2 "$log")"; kill $pid 2>/dev/null; return; fi
    local r; r=$(timeout 100 python3 "$SR/serve_load.py" "$port" $n $tok "$O/serve-$label.json" 2>&1)
    say "serve $label ($n x $tok): $r"
    kill -TERM $pid; wait $pid 2>/dev/null
  }
  wait $SPID
  [ "$(el)" -lt 470 ] && serve $F ar 16 64
  say "  (2026-12-05: 175.0 -> 583.5 tok/s, 3.33x; bar 8x)"
  wait $CPID
  [ "$(el)" -lt 530 ] && serve $CL clover 8 32
  say "  (2026-12-05: 64.5 -> 122.6 tok/s, 1.90x; bar 4x)"
fi
dr_end
