#!/usr/bin/env bash
# Written in the session of 2026-12-07 12:38 UTC: the check of the session's last commit at its defaults (K2 the only
# form of igw_k_kernel; the few-row attention's least split 64 keys).
#   run(command="SEQ_LIMIT=400 ITEMS='final39:f' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  f  every test_cuda_* binary (test_cuda_matmul in parts a, b, d), `clover run` ids
#  s  serve diffusion and AR
# Predictions (before the run; H100): all pass (test_cuda_attention's plan checks at the new default: 64 x 64 ->
# 1 x 64, 32 x 96 -> 2 x 64); ids dac8ccfd8b1c / 55bedcfef53b (split38 seq1's at 64; K2 moves no bit); serve AR
# ~5.4x, diffusion 2.10-2.15x (the stacked pass +3% K2, +2% the split: sequential barely moves), answers identical.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-f s}
. "$PACK/lib.sh"
dr_init final39
dr_synth35
if has f; then
  dr_cuda_tests
  CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_matmul test_moe_igw 150
  wait $SPID
  dr_run_ids final
fi
if has s; then
  wait $SPID
  AR=/tmp/synth35-ar.gguf
  [ -s $AR ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $AR.part \
    > "$O/synth-ar.log" 2>&1 && mv $AR.part $AR; }
  say "AR file at +$(el)s"
  dr_serve $F "" 16 64 1 diffusion
  dr_serve $AR "" 16 128 1 ar
fi
dr_end
