#!/usr/bin/env bash
# Written in the 2026-12-06 11:25 session (issues 25 and 24): the router's exact f32 product in register tiles
# (matmul_exact.cu's ex_tile_kernel, CLOVER_CUDA_EXACT_TILE: AUTO from 64 rows). occ25's trace of a 16-sequence
# stacked diffusion pass had the router (ex_rows_kernel, a warp an output) at 113 us a layer, 8.8% of the pass:
# every 16-byte load of a row fed 8 multiply-adds, 1.08 GB of L1 reads a layer at 512 rows.
#   run(command="ITEMS='xtile25:t,e,d,p,r' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS (default "t e d p r"):
#  t  test_cuda_matmul test_exact_multi / test_exact (the tile form against the decode products, bit for bit, at
#     2..512 rows), test_cuda_batch and test_cuda_preview (stacked passes of >= 64 rows take AUTO), memcheck of
#     test_exact_multi
#  e  bench_cuda_matmul CLOVER_BENCH_EXACT=1: the router at 16..512 rows, the three forms
#  d  bench_batch --device cuda --mode diffusion --n 16 (--prompt 32 --gen 64), EXACT_TILE 0 / AUTO alternating twice
#  p  bench_cuda_backend --prompt-only 1, EXACT_TILE 0 / AUTO (prompt 512: the router of 512-row chunks)
#  r  clover run ids (diffusion, --ar) by default, with EXACT_TILE=1 (forced at every row count) and with
#     CORESET_ROUTE=0: equal to each other and to every pack since k2core24 (2cdbf2f9ccaf / d1f13e945396)
#  c  (added with fca654c: the routing inside the coreset's cluster launch, CLOVER_CUDA_CORESET_ROUTE) bench_cuda_preview
#     --reps 3, CORESET_ROUTE 0 / default alternating twice; bench_cuda_matmul CLOVER_BENCH_LAYER=1's coreset lines
#  n  ncu source counters of a commit's grouped experts pair (igemm_kernel, range 4 of bench_cuda_preview --profile)
#     for the next session's look at the few-slot tiles (k2core24's step n, after K2 / aligned copies / tile loop)
# Predictions (before the run): bits equal everywhere; router at 512 rows ~110 us (warp an output) -> 20-35 us
# (tiles), 128 rows ~30 -> 8-12, 64 rows ~16 -> 6-9, 32 rows tiles slower or equal (fewer warps), 16 rows slower;
# bench_batch diffusion n 16 agg tok/s +6..+10% (a stacked pass ~-3.5 ms of ~39 on an H100); prompt 512 +3..+6%.
# c: the coreset + routing 12.7 + 9.5 us under ncu (serialised) -> one launch ~14-16 us; the 32-row preview -0.1..-0.2
#    ms (a launch and its dependency a layer: ~3-5 us x 40), the commit unchanged (no coreset), block diffusion +2..+3%.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t e c r d p}
. "$PACK/lib.sh"
dr_init xtile25
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_matmul exact 150 CLOVER_TEST_ONLY=test_exact,test_exact_multi
  tst test_cuda_batch all 150
  tst test_cuda_preview all 150
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_ONLY=test_exact_multi timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$D/bin/test_cuda_matmul" > "$O/memcheck_exact.log" 2>&1
    say "memcheck test_exact_multi rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_exact.log" | tail -1)"
  fi
fi
if has e; then
  CLOVER_BENCH_EXACT=1 timeout 90 "$D/bin/bench_cuda_matmul" > "$O/exact.log" 2>&1
  say "== bench_cuda_matmul CLOVER_BENCH_EXACT=1 rc=$? at +$(el)s"
  grep -E "^(device|exact)" "$O/exact.log" | cut -c1-200 | tee -a "$S"
fi
if has d; then
  wait $SPID; say "synth done at +$(el)s"
  for rep in 1 2; do
    for v in 0 auto; do
      [ "$(el)" -lt "${XT_DBUDGET:-380}" ] || { say "bench_batch: no time left"; break 2; }
      e=""; [ $v = auto ] || e="CLOVER_CUDA_EXACT_TILE=$v"
      env $e timeout 100 "$D/bin/bench_batch" $F --device cuda --mode diffusion --prompt 32 --gen 64 --n 16 \
        > "$O/dbatch_${v}_$rep.log" 2>&1
      say "== bench_batch --mode diffusion --n 16 EXACT_TILE=$v rc=$? at +$(el)s: $(tail -1 "$O/dbatch_${v}_$rep.log" | cut -c1-150)"
    done
  done
fi
if has p; then
  wait $SPID
  for v in 0 auto; do
    [ "$(el)" -lt "${XT_PBUDGET:-470}" ] || { say "prompt: no time left"; break; }
    e=""; [ $v = auto ] || e="CLOVER_CUDA_EXACT_TILE=$v"
    env $e timeout 90 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/prompt_$v.log" 2>&1
    say "== bench_cuda_backend --prompt-only 1 EXACT_TILE=$v rc=$? at +$(el)s"
    grep -E "prompt|commit" "$O/prompt_$v.log" | head -3 | cut -c1-150 | tee -a "$S"
  done
fi
if has r; then
  wait $SPID
  for v in def CLOVER_CUDA_EXACT_TILE=1 CLOVER_CUDA_CORESET_ROUTE=0; do
    e=""; [ $v = def ] || e=$v
    env $e timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/run_${#e}.json" 2> "$O/run_${#e}.err"
    env $e timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 \
      --ignore-eos --no-visual --json > "$O/ar_${#e}.json" 2> "$O/ar_${#e}.err"
    say "clover run $v: diffusion $(dr_ids "$O/run_${#e}.json"), --ar $(dr_ids "$O/ar_${#e}.json")"
  done
fi
if has c; then
  wait $SPID
  for rep in 1 2; do
    for v in 0 def; do
      [ "$(el)" -lt "${XT_CBUDGET:-480}" ] || { say "bench_cuda_preview: no time left"; break 2; }
      e=""; [ $v = def ] || e="CLOVER_CUDA_CORESET_ROUTE=$v"
      env $e timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_${v}_$rep.log" 2>&1
      say "== bench_cuda_preview --reps 3 CORESET_ROUTE=$v rc=$? at +$(el)s"
      grep -E "^(preview|commit|block)" "$O/preview_${v}_$rep.log" | cut -c1-110 | tee -a "$S"
    done
  done
  CLOVER_BENCH_LAYER=1 timeout 60 "$D/bin/bench_cuda_matmul" > "$O/layer.log" 2>&1
  say "== bench_cuda_matmul CLOVER_BENCH_LAYER=1 rc=$? at +$(el)s"
  grep -E "coreset|routing|router" "$O/layer.log" | cut -c1-160 | tee -a "$S"
fi
if has n && command -v ncu > /dev/null; then
  wait $SPID
  HERE=$(dirname "$(ls -d bench/device-runs/*-pdlrows24/ncusrc.py | sort | tail -1)")
  if [ "$(el)" -lt 470 ]; then
    CLOVER_BENCH_PROFILE_ONLY=4 timeout 100 ncu --profile-from-start off -k "regex:igemm_kernel" -s 2 -c 1 \
      --warp-sampling-interval 0 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
      --section LaunchStats --section Occupancy -f -o "$O/src_moe" "$D/bin/bench_cuda_preview" $F --profile \
      > "$O/src_moe.out" 2>&1
    say "== ncu source moe (commit pair, range 4) rc=$? at +$(el)s"
    timeout 60 ncu -i "$O/src_moe.ncu-rep" --page details --csv > "$O/src_moe_details.csv" 2>&1
    grep -E '"(Duration|SM Frequency|DRAM Throughput|Achieved Occupancy|Issue Slots Busy|Registers Per Thread|Grid Size)"' \
      "$O/src_moe_details.csv" | awk -F'","' '{print "   " $(NF-2) " " $(NF-1) " " $NF}' | cut -c1-120 | tee -a "$S"
    timeout 60 ncu -i "$O/src_moe.ncu-rep" --page source --csv --print-source sass > "$O/src_moe_sass.csv" 2>&1
    python3 "$HERE/sass_phases.py" "$O/src_moe_sass.csv" 2>&1 | cut -c1-200 | head -20 | tee -a "$S"
    python3 "$HERE/ncusrc.py" "$O/src_moe_sass.csv" 40 2>&1 | cut -c1-200 | tee -a "$S"
    cp "$O/src_moe_sass.csv" "$R/" 2>/dev/null
  else say "ncu: no time left"; fi
fi
dr_end
