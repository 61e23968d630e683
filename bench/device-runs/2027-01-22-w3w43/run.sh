#!/usr/bin/env bash
# Written in the session of 2026-12-07 17:57 UTC (issues 25 and 24), from arstep41 seq2's ncu of the 16-row AR step's
# expert pair (igemm_kernel<Q4_K> WIDE, H100): 88.8 us under ncu, DRAM 63%, issue 46%, 111 registers and ~100 KB of
# shared memory, both capping it at 2 blocks an SM (4 warps a scheduler, one issuing every 7.4 cycles).
# The change: ig_pieces in two words a piece (the default form too: 111 -> 90 registers at one block's bounds, the
# same bytes to the same places), and CLOVER_CUDA_IG_W3=1: the grouped Q4_K WIDE tiles on a 3-stage ring at three
# blocks an SM (80 registers, no spills; 74.9 KB a block); the same arithmetic, so the same bits.
#   run(command="SEQ_LIMIT=540 ITEMS='w3w43:t,b,n' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  every test_cuda_* binary (dr_cuda_tests: test_cuda_moe_tiles holds W3 to the full grid's bits and counts its
#     launches; test_cuda_preview checks 7f4561d's block-operator mend), memcheck of test_cuda_moe_tiles (SMALL),
#     `clover run` ids at the default and with W3=1
#  b  W3 0 / 1 alternating, W3_ROUNDS (3) rounds: bench_batch --mode ar --n 16 --gen 96, the lone preview / commit
#     (bench_cuda_preview); the stacked diffusion pass (bench_batch --mode diffusion --n 16) in round 1 unless W3_DIFF=0
#  n  ncu of the 16-row AR step's pair and down with W3=1 (arstep41's pair16 with the 3-stage kernel)
#  s  serve AR and diffusion with W3=1
#  f  (added after seq1: W3 AUTO, the default since, on in every pass but a preview) test_cuda_moe_tiles
#     (AUTO left alone in the preview cases), test_cuda_matmul b, test_cuda_preview, test_cuda_batch; memcheck
#     of test_cuda_moe_tiles' test_many (SMALL; seq1's memcheck named no test and ran none); ids; one round of AR n 16
#     and the lone preview / commit at the default against W3=0; serve AR at the default.
#     Predicted (H100): all pass, ids as before; AR n 16 +2% (~2,010 against ~1,965), the coreset preview the W3=0
#     figure (5.21-5.25 ms: AUTO leaves it), the commit -0.15 ms (~10.05); serve AR 5.67 -> 5.75-5.85x.
# Predictions (before the run; H100): t all pass, ids dac8ccfd8b1c / 55bedcfef53b both ways. n: the pair 88.8 ->
# 65-72 us (issue 46% -> ~60%, occupancy ~36%), the down 58.5 -> 48-52. b: AR n 16 +8..+12% agg tok/s (W3 0 at
# ~1,945 as before: the compact pieces move no figure), the lone coreset preview +-0.05 ms (its ~30 tiles fill under
# a wave either way), the commit -0.2..-0.4 ms (10.3), the stacked pass +-2% (its experts are igw tiles, not WIDE).
# s: serve AR 5.67 -> 6.1-6.3x.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t b n}
. "$PACK/lib.sh"
dr_init w3w43
dr_synth35
ncu_one() { # TAG KERNEL_REGEX SKIP N COUNT [MODE] [ENV...]: arstep41's, with an environment
    local tag=$1 re=$2 skip=$3 n=$4 c=${5:-1} mode=${6:-ar}; shift 6
    env "$@" timeout 150 ncu --kernel-name-base demangled -k "regex:$re" -s "$skip" -c "$c" --section WarpStateStats \
      --section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section ComputeWorkloadAnalysis -f -o "$O/$tag" "$D/bin/bench_batch" $F \
      --device cuda --mode $mode --n $n --prompt 32 --gen 16 > "$O/ncu_$tag.log" 2>&1
    say "== ncu $tag ($re, skip $skip, $mode n $n, $*) rc=$? at +$(el)s"
    ncu --import "$O/$tag.ncu-rep" --page details --print-details all > "$O/${tag}_details.txt" 2>&1
    grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Issue Active|Achieved Occupancy|Warp Cycles Per Issued|Registers Per|Dynamic Shared|Grid Size|Stall (Long|Wait|Barrier|MIO|Not Sel)" \
      "$O/${tag}_details.txt" | head -$(( 17 * c )) | sed 's/  */ /g' | cut -c1-160 | tee -a "$S"
    gzip -c "$O/${tag}_details.txt" > "$R/${tag}_details.txt.gz"
    rm -f "$O"/*.ncu-rep
}
if has t; then
  dr_cuda_tests
  CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_moe_tiles all 150
  wait $SPID
  dr_run_ids base
  dr_run_ids w3 CLOVER_CUDA_IG_W3=1
fi
if has b; then
  wait $SPID
  for r in $(seq 1 ${W3_ROUNDS:-3}); do
    for v in 0 1; do
      [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 60 )) ] || break
      CLOVER_CUDA_IG_W3=$v timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 \
        --gen 96 > "$O/ar_${v}_$r.log" 2>&1
      say "b$r rc=$? AR n 16 W3=$v: $(grep -E '^ +16 ' "$O/ar_${v}_$r.log" | tail -1 | cut -c1-110)"
      dr_preview "w3_${v}_$r" CLOVER_CUDA_IG_W3=$v
      if [ $r = 1 ] && [ "${W3_DIFF:-1}" = 1 ]; then
        CLOVER_CUDA_IG_W3=$v timeout 90 "$D/bin/bench_batch" $F --device cuda --mode diffusion --n 16 --prompt 32 \
          --gen 64 > "$O/bd_${v}_$r.log" 2>&1
        say "b$r rc=$? diffusion n 16 W3=$v: $(grep -E '^ +16 ' "$O/bd_${v}_$r.log" | tail -1 | cut -c1-110)"
      fi
    done
  done
fi
if has n && command -v ncu > /dev/null; then
  wait $SPID
  # the pair (grid 4,y,2) and down (16,y,1): igemm_kernel<(int)12, (bool)1, (bool)1, (bool)1, (int)0, (int)3> under W3
  ncu_one pair16w3 "igemm_kernel<\\(int\\)12.*\\(int\\)3>" 400 16 2 ar CLOVER_CUDA_IG_W3=1
fi
if has s; then
  wait $SPID
  AR=/tmp/synth35-ar.gguf
  [ -s $AR ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $AR.part \
    > "$O/synth-ar.log" 2>&1 && mv $AR.part $AR; }
  say "AR file at +$(el)s"
  dr_serve $AR "CLOVER_CUDA_IG_W3=1" 16 128 1 ar
  dr_serve $F "CLOVER_CUDA_IG_W3=1" 16 64 1 diffusion
fi
if has f; then
  AR=/tmp/synth35-ar.gguf
  ( [ -s $AR ] || { timeout 200 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $AR.part \
    > "$O/synth-ar.log" 2>&1 && mv $AR.part $AR; } ) &
  APID=$!
  tst test_cuda_moe_tiles all 100
  tst test_cuda_matmul b 150 CLOVER_TEST_ONLY=test_moe_decode,test_moe_chunk,test_moe_igw,test_moe_persist,test_moe_tall,test_moe_many_experts,test_moe_dec32
  tst test_cuda_preview all 100
  tst test_cuda_batch all 100
  CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_moe_tiles test_many 150
  wait $SPID
  dr_run_ids auto
  for v in auto 0; do
    e=""; [ $v = 0 ] && e=CLOVER_CUDA_IG_W3=0
    env $e timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 --gen 96 > "$O/arf_$v.log" 2>&1
    say "f rc=$? AR n 16 W3=$v: $(grep -E '^ +16 ' "$O/arf_$v.log" | tail -1 | cut -c1-110)"
    dr_preview "f_$v" $e
  done
  wait $APID
  say "AR file at +$(el)s"
  dr_serve $AR "" 16 128 1 ar
fi
dr_end
