#!/usr/bin/env bash
# Written in the 2026-12-06 16:57 session (issue 24): the session's final code on a device, the defaults as built
# (CLOVER_CUDA_PDL_ROWS AUTO, the few-row attention at 2 query groups a block), no variable set. A short call for
# the last ~190 s of the session's device time.
#   run(command="ITEMS='final27:t,p' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=170)
# STEPS: t  test_cuda_attention (its plan checks at the new default's shapes run now), test_cuda_preview,
#           test_cuda_matmul's PDL cases; clover run ids
#        p  bench_cuda_preview --reps 3, once
# Predictions (before the run; H100): every test passes; ids db3c58da3157 / ff19558da508 (fewng27's NG 2); the
#  coreset preview 5.46-5.52 ms, the commit 10.53-10.64, block diffusion 162-164 tok/s.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t p}
. "$PACK/lib.sh"
dr_init final27
dr_synth35
C=$D/bin/clover
if has t; then
  tst test_cuda_attention all 100
  tst test_cuda_preview all 60
  tst test_cuda_matmul pdl 60 CLOVER_TEST_ONLY=test_pdl_rows,test_pdl_rows_passes
  wait $SPID
  timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
    > "$O/run.json" 2> "$O/run.err"
  timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
    > "$O/ar.json" 2> "$O/ar.err"
  say "clover run: diffusion $(dr_ids "$O/run.json"), --ar $(dr_ids "$O/ar.json") (db3c58da3157 / ff19558da508)"
fi
if has p; then
  wait $SPID
  timeout 60 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/p.log" 2>&1
  say "== bench_cuda_preview --reps 3 rc=$?"
  grep -E "^(preview 32 rows, first|commit|block)" "$O/p.log" | cut -c1-110 | tee -a "$S"
fi
dr_end
