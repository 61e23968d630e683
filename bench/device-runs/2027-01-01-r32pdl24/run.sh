#!/usr/bin/env bash
# Written in the 2026-12-06 08:53 session (issue 24; issue 25's 16-row step). matmul_q8_rows32.cu (the dense Q8_0
# products of 1..32 rows with K split over a thread-block cluster, CLOVER_CUDA_Q8_ROWS32, off by default) was
# bit-identical on an H100 in 2026-12-22-on24 and slower in a preview there, but its launch had no PDL while every
# other many-row product starts early under PDL, and its product bench (CLOVER_BENCH_ROWS32) never ran. Now it
# launches with PDL (the first stages' weights before griddepcontrol.wait, the rows after). This measures it per
# product and in the passes, to decide an AUTO for the few-block products (the preview trace's 64-block shared
# expert pair at 10 us and 128-block 2048-output products at 7.6 us a launch; ~0.8 ms of a preview).
#   cmake --build build -j2 && EXTRA_BINS="libclover_kernel_trace.so ..." scripts/device-packs.sh build seq
#   run(command="ITEMS='r32pdl24:t,m,p,b,k' bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS (default "t m p b k"):
#  t  test_cuda_matmul's test_q8_rows32 (bit for bit against igemm_q8_kernel, rows 1..32, layouts, graph), under
#     memcheck too; test_cuda_preview and test_cuda_batch with CLOVER_CUDA_Q8_ROWS32=1
#  m  bench_cuda_matmul CLOVER_BENCH_ROWS32=1 (9 shapes x 8/16/32 rows, off/on in graphs, cold weights); then the
#     layouts forced (CLOVER_CUDA_Q8_ROWS32_LAYOUT) for n1024 and gdn out at 32 and 16 rows
#  p  bench_cuda_preview --reps 3, Q8_ROWS32 0 / 1 / 0 / 1; clover run ids (diffusion, --ar) 0 and 1: equal
#  b  bench_batch --mode ar --n 16, Q8_ROWS32 0 / 1 / 0 / 1
#  k  the kernel trace of a preview with Q8_ROWS32=1 (PDL off)
# Predictions: RESULTS.md (written before the run).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t m p b k}
. "$PACK/lib.sh"
dr_init r32pdl24
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_matmul q8r 150 CLOVER_TEST_ONLY=test_q8_rows32
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_ONLY=test_q8_rows32 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$D/bin/test_cuda_matmul" > "$O/memcheck_q8r.log" 2>&1
    say "memcheck test_q8_rows32 rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_q8r.log" | tail -1)"
  fi
  tst test_cuda_preview r32 120 CLOVER_CUDA_Q8_ROWS32=1
  tst test_cuda_batch r32 120 CLOVER_CUDA_Q8_ROWS32=1
fi
if has m; then
  CLOVER_BENCH_ROWS32=1 timeout 150 "$D/bin/bench_cuda_matmul" > "$O/bench_r32.log" 2>&1
  say "== bench_cuda_matmul CLOVER_BENCH_ROWS32=1 rc=$? at +$(el)s"
  grep -E "^(device|copy|r32 )" "$O/bench_r32.log" | cut -c1-200 | tee -a "$S"
  for sh in n1024 "gdn out"; do
    for r in 32 16; do
      for L in 1x8 2x8 4x8 8x8 8x4 8x2; do
        [ "$(el)" -lt "${R32_MBUDGET:-260}" ] || break 3
        CLOVER_CUDA_Q8_ROWS32_LAYOUT=$L CLOVER_BENCH_ROWS32=1 CLOVER_BENCH_ROWS32_ONLY="$sh" CLOVER_BENCH_ROWS32_ROWS=$r \
          timeout 30 "$D/bin/bench_cuda_matmul" > "$O/bench_r32_L.log" 2>&1
        say "layout $L: $(grep -E '^r32 ' "$O/bench_r32_L.log" | tail -1 | cut -c1-190)"
      done
    done
  done
fi
if has p; then
  wait $SPID
  for v in ${R32_ALT:-0 1 0 1}; do
    [ "$(el)" -lt "${R32_PBUDGET:-400}" ] || { say "bench_cuda_preview: no time left for $v"; break; }
    CLOVER_CUDA_Q8_ROWS32=$v timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_Q8_ROWS32=$v rc=$? at +$(el)s"
    grep -E "^(preview 32 rows|commit|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
  for v in 0 1; do
    CLOVER_CUDA_Q8_ROWS32=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/run_$v.json" 2> "$O/run_$v.err"
    CLOVER_CUDA_Q8_ROWS32=$v timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 \
      --ignore-eos --no-visual --json > "$O/ar_$v.json" 2> "$O/ar_$v.err"
  done
  say "clover run Q8_ROWS32=0: diffusion $(dr_ids "$O/run_0.json"), --ar $(dr_ids "$O/ar_0.json")"
  dr_ids_cmp "$O/run_0.json" "$O/run_1.json" "clover run diffusion, Q8_ROWS32 0 / 1"
  dr_ids_cmp "$O/ar_0.json" "$O/ar_1.json" "clover run --ar, Q8_ROWS32 0 / 1"
fi
if has b; then
  wait $SPID
  for v in ${R32_ALT:-0 1 0 1}; do
    [ "$(el)" -lt "${R32_BBUDGET:-490}" ] || { say "bench_batch: no time left"; break; }
    CLOVER_CUDA_Q8_ROWS32=$v timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 --gen 96 \
      > "$O/batch_ar_$v.log" 2>&1
    say "== bench_batch --mode ar --n 16 Q8_ROWS32=$v rc=$? at +$(el)s: $(grep -E "^ +16 " "$O/batch_ar_$v.log" | tail -1)"
  done
fi
if has k; then
  wait $SPID
  TR=$D/bin/libclover_kernel_trace.so
  CLOVER_CUDA_Q8_ROWS32=1 CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_1.txt LD_PRELOAD=$TR timeout 120 \
    "$D/bin/bench_cuda_preview" $F --profile > "$O/trace_1.log" 2>&1
  say "== the kernel trace of a preview, Q8_ROWS32=1 (PDL off) rc=$? at +$(el)s; window 2:"
  if [ -f $R/trace_1.txt ]; then
    c++filt < $R/trace_1.txt > $R/trace_1.dm.txt && rm -f $R/trace_1.txt
    awk '$0 ~ "^== window 2" {f=1; print; next} /^== window/ {f=0} f' $R/trace_1.dm.txt | head -14 | cut -c1-150 | \
      tee -a "$S"
  fi
fi
dr_end
