#!/usr/bin/env bash
# Written in the 2026-12-06 session by a helper without a device (issue 24; run since: RESULTS.md). The tile loop of the
# grouped integer kernel's WIDE tiles (matmul_igemm.cu's igemm_kernel, CLOVER_CUDA_MOE_TILE_LOOP, ON by default; 0:
# the old full grid): grid.y was the worst-case tile count (288 for 32 rows x top-8 of 256 experts) while a preview
# fills ~28-40 tiles, so ~90% of the blocks (~100 KB of shared memory each) only read the tile count and left; the
# H100 trace had the experts' pair at 20.3 us and the down at 16.6 us a layer for ~13 MB of weights. Now grid.y is
# ~2 waves of blocks (ceil(2 * SMs * blocks an SM / (grid.x * grid.z)): 66 for the pair, 33 for the down on an H100)
# and each block walks tiles y, y + gridDim.y, ... with the one-tile code unchanged: the same bits.
# CLOVER_CUDA_MOE_TILE_CAP=N forces the cap (A/B).
#   cmake --build build -j2 && EXTRA_BINS="libclover_kernel_trace.so" scripts/device-packs.sh build tiles24
#   run(command="OUT=$OUT/tiles bash .gpu-tiles24/run.sh", carry=[".gpu-tiles24"], timeout_s=600)
#   (or in a seq pack: ITEMS='tiles24:t,m,p,k,b' bash .gpu-seq/run.sh; short of time: 't,m,p,k' then 'b')
# STEPS (default "t m p k b", run in that order; ~300-380 s with the 35B synth):
#  t  test_cuda_moe_tiles (the loop at the cap by shape, caps 3 / 1, with X2 and K2 off = the full grid, memcmp;
#     the CPU oracle; a graph replayed on two routings), its small cases under compute-sanitizer memcheck,
#     test_cuda_matmul and test_cuda_ig_x2 (their grouped cases now on the loop), test_cuda_preview / _batch
#  m  bench_cuda_matmul CLOVER_BENCH_TILES=1: the pair and the down, preview / commit / 16-row AR step routing,
#     loop off / on alternating (medians, on/off), and caps $TILES_CAPS forced
#  p  bench_cuda_preview --reps 3, CLOVER_CUDA_MOE_TILE_LOOP=0 / 1 / 0 / 1 (preview, commit, block diffusion); clover
#     run ids (diffusion and --ar, 64 tokens) with 0 and 1: equal
#  k  the kernel trace of a preview (bench_cuda_preview --profile, PDL off) with 0 and 1: igemm_kernel's grid and us
#  r  (added 2026-12-06, after the first run) test_cuda_matmul's cases after test_moe_fast (the step t's run of the
#     whole file ends at its 150 s limit inside test_moe_fast): test_glu, test_glu_quant, test_multi,
#     test_graph_capture, test_pdl_rows, with the loop on (~5 s)
#  b  the stacked 16-sequence steps: bench_batch --n 16, --mode ar (--gen 96) and diffusion (--gen 64), loop 0 / 1
#     alternating twice (run last: the longest step)
# Predictions: RESULTS.md (written before any run).
set -uo pipefail
PACK=${PACK:-.gpu-tiles24}
STEPS=${STEPS:-t m p k b}
. "$PACK/lib.sh"
dr_init tiles24
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_moe_tiles all 200
  grep -E "^  " "$O/t_test_cuda_moe_tiles_all.log" | head -6 | cut -c1-200 | tee -a "$S"
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_SMALL=1 timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$D/bin/test_cuda_moe_tiles" \
      > "$O/memcheck_tiles.log" 2>&1
    rc=$?
    say "memcheck test_cuda_moe_tiles (small) rc=$rc $(( $(date +%s) - s ))s: \
$(grep -E 'ERROR SUMMARY' "$O/memcheck_tiles.log" | tail -1) $(grep -E 'passed' "$O/memcheck_tiles.log" | tail -1)"
  fi
  tst test_cuda_matmul all 150
  tst test_cuda_ig_x2 all 150
  tst test_cuda_matmul rest 150 CLOVER_TEST_ONLY=test_glu,test_glu_quant,test_multi,test_graph_capture,test_pdl_rows
  tst test_cuda_preview all 120
  tst test_cuda_batch all 120
fi
if has r; then
  tst test_cuda_matmul rest 150 CLOVER_TEST_ONLY=test_glu,test_glu_quant,test_multi,test_graph_capture,test_pdl_rows
fi
if has m; then
  CLOVER_BENCH_TILES=1 CLOVER_BENCH_TILES_CAPS=${TILES_CAPS:-8,16,33,66,132} timeout 150 "$D/bin/bench_cuda_matmul" \
    > "$O/bench_tiles.log" 2>&1
  say "== bench_cuda_matmul CLOVER_BENCH_TILES=1 rc=$? at +$(el)s"
  grep -E "^(device|tiles )" "$O/bench_tiles.log" | cut -c1-230 | tee -a "$S"
fi
if has p; then
  wait $SPID
  for v in ${TL_ALT:-0 1 0 1}; do
    [ "$(el)" -lt "${TL_BUDGET:-380}" ] || { say "bench_cuda_preview: no time left for $v"; break; }
    CLOVER_CUDA_MOE_TILE_LOOP=$v timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_MOE_TILE_LOOP=$v rc=$? at +$(el)s"
    grep -E "^(preview 32 rows, first|commit|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
  for v in 0 1; do
    CLOVER_CUDA_MOE_TILE_LOOP=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/run_$v.json" 2> "$O/run_$v.err"
    CLOVER_CUDA_MOE_TILE_LOOP=$v timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 \
      --ignore-eos --no-visual --json > "$O/ar_$v.json" 2> "$O/ar_$v.err"
  done
  say "clover run TILE_LOOP=0: diffusion $(dr_ids "$O/run_0.json"), --ar $(dr_ids "$O/ar_0.json")"
  dr_ids_cmp "$O/run_0.json" "$O/run_1.json" "clover run diffusion, TILE_LOOP 0 / 1"
  dr_ids_cmp "$O/ar_0.json" "$O/ar_1.json" "clover run --ar, TILE_LOOP 0 / 1"
fi
if has k; then
  wait $SPID
  TR=$D/bin/libclover_kernel_trace.so
  for v in 0 1; do
    [ "$(el)" -lt "${TL_KBUDGET:-420}" ] || { say "trace: no time left for $v"; break; }
    CLOVER_CUDA_MOE_TILE_LOOP=$v CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_$v.txt LD_PRELOAD=$TR timeout 120 \
      "$D/bin/bench_cuda_preview" $F --profile > "$O/trace_$v.log" 2>&1
    say "== the kernel trace of a preview, CLOVER_CUDA_MOE_TILE_LOOP=$v (PDL off) rc=$? at +$(el)s; window 2's igemm:"
    if [ -f $R/trace_$v.txt ]; then
      c++filt < $R/trace_$v.txt > $R/trace_$v.dm.txt && rm -f $R/trace_$v.txt
      awk '$0 ~ "^== window 2" {f=1; print; next} /^== window/ {f=0} f' $R/trace_$v.dm.txt | \
        grep -E "^== window|igemm_kernel|moe_group" | head -8 | cut -c1-180 | tee -a "$S"
    fi
  done
fi
if has b; then
  wait $SPID
  for rep in 1 2; do
    for v in 0 1; do
      for m in ar diffusion; do
        [ "$(el)" -lt "${TL_BBUDGET:-500}" ] || { say "bench_batch: no time left"; break 3; }
        g=96; [ $m = ar ] || g=64
        CLOVER_CUDA_MOE_TILE_LOOP=$v timeout 60 "$D/bin/bench_batch" $F --device cuda --mode $m --n 16 --prompt 32 \
          --gen $g > "$O/batch_${m}_${v}_$rep.log" 2>&1
        say "== bench_batch --mode $m --n 16 TILE_LOOP=$v rc=$? at +$(el)s: \
$(grep -E "^ +16 " "$O/batch_${m}_${v}_$rep.log" | tail -1)"
      done
    done
  done
fi
dr_end
