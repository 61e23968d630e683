#!/usr/bin/env bash
# Written in the 2026-12-06 02:54 session by a helper without a device (issues 24, 25; not run yet). The integer
# chunk kernels' X2 forms (matmul_igemm.cu, CLOVER_CUDA_IG_X2=1, OFF by default until this runs): two 256-value
# chunks a cp.async ring stage, so half the waits and __syncthreads (README items 19, 22: the chunk barrier the
# grouped experts' top stall; a chunk of the dense Q8_0 products ~latency-bound), both chunks' fragment decodes and
# mma issued before their float adds; igemm_q8_kernel (every dense Q8_0 product of <= 32 rows, the head, the segmented
# launch) and igemm_kernel's WIDE Q4_K / Q5_K tiles (the grouped experts of a preview / commit / stacked step). The
# same additions in the same order: the same bits. Stages of two chunks: 3 where that keeps the one-chunk form's blocks
# an SM or the grid is one wave, else 2 (CLOVER_CUDA_IG_X2_STAGES=2|3 forces it).
#   cmake --build build -j2 && EXTRA_BINS="libclover_kernel_trace.so" scripts/device-packs.sh build x2ig24
#   run(command="OUT=$OUT/x2 bash .gpu-x2ig24/run.sh", carry=[".gpu-x2ig24"], timeout_s=600)
#   (or in a seq pack: ITEMS='x2ig24:t,m,p,k' bash .gpu-seq/run.sh)
# STEPS (default "t m p k"; ~200-240 s with the 35B synth):
#  t  test_cuda_ig_x2 (X2 at 2 / 3 / auto stages = the one-chunk form, memcmp; the CPU oracle), its small cases under
#     compute-sanitizer memcheck, test_cuda_matmul's row-invariance / seg / GLU-quant tests with CLOVER_CUDA_IG_X2=1
#  m  bench_cuda_matmul CLOVER_BENCH_X2=1 (each product off / on alternating, 2 / 3 stages forced; GB/s vs copy bw)
#  p  bench_cuda_preview --reps 3, CLOVER_CUDA_IG_X2=0 / 1 / 0 / 1 (preview, commit, block diffusion); clover run ids
#     (diffusion and --ar, 64 tokens) with 0 and 1: equal
#  b  (added 2026-12-06) the stacked 16-sequence steps (issue 25): bench_batch --n 16, --mode ar (--gen 96) and
#     diffusion (--gen 64), CLOVER_CUDA_IG_X2=0 / $X2_ON alternating twice
#  k  the kernel trace of a preview (bench_cuda_preview --profile, PDL off) with 0 and 1: igemm_q8_kernel / igemm_kernel
# Predictions: RESULTS.md (written before any run).
set -uo pipefail
PACK=${PACK:-.gpu-x2ig24}
STEPS=${STEPS:-t m p k}
. "$PACK/lib.sh"
dr_init x2ig24
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_ig_x2 all 150
  grep -E "^  " "$O/t_test_cuda_ig_x2_all.log" | head -6 | cut -c1-200 | tee -a "$S"
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_SMALL=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$D/bin/test_cuda_ig_x2" \
      > "$O/memcheck_x2.log" 2>&1
    rc=$?
    say "memcheck test_cuda_ig_x2 (small) rc=$rc $(( $(date +%s) - s ))s: \
$(grep -E 'ERROR SUMMARY' "$O/memcheck_x2.log" | tail -1)"
  fi
  tst test_cuda_matmul x2 150 CLOVER_TEST_ONLY=test_row_invariance,test_chunk_seg,test_glu_quant,test_graph_capture \
    CLOVER_CUDA_IG_X2=1
fi
if has m; then
  CLOVER_BENCH_X2=1 timeout 120 "$D/bin/bench_cuda_matmul" > "$O/bench_x2.log" 2>&1
  say "== bench_cuda_matmul CLOVER_BENCH_X2=1 rc=$? at +$(el)s"
  grep -E "^(device|x2 )" "$O/bench_x2.log" | cut -c1-230 | tee -a "$S"
fi
if has p; then
  wait $SPID
  for v in ${X2_ALT:-0 1 0 1}; do
    [ "$(el)" -lt "${X2_BUDGET:-380}" ] || { say "bench_cuda_preview: no time left for $v"; break; }
    CLOVER_CUDA_IG_X2=$v timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_IG_X2=$v rc=$? at +$(el)s"
    grep -E "^(preview 32 rows, first|commit|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
  ON=${X2_ON:-1} # the form against off: 1 (every X2 form) or auto (the default since ee3735d: any other value)
  for v in 0 $ON; do
    CLOVER_CUDA_IG_X2=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/run_$v.json" 2> "$O/run_$v.err"
    CLOVER_CUDA_IG_X2=$v timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/ar_$v.json" 2> "$O/ar_$v.err"
  done
  say "clover run IG_X2=0: diffusion $(dr_ids "$O/run_0.json"), --ar $(dr_ids "$O/ar_0.json")"
  dr_ids_cmp "$O/run_0.json" "$O/run_$ON.json" "clover run diffusion, IG_X2 0 / $ON"
  dr_ids_cmp "$O/ar_0.json" "$O/ar_$ON.json" "clover run --ar, IG_X2 0 / $ON"
fi
if has b; then
  wait $SPID
  for rep in 1 2; do
    for v in 0 ${X2_ON:-1}; do
      for m in ar diffusion; do
        [ "$(el)" -lt "${X2_BBUDGET:-200}" ] || { say "bench_batch: no time left"; break 3; }
        g=96; [ $m = ar ] || g=64
        CLOVER_CUDA_IG_X2=$v timeout 60 "$D/bin/bench_batch" $F --device cuda --mode $m --n 16 --prompt 32 --gen $g \
          > "$O/batch_${m}_${v}_$rep.log" 2>&1
        say "== bench_batch --mode $m --n 16 IG_X2=$v rc=$? at +$(el)s: $(grep -E "^ +16 " "$O/batch_${m}_${v}_$rep.log" | tail -1)"
      done
    done
  done
fi
if has k; then
  wait $SPID
  TR=$D/bin/libclover_kernel_trace.so
  for v in 0 ${X2_ON:-1}; do
    [ "$(el)" -lt "${X2_KBUDGET:-480}" ] || { say "trace: no time left for $v"; break; }
    CLOVER_CUDA_IG_X2=$v CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_$v.txt LD_PRELOAD=$TR timeout 120 \
      "$D/bin/bench_cuda_preview" $F --profile > "$O/trace_$v.log" 2>&1
    say "== the kernel trace of a preview, CLOVER_CUDA_IG_X2=$v (PDL off) rc=$? at +$(el)s; window 2's igemm kernels:"
    if [ -f $R/trace_$v.txt ]; then
      c++filt < $R/trace_$v.txt > $R/trace_$v.dm.txt && rm -f $R/trace_$v.txt
      awk '$0 ~ "^== window 2" {f=1; print; next} /^== window/ {f=0} f' $R/trace_$v.dm.txt | \
        grep -E "^== window|igemm_q8_kernel|igemm_kernel" | head -8 | cut -c1-180 | tee -a "$S"
    fi
  done
fi
dr_end
