#!/usr/bin/env bash
# Written 2026-12-21 (issue 24, branch persist24; no GPU in that session: nothing here has run yet). trace24 /
# share24 put a 32-row preview's grouped expert products at ~2.2 ms of ~9.1 (igemm_kernel<12,true,true>, the
# WIDE form: gate / up 19.4 us x 80 on grids of 4 x 288, down 16.75 us x 40 on 16 x 288, for ~4.7 MB of weights a
# product, ~1.2 us at the bandwidth): the grid's y is the worst-case tile count (288) while the preview fills ~32,
# so 1,000-4,000 empty blocks queue behind the working ones, and each expert's rows are re-read by 4 tiles of 8
# slots. CLOVER_CUDA_MOE_PERSIST=1 runs them (Q4_K / Q5_K, the WIDE plans) on matmul_igemm.cu's igp_kernel: a
# fixed grid of ~1-2 blocks an SM walking the device-built tiles of 8 / 16 / 32 slots of one expert (by shape:
# gate / up 8, down 16 on the 35B-A3B; CLOVER_CUDA_MOE_PERSIST_TS forces one), every tile's chunks through one
# cp.async ring. The same bits by construction; test_moe_persist checks them against the WIDE form.
#   cmake --build build -j2 && EXTRA_BINS=libclover_kernel_trace.so scripts/device-packs.sh build persist24
#   run(command="bash .gpu-persist24/run.sh", carry=[".gpu-persist24"], timeout_s=600)
# STEPS (default "t b r p"):
#  t  test_cuda_matmul test_moe_persist + test_moe_igw; test_moe_chunk / test_graph_capture / test_moe_many_experts
#     with the switch on; compute-sanitizer memcheck and racecheck of test_moe_persist (CLOVER_TEST_SMALL);
#     test_cuda_backend / test_cuda_preview / test_cuda_batch with CLOVER_CUDA_MOE_PERSIST=1
#  b  bench_cuda_preview --reps 3 on the 35B-A3B diffusion file with the switch 0 / 1 / 0 / 1, then 1 with the
#     tile forced to 8 / 16 / 32; bench_cuda_backend --prompt-only 1 (the 32-row chunk commit) off / on
#  r  clover run ids (diffusion, and --ar) with the switch 0 and 1: equal
#  p  the kernel trace of bench_cuda_preview --profile, PDL off, switch on then off (window 2: igp_kernel against
#     igemm_kernel<12, true, true> per launch)
# Predictions (before the run):
#  t: every persist case bit-identical to WIDE (Q4_K and Q5_K; preview pair 2048x512, preview down 512x2048 x a
#     slot, decode batch, one slot, all-bad, preview + bad id; tiles 8 / 16 / 32 / by shape, eager and graph),
#     CPU err ~1e-7, launches = calls; memcheck and racecheck 0 errors; backend / preview / batch pass.
#  b: preview 32 rows, first pass ~9.1 -> ~7.7-8.3 ms (gate / up 19.4 -> ~6-9 us, down 16.75 -> ~5-8 us, x 40
#     layers: -0.8..-1.4 ms); TS 8 / 16 / 32 forced: 32 the slowest for gate / up (32 blocks for 132 SMs), 16 or 32
#     best for down. 32-row chunk commit: the same gain per layer (its expert products take the same path).
#  r: ids equal off / on (both modes).
#  p: igp_kernel gate / up ~6-9 us (grid 264), down ~5-8 us; igemm_kernel<12,true,true> as before (19.4 / 16.75).
#     If gate / up stays > 12 us, the cost is in the working blocks themselves (latency / issue), not the empty ones.
set -uo pipefail
PACK=${PACK:-.gpu-persist24}
STEPS=${STEPS:-t b r p}
. "$PACK/lib.sh"
dr_init persist24
TR=$D/bin/libclover_kernel_trace.so
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_matmul persist 300 CLOVER_TEST_ONLY=test_moe_persist,test_moe_igw
  grep -E "persist |igw moe" "$O/t_test_cuda_matmul_persist.log" | head -24 | cut -c1-150 | tee -a "$S"
  tst test_cuda_matmul persist_on 240 CLOVER_CUDA_MOE_PERSIST=1 \
    CLOVER_TEST_ONLY=test_moe_chunk,test_graph_capture,test_moe_many_experts,test_glu
  if command -v compute-sanitizer > /dev/null; then
    for tool in memcheck racecheck; do
      [ "$(el)" -lt 300 ] || { say "$tool: no time left"; break; }
      CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=test_moe_persist timeout 150 compute-sanitizer --tool $tool \
        "$D/bin/test_cuda_matmul" > "$O/$tool.log" 2>&1
      say "$tool test_moe_persist rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/$tool.log" | tail -1)"
    done
  fi
  for n in test_cuda_backend test_cuda_preview test_cuda_batch; do
    tst $n persist 150 CLOVER_CUDA_MOE_PERSIST=1
  done
fi
if has b; then
  wait $SPID
  for v in 0 1 0 1 1:8 1:16 1:32; do
    [ "$(el)" -lt 430 ] || { say "bench_cuda_preview: no time left for $v"; break; }
    sw=${v%%:*}; ts=; [ "$v" != "$sw" ] && ts=${v#*:}
    env CLOVER_CUDA_MOE_PERSIST=$sw ${ts:+CLOVER_CUDA_MOE_PERSIST_TS=$ts} timeout 90 "$D/bin/bench_cuda_preview" $F \
      --reps 3 > "$O/preview_${sw}_$ts.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_MOE_PERSIST=$sw${ts:+ TS=$ts} rc=$? at +$(el)s"
    grep -E "^(preview|commit|resolve|block)" "$O/preview_${sw}_$ts.log" | cut -c1-110 | tee -a "$S"
  done
  for v in 0 1; do
    [ "$(el)" -lt 460 ] || break
    CLOVER_CUDA_MOE_PERSIST=$v timeout 60 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/backend_$v.log" 2>&1
    say "== bench_cuda_backend --prompt-only 1, CLOVER_CUDA_MOE_PERSIST=$v rc=$?"
    grep -E "chunk commit" "$O/backend_$v.log" | cut -c1-140 | tee -a "$S"
  done
fi
if has r; then
  wait $SPID
  for mode in diffusion ar; do
    for v in 0 1; do
      [ "$(el)" -lt 500 ] || break
      CLOVER_CUDA_MOE_PERSIST=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
        --no-visual --json $([ $mode = ar ] && echo --ar) > "$O/run_${mode}_$v.json" 2> "$O/run_${mode}_$v.err"
      a=$(dr_ids "$O/run_${mode}_$v.json")
      say "clover run $mode CLOVER_CUDA_MOE_PERSIST=$v: ids $a"
    done
  done
fi
if has p && [ -f "$TR" ]; then
  wait $SPID
  for v in 1 0; do
    [ "$(el)" -lt 480 ] || { say "trace: no time left for switch $v"; break; }
    CLOVER_CUDA_MOE_PERSIST=$v CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_preview_$v.txt LD_PRELOAD=$TR timeout 100 \
      "$D/bin/bench_cuda_preview" $F --profile > "$O/trace_preview_$v.log" 2>&1
    say "== bench_cuda_preview --profile, CLOVER_CUDA_MOE_PERSIST=$v, PDL off, under the tracer rc=$?"
    awk '/== window 2/{f=1} /== window 3/{f=0} f' "$R/trace_preview_$v.txt" > "$O/window2_$v.txt"
    head -3 "$O/window2_$v.txt" | cut -c1-170 | tee -a "$S"
    grep -E "igp_kernel|igemm_kernel<1[23], true, true>|moe_group|ig_quantize" "$O/window2_$v.txt" | head -12 \
      | cut -c1-170 | tee -a "$S"
  done
fi
dr_end
