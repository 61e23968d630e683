#!/usr/bin/env bash
# 2026-12-04 20:39 session, call 2 (issues 24, 25): the many-row float product with the decode bits (matmul_exact.cu:
# the router + the shared expert's gate logit of a preview / commit / stacked step in one launch, on by default,
# CLOVER_CUDA_EXACT_ROWS=0 = the old 4 decode launches + thin launch), and the kernel trace with PDL off (CUPTI
# durations without the early-launch wait that PDL folds into them: call 1's sums exceeded the spans).
#   cmake --build build -j2 && EXTRA_BINS=libclover_kernel_trace.so scripts/device-packs.sh build exact24
#   run(command="bash .gpu-exact24/run.sh", carry=[".gpu-exact24"], timeout_s=600)
# STEPS (default "t x d"):
#  t  test_cuda_matmul test_exact / test_exact_multi / test_decode_types / test_chunk_thin; backend, batch, engine,
#     preview tests (the default now takes the new form past 8 rows); clover run ids, new vs CLOVER_CUDA_EXACT_ROWS=0
#     (block diffusion and --ar on the 35B-A3B files)
#  x  bench_cuda_preview --reps 3, new vs EXACT_ROWS=0; then --profile under the tracer with CLOVER_CUDA_PDL=0
#  d  bench_cuda_decode (AR file) steps new vs EXACT_ROWS=0; the traced 1- and 16-sequence steps with PDL off
# Predictions (before the run):
#  t: all pass; test_exact_multi 18 cases bit-identical; clover run ids identical new vs old (the same bits).
#  x: router + gate logit ~42 us -> ~4-5 us a layer: preview first pass coreset 10.05 -> ~8.6 ms, no coreset 9.13 ->
#     ~7.7, commit 16.0 -> ~14.6; block diffusion 93.9 -> ~108 tok/s. PDL-off trace: span ~+0.5 ms over PDL on, the
#     sum of kernel times ~ the span; ex_rows_kernel ~4 us each.
#  d: 16-sequence step 11.6 -> ~9.9 ms (the two 23 us decode launches a layer -> one ~4 us); 1 sequence unchanged.
set -uo pipefail
PACK=${PACK:-.gpu-exact24}
STEPS=${STEPS:-t x d}
. "$PACK/lib.sh"
dr_init exact24
TR=$D/bin/libclover_kernel_trace.so
CL=/tmp/synth35-clover.gguf
( [ -s $CL ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!
dr_synth35 --no-diffusion
if has t; then
  tst test_cuda_matmul exact 120 CLOVER_TEST_ONLY=test_exact,test_exact_multi,test_decode_types,test_chunk_thin,test_bad_arguments
  grep -E "exact_multi" "$O/t_test_cuda_matmul_exact.log" | tee -a "$S"
  for n in test_cuda_backend test_cuda_batch test_cuda_engine test_cuda_preview; do tst $n new 150; done
  wait $CPID $SPID
  for f in $CL $F; do
    for ex in 1 0; do
      mode=""; [ $f = $F ] && mode=--ar
      CLOVER_CUDA_EXACT_ROWS=$ex timeout 60 "$D/bin/clover" run -m $f --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
        --no-visual $mode --json > "$O/run_${ex}_$(basename $f).json" 2> "$O/run_${ex}_$(basename $f).err"
      echo "rc=$?" >> "$O/run_${ex}_$(basename $f).err"
    done
    a=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1])).get('ids'))" "$O/run_1_$(basename $f).json" 2>&1 | md5sum | cut -c1-12)
    b=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1])).get('ids'))" "$O/run_0_$(basename $f).json" 2>&1 | md5sum | cut -c1-12)
    say "clover run $(basename $f) ${mode:-diffusion}: ids new $a old $b $([ "$a" = "$b" ] && echo IDENTICAL || echo DIFFER) ($(tail -1 "$O/run_1_$(basename $f).err"))"
  done
fi
if has x; then
  wait $CPID
  for ex in 1 0; do
    CLOVER_CUDA_EXACT_ROWS=$ex timeout 120 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview_$ex.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_EXACT_ROWS=$ex rc=$? at +$(el)s"
    grep -E "^(preview|commit|resolve|block)" "$O/preview_$ex.log" | cut -c1-110 | tee -a "$S"
  done
  CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_preview.txt LD_PRELOAD=$TR timeout 150 "$D/bin/bench_cuda_preview" $CL --profile \
    > "$O/preview_profile.log" 2>&1
  say "== bench_cuda_preview --profile, PDL off, under the tracer rc=$? at +$(el)s"
  [ -f $R/trace_preview.txt ] && c++filt < $R/trace_preview.txt > $R/trace_preview.dm.txt && rm $R/trace_preview.txt && \
    grep -E "^(==|cuda_kernel)" $R/trace_preview.dm.txt | tee -a "$S"
fi
if has d; then
  wait $SPID
  for ex in 1 0; do
    CLOVER_CUDA_EXACT_ROWS=$ex CLOVER_BENCH_DECODE_ROWS=0 timeout 100 "$D/bin/bench_cuda_decode" $F > "$O/decode_$ex.log" 2>&1
    say "== bench_cuda_decode CLOVER_CUDA_EXACT_ROWS=$ex rc=$? at +$(el)s"; grep -E "^STEP (seq|batched)" "$O/decode_$ex.log" | tee -a "$S"
  done
  CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_decode.txt LD_PRELOAD=$TR CLOVER_BENCH_DECODE_TRACE=1 CLOVER_BENCH_DECODE_ROWS=0 \
    timeout 100 "$D/bin/bench_cuda_decode" $F > "$O/decode_trace.log" 2>&1
  say "== bench_cuda_decode trace (PDL off) rc=$? at +$(el)s"
  [ -f $R/trace_decode.txt ] && c++filt < $R/trace_decode.txt > $R/trace_decode.dm.txt && rm $R/trace_decode.txt && \
    grep -E "^(==|cuda_kernel)" $R/trace_decode.dm.txt | tee -a "$S"
fi
dr_end
