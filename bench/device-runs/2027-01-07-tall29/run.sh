#!/usr/bin/env bash
# Written in the session of 2026-12-06 19:36 UTC (issue 24). The grouped experts of a coreset preview on tall tiles
# (matmul_igemm.cu's igemm_tall_kernel, CLOVER_CUDA_MOE_TALL=1: narrowed passes; off until this runs): tiles of
# <= 32 slots of one expert, 64 outputs a block, warp w m-tile w & 3 over the chunks of parity w >> 2 for all the tile's n-tiles,
# so each weight fragment is decoded once for 32 slots instead of once per WIDE tile of 8 (README item 34).
#   run(command="ITEMS='tall29:t,p,k' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=400)
# STEPS: t  test_cuda_matmul's test_moe_tall (bit for bit the WIDE form: previews, every tile size, a bad id, no
#           slot, a partial m-tile, pairs, eager and graph) and test_moe_persist (its case function now shared),
#           test_cuda_moe_tiles, test_cuda_preview, test_cuda_batch, test_cuda_backend; memcheck of test_moe_tall
#           (CLOVER_TEST_SMALL); clover run ids with the tall tiles on and off
#        p  dr_preview (bench_cuda_preview --reps 3) CLOVER_CUDA_MOE_TALL=0 / on / 2 (every WIDE plan: the commit's
#           experts too), alternating twice
#        b  bench_batch --mode ar --n 16 --prompt 32 --gen 96 (the 16-row stacked AR step, serve AR's) TALL 1 / 2
#        k  bench_cuda_preview --profile under the tracer, TALL on then 0: window 2 (the coreset preview), top 14
#        s  bench_batch --mode diffusion --n 16 (--prompt 32 --gen 64) under the tracer, PDL off: the kernel table of
#           the 16-sequence stacked diffusion passes (issue 25's 4x: never profiled; not narrowed-WIDE, so no TALL)
# Predictions (before the run; H100): t all pass, memcheck 0 errors, ids db3c58da3157 / ff19558da508 both ways;
#  k: the pair 17.9 -> 7-10 us a layer, the down 12.0 -> 4-6 us; p: the coreset preview 5.43 -> 4.8-5.0 ms, block
#  diffusion 165 -> 175-185 tok/s, the preview without the coreset and the commit unchanged (not narrowed). TALL=2
#  (tiles of 1-2 live slots on the 1-n-tile body, 64 outputs a block, each warp half the chunks): the commit and the
#  n16 step within -5..+5% (a guess: same decode work, twice the blocks, half the chain a block).
#  s: the stacked pass (~39 ms, xtile25) led by the grouped experts (igw / BR=32 tiles: ~45%), then the dense Q8_0
#  products of 512 rows (~20%) and the 16 few-row attentions and GDN block operators.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t p k}
. "$PACK/lib.sh"
dr_init tall29
dr_synth35
C=$D/bin/clover
TR=$D/bin/libclover_kernel_trace.so
if has t; then
  tst test_cuda_matmul tall 200 CLOVER_TEST_ONLY=test_moe_tall,test_moe_persist
  for n in test_cuda_moe_tiles test_cuda_preview test_cuda_batch test_cuda_backend; do tst $n all 120; done
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=test_moe_tall timeout 200 compute-sanitizer --tool memcheck \
      --error-exitcode 9 "$D/bin/test_cuda_matmul" > "$O/memcheck_tall.log" 2>&1
    say "memcheck test_moe_tall rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_tall.log" | tail -1)"
  fi
  wait $SPID
  for v in on 0; do
    e="CLOVER_CUDA_MOE_TALL=1"; [ $v = on ] || e="CLOVER_CUDA_MOE_TALL=0"
    env $e timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
      > "$O/run_$v.json" 2> "$O/run_$v.err"
    env $e timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual \
      --json > "$O/ar_$v.json" 2> "$O/ar_$v.err"
    say "clover run TALL $v: diffusion $(dr_ids "$O/run_$v.json"), --ar $(dr_ids "$O/ar_$v.json") (db3c58da3157 / ff19558da508)"
  done
fi
if has p; then
  wait $SPID
  for r in 1 2; do
    dr_preview TALL_0_$r CLOVER_CUDA_MOE_TALL=0
    dr_preview TALL_on_$r CLOVER_CUDA_MOE_TALL=1
    dr_preview TALL_2_$r CLOVER_CUDA_MOE_TALL=2
  done
fi
if has b; then
  wait $SPID
  for r in 1 2; do
    for v in 1 2; do
      CLOVER_CUDA_MOE_TALL=$v timeout 100 "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 \
        --gen 96 > "$O/batch_${v}_$r.log" 2>&1
      say "== bench_batch --mode ar --n 16 TALL=$v rc=$? at +$(el)s: $(grep -E '^ +16 ' "$O/batch_${v}_$r.log" | tail -1 | cut -c1-120)"
    done
  done
fi
if has k; then
  wait $SPID
  for v in 1 0; do
    CLOVER_CUDA_MOE_TALL=$v CLOVER_TRACE_OUT=$O/trace_tall$v.txt LD_PRELOAD=$TR timeout 150 \
      "$D/bin/bench_cuda_preview" $F --profile > "$O/profile_tall$v.log" 2>&1
    say "== bench_cuda_preview --profile under the tracer, TALL=$v rc=$? at +$(el)s"
    if [ -f $O/trace_tall$v.txt ]; then
      c++filt < $O/trace_tall$v.txt > $O/trace_tall$v.dm.txt && rm -f $O/trace_tall$v.txt
      grep -E "^== window 2:" $O/trace_tall$v.dm.txt | tee -a "$S"
      awk '$0 ~ "^== window 2:" {f=1;next} /^== window/{f=0} f' $O/trace_tall$v.dm.txt | head -15 | cut -c1-150 | \
        tee -a "$S"
    fi
  done
fi
if has s; then
  wait $SPID
  CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$O/trace_d16.txt LD_PRELOAD=$TR timeout 200 "$D/bin/bench_batch" $F \
    --device cuda --mode diffusion --prompt 32 --gen 64 --n 16 > "$O/dbatch_trace.log" 2>&1
  say "== bench_batch --mode diffusion --n 16 under the tracer (PDL off) rc=$? at +$(el)s"
  tail -1 "$O/dbatch_trace.log" | cut -c1-150 | tee -a "$S"
  if [ -f $O/trace_d16.txt ]; then
    c++filt < $O/trace_d16.txt > $O/trace_d16.dm.txt && rm -f $O/trace_d16.txt
    grep -E "^== window 0:" $O/trace_d16.dm.txt | head -1 | tee -a "$S"
    awk '$0 ~ "^== window 0:" {f++; next} /^== window/{if (f) exit} f == 1' $O/trace_d16.dm.txt | head -33 | \
      cut -c1-150 | tee -a "$S"
  fi
fi
dr_end
