#!/usr/bin/env bash
# 2026-12-04 20:39 session, call 3 (issues 24, 25): a preview's grouped expert products in 32-slot tiles
# (cuda_moe_args.rows_alike, on for previews; CLOVER_CUDA_MOE_WIDE=1 = the old wide 8-slot tiles), and the merged
# serve25 branch's CUDA switches under test (CLOVER_CUDA_STACK_CHUNKS=1, CLOVER_CUDA_DEVICE_SNAPSHOT=1).
#   cmake --build build -j2 && EXTRA_BINS="libclover_kernel_trace.so test_engine_snapshot" scripts/device-packs.sh build moe24
#   run(command="bash .gpu-moe24/run.sh", carry=[".gpu-moe24"], timeout_s=600)
# STEPS (default "t x"):
#  t  test_cuda_matmul test_moe_chunk (the hint bit for bit, rows-alike cases) and test_moe_fast (small); backend,
#     batch, engine, preview tests with the new default; batch / engine / backend with CLOVER_CUDA_STACK_CHUNKS=1;
#     test_engine_snapshot with CLOVER_CUDA_DEVICE_SNAPSHOT=0 and 1
#  x  bench_cuda_preview --reps 3: default (rows_alike tiles), CLOVER_CUDA_MOE_WIDE=1 (old), =0 (never wide: the
#     commit too); the PDL-off kernel trace of the default
# Predictions (before the run):
#  t: all pass (the tiles change which block computes a slot, not its arithmetic).
#  x: the preview's gate / up 19.7 us -> ~6-8 us each, down 16.9 -> ~6: preview first pass coreset 9.46 -> ~8.2 ms,
#     no coreset 8.52 -> ~7.3; half fixed (16 experts kept) ~-0.8 ms; commit unchanged with the default (not a
#     preview); WIDE=0's commit slower (~1.6 slots an expert in 32-slot tiles: the wide tiles were made for it).
set -uo pipefail
PACK=${PACK:-.gpu-moe24}
STEPS=${STEPS:-t x}
. "$PACK/lib.sh"
dr_init moe24
TR=$D/bin/libclover_kernel_trace.so
CL=/tmp/synth35-clover.gguf
( [ -s $CL ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!
if has t; then
  tst test_cuda_matmul moe 150 CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=test_moe_chunk,test_moe_fast,test_moe_many_experts
  grep -E "moe chunk x32" "$O/t_test_cuda_matmul_moe.log" | tee -a "$S"
  for n in test_cuda_backend test_cuda_batch test_cuda_engine test_cuda_preview; do tst $n new 150; done
  for n in test_cuda_backend test_cuda_batch test_cuda_engine; do tst $n chunks 150 CLOVER_CUDA_STACK_CHUNKS=1; done
  for v in 0 1; do tst test_engine_snapshot dev$v 150 CLOVER_CUDA_DEVICE_SNAPSHOT=$v; done
fi
if has x; then
  wait $CPID; say "synth done at +$(el)s"
  for c in "default:" "wide1:CLOVER_CUDA_MOE_WIDE=1" "wide0:CLOVER_CUDA_MOE_WIDE=0"; do
    tag=${c%%:*} envs=${c#*:}
    env $envs timeout 120 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview_$tag.log" 2>&1
    say "== bench_cuda_preview --reps 3, $tag${envs:+ ($envs)} rc=$? at +$(el)s"
    grep -E "^(preview|commit|resolve|block)" "$O/preview_$tag.log" | cut -c1-110 | tee -a "$S"
  done
  CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_preview.txt LD_PRELOAD=$TR timeout 150 "$D/bin/bench_cuda_preview" $CL --profile \
    > "$O/preview_profile.log" 2>&1
  say "== bench_cuda_preview --profile, PDL off, under the tracer rc=$? at +$(el)s"
  [ -f $R/trace_preview.txt ] && c++filt < $R/trace_preview.txt > $R/trace_preview.dm.txt && rm $R/trace_preview.txt && \
    grep -E "^(==|cuda_kernel)" $R/trace_preview.dm.txt | tee -a "$S" && \
    awk '/^== window 2/{f=1;next} /^== window 3/{f=0} f' $R/trace_preview.dm.txt | head -12 | cut -c1-150 | tee -a "$S"
fi
dr_end
