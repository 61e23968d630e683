#!/usr/bin/env bash
# Written in the 2026-12-06 08:53 session: the session's final pack on a device. The CUDA tests of the landed state
# (Q8_ROWS32 AUTO for the head; the split and WIDE 2 removed again; the merged CPU changes do not touch CUDA), then
# ncu24's stall summary of a preview's launches (bench/device-runs/2026-12-23-ncu24/summary.py) for the next session.
#   run(command="ITEMS='final24:t ncu24:n' bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS: t  test_cuda_matmul (two parts: through test_moe_dec32, then the rest), test_cuda_moe_tiles,
#           test_cuda_preview, test_cuda_batch, test_cuda_backend, test_cuda_gdn, test_cuda_attention; clover run ids
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t}
. "$PACK/lib.sh"
dr_init final24
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_matmul a 150 CLOVER_TEST_ONLY=test_bad_arguments,test_act_quantize_bytes,test_decode_types,test_chunk_types,test_chunk_thin,test_exact,test_exact_multi,test_chunk_multi,test_chunk_seg,test_row_invariance,test_few_rows,test_mma_rows,test_igemm_wide,test_q8_rows32,test_mmv_stream,test_mmv_lane,test_stream32
  tst test_cuda_matmul b 150 CLOVER_TEST_ONLY=test_moe_decode,test_moe_chunk,test_moe_igw,test_moe_persist,test_moe_many_experts,test_moe_dec32,test_glu,test_glu_quant,test_multi,test_graph_capture,test_pdl_rows
  for n in test_cuda_moe_tiles test_cuda_preview test_cuda_batch test_cuda_backend test_cuda_gdn test_cuda_attention; do
    tst $n all 120
  done
  wait $SPID
  timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
    > "$O/run.json" 2> "$O/run.err"
  timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
    > "$O/ar.json" 2> "$O/ar.err"
  say "clover run: diffusion $(dr_ids "$O/run.json"), --ar $(dr_ids "$O/ar.json")"
fi
dr_end
