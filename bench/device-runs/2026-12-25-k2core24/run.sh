#!/usr/bin/env bash
# Written in the 2026-12-05 16:54 session (issue 24; not yet run when written). Two forms, each on by default in the
# pack and each behind its switch:
#  - the Q4_K / Q5_K super-block sums of the grouped and dense integer kernel in their short form
#    (matmul_igemm.cu's ig_k_superblock2, CLOVER_CUDA_IG_K2): each code run loaded once for its two sub-blocks, the
#    scales / mins unpacked four at a time, the mins' activation sums by dp2a once a super-block; the same
#    integers, so the same bits. SASS (H100 build): ~45 -> ~27 instructions a sub-block (one mma each);
#  - the coreset on a thread-block cluster (moe_coreset_cluster.cu, CLOVER_CUDA_CORESET_CLUSTER): the rows over
#    8 blocks, the column totals through distributed shared memory, one launch; the same float64 sums in the
#    same order, so the same flags.
#   run(command="ITEMS='k2core24:t,b,r' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t b r n"):
#  t  test_cuda_matmul (K2 off = on bit for bit, every integer kernel against the decode one), test_cuda_preview
#     (the cluster form against the one-block form and the old kernel), test_cuda_backend, test_cuda_batch, and
#     test_cuda_preview's small cases under compute-sanitizer memcheck
#  b  bench_cuda_preview --reps 3: CLOVER_CUDA_IG_K2 0 / 1 / 0 / 1, then CLOVER_CUDA_CORESET_CLUSTER 0 / 1 / 0 / 1;
#     bench_cuda_backend --prompt-only 1 with K2 0 / 1 (the prompt's experts)
#  r  clover run ids (diffusion and --ar) with each switch 0 and 1: equal
#  n  ncu source counters (stall samples per SASS line, pdlrows24's ncusrc.py / sass_phases.py) of the commit's
#     experts pair (igemm_kernel, K2) and the preview's largest dense Q8_0 product (igemm_q8_kernel, the qkv/z/a/b
#     segment launch): what bounds them after K2, for the next forms (issue 24's dense 32-row bar: >= 60% of copy)
#  m  (added after seq1, where test_cuda_matmul ran past its 240 s in test_moe_fast after every earlier test passed)
#     test_cuda_matmul's last five tests
#  g  (added after seq1) the GDN conv of chunk commits and prompts with its inputs loaded before its stores
#     (gdn_conv.cu: seq1's trace had it at 19.2 us a commit layer): test_cuda_gdn, bench_cuda_preview --reps 3 twice,
#     bench_cuda_backend --prompt-only 1, and clover run's ids (their hashes against seq1's: the same bits)
#     Predicted: conv 19.2 -> 3-5 us a commit layer, commit 11.85 -> 11.4-11.5 ms (H100), prompt 512 +2..+4%.
# Predictions (before the run; H100, 2026-12-24: preview 7.19 ms, commit 12.45 ms, block diffusion ~123 tok/s; prof24:
#  the experts' pair 23.3 + down 18.0 us a preview layer, 108.8 + 61.6 a commit layer, the coreset 24.1 us):
#  K2: bits equal; commit 12.45 -> 10.8-11.5 ms (the experts ~20-30% shorter where issue-bound), preview -0.2..-0.4
#      ms, block diffusion +2..+5%; the prompt within +-3% (its 512 rows take the wide kernel, unchanged).
#  cluster: flags equal; the coreset ~24 -> 6-9 us a layer: preview -0.6..-0.75 ms, block diffusion +8..+11%.
#  n: the experts pair still issue-bound (the decode and the IMAD scale sums the top lines, no memory stall on top);
#     igemm_q8_kernel: its FP terms (4 FMUL / FADD chains a tile) and the chunk barrier the top lines.
set -uo pipefail
PACK=${PACK:-.gpu-k2core24}
STEPS=${STEPS:-t b r n}
. "$PACK/lib.sh"
dr_init k2core24
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_matmul all 240
  grep -E "K2|few moe" "$O/t_test_cuda_matmul_all.log" | head -4 | cut -c1-200 | tee -a "$S"
  tst test_cuda_preview all 150
  grep -E "coreset" "$O/t_test_cuda_preview_all.log" | head -3 | cut -c1-200 | tee -a "$S"
  for n in test_cuda_backend test_cuda_batch; do tst $n all 150; done
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_SMALL=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$D/bin/test_cuda_preview" \
      > "$O/memcheck_preview.log" 2>&1
    say "memcheck test_cuda_preview (small) rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_preview.log" | tail -1)"
  fi
fi
if has b; then
  wait $SPID
  for sw in IG_K2 CORESET_CLUSTER; do
    for v in 0 1 0 1; do
      [ "$(el)" -lt 420 ] || { say "bench_cuda_preview: no time left for $sw=$v"; break; }
      env CLOVER_CUDA_$sw=$v timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_${sw}_$v.log" 2>&1
      say "== bench_cuda_preview --reps 3, CLOVER_CUDA_$sw=$v rc=$? at +$(el)s"
      grep -E "^(preview|commit|block)" "$O/preview_${sw}_$v.log" | cut -c1-110 | tee -a "$S"
    done
  done
  for v in 0 1; do
    [ "$(el)" -lt 470 ] || { say "bench_cuda_backend: no time left for K2=$v"; break; }
    CLOVER_CUDA_IG_K2=$v timeout 90 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/prompt_$v.log" 2>&1
    say "== bench_cuda_backend --prompt-only 1, CLOVER_CUDA_IG_K2=$v rc=$? at +$(el)s"
    grep -E "prompt|commit" "$O/prompt_$v.log" | head -4 | cut -c1-140 | tee -a "$S"
  done
fi
if has r; then
  wait $SPID
  for sw in IG_K2 CORESET_CLUSTER; do
    for v in 0 1; do
      env CLOVER_CUDA_$sw=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
        --no-visual --json > "$O/run_${sw}_$v.json" 2> "$O/run_${sw}_$v.err"
      env CLOVER_CUDA_$sw=$v timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos \
        --no-visual --json > "$O/ar_${sw}_$v.json" 2> "$O/ar_${sw}_$v.err"
    done
    dr_ids_cmp "$O/run_${sw}_0.json" "$O/run_${sw}_1.json" "clover run diffusion, $sw 0 / 1"
    dr_ids_cmp "$O/ar_${sw}_0.json" "$O/ar_${sw}_1.json" "clover run --ar, $sw 0 / 1"
  done
fi
if has m; then
  tst test_cuda_matmul rest 240 CLOVER_TEST_ONLY=test_glu,test_multi,test_graph_capture,test_pdl_rows
fi
if has g; then
  tst test_cuda_gdn all 200
  wait $SPID
  for v in 1 2; do
    timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_conv_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3 ($v) rc=$? at +$(el)s"
    grep -E "^(preview 32 rows, first|commit|block)" "$O/preview_conv_$v.log" | cut -c1-110 | tee -a "$S"
  done
  timeout 90 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/prompt_conv.log" 2>&1
  say "== bench_cuda_backend --prompt-only 1 rc=$? at +$(el)s"
  grep -E "prompt|commit" "$O/prompt_conv.log" | head -4 | cut -c1-140 | tee -a "$S"
  timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
    > "$O/run_conv.json" 2> "$O/run_conv.err"
  timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
    > "$O/ar_conv.json" 2> "$O/ar_conv.err"
  say "clover run diffusion: $(dr_ids "$O/run_conv.json") (seq1: 64 ids, hash ${SEQ1_RUN:-2cdbf2f9ccaf}); --ar: \
$(dr_ids "$O/ar_conv.json") (seq1: ${SEQ1_AR:-d1f13e945396})"
fi
if has n && command -v ncu > /dev/null; then
  wait $SPID
  HERE=$(dirname "$(ls -d bench/device-runs/*-pdlrows24/ncusrc.py | sort | tail -1)")
  for k in "4 igemm_kernel moe" "5 igemm_q8_kernel q8"; do
    set -- $k
    [ "$(el)" -lt 470 ] || { say "ncu source $3: no time left"; continue; }
    CLOVER_BENCH_PROFILE_ONLY=$1 timeout 100 ncu --profile-from-start off -k "regex:$2" -s 2 -c 1 \
      --warp-sampling-interval 0 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
      --section LaunchStats --section Occupancy -f -o "$O/src_$3" "$D/bin/bench_cuda_preview" $F --profile \
      > "$O/src_$3.out" 2>&1
    say "== ncu source $3 ($2, range $1) rc=$? at +$(el)s"
    timeout 60 ncu -i "$O/src_$3.ncu-rep" --page details --csv > "$O/src_$3_details.csv" 2>&1
    grep -E '"(Duration|Elapsed Cycles|SM Frequency|DRAM Throughput|Memory Throughput|Achieved Occupancy|Issue Slots Busy|Registers Per Thread|Grid Size)"' \
      "$O/src_$3_details.csv" | awk -F'","' '{print "   " $(NF-2) " " $(NF-1) " " $NF}' | cut -c1-120 | tee -a "$S"
    timeout 60 ncu -i "$O/src_$3.ncu-rep" --page source --csv --print-source sass > "$O/src_$3_sass.csv" 2>&1
    python3 "$HERE/sass_phases.py" "$O/src_$3_sass.csv" 2>&1 | cut -c1-200 | head -20 | tee -a "$S"
    python3 "$HERE/ncusrc.py" "$O/src_$3_sass.csv" 25 2>&1 | cut -c1-200 | tee -a "$S"
  done
fi
dr_end
