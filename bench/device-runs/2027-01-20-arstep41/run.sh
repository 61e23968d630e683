#!/usr/bin/env bash
# Written in the session of 2026-12-07 15:09 UTC (issue 25's AR ratio, 5.37x of 8): what holds the 16-row stacked AR
# step (~8.5-9 ms; prof26 s / auto30 seq3's table, H100: the experts' pair igemm_kernel<Q4_K> 67 us x 40 (28%), down
# 37 x 40 (15%), gdn_rec_reg 37 us x 30 (10%)). Neither the pair nor the recurrent GDN step has been under ncu in
# the AR step. Bytes (35B-A3B): the recurrent step reads and writes 16 x 32 heads x 64 KB = 32 MB each way (64 MB:
# ~22 us at an H100's ~2.9 TB/s copy); the pair ~101 experts x 1.18 MB (Q4_K) = 119 MB (~41 us).
#   run(command="SEQ_LIMIT=300 ITEMS='arstep41:n' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  n  ncu (SpeedOfLight, MemoryWorkloadAnalysis, Occupancy, WarpStateStats, LaunchStats) of one gdn_rec_reg_kernel
#     and one experts' pair + down kernel of bench_batch --mode ar --n 16's decode steps (launches skipped past the prompt
#     and the first steps), and of gdn_rec_reg in the lone step (--n 1)
#  c  (needs a pack with gdn_recurrent.cu's COLS form) test_cuda_gdn (the COLS form bit for bit against the default,
#     and against the CPU), memcheck of it, `clover run` ids with CLOVER_CUDA_GDN_REC_COLS=1; then COLS 0 / 1
#     alternating, three rounds: bench_batch --mode ar --n 16 --gen 96 and --n 1; ncu of the COLS kernel at n 16
#  h  ncu of one k_block_head_once_multi<4> of the stacked 16-sequence diffusion pass (8.8% of it, 134 us a GDN layer
#     against ~30-50 us of shared-memory issue and state loading estimated in seq2's prediction)
# Predictions (before the run; H100): gdn_rec_reg n16 DRAM 55-65% of peak (~37 us under ncu's clocks ~45), its
# stalls long_scoreboard (the state's loads) then barrier; n1 DRAM < 20% (32 blocks: one SM each); the pair DRAM
# 40-50%, issue-bound like the preview's (stall wait / long_scoreboard).
# h (written before seq2): DRAM < 15%, issue-bound on shared-memory loads (short_scoreboard / mio_throttle the top
# stalls), achieved occupancy ~45% (one 1,024-thread block an SM), 3.9 waves of 512 blocks.
# c (written before n ran): all pass, ids dac8ccfd8b1c / 55bedcfef53b; gdn_rec_reg at 16 sequences 37 -> 25-30 us
# (each state load / store one 128-byte line instead of four 32-byte pieces), the AR step at n 16 +2..+4% agg
# tok/s (0.2-0.35 ms of ~8.5), n 1 within +-1% (32 blocks: latency, not bandwidth).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-n}
. "$PACK/lib.sh"
dr_init arstep41
dr_synth35
# ncu_one TAG KERNEL_REGEX SKIP N COUNT [MODE]: ncu of COUNT launches after the first SKIP matching KERNEL_REGEX
# (against the demangled name) in bench_batch --mode MODE (ar) --n N
ncu_one() {
    local tag=$1 re=$2 skip=$3 n=$4 c=${5:-1} mode=${6:-ar}
    timeout 150 ncu --kernel-name-base demangled -k "regex:$re" -s "$skip" -c "$c" --section WarpStateStats --section LaunchStats --section Occupancy \
      --section SpeedOfLight --section MemoryWorkloadAnalysis -f -o "$O/$tag" "$D/bin/bench_batch" $F \
      --device cuda --mode $mode --n $n --prompt 32 --gen 16 > "$O/ncu_$tag.log" 2>&1
    say "== ncu $tag ($re, skip $skip, $mode n $n) rc=$? at +$(el)s"
    ncu --import "$O/$tag.ncu-rep" --page details --print-details all > "$O/${tag}_details.txt" 2>&1
    grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|L2 Hit|L1/TEX Hit|Achieved Occupancy|Warp Cycles Per Issued|Registers Per|Block Size|Grid Size|Stall" \
      "$O/${tag}_details.txt" | head -$(( 24 * c )) | sed 's/  */ /g' | cut -c1-160 | tee -a "$S"
    gzip -c "$O/${tag}_details.txt" > "$R/${tag}_details.txt.gz"
    rm -f "$O"/*.ncu-rep
}
if has n; then
  wait $SPID
  if command -v ncu > /dev/null; then
    # 30 recurrent layers a step: skip 300 = past ~10 steps (the prompt's own GDN is the chunked form)
    ncu_one gdnrec16 gdn_rec_reg 300 16
    ncu_one gdnrec1 gdn_rec_reg 300 1
    # the experts' pair (grid 4,66,2) and down (16,33,1): both igemm_kernel<12, true, true, true, 0>, 80 a step (ncu
    # demangles it as igemm_kernel<(int)12, (bool)1, ...>: seq1's pattern with "true" matched nothing)
    ncu_one pair16 "igemm_kernel<\\(int\\)12" 400 16 2
  else say "no ncu"; fi
fi
if has h; then
  wait $SPID
  # 30 GDN layers a pass; skip 90 = past the first 3 passes
  command -v ncu > /dev/null && ncu_one headonce16 k_block_head_once_multi 90 16 1 diffusion
fi
if has c; then
  wait $SPID
  tst test_cuda_gdn all 100
  dr_memcheck test_cuda_gdn recurrent_cols_matches_rows 150
  dr_run_ids cols CLOVER_CUDA_GDN_REC_COLS=1
  for r in 1 2 3; do
    for v in 0 1; do
      [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 40 )) ] || break
      for n in 16 1; do
        CLOVER_CUDA_GDN_REC_COLS=$v timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n $n --prompt 32 \
          --gen 96 > "$O/c_${r}_${v}_$n.log" 2>&1
        say "c$r rc=$? COLS=$v n $n: $(grep -E "^ +$n " "$O/c_${r}_${v}_$n.log" | tail -1 | cut -c1-110)"
      done
    done
  done
  CLOVER_CUDA_GDN_REC_COLS=1 ncu_one gdnrec16c gdn_rec_reg 300 16
fi
dr_end
