#!/usr/bin/env bash
# Written in the session of 2026-12-07 20:57 UTC (issues 25 and 24), from pfd44's ncu (H100): the grouped Q4_K W3
# tiles' warps wait on the chunk barrier as soon as their data is early (an L2 prefetch halved long_scoreboard and
# doubled the barrier's stall). The change: WR (CLOVER_CUDA_IG_WR=1, off by default), igemm_warp_kernel: a ring per
# warp (each warp copies its own 16 weight rows a chunk and waits on its own cp.async groups, a __syncwarp, no block
# barrier a chunk); the tile's 8 activation rows, every chunk, copied once a tile behind one barrier; three blocks an
# SM (80 registers, no spills; 74.8 KB at n_in 2048). The same sums a warp: the same bits.
#   run(command="SEQ_LIMIT=400 ITEMS='wr45:t,b,n' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  test_cuda_moe_tiles (WR forms: bits against the full grid, WR's launches counted), memcheck of its test_many
#     and test_preview (SMALL), ids with WR=1
#  b  WR 0 / 1 alternating, WR_ROUNDS (2) rounds: bench_batch --mode ar --n 16 --gen 96, bench_cuda_preview
#  n  ncu of the 16-row AR step's pair and down with WR=1 (igemm_warp_kernel)
#  s  serve AR with WR=1
# Predictions (before the run; H100): t all pass, ids dac8ccfd8b1c / 55bedcfef53b. b: AR n 16 +3..+6% (2,048 ->
# ~2,130), the commit -0.2..-0.5 ms (9.95), the previews unchanged (AUTO keeps WR, like W3, out of them). n: the
# pair 86 -> ~75 us (barrier stall gone; long_scoreboard up), the down 51 -> ~47.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t b n}
. "$PACK/lib.sh"
dr_init wr45
dr_synth35
if has t; then
  tst test_cuda_moe_tiles all 120
  CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_moe_tiles test_many,test_preview 150
  wait $SPID
  dr_run_ids wr CLOVER_CUDA_IG_WR=1
fi
if has b; then
  wait $SPID
  for r in $(seq 1 ${WR_ROUNDS:-2}); do
    for v in 0 1; do
      [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 45 )) ] || break
      CLOVER_CUDA_IG_WR=$v timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 \
        --gen 96 > "$O/ar_${v}_$r.log" 2>&1
      say "b$r rc=$? AR n 16 WR=$v: $(grep -E '^ +16 ' "$O/ar_${v}_$r.log" | tail -1 | cut -c1-110)"
      dr_preview "wr_${v}_$r" CLOVER_CUDA_IG_WR=$v
    done
  done
fi
if has n && command -v ncu > /dev/null; then
  wait $SPID
  CLOVER_CUDA_IG_WR=1 timeout 150 ncu --kernel-name-base demangled -k "regex:igemm_warp_kernel" -s 200 -c 2 \
    --section WarpStateStats --section SpeedOfLight --section Occupancy --section LaunchStats -f -o "$O/nwr" \
    "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 --gen 16 > "$O/ncu_wr.log" 2>&1
  say "== ncu WR=1 rc=$? at +$(el)s"
  ncu --import "$O/nwr.ncu-rep" --page details --print-details all > "$O/nwr_details.txt" 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Issue Active|Warp Cycles Per Issued|Stall (Long|Barrier|MIO|Not Sel)|Registers Per|Achieved Occ" \
    "$O/nwr_details.txt" | head -26 | sed 's/  */ /g' | cut -c1-160 | tee -a "$S"
  gzip -c "$O/nwr_details.txt" > "$R/nwr_details.txt.gz"
  rm -f "$O"/*.ncu-rep
fi
if has s; then
  AR=/tmp/synth35-ar.gguf
  [ -s $AR ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $AR.part \
    > "$O/synth-ar.log" 2>&1 && mv $AR.part $AR; }
  dr_serve $AR "CLOVER_CUDA_IG_WR=1" 16 128 1 ar
fi
dr_end
