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
  A="test_bad_arguments,test_act_quantize_bytes,test_decode_types,test_chunk_types,test_chunk_thin,test_exact,test_exact_multi,test_chunk_multi,test_chunk_seg,test_row_invariance,test_few_rows,test_mma_rows,test_igemm_wide,test_q8_rows32,test_mmv_stream,test_mmv_lane,test_stream32"
  B="test_moe_decode,test_moe_chunk,test_moe_igw,test_moe_persist,test_moe_tall,test_moe_many_experts,test_moe_dec32"
  DD="test_glu,test_glu_quant,test_multi,test_graph_capture,test_pdl_rows,test_pdl_rows_passes,test_norm_q8"
  tst test_cuda_matmul a 150 CLOVER_TEST_ONLY=$A
  tst test_cuda_matmul b 150 CLOVER_TEST_ONLY=$B
  tst test_cuda_matmul d 120 CLOVER_TEST_ONLY=$DD
  for t in test_cuda_ops test_cuda_moe_tiles test_cuda_ig_x2 test_cuda_preview test_cuda_batch test_cuda_attention \
      test_cuda_gdn test_cuda_backend test_cuda_engine test_cuda_split test_cuda_gpumem; do
    tst $t all 100
  done
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
