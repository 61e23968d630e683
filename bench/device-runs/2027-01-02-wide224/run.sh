#!/usr/bin/env bash
# Written in the 2026-12-06 08:53 session (issue 24; the commit's and issue 25's AR step's experts too). WIDE 2
# (CLOVER_CUDA_MOE_WIDE2=1, off until measured): the grouped few-slot expert tiles (a preview's, a commit's, the
# 16-row AR step's: tiles of <= 8 slots) on blocks of 64 outputs whose 8 warps are 4 m-tiles x the two halves of the
# partials (even / odd chunks), instead of 128 outputs with each warp walking every chunk: each warp's chain of
# chunk steps halved, twice the blocks, half the shared memory (Q4_K K2: 78 registers against 92). Same bits.
#   cmake --build build -j2 && EXTRA_BINS="libclover_kernel_trace.so ..." scripts/device-packs.sh build seq
#   run(command="ITEMS='wide224:t,m,p,b,k' bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS (default "t m p b k"):
#  t  test_cuda_moe_tiles (WIDE 2 against the full grid's bits in every case, its launches counted), memcheck of its
#     small cases; test_cuda_matmul's grouped cases with WIDE2=1; test_cuda_preview / _batch / _backend with WIDE2=1
#  m  bench_cuda_matmul CLOVER_BENCH_TILES=1 with WIDE2 0 and 1 (each line: the loop off / on; compare the on columns)
#  p  bench_cuda_preview --reps 3, WIDE2 0 / 1 / 0 / 1; clover run ids (diffusion, --ar) 0 and 1: equal
#  b  bench_batch --mode ar --n 16, WIDE2 0 / 1 / 0 / 1
#  k  the kernel trace of a preview with WIDE2=1 (PDL off)
# Predictions: RESULTS.md (written before the run).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t m p b k}
. "$PACK/lib.sh"
dr_init wide224
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_moe_tiles all 200
  grep -E "^  " "$O/t_test_cuda_moe_tiles_all.log" | head -6 | cut -c1-200 | tee -a "$S"
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_SMALL=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$D/bin/test_cuda_moe_tiles" \
      > "$O/memcheck_tiles.log" 2>&1
    say "memcheck test_cuda_moe_tiles (small) rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_tiles.log" | tail -1)"
  fi
  tst test_cuda_matmul moe 150 CLOVER_CUDA_MOE_WIDE2=1 CLOVER_TEST_ONLY=test_moe_chunk,test_moe_igw,test_moe_many_experts,test_glu_quant
  tst test_cuda_preview w2 120 CLOVER_CUDA_MOE_WIDE2=1
  tst test_cuda_batch w2 120 CLOVER_CUDA_MOE_WIDE2=1
  tst test_cuda_backend w2 150 CLOVER_CUDA_MOE_WIDE2=1
fi
if has m; then
  for v in 0 1; do
    CLOVER_CUDA_MOE_WIDE2=$v CLOVER_BENCH_TILES=1 CLOVER_BENCH_TILES_CAPS=66 timeout 100 "$D/bin/bench_cuda_matmul" \
      > "$O/bench_tiles_$v.log" 2>&1
    say "== bench_cuda_matmul CLOVER_BENCH_TILES=1 WIDE2=$v rc=$? at +$(el)s"
    grep -E "^(tiles )" "$O/bench_tiles_$v.log" | cut -c1-200 | tee -a "$S"
  done
fi
if has p; then
  wait $SPID
  for v in ${W2_ALT:-0 1 0 1}; do
    [ "$(el)" -lt "${W2_PBUDGET:-300}" ] || { say "bench_cuda_preview: no time left for $v"; break; }
    CLOVER_CUDA_MOE_WIDE2=$v timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_MOE_WIDE2=$v rc=$? at +$(el)s"
    grep -E "^(preview 32 rows, first|commit|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
  for v in 0 1; do
    CLOVER_CUDA_MOE_WIDE2=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/run_$v.json" 2> "$O/run_$v.err"
    CLOVER_CUDA_MOE_WIDE2=$v timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 \
      --ignore-eos --no-visual --json > "$O/ar_$v.json" 2> "$O/ar_$v.err"
  done
  say "clover run WIDE2=0: diffusion $(dr_ids "$O/run_0.json"), --ar $(dr_ids "$O/ar_0.json")"
  dr_ids_cmp "$O/run_0.json" "$O/run_1.json" "clover run diffusion, WIDE2 0 / 1"
  dr_ids_cmp "$O/ar_0.json" "$O/ar_1.json" "clover run --ar, WIDE2 0 / 1"
fi
if has b; then
  wait $SPID
  for v in ${W2_ALT:-0 1 0 1}; do
    [ "$(el)" -lt "${W2_BBUDGET:-380}" ] || { say "bench_batch: no time left"; break; }
    CLOVER_CUDA_MOE_WIDE2=$v timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 --gen 96 \
      > "$O/batch_ar_$v.log" 2>&1
    say "== bench_batch --mode ar --n 16 WIDE2=$v rc=$? at +$(el)s: $(grep -E "^ +16 " "$O/batch_ar_$v.log" | tail -1)"
  done
fi
if has k; then
  wait $SPID
  TR=$D/bin/libclover_kernel_trace.so
  CLOVER_CUDA_MOE_WIDE2=1 CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_1.txt LD_PRELOAD=$TR timeout 120 \
    "$D/bin/bench_cuda_preview" $F --profile > "$O/trace_1.log" 2>&1
  say "== the kernel trace of a preview, WIDE2=1 (PDL off) rc=$? at +$(el)s; window 2's experts:"
  if [ -f $R/trace_1.txt ]; then
    c++filt < $R/trace_1.txt > $R/trace_1.dm.txt && rm -f $R/trace_1.txt
    awk '$0 ~ "^== window 2" {f=1; print; next} /^== window/ {f=0} f' $R/trace_1.dm.txt | \
      grep -E "^== window|igemm_kernel|moe_group" | head -8 | cut -c1-150 | tee -a "$S"
  fi
fi
dr_end
