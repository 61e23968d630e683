#!/usr/bin/env bash
# Written in the session of 2026-12-07 23:53 UTC (issue 25), from gdnp46's serve split (H100): the concurrent AR
# phase takes 1.12 passes a step (14.2 sequences a pass against 15.9 a step): its 16 prompt tails run as one-sequence
# passes before the stacked decode steps. CLOVER_CUDA_STACK_CHUNKS=1 (backend_cuda_stack.c's chunks: a call's prompt
# chunks stacked into one pass, chunks of <= 8 rows and of more apart; off since serve25 "until it has run on a
# device"; pick24 ran its three tests green and serve 4.37x / 4.28x with other switches) is the lever.
# The pack may be of 47bc249 (R16 on): CLOVER_CUDA_ROUTER_FUSED=8 and CLOVER_CUDA_GDN_REC_PAIR=2 give main's defaults
# of 477b3f7 (R16 reverted, PAIR AUTO) on it.
#   run(command="SEQ_LIMIT=420 ITEMS='chunks48:t,s' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  test_cuda_batch, test_cuda_engine, test_cuda_backend with STACK_CHUNKS=1; ids with it
#  s  serve AR 16 x 128, STACK_CHUNKS 0 then 1 (two rounds a server); where time is left serve diffusion 16 x 64
#     with 0 and 1, then AR with 1 and 0 again (one round each)
# Predictions (before the run; H100): t pass, ids dac8ccfd8b1c / 55bedcfef53b. s: AR concurrent +5..+10% (the 16
# tails' ~0.1 s of a ~1.04 s phase into one ~20 ms pass), 1.00 passes/step, ratio 5.96 -> 6.3-6.5x, answers
# identical; diffusion +2..+4% (its phase is 3 s).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t s}
. "$PACK/lib.sh"
dr_init chunks48
dr_synth35
B="CLOVER_CUDA_ROUTER_FUSED=8 CLOVER_CUDA_GDN_REC_PAIR=2"
if has t; then
  tst test_cuda_batch chunks 120 CLOVER_CUDA_STACK_CHUNKS=1 $B
  tst test_cuda_engine chunks 90 CLOVER_CUDA_STACK_CHUNKS=1 $B
  tst test_cuda_backend chunks 90 CLOVER_CUDA_STACK_CHUNKS=1 $B
  wait $SPID
  dr_run_ids chunks CLOVER_CUDA_STACK_CHUNKS=1 $B
fi
if has s; then
  dr_ar_file
  dr_serve $AR "$B CLOVER_CUDA_STACK_CHUNKS=0" 16 128 2 ar0
  dr_serve $AR "$B CLOVER_CUDA_STACK_CHUNKS=1" 16 128 2 ar1
  wait $SPID
  left() { [ "$(el)" -lt $(( ${DR_LIMIT:-585} - $1 )) ]; } # the rest only where the call's time allows
  left 60 && dr_serve $F "$B CLOVER_CUDA_STACK_CHUNKS=0" 16 64 1 dif0
  left 60 && dr_serve $F "$B CLOVER_CUDA_STACK_CHUNKS=1" 16 64 1 dif1
  left 40 && dr_serve $AR "$B CLOVER_CUDA_STACK_CHUNKS=1" 16 128 1 ar1b
  left 40 && dr_serve $AR "$B CLOVER_CUDA_STACK_CHUNKS=0" 16 128 1 ar0b
  for k in 1 2; do
    [ -s "$O/serve-ar1-$k.json" ] && [ -s "$O/serve-ar0-$k.json" ] && say "ar round $k answers chunks = none: $(python3 -c "
import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); print(a['answers_con'] == b['answers_con'], a['answers_seq'] == b['answers_seq'])" "$O/serve-ar1-$k.json" "$O/serve-ar0-$k.json")"
  done
fi
dr_end
