#!/usr/bin/env bash
# Written in the 2026-12-06 16:57 session (issues 24, 25). sweep27 (same session) found the many-row launches' PDL
# (CLOVER_CUDA_PDL_ROWS=0) worth -0.35..-0.38 ms on a 32-row coreset preview (5.90 -> 5.52-5.55 ms, block diffusion
# 157.6 -> 160.3-160.4 tok/s) but +0.03..+0.08 on the preview without the coreset and +0.07..+0.09 on the commit.
# This pack makes that the default per pass: CLOVER_CUDA_PDL_ROWS unset = 2 (AUTO: the row launches without PDL in a
# lone preview with the coreset, with it everywhere else), 3 (also stacked coreset previews), 4 (off on the shared
# expert's side stream only: a guess at the mechanism, its blocks resident early beside the coreset's cluster
# launch), 5 (2 and 4), 0 / 1 (off / on everywhere: 1 is the old default). The bits cannot change (PDL only moves when a kernel starts; each waits for
# its predecessors' completion): the ids of every mode are compared.
#   run(command="ITEMS='pdlrows27:t,p,b' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t p b"):
#  t  test_cuda_matmul (test_pdl_rows, test_pdl_rows_passes, test_graph_capture), test_cuda_preview, test_cuda_batch;
#     clover run diffusion and --ar ids under AUTO, PDL_ROWS=1 and PDL_ROWS=0
#  p  bench_cuda_preview --reps 3: AUTO, =1, =0, =4, =5, AUTO + MOE_TILE_LOOP=0 (sweep27: -0.13 ms on the
#     coreset preview, +0.19 without it); two rounds
#  b  bench_batch --mode diffusion --n 16 --prompt 32 --gen 64 (the stacked coreset passes): AUTO (= 1 there), 3, 5;
#     bench_batch --mode ar --n 16: AUTO, 4, 0; two rounds
#  x  (added after seq4, for the final commit's code) test_cuda_matmul a + b (prof26's lists), test_cuda_moe_tiles,
#     test_cuda_backend; compute-sanitizer memcheck of test_cuda_preview
#  e  (added after seq4) bench_cuda_preview --reps 3: AUTO against CLOVER_CUDA_PDL=0 (every launch plain, the decode
#     kernels' and the cluster's too), two rounds: is more of the coreset preview's PDL worth taking off?
#     Predicted: within +-0.05 ms of AUTO on the coreset preview, the no-coreset preview and the commit +0.1..+0.4 ms.
# Predictions (before the run; H100): t all pass, ids equal in every mode (2cdbf2f9ccaf / d1f13e945396);
#  p: AUTO's coreset preview = PDL_ROWS=0's (5.52-5.56 ms) and its commit = PDL_ROWS=1's (10.60-10.64), block
#  diffusion 160-161 tok/s; AUTO + TILE_LOOP=0: coreset preview -0.05..-0.15 more, block diffusion within +-1%;
#  =4: if the side stream's early blocks are the mechanism, the coreset preview near AUTO's and the rest unchanged
#  (else =1's figures); =5 = AUTO's within 0.02 ms on the coreset preview.
#  b: diffusion n16 with 3 against AUTO -3..+5% (unknown: the stacked pass's kernels are wider); ar n16 =0 -2..+2%,
#  =4 -1..+2%.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t p b}
. "$PACK/lib.sh"
dr_init pdlrows27
dr_synth35
C=$D/bin/clover
if has t; then
  tst test_cuda_matmul pdl 150 CLOVER_TEST_ONLY=test_pdl_rows,test_pdl_rows_passes,test_graph_capture
  for n in test_cuda_preview test_cuda_batch; do tst $n all 120; done
  wait $SPID
  for v in auto 1 0; do
    e=""; [ $v = auto ] || e="CLOVER_CUDA_PDL_ROWS=$v"
    env $e timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
      > "$O/run_$v.json" 2> "$O/run_$v.err"
    env $e timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual \
      --json > "$O/ar_$v.json" 2> "$O/ar_$v.err"
    say "clover run PDL_ROWS=$v: diffusion $(dr_ids "$O/run_$v.json"), --ar $(dr_ids "$O/ar_$v.json") (2cdbf2f9ccaf / d1f13e945396)"
  done
fi
pv() { # LABEL ENV...: one bench_cuda_preview --reps 3, its four figures said
  local lab=$1; shift
  env "$@" timeout 60 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/p_$lab.log" 2>&1; local rc=$?
  local l=$(grep -E "^(preview 32 rows, first|commit|block)" "$O/p_$lab.log" | \
      awk '{for (i = 2; i <= NF; i++) if ($i == "ms" || $i == "tok/s") { printf "%s ", $(i - 1); break }}')
  say "p rc=$rc $lab ($*): coreset/nocoreset/commit ms, block tok/s: $l"
}
if has p; then
  wait $SPID
  for r in 1 2; do
    pv auto_$r
    pv one_$r CLOVER_CUDA_PDL_ROWS=1
    pv zero_$r CLOVER_CUDA_PDL_ROWS=0
    pv four_$r CLOVER_CUDA_PDL_ROWS=4
    pv five_$r CLOVER_CUDA_PDL_ROWS=5
    pv auto_noloop_$r CLOVER_CUDA_MOE_TILE_LOOP=0
  done
fi
bb() { # LABEL MODE GEN ENV...: one bench_batch --n 16, its line said
  local lab=$1 mode=$2 gen=$3; shift 3
  env "$@" timeout 90 "$D/bin/bench_batch" $F --device cuda --mode $mode --n 16 --prompt 32 --gen $gen \
    > "$O/b_$lab.log" 2>&1
  say "b rc=$? $lab ($mode n16 $*): $(grep -E '^ +16 ' "$O/b_$lab.log" | tail -1 | cut -c1-110)"
}
if has b; then
  wait $SPID
  for r in 1 2; do
    [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 40 )) ] || { say "b: no time for round $r"; continue; }
    bb d_auto_$r diffusion 64
    bb d_three_$r diffusion 64 CLOVER_CUDA_PDL_ROWS=3
    bb d_five_$r diffusion 64 CLOVER_CUDA_PDL_ROWS=5
    bb a_auto_$r ar 96
    bb a_four_$r ar 96 CLOVER_CUDA_PDL_ROWS=4
    bb a_zero_$r ar 96 CLOVER_CUDA_PDL_ROWS=0
  done
fi
if has x; then
  tst test_cuda_matmul a 150 CLOVER_TEST_ONLY=test_bad_arguments,test_act_quantize_bytes,test_decode_types,test_chunk_types,test_chunk_thin,test_exact,test_exact_multi,test_chunk_multi,test_chunk_seg,test_row_invariance,test_few_rows,test_mma_rows,test_igemm_wide,test_q8_rows32,test_mmv_stream,test_mmv_lane,test_stream32
  tst test_cuda_matmul b 150 CLOVER_TEST_ONLY=test_moe_decode,test_moe_chunk,test_moe_igw,test_moe_persist,test_moe_many_experts,test_moe_dec32,test_glu,test_glu_quant,test_multi,test_graph_capture,test_pdl_rows,test_pdl_rows_passes
  for n in test_cuda_moe_tiles test_cuda_backend; do tst $n all 120; done
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$D/bin/test_cuda_preview" > "$O/memcheck_preview.log" 2>&1
    say "memcheck test_cuda_preview rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_preview.log" | tail -1)"
  fi
fi
if has e; then
  wait $SPID
  for r in 1 2; do
    pv e_auto_$r
    pv e_pdl0_$r CLOVER_CUDA_PDL=0
  done
fi
dr_end
