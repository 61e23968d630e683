#!/usr/bin/env bash
# Written in the session of 2026-12-07 15:09 UTC (issues 24 and 25), from arstep41 seq2's ncu of the stacked
# 16-sequence diffusion pass's k_block_head_once_multi<4> (H100): 164 us under ncu, 77% of issue slots busy, the ALU
# pipe 42% against the FMA pipe's 22%, DRAM 12%. The change: CLOVER_CUDA_GDN_K128=1 runs the block operator's scores
# and read-out with dk = dv = 128 unrolled (tile_scores' k128 branch, tile_readout128: NR = 2 row groups known, so no
# issued-and-predicated rows r * NR >= RT, no runtime-dk address arithmetic); the same operations per output in the
# same order, so the same bits. Also the first run of the recurrent GDN kernel as its only (COLS) form.
#   run(command="SEQ_LIMIT=560 ITEMS='k128w42:t,b,x,s' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  test_cuda_preview (gdn_block_k128: the k128 steps against the four-launch form's bits and the tile form's),
#     test_cuda_gdn, test_cuda_batch; memcheck of gdn_block_k128 (SMALL); `clover run` ids default and K128=1
#  b  K128 0 / 1 alternating, three rounds: bench_batch --mode diffusion --n 16 and the lone preview (bench_cuda_preview)
#  x  ncu of k_block_head_once_multi<4> (stacked pass) with K128=1
#  s  serve AR (the COLS form, default) and serve diffusion with K128=1
#  k  (added after seq3) with K128=1: do the heads' form knobs move? two rounds: the stacked pass at
#     CLOVER_CUDA_GDN_HEAD_ONCE_G=2 against the default (4 groups); the lone preview at CLOVER_CUDA_GDN_HEAD_ONCE=1
#     (head-once for a lone preview too) and CLOVER_CUDA_GDN_HEAD_RT=8 against the default (4-row tiles)
#     Predicted: no default moves (G 2: -1..-3%, the read-outs of 4 tiles on 2 groups; lone head-once still slower
#     by ~0.3-0.5 ms, RT 8 +0.05-0.1 ms), K128 having cut the read-out's issue by about a third, not the structure.
# Predictions (before the run; H100): t all pass, ids dac8ccfd8b1c / 55bedcfef53b both ways. x: 164 -> 70-90 us,
# issue still the bound. b: the stacked pass +4..+6% agg tok/s (the kernel 8.8% of it), the lone coreset preview
# 5.36 -> 5.15-5.25 ms (its tile kernel k_block_head_fused<4> ~16 us x 30), commit unchanged. s: serve AR 5.5 ->
# 5.7-5.8x (the 16-row step +4.6%, a lone sequence unchanged), diffusion 2.11 -> 2.15-2.25x.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t b}
. "$PACK/lib.sh"
dr_init k128w42
dr_synth35
if has t; then
  tst test_cuda_preview all 150
  tst test_cuda_gdn all 100
  tst test_cuda_batch all 100
  CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_preview gdn_block_k128 150
  wait $SPID
  dr_run_ids base
  dr_run_ids k128 CLOVER_CUDA_GDN_K128=1
fi
if has b; then
  wait $SPID
  for r in 1 2 3; do
    for v in 0 1; do
      [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 40 )) ] || break
      CLOVER_CUDA_GDN_K128=$v timeout 90 "$D/bin/bench_batch" $F --device cuda --mode diffusion --n 16 --prompt 32 \
        --gen 64 > "$O/bd_${v}_$r.log" 2>&1
      say "b$r rc=$? diffusion n 16 K128=$v: $(grep -E '^ +16 ' "$O/bd_${v}_$r.log" | tail -1 | cut -c1-110)"
      dr_preview "k128_${v}_$r" CLOVER_CUDA_GDN_K128=$v
    done
  done
fi
if has x && command -v ncu > /dev/null; then
  wait $SPID
  CLOVER_CUDA_GDN_K128=1 timeout 150 ncu --kernel-name-base demangled -k "regex:k_block_head_once_multi" -s 90 -c 1 \
    --section WarpStateStats --section LaunchStats --section Occupancy --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis -f -o "$O/headonce16k" "$D/bin/bench_batch" $F \
    --device cuda --mode diffusion --n 16 --prompt 32 --gen 16 > "$O/ncu_headonce16k.log" 2>&1
  say "== ncu headonce16k rc=$? at +$(el)s"
  ncu --import "$O/headonce16k.ncu-rep" --page details --print-details all > "$O/headonce16k_details.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Issued Warp|Pipe Alu|Pipe Fma Cycles|Registers Per|Achieved Occupancy|Stall (Wait|Short|Long|MIO|Barrier)" \
    "$O/headonce16k_details.txt" | head -14 | sed 's/  */ /g' | tee -a "$S"
  gzip -c "$O/headonce16k_details.txt" > "$R/headonce16k_details.txt.gz"
  rm -f "$O"/*.ncu-rep
fi
if has k; then
  wait $SPID
  for r in 1 2; do
    for e in "" CLOVER_CUDA_GDN_HEAD_ONCE_G=2; do
      env CLOVER_CUDA_GDN_K128=1 $e timeout 90 "$D/bin/bench_batch" $F --device cuda --mode diffusion --n 16 --prompt 32 \
        --gen 64 > "$O/k_${r}_${e:-base}.log" 2>&1
      say "k$r rc=$? diffusion n 16 K128=1 ${e:-base}: $(grep -E '^ +16 ' "$O/k_${r}_${e:-base}.log" | tail -1 | cut -c1-110)"
    done
    for e in "" CLOVER_CUDA_GDN_HEAD_ONCE=1 CLOVER_CUDA_GDN_HEAD_RT=8; do
      dr_preview "k_${r}_${e:-base}" CLOVER_CUDA_GDN_K128=1 $e
    done
  done
fi
if has s; then
  wait $SPID
  AR=/tmp/synth35-ar.gguf
  [ -s $AR ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $AR.part \
    > "$O/synth-ar.log" 2>&1 && mv $AR.part $AR; }
  say "AR file at +$(el)s"
  dr_serve $AR "" 16 128 1 ar
  dr_serve $F "CLOVER_CUDA_GDN_K128=1" 16 64 1 diffusion
fi
dr_end
