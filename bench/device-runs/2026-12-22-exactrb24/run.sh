#!/usr/bin/env bash
# Written in the 2026-12-05 08:52 session (issues 24 / 25; no device lent that session: NOT RUN). The exact float
# products of many rows (matmul_exact.cu: the router and the shared expert's gate logit of every prompt chunk,
# commit, preview and stacked pass) took 107 us a layer at 512 rows in stack25's N=16 trace (4.3 ms of a ~53 ms
# stacked preview) and ~9 us at 32 rows (share24: 0.36 ms of a 9.1 ms preview), for ~8 us of arithmetic at 512
# rows: L2-bound, every weight row read once per 4 rows and every row once per 8 outputs. CLOVER_CUDA_EXACT_RB=1
# runs the row-block form (ex_rb_kernel: 16 outputs a block, each warp's weight slice in registers across the
# block's rows, row blocks sized to ~2 waves): the same per-row code, so the same bits.
#   cmake --build build -j2 && EXTRA_BINS=libclover_kernel_trace.so scripts/device-packs.sh build exactrb24
#   run(command="bash .gpu-exactrb24/run.sh", carry=[".gpu-exactrb24"], timeout_s=600)
#   (or from the seq pack: ITEMS='exactrb24:t,b')
# STEPS (default "t b r p"):
#  t  test_cuda_matmul test_exact_multi (both forms, 2..512 rows, bit for bit against the 8-row decode products);
#     test_cuda_backend / test_cuda_preview / test_cuda_batch with the switch on; memcheck of test_exact_multi (on)
#  b  bench_cuda_backend --prompt-only 1 (prompt 512, the 32-row chunk commit) off / on / off / on; bench_batch
#     diffusion (prompt 32, gen 64) at N = 16 off / on; bench_cuda_preview --reps 3 off / on
#  r  clover run ids (diffusion, and --ar) off and on: equal
#  p  kernel trace (PDL off) of a 512-row prompt chunk off / on: ex_rows_kernel against ex_rb_kernel per launch
# Predictions (before the run):
#  t: all pass, bit for bit; memcheck 0 errors.
#  b: prompt 512 6,068 -> ~6,300-6,400 tok/s (40 x ~80 us of ~84 ms); the 32-row commit and the lone preview
#     within +-1% (at 32 rows the grid is the old one's shape: 17 x 8 blocks of 4 rows a warp); bench_batch N=16
#     diffusion +3-6% (the stacked preview's 512 rows).
#  r: ids equal.
#  p: at 512 rows ex_rows_kernel ~107 us, ex_rb_kernel ~20-35 us (~100 MB of L2 reads instead of ~400, ~8 us of
#     arithmetic); at 32 rows both ~8-9 us.
set -uo pipefail
PACK=${PACK:-.gpu-exactrb24}
STEPS=${STEPS:-t b r p}
. "$PACK/lib.sh"
dr_init exactrb24
TR=$D/bin/libclover_kernel_trace.so
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_matmul exact 300 CLOVER_TEST_ONLY=test_exact_multi
  grep -E "exact_multi" "$O/t_test_cuda_matmul_exact.log" | head -6 | cut -c1-150 | tee -a "$S"
  for n in test_cuda_backend test_cuda_preview test_cuda_batch; do
    tst $n rb 150 CLOVER_CUDA_EXACT_RB=1
  done
  if command -v compute-sanitizer > /dev/null; then
    CLOVER_CUDA_EXACT_RB=1 CLOVER_TEST_ONLY=test_exact_multi timeout 200 compute-sanitizer --tool memcheck \
      "$D/bin/test_cuda_matmul" > "$O/memcheck.log" 2>&1
    say "memcheck test_exact_multi rc=$?: $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1)"
  fi
fi
if has b; then
  wait $SPID
  i=0
  for v in 0 1 0 1; do
    i=$((i + 1))
    [ "$(el)" -lt 420 ] || { say "bench_cuda_backend EXACT_RB=$v: no time left"; break; }
    CLOVER_CUDA_EXACT_RB=$v timeout 60 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/backend_$i.log" 2>&1
    say "== bench_cuda_backend --prompt-only 1, CLOVER_CUDA_EXACT_RB=$v (run $i) rc=$?"
    grep -E "prompt of|chunk commit" "$O/backend_$i.log" | cut -c1-140 | tee -a "$S"
  done
  for v in 0 1; do
    [ "$(el)" -lt 470 ] || { say "bench_batch EXACT_RB=$v: no time left"; break; }
    CLOVER_CUDA_EXACT_RB=$v timeout 90 "$D/bin/bench_batch" $F --device cuda --mode diffusion --prompt 32 --gen 64 \
      --n 1,16 > "$O/batch_$v.log" 2>&1
    say "== bench_batch diffusion N=1,16, CLOVER_CUDA_EXACT_RB=$v rc=$?"
    tail -4 "$O/batch_$v.log" | cut -c1-160 | tee -a "$S"
  done
  for v in 0 1; do
    [ "$(el)" -lt 500 ] || break
    CLOVER_CUDA_EXACT_RB=$v timeout 60 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_EXACT_RB=$v rc=$?"
    grep -E "^(preview|commit)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
fi
if has r; then
  wait $SPID
  for mode in diffusion ar; do
    for v in 0 1; do
      [ "$(el)" -lt 530 ] || break
      CLOVER_CUDA_EXACT_RB=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
        --no-visual --json $([ $mode = ar ] && echo --ar) > "$O/run_${mode}_$v.json" 2> "$O/run_${mode}_$v.err"
      say "clover run $mode CLOVER_CUDA_EXACT_RB=$v: ids $(dr_ids "$O/run_${mode}_$v.json")"
    done
  done
fi
if has p && [ -f "$TR" ]; then
  wait $SPID
  for v in 0 1; do
    [ "$(el)" -lt 540 ] || { say "trace: no time left for switch $v"; break; }
    CLOVER_CUDA_EXACT_RB=$v CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_prompt_$v.txt LD_PRELOAD=$TR timeout 60 \
      "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/trace_prompt_$v.log" 2>&1
    say "== bench_cuda_backend --prompt-only 1 under the tracer, CLOVER_CUDA_EXACT_RB=$v, PDL off rc=$?"
    grep -E "ex_rows_kernel|ex_rb_kernel" "$R/trace_prompt_$v.txt" | head -6 | cut -c1-170 | tee -a "$S"
  done
fi
dr_end
