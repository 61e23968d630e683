#!/usr/bin/env bash
# Written in the session of 2026-12-07 23:53 UTC (issues 25 and 24), after wr45 (WR +3.2% on the 16-row AR step, now
# on by default) and a fresh tracer table of that step (wr45/out-seq1/prof26: gdn_rec_reg 25.7 us x 30 = 7.4%).
# The change: PAIR (CLOVER_CUDA_GDN_REC_PAIR: 0 off, the default until measured; 1 every call of >= 2 sequences;
# 2 AUTO, where one sequence a block is over one wave at two blocks an SM), gdn_rec_pair_kernel: block y takes
# sequences 2y and 2y + 1 of one head; the second's 64 KB state is cp.async'd into shared memory before pdl_wait,
# beside the first's register loads, so one wave (256 blocks at 16 sequences) has every state read in flight while
# the conv kernel ends. Each sequence's rows: the same inlined body (gdn_rec_rows) as gdn_rec_reg_kernel: the same bits.
#   run(command="SEQ_LIMIT=400 ITEMS='gdnp46:t,b,n,s' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  test_cuda_gdn (rec_pair_matches_single: PAIR = G 1 bit for bit; run_case against the CPU), test_cuda_moe_tiles
#     and test_cuda_batch (WR now the default), memcheck of test_cuda_gdn (SMALL), ids at the defaults and PAIR=2
#  b  PAIR 0 / 2 alternating, two rounds: bench_batch --mode ar --n 16 --gen 96, and --n 8 (AUTO leaves 8: 256 blocks)
#  n  ncu of the AR n 16 step's recurrent GDN kernel, PAIR 0 then 2
#  s  serve AR and diffusion at the defaults with PAIR=2
# Predictions (before the run; H100): t pass, ids dac8ccfd8b1c / 55bedcfef53b both ways. b: AR n 16 +1..+2.5% (2,066
# -> ~2,100; the kernel 25.7 -> ~20 us of a ~7.7 ms step under PDL), n 8 unchanged. n: gdn_rec_reg 29 us, pair ~21
# us, DRAM 47 -> ~65%. s: serve AR ~5.9x (WR +3% over 5.72-5.85), diffusion ~2.2x.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t b n}
. "$PACK/lib.sh"
dr_init gdnp46
dr_synth35
if has t; then
  tst test_cuda_gdn all 100
  tst test_cuda_moe_tiles all 120
  tst test_cuda_batch all 100
  CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_gdn rec_pair_matches_single 150
  wait $SPID
  dr_run_ids def
  dr_run_ids pair CLOVER_CUDA_GDN_REC_PAIR=2
fi
if has b; then
  wait $SPID
  for r in 1 2; do
    for v in 0 2; do
      for n in 16 8; do
        [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 40 )) ] || break
        CLOVER_CUDA_GDN_REC_PAIR=$v timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n $n --prompt 32 \
          --gen 96 > "$O/ar_${v}_${n}_$r.log" 2>&1
        say "b$r rc=$? AR n $n PAIR=$v: $(grep -E "^ +$n " "$O/ar_${v}_${n}_$r.log" | tail -1 | cut -c1-110)"
      done
    done
  done
fi
if has n && command -v ncu > /dev/null; then
  wait $SPID
  for v in 0 2; do
    CLOVER_CUDA_GDN_REC_PAIR=$v timeout 100 ncu --kernel-name-base demangled -k "regex:gdn_rec_(reg|pair)_kernel" -s 60 \
      -c 1 --section WarpStateStats --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section MemoryWorkloadAnalysis -f -o "$O/ng$v" "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 \
      --prompt 32 --gen 8 > "$O/ncu_g$v.log" 2>&1
    say "== ncu PAIR=$v rc=$? at +$(el)s"
    ncu --import "$O/ng$v.ncu-rep" --page details --print-details all > "$O/ng${v}_details.txt" 2>&1
    grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Issue Active|Warp Cycles Per Issued|Stall (Long|Barrier|MIO|Not Sel|Short)|Registers Per|Achieved Occ|Dynamic Shared" \
      "$O/ng${v}_details.txt" | head -20 | sed 's/  */ /g' | cut -c1-160 | tee -a "$S"
    gzip -c "$O/ng${v}_details.txt" > "$R/ng${v}_details.txt.gz"
    rm -f "$O"/*.ncu-rep
  done
fi
if has s; then
  AR=/tmp/synth35-ar.gguf
  [ -s $AR ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $AR.part \
    > "$O/synth-ar.log" 2>&1 && mv $AR.part $AR; }
  dr_serve $AR "CLOVER_CUDA_GDN_REC_PAIR=2" 16 128 1 ar
  dr_serve $F "CLOVER_CUDA_GDN_REC_PAIR=2" 16 64 1 diffusion
fi
dr_end
