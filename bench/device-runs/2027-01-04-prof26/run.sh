#!/usr/bin/env bash
# Written in the 2026-12-06 14:06 session (issues 24, 25). Where a 32-row preview, a block commit and the 16-row
# stacked AR step go now (after the fused coreset + routing, the router's register tiles and the branch-free chunk
# sums), kernel by kernel, and how far each of a preview's kernels is from its bytes; plus the tests of the landed
# branch-free sums alone (ilp24 tested them only together with the early weights, which did not land).
#   run(command="ITEMS='prof26:t,k,n,s' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t k n s"):
#  t  test_cuda_matmul a + b, test_cuda_moe_tiles, test_cuda_preview, test_cuda_batch; clover run ids
#  k  LD_PRELOAD=libclover_kernel_trace.so bench_cuda_preview --profile, PDL off: windows 2 (the preview with the
#     coreset, graph) and 4 (the commit), the top 32 kernels of each
#  n  ncu of range 5 (the same preview, eager) kernels 1..84 (layers 0-3: three GDN layers and one attention layer),
#     twice: duration, DRAM % of peak, achieved occupancy, registers, grid; then issue % and stall reasons
#  s  bench_batch --mode ar --n 16 --prompt 32 --gen 96 under the tracer (PDL off): the top 32 kernels
#  d  the deep ring of the dense Q8_0 32-row one-wave products (CLOVER_CUDA_IG_Q8_DEEP=1, off by default):
#     test_cuda_ig_x2 (its bits against the one-chunk form), bench_cuda_preview --reps 3 off / on twice
# Predictions (before the run; H100, ilp24: preview 5.91 ms, commit 10.75): k: the preview ~700 kernels, its largest
#  groups the grouped experts' pair + down (~1.4 ms), the dense Q8_0 products (~1.6), the head (~0.37), the GDN
#  block (~0.5), attention (~0.35), the coreset+route (~0.5), the rest small kernels ~2-4 us each; the commit's
#  experts ~5.5 of 10.75 ms. n: every dense product of a preview layer < 35% of DRAM peak (latency-bound: ~5-9 us
#  for 1-8 MB); s: the grouped experts ~45% of the step. d: same bits; the preview -0.05..-0.15 ms (~40 one-wave
#  dense 32-row products a pass, ~1-3 us each of a memory latency), the commit within noise (its GDN products
#  are multi-wave).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t k n s}
. "$PACK/lib.sh"
dr_init prof26
dr_synth35
C=$D/bin/clover
TR=$D/bin/libclover_kernel_trace.so
HERE=$(dirname "$(ls -d bench/device-runs/*-prof26/run.sh | sort | tail -1)")
top() { # FILE WINDOW N: the window's header and its top N rows
  grep -E "^== window $2:" "$1" | tee -a "$S"
  awk -v w="$2" '$0 ~ "^== window "w":" {f=1;next} /^== window/{f=0} f' "$1" | head -$(( $3 + 1 )) | \
    cut -c1-200 | tee -a "$S"
}
if has t; then
  tst test_cuda_matmul a 150 CLOVER_TEST_ONLY=test_bad_arguments,test_act_quantize_bytes,test_decode_types,test_chunk_types,test_chunk_thin,test_exact,test_exact_multi,test_chunk_multi,test_chunk_seg,test_row_invariance,test_few_rows,test_mma_rows,test_igemm_wide,test_q8_rows32,test_mmv_stream,test_mmv_lane,test_stream32
  tst test_cuda_matmul b 150 CLOVER_TEST_ONLY=test_moe_decode,test_moe_chunk,test_moe_igw,test_moe_persist,test_moe_many_experts,test_moe_dec32,test_glu,test_glu_quant,test_multi,test_graph_capture,test_pdl_rows
  for n in test_cuda_moe_tiles test_cuda_preview test_cuda_batch; do tst $n all 120; done
  wait $SPID
  timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
    > "$O/run.json" 2> "$O/run.err"
  timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
    > "$O/ar.json" 2> "$O/ar.err"
  say "clover run: diffusion $(dr_ids "$O/run.json"), --ar $(dr_ids "$O/ar.json") (2cdbf2f9ccaf / d1f13e945396)"
fi
if has k; then
  wait $SPID
  CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_preview.txt LD_PRELOAD=$TR timeout 150 "$D/bin/bench_cuda_preview" $F \
    --profile > "$O/preview_profile.log" 2>&1
  say "== bench_cuda_preview --profile under the tracer (PDL off) rc=$? at +$(el)s"
  if [ -f $R/trace_preview.txt ]; then
    c++filt < $R/trace_preview.txt > $R/trace_preview.dm.txt && rm -f $R/trace_preview.txt
    top $R/trace_preview.dm.txt 2 32
    top $R/trace_preview.dm.txt 4 32
  fi
fi
if has n && command -v ncu > /dev/null; then
  wait $SPID
  ncu_pass() { # TAG METRICS: ncu of range 5's first 84 kernels, its table (ncu_table.py) into the summary
    CLOVER_BENCH_PROFILE_ONLY=5 timeout 200 ncu --profile-from-start off -c 84 --csv --page raw --metrics "$2" \
      "$D/bin/bench_cuda_preview" $F --profile > "$O/ncu_$1.csv" 2> "$O/ncu_$1.err"
    say "== ncu range 5, kernels 1..84, $1 rc=$? at +$(el)s"
    python3 "$HERE/ncu_table.py" "$O/ncu_$1.csv" 2>&1 | tee -a "$S"
  }
  ncu_pass sizes gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,\
sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,\
launch__occupancy_limit_registers,sm__throughput.avg.pct_of_peak_sustained_elapsed
  M=smsp__issue_active.avg.pct_of_peak_sustained_active
  for st in long_scoreboard barrier wait short_scoreboard membar lg_throttle mio_throttle math_pipe_throttle \
    no_instruction sleeping; do M=$M,smsp__warp_issue_stalled_${st}_per_warp_active.pct; done
  ncu_pass stalls $M
fi
if has s; then
  wait $SPID
  CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_n16.txt LD_PRELOAD=$TR timeout 200 "$D/bin/bench_batch" $F \
    --device cuda --mode ar --n 16 --prompt 32 --gen 96 > "$O/batch_n16.log" 2>&1
  say "== bench_batch --mode ar --n 16 under the tracer (PDL off) rc=$? at +$(el)s"
  grep -E "^ +16 " "$O/batch_n16.log" | tail -1 | tee -a "$S"
  if [ -f $R/trace_n16.txt ]; then
    c++filt < $R/trace_n16.txt > $R/trace_n16.dm.txt && rm -f $R/trace_n16.txt
    top $R/trace_n16.dm.txt 0 32
  fi
fi
if has d; then
  tst test_cuda_ig_x2 all 150
  wait $SPID
  for v in 0 1 0 1; do
    CLOVER_CUDA_IG_Q8_DEEP=$v timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/deep_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3 CLOVER_CUDA_IG_Q8_DEEP=$v rc=$? at +$(el)s"
    grep -E "^(preview 32 rows, first|commit|block)" "$O/deep_$v.log" | cut -c1-110 | tee -a "$S"
  done
  CLOVER_CUDA_IG_Q8_DEEP=1 timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
    --no-visual --json > "$O/run_deep.json" 2> "$O/run_deep.err"
  say "clover run CLOVER_CUDA_IG_Q8_DEEP=1: diffusion $(dr_ids "$O/run_deep.json") (2cdbf2f9ccaf)"
fi
dr_end
