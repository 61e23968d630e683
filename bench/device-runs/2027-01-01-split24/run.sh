#!/usr/bin/env bash
# Written in the 2026-12-06 08:53 session (issue 24; issue 25's 16-row step). Two host-side choices for the dense
# Q8_0 products of <= 32 rows, both the same bits by construction:
#  - the row split (matmul_igemm.cu's ig_split_br, CLOVER_CUDA_IG_SPLIT, on unless 0): a product whose output
#    tiles x row tiles of 8 (or 16) rows fit 2 blocks an SM takes that tile instead of the one holding all its rows
#    (the shared expert's pair 64 -> 256 blocks at 32 rows, the 2048-output products 128 -> 256);
#  - CLOVER_CUDA_Q8_ROWS32 AUTO (unset): the K-split cluster form for the output head only (r32pdl24: 339 -> 292 us
#    at 32 rows), 0 none, 1 every product.
#   cmake --build build -j2 && EXTRA_BINS="libclover_kernel_trace.so ..." scripts/device-packs.sh build seq
#   run(command="ITEMS='split24:t,m,p,b,k' bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS (default "t m p b k"):
#  t  test_cuda_matmul's test_ig_split (split on = off bit for bit, taken where expected, the pair, the CPU
#     oracle), test_row_invariance, test_chunk_seg, test_q8_rows32, test_chunk_multi; memcheck of test_ig_split;
#     test_cuda_preview, test_cuda_batch, test_cuda_backend
#  m  bench_cuda_matmul CLOVER_BENCH_SPLIT=1 (9 shapes x 8/16/32 rows, split off/on in graphs, cold weights)
#  p  bench_cuda_preview --reps 3: (IG_SPLIT, Q8_ROWS32) = (0,0) / default / (0,0) / default / (1,0) / (0,auto);
#     clover run ids (diffusion, --ar) default and (0,0): equal
#  b  bench_batch --mode ar --n 16: (0,0) / default / (0,0) / default
#  k  the kernel trace of a preview with the defaults (PDL off)
# Predictions: RESULTS.md (written before the run).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t m p b k}
. "$PACK/lib.sh"
dr_init split24
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_matmul split 200 CLOVER_TEST_ONLY=test_ig_split,test_row_invariance,test_chunk_seg,test_q8_rows32,test_chunk_multi
  grep -E "^  ig split" "$O/t_test_cuda_matmul_split.log" | cut -c1-200 | tee -a "$S"
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_ONLY=test_ig_split timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$D/bin/test_cuda_matmul" > "$O/memcheck_split.log" 2>&1
    say "memcheck test_ig_split rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_split.log" | tail -1)"
  fi
  tst test_cuda_preview all 120
  tst test_cuda_batch all 120
  tst test_cuda_backend all 150
fi
if has m; then
  CLOVER_BENCH_SPLIT=1 timeout 150 "$D/bin/bench_cuda_matmul" > "$O/bench_split.log" 2>&1
  say "== bench_cuda_matmul CLOVER_BENCH_SPLIT=1 rc=$? at +$(el)s"
  grep -E "^(device|split )" "$O/bench_split.log" | cut -c1-200 | tee -a "$S"
fi
# a form: "SPLIT,R32" ("d" = unset: the default)
form_env() {
  local a=${1%,*} b=${1#*,} e=()
  [ "$a" = d ] || e+=("CLOVER_CUDA_IG_SPLIT=$a")
  [ "$b" = d ] || e+=("CLOVER_CUDA_Q8_ROWS32=$b")
  echo "${e[@]}"
}
if has p; then
  wait $SPID
  for f in ${SP_PFORMS:-0,0 d,d 0,0 d,d 1,0 0,d}; do
    [ "$(el)" -lt "${SP_PBUDGET:-400}" ] || { say "bench_cuda_preview: no time left for $f"; break; }
    env $(form_env $f) timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_$f.log" 2>&1
    say "== bench_cuda_preview --reps 3, (split, rows32) = ($f) rc=$? at +$(el)s"
    grep -E "^(preview 32 rows|commit|block)" "$O/preview_$f.log" | cut -c1-110 | tee -a "$S"
  done
  for f in d,d 0,0; do
    env $(form_env $f) timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/run_$f.json" 2> "$O/run_$f.err"
    env $(form_env $f) timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 \
      --ignore-eos --no-visual --json > "$O/ar_$f.json" 2> "$O/ar_$f.err"
  done
  say "clover run defaults: diffusion $(dr_ids "$O/run_d,d.json"), --ar $(dr_ids "$O/ar_d,d.json")"
  dr_ids_cmp "$O/run_d,d.json" "$O/run_0,0.json" "clover run diffusion, defaults / (0,0)"
  dr_ids_cmp "$O/ar_d,d.json" "$O/ar_0,0.json" "clover run --ar, defaults / (0,0)"
fi
if has b; then
  wait $SPID
  for f in ${SP_BFORMS:-0,0 d,d 0,0 d,d}; do
    [ "$(el)" -lt "${SP_BBUDGET:-490}" ] || { say "bench_batch: no time left"; break; }
    env $(form_env $f) timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 --gen 96 \
      > "$O/batch_ar_$f.log" 2>&1
    say "== bench_batch --mode ar --n 16 ($f) rc=$? at +$(el)s: $(grep -E "^ +16 " "$O/batch_ar_$f.log" | tail -1)"
  done
fi
if has k; then
  wait $SPID
  TR=$D/bin/libclover_kernel_trace.so
  CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_d.txt LD_PRELOAD=$TR timeout 120 \
    "$D/bin/bench_cuda_preview" $F --profile > "$O/trace_d.log" 2>&1
  say "== the kernel trace of a preview, defaults (PDL off) rc=$? at +$(el)s; window 2:"
  if [ -f $R/trace_d.txt ]; then
    c++filt < $R/trace_d.txt > $R/trace_d.dm.txt && rm -f $R/trace_d.txt
    awk '$0 ~ "^== window 2" {f=1; print; next} /^== window/ {f=0} f' $R/trace_d.dm.txt | head -16 | cut -c1-150 | \
      tee -a "$S"
  fi
fi
dr_end
