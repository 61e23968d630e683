#!/usr/bin/env bash
# Written in the session of 2026-12-07 04:57 UTC (issues 24 and 25): the router's exact f32 product with its rows
# staged once a block in shared memory (matmul_exact.cu's ex_stage_kernel<T, O>, CLOVER_CUDA_EXACT_STAGE=1 / 2 outputs
# a warp; off by default). Why: xtile25 (H100) timed the warp-an-output form at ~0.22 us a row (16 rows 4.96 us, 32
# 7.57, 64 14.60), so its time is its rows' reads (each warp reads its 4 rows through L1 on its own: 67 MB of L1
# fills a 32-row pass); prof26's trace had it 9.62 us x 40 of a coreset preview, ncu long_scoreboard 67%.
#   run(command="SEQ_LIMIT=420 ITEMS='xstage32:t,e,p,b' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  test_cuda_matmul test_exact + test_exact_multi (five forms: the staged ones with 1 and 2 outputs a warp, bit for
#     bit against the 8-row decode products, within 1e-5 of the CPU's scalar dot), memcheck of test_exact_multi;
#     clover run ids with STAGE=1 and 2 (the references db3c58da3157 / ff19558da508)
#  e  bench_cuda_matmul CLOVER_BENCH_EXACT=1: the router 257 x 2048 at 4..512 rows, five forms
#  p  dr_preview (bench_cuda_preview --reps 3) STAGE 0 / 1 / 2 alternating twice: the coreset preview, the commit
#  b  bench_batch --mode ar --n 1,4,16 STAGE 0 / 1 / 2 (the stacked AR steps' router at 1..16 rows)
#  v  with CLOVER_CUDA_EXACT_STAGE=$XS_V (default 1) exported, as if it were the default: every test_cuda_* of the
#     pack, clover run ids, bench_cuda_backend, serve AR 16 x 128 (the --no-diffusion file) one round
# Predictions (before the run; H100):
#  t: all pass, ids equal in every form, memcheck 0 errors.
#  e: warp an output 4 rows ~2.5 us, 8 ~3.2, 16 ~5.0, 32 ~7.6, 64 ~14.6 (xtile25's); staged 1 a warp 4 ~2.5, 8 ~2.8,
#     16 ~3.0, 32 ~4.0, 64 ~6.5; staged 2 a warp 16 ~2.8, 32 ~3.3, 64 ~5.0 (half the shared-memory reads, one block an
#     SM). Where staged wins from 8 rows up, make it the default below 128 rows (the tiles' AUTO).
#  p: the router 9.6 -> ~4.5 us a layer in a preview: coreset preview 5.42 -> ~5.22 ms, no-coreset likewise, commit
#     ~10.5 -> ~10.3 ms, block diffusion +2..+3%.
#  b: n 1 equal (1 row: the decode's fused router), n 4 +0..+1%, n 16 +1..+2% (5 -> 3 us x 40 of a 8.6 ms step).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t e p b}
. "$PACK/lib.sh"
dr_init xstage32
dr_synth35
if has t; then
  tst test_cuda_matmul exact 200 CLOVER_TEST_ONLY=test_exact,test_exact_multi
  dr_memcheck test_cuda_matmul test_exact_multi 200
fi
if has e; then
  CLOVER_BENCH_EXACT=1 timeout 90 "$D/bin/bench_cuda_matmul" > "$O/exact.log" 2>&1
  say "== bench_cuda_matmul CLOVER_BENCH_EXACT=1 rc=$? at +$(el)s"
  grep -E "^(device|exact)" "$O/exact.log" | cut -c1-220 | tee -a "$S"
fi
if has t; then
  wait $SPID
  for v in 1 2; do dr_run_ids stage$v CLOVER_CUDA_EXACT_STAGE=$v; done
fi
if has p; then
  wait $SPID
  for r in 1 2; do
    for v in 0 1 2; do dr_preview STAGE_${v}_$r CLOVER_CUDA_EXACT_STAGE=$v; done
  done
fi
if has b; then
  wait $SPID
  for v in 0 1 2; do
    [ "$(el)" -lt "${DR_LIMIT:-585}" ] || break
    CLOVER_CUDA_EXACT_STAGE=$v timeout 120 "$D/bin/bench_batch" $F --device cuda --mode ar --n 1,4,16 --prompt 32 \
      --gen 96 > "$O/batch_$v.log" 2>&1
    say "== bench_batch --mode ar --n 1,4,16 STAGE=$v rc=$? at +$(el)s"
    grep -E "^ +(1|4|16) " "$O/batch_$v.log" | cut -c1-130 | tee -a "$S"
  done
fi
if has v; then
  export CLOVER_CUDA_EXACT_STAGE=${XS_V:-1}
  say "== v: CLOVER_CUDA_EXACT_STAGE=$CLOVER_CUDA_EXACT_STAGE exported"
  for t in "$D"/bin/test_cuda_*; do tst "$(basename "$t")" v 200; done
  wait $SPID
  dr_run_ids v
  AR=/tmp/synth35-ar.gguf
  ( [ -s $AR ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $AR.part \
      > "$O/synth-ar.log" 2>&1 && mv $AR.part $AR; } ) &
  APID=$!
  DR_LIMIT=$(( ${DR_LIMIT:-585} - 120 )) dr_backend
  wait $APID
  dr_serve $AR "" 16 128 1 ar
fi
dr_end
