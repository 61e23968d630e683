#!/usr/bin/env bash
# Written in the session of 2026-12-07 07:33 UTC (issues 24 and 25): the layer's expert sum (k_combine: the routed
# experts' weighted sum and the gated shared expert), the residual add and the next layer's input norm (with its
# Q8_0 8-bit rows where the next products take them) in ONE launch: k_norm_vec's CMB form (ops_small.cu,
# cuda_moe_combine_add_rms_norm; backend_cuda_pass.c's residual_norm), CLOVER_CUDA_COMBINE_NORM=0 the two launches.
# Why: every pass ran k_combine (8 blocks a row) and then k_norm_vec (a block a row) a layer; the sum is read once by
# the norm, so it need never go to memory: one launch less a layer (40 a pass) in the decode step, the preview, the
# commit and the stacked steps. prof26 (H100, PDL off): k_combine 3.28 us x 40 of a preview, 4.79 x 40 of a commit;
# bench_cuda_decode's 1-row ops: combine 2.3 us, a norm ~1.4.
#   run(command="SEQ_LIMIT=420 ITEMS='cmbnorm33:t,d,p,b' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  test_cuda_ops (test_combine_norm: h, x and the 8-bit rows bit and byte for byte against combine + add + norm,
#     h against the CPU exactly), test_cuda_matmul's norm_q8, test_cuda_preview, test_cuda_batch; memcheck of
#     test_combine_norm; clover run ids fused (default) and with CLOVER_CUDA_COMBINE_NORM=0 (db3c58da3157 / ff19558da508)
#  d  bench_cuda_decode (1 row) COMBINE_NORM 0 / 1 twice: the fused op's line beside combine's, the decode step
#  p  dr_preview COMBINE_NORM 0 / 1 twice: the coreset preview, the commit, block diffusion
#  b  bench_batch --mode ar --n 1,4,16 COMBINE_NORM 0 / 1
#  v  every test_cuda_* of the pack (the fused form is the default)
# Predictions (before the run; H100):
#  t: all pass, ids equal both ways, memcheck 0 errors.
#  d: the fused op ~2.5-3 us at 1 row (combine 2.3 + a norm 1.4 apart); the decode step 2.83 -> ~2.76 ms.
#  p: coreset preview 5.40 -> ~5.34 ms, commit 10.39 -> ~10.31, block diffusion +1%.
#  b: n 1 +2%, n 4 +1%, n 16 +0.5..1%.
# seq1 (pack 7fcb364) ran: bits right, no gain (the fused op 3.76 us at 1 row against 2.32 + 1.37 apart: the sum's
# 16 float4 loads a thread waited in two round trips on one SM). seq2 (pack with cmb_sum4<U>: every slot's loads of
# both float4s of a thread in one round trip; the bench now times the fused line whatever the switch says, so the
# COMBINE_NORM=0 step runs too): `ITEMS='cmbnorm33:t,d,p,b'`. Predicted (H100): the fused op ~2.8-3.0 us at 1 row;
# the decode step -0.02..-0.04 ms against COMBINE_NORM=0; the preview and commit -0.02..-0.04 ms; bench_batch within
# its noise (~4% between runs).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t d p b}
. "$PACK/lib.sh"
dr_init cmbnorm33
dr_synth35
if has t; then
  tst test_cuda_ops all 120
  tst test_cuda_matmul normq8 120 CLOVER_TEST_ONLY=test_norm_q8
  tst test_cuda_preview all 200
  tst test_cuda_batch all 200
  dr_memcheck test_cuda_ops test_combine_norm 200
  wait $SPID
  dr_run_ids fused
  dr_run_ids apart CLOVER_CUDA_COMBINE_NORM=0
fi
if has d; then
  wait $SPID
  for r in 1 2; do
    for v in 0 1; do
      CLOVER_CUDA_COMBINE_NORM=$v CLOVER_BENCH_DECODE_ROWS=1 timeout 90 "$D/bin/bench_cuda_decode" $F \
        > "$O/decode_${v}_$r.log" 2>&1
      say "bench_cuda_decode COMBINE_NORM=$v rc=$? at +$(el)s:"
      grep -iE "^STEP|weighted sum|one launch|residual add|sums at" "$O/decode_${v}_$r.log" | cut -c1-170 | head -8 | tee -a "$S"
    done
  done
fi
if has p; then
  wait $SPID
  for r in 1 2; do
    for v in 0 1; do dr_preview CN_${v}_$r CLOVER_CUDA_COMBINE_NORM=$v; done
  done
fi
if has b; then
  wait $SPID
  for v in 0 1; do
    [ "$(el)" -lt "${DR_LIMIT:-585}" ] || break
    CLOVER_CUDA_COMBINE_NORM=$v timeout 120 "$D/bin/bench_batch" $F --device cuda --mode ar --n 1,4,16 --prompt 32 \
      --gen 96 > "$O/batch_$v.log" 2>&1
    say "== bench_batch --mode ar --n 1,4,16 COMBINE_NORM=$v rc=$? at +$(el)s"
    grep -E "^ +(1|4|16) " "$O/batch_$v.log" | cut -c1-130 | tee -a "$S"
  done
fi
if has v; then
  for t in "$D"/bin/test_cuda_*; do tst "$(basename "$t")" v 200; done
fi
dr_end
