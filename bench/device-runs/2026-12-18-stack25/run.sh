#!/usr/bin/env bash
# Written in the 2026-12-05 02:35 session (device budget spent: NOT RUN). Issue 25's diffusion bar (16 concurrent
# block-diffusion requests >= 4x one at a time; share24 call 2: 1.69x): a stacked preview of 16 sequences ran each
# sequence's coreset and routing as launches of its own (2 x 16 a layer, the coreset ~24 us each: ~15 ms of a
# stacked pass). CLOVER_CUDA_STACK_ROUTE=1 (src/cuda/moe_coreset_warp.cu: k_coreset_warp_multi, a block a
# sequence, and k_route_multi over every row) makes them two launches a layer, the same bits; likewise
# CLOVER_CUDA_STACK_GDN=1 the GDN block operator of every sequence (gdn_block_fused.cu's two kernels with a grid z
# a sequence: 2 launches a GDN layer instead of 2 x 16). Also re-runs test_cuda_gpumem (its refusal case was fixed
# after remap31's run).
#   cmake --build build -j2 && EXTRA_BINS=libclover_kernel_trace.so scripts/device-packs.sh build stack25
#   run(command="bash .gpu-stack25/run.sh", carry=[".gpu-stack25"], timeout_s=600)
# STEPS (default "t b s r"):
#  t  test_cuda_preview (coreset_route_multi and gdn_block_multi: the two launches against the per-sequence calls,
#     bit for bit) and test_cuda_batch / test_cuda_engine / test_cuda_preview with CLOVER_CUDA_STACK_ROUTE=1
#     CLOVER_CUDA_STACK_GDN=1 (stacked previews equal each sequence alone); test_cuda_gpumem; clover run ids
#     (diffusion) with both on and off
#  b  bench_batch --device cuda, the diffusion file, N 1 / 4 / 16: neither, STACK_ROUTE, both; the PDL-off kernel
#     trace of N=16 with both on (what a stacked pass spends)
#  s  clover serve --device cuda, 16 x 64 diffusion requests with both on and as is (issue 25's bar)
#  k  serve AR 16 x 128 on the --route-skew 4 file (issue 25's AR bar: on uniform routing 16 rows read ~98
#     experts a layer against 8, so at both floors the ratio is at most 16 x 0.637 / 2.11 ms = 4.8x; a skewed
#     router shares more experts)
#  r  remap: test_cuda_gpumem under compute-sanitizer's memcheck (q8_0)
#  n  ncu of k_router (a 1-row step: 12.5 us x 40 for a 2 MB product, ~25x its floor) and k_pick_greedy
# Predictions (before the run):
#  t: all pass; ids equal on and off.
#  b: N=16 agg 161 -> ~220-260 tok/s with STACK_ROUTE (a stacked pass ~37 ms -> ~20-25 ms: -15 ms of coresets,
#     -2 ms of routing launches), ~300-350 with both (-~10 ms more: 30 GDN layers x 16 sequences x ~20 us of
#     latency-bound launches); N=1 unchanged. Trace: k_coreset_warp_multi 40 a pass at ~25-30 us,
#     k_block_head_fused_multi 30 a pass at ~40-60 us (16 x the work in one grid).
#  s: diffusion 16 x 64 ratio 1.69x -> ~3-3.5x with both, answers identical (bar 4x).
#  k: AR ratio on the skewed file ~5-5.5x (uniform: 4.37x), answers identical.
#  n: k_router latency-bound: DRAM < 10%, most warps stalled on the long scoreboard or the barrier.
set -uo pipefail
PACK=${PACK:-.gpu-stack25}
STEPS=${STEPS:-t b s k r n}
. "$PACK/lib.sh"
dr_init stack25
TR=$D/bin/libclover_kernel_trace.so
C=$D/bin/clover
CL=/tmp/synth35-clover.gguf
( [ -s $CL ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!
SK=/tmp/q35skew4nd.gguf
( ! has k || [ -s $SK ] || { timeout 200 "$C" synth --preset qwen3.5-35b-a3b --no-diffusion --route-skew 4 -o $SK.part \
    > "$O/synth-sk.log" 2>&1 && mv $SK.part $SK; } ) & KPID=$!
if has t; then
  tst test_cuda_preview default 150
  grep -E "coresets and routing" "$O/t_test_cuda_preview_default.log" | tee -a "$S"
  grep -E "gdn block operators of" "$O/t_test_cuda_preview_default.log" | tee -a "$S"
  for n in test_cuda_batch test_cuda_engine test_cuda_preview; do
    tst $n stack 150 CLOVER_CUDA_STACK_ROUTE=1 CLOVER_CUDA_STACK_GDN=1
  done
  tst test_cuda_gpumem all 200
  wait $CPID
  for v in 0 1; do
    CLOVER_CUDA_STACK_ROUTE=$v CLOVER_CUDA_STACK_GDN=$v timeout 60 "$C" run -m $CL --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
      > "$O/run_r$v.json" 2> "$O/run_r$v.err"
    a=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1])).get('ids'))" "$O/run_r$v.json" 2>&1 | md5sum | cut -c1-12)
    say "clover run diffusion STACK_ROUTE=STACK_GDN=$v: ids $a (call 2 of share24: 7c7806005f9c)"
  done
fi
if has b; then
  wait $CPID
  for c in none:0:0 route:1:0 both:1:1; do
    IFS=: read -r tag r g <<< "$c"
    [ "$(el)" -lt 380 ] || { say "bench_batch: no time left for $tag"; continue; }
    CLOVER_CUDA_STACK_ROUTE=$r CLOVER_CUDA_STACK_GDN=$g timeout 150 "$D/bin/bench_batch" $CL --device cuda --n 1,4,16 \
      --prompt 32 --gen 64 > "$O/bench_batch_$tag.log" 2>&1
    say "bench_batch diffusion $tag (STACK_ROUTE=$r STACK_GDN=$g) rc=$? at +$(el)s:"
    tail -6 "$O/bench_batch_$tag.log" | cut -c1-160 | tee -a "$S"
  done
  if [ "$(el)" -lt 400 ]; then
    CLOVER_CUDA_STACK_ROUTE=1 CLOVER_CUDA_STACK_GDN=1 CLOVER_CUDA_PDL=0 LD_PRELOAD=$TR timeout 100 "$D/bin/bench_batch" $CL --device cuda --n 16 \
      --prompt 32 --gen 32 > "$O/trace_b16.log" 2>&1
    say "== bench_batch N=16 trace (STACK_ROUTE=1 STACK_GDN=1, PDL off) rc=$?"; grep -A24 "== window" "$O/trace_b16.log" | cut -c1-170 | tee -a "$S"
  fi
fi
if has s; then
  wait $CPID
  dr_serve $CL "CLOVER_CUDA_STACK_ROUTE=1 CLOVER_CUDA_STACK_GDN=1" 16 64 1 diffusion-stack
  dr_serve $CL "" 16 64 1 diffusion-as-is
fi
if has k; then
  wait $KPID
  if [ "$(el)" -lt 440 ]; then dr_serve $SK "" 16 128 1 ar-skew4; else say "serve ar-skew4: no time left"; fi
fi
if has r && command -v compute-sanitizer > /dev/null && [ "$(el)" -lt 500 ]; then
  CLOVER_TEST_ONLY=q8_0 timeout 90 compute-sanitizer --tool memcheck --leak-check no "$D/bin/test_cuda_gpumem" > $O/memcheck.log 2>&1
  say "memcheck test_cuda_gpumem q8_0 rc=$?: $(grep -E 'ERROR SUMMARY' $O/memcheck.log | tail -1)"
fi
if has n && command -v ncu > /dev/null && [ "$(el)" -lt 520 ]; then
  CLOVER_BENCH_DECODE_ROWS=1 timeout 60 ncu --kernel-name-base demangled -k "regex:^k_router|^k_pick_greedy" -c 2 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
    "$D/bin/bench_cuda_decode" > "$O/ncu_router.log" 2>&1
  say "== ncu k_router / k_pick_greedy rc=$?"
  grep -E "k_router|k_pick_greedy|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Stall|Registers" \
    "$O/ncu_router.log" | head -30 | tee -a "$S"
fi
dr_end
