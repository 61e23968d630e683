#!/usr/bin/env bash
# Written in the 2026-12-05 11:42 session (issue 24): what bounds each kernel of a 32-row preview and a 32-row block
# commit, read by ncu (the issue asks for DRAM throughput %, achieved occupancy and stall reasons per product,
# before and after): bench_cuda_preview --profile with CLOVER_BENCH_PROFILE_ONLY (range 5: the eager preview with
# the coreset, each kernel its own launch; range 4: the block's commit, graph nodes), the first ~5 layers' kernels,
# one CSV row a kernel, summarised per kernel and grid by summary.py beside this script.
#   run(command="ITEMS='ncu24:n' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "n"):
#  n  ncu of range 5 (preview) then range 4 (commit), -c 160 kernels each
# Predictions (before the run; trace24 / gpu-profile.md): the dense Q8_0 products (igemm_q8_kernel, grids 1 x 2..512)
#  DRAM 10-35% of peak, issue-active 30-50%, the top stall long_scoreboard or barrier (few warps, a 4-stage ring
#  over 8 chunks); the grouped experts (igemm_kernel<12,1,1>, WIDE) DRAM ~15-25%, stalled on math / short
#  scoreboard (the nibble and scale decode amortised over 8 slots); k_coreset_warp: one block, occupancy ~1.5% of
#  the GPU, long latency chains (the float64 adds).
set -uo pipefail
PACK=${PACK:-.gpu-ncu24}
STEPS=${STEPS:-n}
. "$PACK/lib.sh"
dr_init ncu24
dr_synth35
HERE=$(dirname "$(ls -d bench/device-runs/*-ncu24/run.sh | sort | tail -1)")
M=smsp__average_warps_issue_stalled
METRICS=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,\
lts__t_bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,\
smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size,\
launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,\
${M}_long_scoreboard_per_issue_active.ratio,${M}_barrier_per_issue_active.ratio,${M}_short_scoreboard_per_issue_active.ratio,\
${M}_math_pipe_throttle_per_issue_active.ratio,${M}_mio_throttle_per_issue_active.ratio,${M}_lg_throttle_per_issue_active.ratio,\
${M}_wait_per_issue_active.ratio,${M}_not_selected_per_issue_active.ratio,${M}_no_instruction_per_issue_active.ratio,\
${M}_membar_per_issue_active.ratio,${M}_dispatch_stall_per_issue_active.ratio,${M}_selected_per_issue_active.ratio
if has n && command -v ncu > /dev/null; then
  wait $SPID; say "synth done at +$(el)s"
  for r in 5 4; do
    [ "$(el)" -lt 420 ] || { say "ncu range $r: no time left"; continue; }
    CLOVER_BENCH_PROFILE_ONLY=$r timeout 170 ncu --profile-from-start off --kernel-name-base demangled -c 160 \
      --csv --page raw --print-units base --metrics "$METRICS" "$D/bin/bench_cuda_preview" $F --profile > "$O/ncu_r$r.csv" 2> "$O/ncu_r$r.err"
    say "== ncu range $r rc=$? at +$(el)s ($(grep -c '^"' "$O/ncu_r$r.csv") rows)"
    python3 "$HERE/summary.py" "$O/ncu_r$r.csv" 2>&1 | tee -a "$S"
  done
fi
dr_end
