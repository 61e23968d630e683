#!/usr/bin/env bash
# 2026-12-04 20:39 session, call 1 (issue 24, 25): where a 32-row preview / commit and a 16-sequence step go, kernel
# by kernel as the graphs replay them (bench/cuda_kernel_trace.c: CUPTI activity records, LD_PRELOADed), and the
# first device run of the few-row mma form (matmul_mma_rows.cu, 2026-12-11-mma24: never run before).
#   cmake --build build -j2 && EXTRA_BINS=libclover_kernel_trace.so scripts/device-packs.sh build trace24
#   run(command="bash .gpu-trace24/run.sh", carry=[".gpu-trace24"], timeout_s=600)
# STEPS (default "t x b d"):
#  t  test_cuda_matmul test_mma_rows (switch off vs on, rows 1..32 (17..32: new, 4 row tiles), bit for bit), the
#     backend / batch / engine tests with CLOVER_CUDA_MMA_ROWS=32 CLOVER_CUDA_DECODE_ROWS=1 (2..32-row passes)
#  x  bench_cuda_preview --profile under the tracer (windows: 1 prompt 512 commit, 2 preview coreset graph, 3 preview
#     no coreset graph, 4 commit of the 32-row block graph, 5 preview coreset eager); then bench_cuda_preview --reps 3
#  b  bench_cuda_matmul CLOVER_BENCH_MMAROWS=1 (decode / chunk / mma at 1, 2, 4, 8, 16 rows; PREDICTIONS.md of mma24)
#  d  bench_cuda_decode (AR file) CLOVER_BENCH_DECODE_TRACE=1 under the tracer: one batched step of 1 and of 16 seqs
# Predictions (written before the run):
#  t: test_mma_rows passes, 7 lines bit-identical (mma24's PREDICTIONS.md); the backend tests pass with the switch.
#  x: window 2 (preview, graph) span ~9.5-10 ms, idle between kernels < 0.5 ms; by kernel: the dense Q8_0 chunk
#     products (igemm_q8_kernel) ~3 ms (7 products a layer x 40 at ~10-17 us), the grouped expert products
#     (igemm_kernel / wide, ~8 experts) ~1.5-2 ms, the 32-row head ~0.3 ms, GDN block operator ~0.5 ms (30 x ~15 us),
#     the coreset ~0.4 ms, attention ~0.3 ms, small kernels (norms, quantisers, routing, combine) ~2 ms in all.
#     Window 4 (commit): span ~16 ms, the expert products ~9 ms (~160 experts a layer). Window 1: ~100 ms.
#     bench_cuda_preview: preview ~10.0 ms, commit ~16.0 (as final24).
#  b: mma24's PREDICTIONS.md: qkv 8 rows mma ~8.5 us vs chunk ~16, head 8 rows ~185 vs ~251; 32 rows qkv ~11 vs ~19,
#     head ~260 vs ~300. With CLOVER_CUDA_MMA_ROWS=32 the preview ~8.5 ms (dense products ~3 -> ~1.6 ms), commit ~15.
#  d: window 2 (16 sequences) ~11.6 ms, the routed experts ~5 ms of it.
set -uo pipefail
PACK=${PACK:-.gpu-trace24}
STEPS=${STEPS:-t x b d}
. "$PACK/lib.sh"
dr_init trace24
TR=$D/bin/libclover_kernel_trace.so
CL=/tmp/synth35-clover.gguf CPID=
if has x; then ( [ -s $CL ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!; fi
if has t; then
  tst test_cuda_matmul mma 120 CLOVER_TEST_ONLY=test_mma_rows
  grep -E "^  mma rows" "$O/t_test_cuda_matmul_mma.log" | tee -a "$S"
  for n in test_cuda_backend test_cuda_batch test_cuda_engine; do
    tst $n mma 120 CLOVER_CUDA_MMA_ROWS=32 CLOVER_CUDA_DECODE_ROWS=1
  done
fi
if has x; then
  wait $CPID; say "synth (diffusion file) done at +$(el)s: $(ls -la $CL 2>&1 | awk '{print $5}')"
  CLOVER_TRACE_OUT=$R/trace_preview.txt LD_PRELOAD=$TR timeout 150 "$D/bin/bench_cuda_preview" $CL --profile \
    > "$O/preview_profile.log" 2>&1
  say "== bench_cuda_preview --profile under the tracer rc=$? at +$(el)s"; grep -E "profiled|trace" "$O/preview_profile.log" | tee -a "$S"
  [ -f $R/trace_preview.txt ] && c++filt < $R/trace_preview.txt > $R/trace_preview.dm.txt && \
    grep -E "^(==|cuda_kernel)" $R/trace_preview.txt | tee -a "$S" && \
    awk '/^== window 2/{f=1;next} /^== window/{f=0} f' $R/trace_preview.dm.txt | head -30 | cut -c1-220 | tee -a "$S"
  timeout 120 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview.log" 2>&1
  say "== bench_cuda_preview --reps 3 rc=$? at +$(el)s"; grep -vE "^\s*$" "$O/preview.log" | tail -14 | tee -a "$S"
  CLOVER_CUDA_MMA_ROWS=32 timeout 120 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview_mma.log" 2>&1
  say "== bench_cuda_preview --reps 3, CLOVER_CUDA_MMA_ROWS=32 rc=$? at +$(el)s"; grep -vE "^\s*$" "$O/preview_mma.log" | tail -14 | tee -a "$S"
fi
if has d; then dr_synth35 --no-diffusion; fi
if has b; then
  s=$(date +%s)
  CLOVER_BENCH_MMAROWS=1 timeout 150 "$D/bin/bench_cuda_matmul" > "$O/bench_mma.log" 2>&1
  say "== bench_cuda_matmul CLOVER_BENCH_MMAROWS=1 rc=$? $(( $(date +%s) - s ))s"
  grep -E "^(mma|device)" "$O/bench_mma.log" | tee -a "$S"
  grep -vE "^(mma|device)" "$O/bench_mma.log" | tail -3 | tee -a "$S"
fi
if has d; then
  wait $SPID; say "synth (AR file) done at +$(el)s"
  CLOVER_TRACE_OUT=$R/trace_decode.txt LD_PRELOAD=$TR CLOVER_BENCH_DECODE_TRACE=1 CLOVER_BENCH_DECODE_ROWS=0 \
    timeout 100 "$D/bin/bench_cuda_decode" $F > "$O/decode_trace.log" 2>&1
  say "== bench_cuda_decode trace rc=$? at +$(el)s"; grep -E "^STEP|TRACE" "$O/decode_trace.log" | tee -a "$S"
  [ -f $R/trace_decode.txt ] && c++filt < $R/trace_decode.txt > $R/trace_decode.dm.txt && \
    grep -E "^(==|cuda_kernel)" $R/trace_decode.txt | tee -a "$S"
fi
dr_end
