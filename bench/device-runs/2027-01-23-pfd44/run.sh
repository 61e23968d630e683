#!/usr/bin/env bash
# Written in the session of 2026-12-07 20:57 UTC (issues 25 and 24), from w3w43 seq1's ncu of the 16-row AR step's
# expert pair under W3 (H100): 83.5 us, DRAM 67%, issue 47%, long_scoreboard the top stall (1.88 cycles of ~10.4
# between a warp's issues), then not_selected, mio, barrier. A block keeps two chunks in flight (3-stage ring) and
# starts its tile with the ring empty; the down's tiles are two chunks each (n_in 512), so its ring never runs ahead.
# The change: PFD (CLOVER_CUDA_IG_PFD = d, off by default): the grouped Q4_K WIDE tiles prefetch into L2 the chunk d
# steps past the ring's copy, following the block's tile walk into its next tile (cp.async.bulk.prefetch.L2, a weight
# row a thread); a template instance of its own, so the off path's PTX is the committed kernel's. No byte changes.
#   run(command="SEQ_LIMIT=560 ITEMS='w3w43:f pfd44:t,b' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  test_cuda_moe_tiles (the PFD forms: W3 at the cap by shape, the 4-stage ring at cap 3, W3 at cap 1 with d 9:
#     bits against the full grid, PFD's launches counted), memcheck of its test_many (SMALL), ids with PFD 2
#  b  PFD 0 / 2 / 4 alternating, PFD_ROUNDS (2) rounds: bench_batch --mode ar --n 16 --gen 96, the lone preview /
#     commit (bench_cuda_preview); beside them "base", the same benches from bd53825's pack ($PACK/base.txz: before
#     d361211, the aligned copy pieces' offsets summed in 32 bits, 62 -> 37 SASS instructions a chunk in W3's copy)
#  n  ncu of the 16-row AR step's pair and down with PFD=$PFD_N (2) (w3w43's pair16w3 beside it)
# Predictions (before the run; H100): t all pass, ids dac8ccfd8b1c / 55bedcfef53b. b: AR n 16 at PFD 2 +3..+5%
# against PFD 0 (~2,010 -> ~2,070; the pair and down each -8..-10%), PFD 4 within 1% of PFD 2; the commit -0.2..-0.4
# ms (10.0); the lone coreset preview -0.03..-0.08 ms (5.23; its pair's 8-chunk tiles start cold). n: the pair 83.5 ->
# ~76 us, DRAM 67 -> ~74%; the down 51.0 -> ~45. d361211 (0 against base): AR n 16 +1..+3%, the commit -0.05..-0.15
# ms, the preview within +-0.03.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t b}
. "$PACK/lib.sh"
dr_init pfd44
dr_synth35
if has t; then
  tst test_cuda_moe_tiles all 120
  CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_moe_tiles test_many 150
  wait $SPID
  dr_run_ids pfd2 CLOVER_CUDA_IG_PFD=2
fi
if has b; then
  wait $SPID
  # base: the pack of bd53825 (PFD's commit, before d361211's 32-bit copy offsets), carried as $PACK/base.txz
  V="0 2 4"
  if [ -s "$PACK/base.txz" ] && mkdir -p "$D/base" && tar xJf "$PACK/base.txz" -C "$D/base" bin/bench_batch \
       bin/bench_cuda_preview; then V="base 0 2 4"; fi
  for r in $(seq 1 ${PFD_ROUNDS:-2}); do
    for v in $V; do
      [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 45 )) ] || break
      bin=$D/bin e=CLOVER_CUDA_IG_PFD=$v
      [ $v = base ] && bin=$D/base/bin e=CLOVER_NOTHING=1
      env $e timeout 60 "$bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 --gen 96 \
        > "$O/ar_${v}_$r.log" 2>&1
      say "b$r rc=$? AR n 16 PFD=$v: $(grep -E '^ +16 ' "$O/ar_${v}_$r.log" | tail -1 | cut -c1-110)"
      env $e timeout 60 "$bin/bench_cuda_preview" $F --reps 3 > "$O/p_${v}_$r.log" 2>&1; rc=$?
      l=$(grep -E "^(preview 32 rows, first|commit|block)" "$O/p_${v}_$r.log" | \
        awk '{for (i = 2; i <= NF; i++) if ($i == "ms" || $i == "tok/s") { printf "%s ", $(i - 1); break }}')
      say "p rc=$rc PFD=$v: coreset/nocoreset/commit ms, block tok/s: $l"
    done
  done
fi
if has n && command -v ncu > /dev/null; then
  wait $SPID
  for v in 0 ${PFD_N:-2}; do
    CLOVER_CUDA_IG_PFD=$v timeout 150 ncu --kernel-name-base demangled -k "regex:igemm_kernel<\\(int\\)12.*\\(int\\)3" \
      -s 400 -c 2 --section WarpStateStats --section SpeedOfLight --section Occupancy -f -o "$O/n$v" \
      "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 --gen 16 > "$O/ncu_$v.log" 2>&1
    say "== ncu PFD=$v rc=$? at +$(el)s"
    ncu --import "$O/n$v.ncu-rep" --page details --print-details all > "$O/n${v}_details.txt" 2>&1
    grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Issue Active|Warp Cycles Per Issued|Stall (Long|Barrier|MIO)" \
      "$O/n${v}_details.txt" | head -24 | sed 's/  */ /g' | cut -c1-160 | tee -a "$S"
    gzip -c "$O/n${v}_details.txt" > "$R/n${v}_details.txt.gz"
    rm -f "$O"/*.ncu-rep
  done
fi
dr_end
