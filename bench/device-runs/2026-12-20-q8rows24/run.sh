#!/usr/bin/env bash
# Written 2026-12-20 (issue 24, branch q8rows24; no GPU in that session: nothing here has run yet). trace24 put the
# dense Q8_0 chunk products of a 32-row preview at 2.9 ms of ~9.1 (igemm_q8_kernel: 16 outputs a block, grids of
# 1 x 32..512 blocks, 8-15 us each, latency-bound; the head 1 x 15520, 353 us). CLOVER_CUDA_Q8_ROWS32=1 runs them
# (1..32 rows, n_in % 256 == 0) on matmul_q8_rows32.cu's q8r_kernel: K split over a cluster of 2/4/8 blocks by the
# canonical partials (the tree's upper levels added through distributed shared memory), >= 256 blocks a product,
# 4-8 cp.async stages. The same bits by construction; test_q8_rows32 checks them against the old kernel.
#   cmake --build build -j2 && EXTRA_BINS=libclover_kernel_trace.so scripts/device-packs.sh build q8rows24
#   run(command="bash .gpu-q8rows24/run.sh", carry=[".gpu-q8rows24"], timeout_s=600)
# STEPS (default "t b r p"):
#  t  test_cuda_matmul test_q8_rows32 (+ test_row_invariance, test_chunk_types, test_graph_capture with the switch
#     on), compute-sanitizer memcheck of test_q8_rows32 (CLOVER_TEST_SMALL); test_cuda_backend / test_cuda_preview
#     / test_cuda_batch with CLOVER_CUDA_Q8_ROWS32=1
#  b  bench_cuda_matmul CLOVER_BENCH_ROWS32=1 (each product off / on alternating twice, in graphs, GB/s and the
#     floor); bench_cuda_preview --reps 3 on the 35B-A3B diffusion file with the switch 0 / 1 / 0 / 1
#  r  clover run ids (diffusion, and --ar) with the switch 0 and 1: equal
#  p  the kernel trace of bench_cuda_preview --profile with the switch on, PDL off (window 2: q8r_kernel per shape)
# Predictions (before the run):
#  t: every case bit-identical (rows 1..32, 6 layouts, pair, graph), CPU err ~1e-7, launches = calls; memcheck 0
#     errors; backend / preview / batch pass.
#  b: at 32 rows, off -> on, each time with its quantiser launch (~1.7 us): qkv 8192x2048 ~16 -> ~8.5 us (product
#     ~60% of copy); 12288x2048 ~20 -> ~11; z 4096x2048 ~10 -> ~5.5; out 2048x4096 ~10 -> ~6; 512x2048 and 1024x2048
#     ~8 -> ~4; 2048x512 ~5 -> ~3.5; head 248320x2048 ~350 -> ~170-200 us (~65-75% of copy; issue-bound: ~25
#     instructions an mma, the canonical order's 16 float ops among them). 8 and 16 rows: about the same gains.
#     bench_cuda_preview: preview 32 rows, first pass ~9.1 -> ~7.9-8.3 ms; commit of a 32-row block -0.6..-1 ms.
#  r: ids equal off / on (both modes).
#  p: q8r_kernel 3-9 us a product except the head; the dense products ~2.9 -> ~1.5 ms of the window.
set -uo pipefail
PACK=${PACK:-.gpu-q8rows24}
STEPS=${STEPS:-t b r p}
. "$PACK/lib.sh"
dr_init q8rows24
TR=$D/bin/libclover_kernel_trace.so
C=$D/bin/clover
CL=/tmp/synth35-clover.gguf
( [ -s $CL ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!
if has t; then
  tst test_cuda_matmul q8r 240 CLOVER_TEST_ONLY=test_q8_rows32
  grep -E "q8 rows32" "$O/t_test_cuda_matmul_q8r.log" | head -16 | cut -c1-150 | tee -a "$S"
  tst test_cuda_matmul q8r_on 240 CLOVER_CUDA_Q8_ROWS32=1 CLOVER_TEST_ONLY=test_row_invariance,test_chunk_types,test_chunk_multi,test_graph_capture
  if command -v compute-sanitizer > /dev/null; then
    CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=test_q8_rows32 timeout 200 compute-sanitizer --tool memcheck "$D/bin/test_cuda_matmul" \
      > "$O/memcheck.log" 2>&1
    say "memcheck test_q8_rows32 rc=$?: $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1)"
  fi
  for n in test_cuda_backend test_cuda_preview test_cuda_batch; do
    tst $n q8r 150 CLOVER_CUDA_Q8_ROWS32=1
  done
fi
if has b; then
  CLOVER_BENCH_ROWS32=1 timeout 240 "$D/bin/bench_cuda_matmul" > "$O/bench_rows32.log" 2>&1
  say "== bench_cuda_matmul CLOVER_BENCH_ROWS32=1 rc=$? at +$(el)s"
  grep -E "^(device|r32)" "$O/bench_rows32.log" | cut -c1-170 | tee -a "$S"
  wait $CPID
  for v in 0 1 0 1; do
    [ "$(el)" -lt 430 ] || { say "bench_cuda_preview: no time left for $v"; break; }
    CLOVER_CUDA_Q8_ROWS32=$v timeout 90 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_Q8_ROWS32=$v rc=$? at +$(el)s"
    grep -E "^(preview|commit|resolve|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
fi
if has r; then
  wait $CPID
  for mode in diffusion ar; do
    for v in 0 1; do
      [ "$(el)" -lt 500 ] || break
      CLOVER_CUDA_Q8_ROWS32=$v timeout 60 "$C" run -m $CL --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual \
        --json $([ $mode = ar ] && echo --ar) > "$O/run_${mode}_$v.json" 2> "$O/run_${mode}_$v.err"
      a=$(dr_ids "$O/run_${mode}_$v.json")
      say "clover run $mode CLOVER_CUDA_Q8_ROWS32=$v: ids $a (igw25 diffusion: 7c7806005f9c)"
    done
  done
fi
if has p && [ -f "$TR" ] && [ "$(el)" -lt 480 ]; then
  CLOVER_CUDA_Q8_ROWS32=1 CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_preview.txt LD_PRELOAD=$TR timeout 100 "$D/bin/bench_cuda_preview" $CL --profile \
    > "$O/trace_preview.log" 2>&1
  say "== bench_cuda_preview --profile, Q8_ROWS32=1, PDL off, under the tracer rc=$?"
  awk '/== window 2/{f=1} /== window 3/{f=0} f' "$R/trace_preview.txt" | head -40 | cut -c1-170 | tee -a "$S"
fi
dr_end
