#!/usr/bin/env bash
# Written in the 2026-12-05 14:27 session (issue 24; not yet run when written). The coreset kernel split in two
# (moe_coreset_warp.cu, CLOVER_CUDA_CORESET_SPLIT; on in the pack that ran, off by default since: slower):
# k_coreset_rows, a warp a row over n / 2 blocks
# (the max, the float64 exps, the top-k rounds, the row's float64 sum, its picks' probabilities into the scratch
# [n][k]), then the one-block kernel's totals (each expert's sum over the rows that picked it, ascending: the old
# column sums without their 0.0 terms), ranks and walk. chunktile24's ncu: 60% of the one-block kernel's 26.8 us in
# its per-row phase, issue-bound on one SM. The same code per row: the same flags and counts.
#   run(command="ITEMS='coresplit24:t,b,r' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t b r"):
#  t  test_cuda_preview (coreset_forms: the split against the one-block form, 576 cases bit for bit, and the old
#     kernel, and the CPU's set), test_cuda_backend, test_cuda_batch
#  b  bench_cuda_preview --reps 3, CLOVER_CUDA_CORESET_SPLIT 0 / 1 / 0 / 1
#  r  clover run ids (diffusion) with 0 and 1: equal
# Predictions (before the run; prof24 (H100): k_coreset_warp 24.1 us x 40 a preview): the rows' kernel ~4-5 us, the
#  rest ~9-10 us: ~24 -> ~14 us a layer, preview -0.35..-0.45 ms (7.19 -> ~6.8 ms on an H100), block diffusion
#  +4..+6%.
set -uo pipefail
PACK=${PACK:-.gpu-coresplit24}
STEPS=${STEPS:-t b r}
. "$PACK/lib.sh"
dr_init coresplit24
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_preview split 150
  grep -E "coreset kernel" "$O/t_test_cuda_preview_split.log" | head -2 | cut -c1-200 | tee -a "$S"
  for n in test_cuda_backend test_cuda_batch; do tst $n split 150; done
fi
if has b; then
  wait $SPID
  for v in 0 1 0 1; do
    [ "$(el)" -lt 400 ] || { say "bench_cuda_preview: no time left for $v"; break; }
    CLOVER_CUDA_CORESET_SPLIT=$v timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_CORESET_SPLIT=$v rc=$? at +$(el)s"
    grep -E "^(preview|commit|resolve|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
fi
if has r; then
  wait $SPID
  for v in 0 1; do
    CLOVER_CUDA_CORESET_SPLIT=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/run_$v.json" 2> "$O/run_$v.err"
  done
  dr_ids_cmp "$O/run_0.json" "$O/run_1.json" "clover run diffusion, CORESET_SPLIT 0 / 1"
fi
dr_end
