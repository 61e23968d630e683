#!/usr/bin/env bash
# Written in the session of 2026-12-07 12:38 UTC (issues 24 and 25), from t32x37's kernel table of the stacked
# 16-sequence diffusion pass (H100): the experts' igw_k_kernel<Q4_K, 8, 32> gate / up 95.1 us a launch and down
# 97.4 (24% of the pass) at ~1/4 of the DRAM floor of reading every expert once; opmix34 counted ~51 instructions an
# IMMA in the K-quant tiles, ~12 of them the mins (a multiply-add an output a sub-block, beside four 16-bit loads
# and two adds of the rows' sub-block sums) and ~4 the scales cut one at a time. The change: CLOVER_CUDA_IGW_K2=1
# forms the wide K-quant tiles' integer sums as the few-row kernels do (ig_k_superblock2): scale bytes by one
# byte_perm from words unpacked once a chunk, the mins' sums by two IMMA a tile once a chunk (ig_k_mins_mma);
# the same integers, so the same bits. ptxas: <Q4_K, 8, 32> 124 -> 123 registers, <Q5_K, 8, 32> 128 -> 117.
#   run(command="SEQ_LIMIT=400 ITEMS='k2w39:t,b' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  test_cuda_matmul's test_igemm_wide and test_moe_igw (every K2 form bit for bit against matmul_igemm.cu's
#     kernels, 8 / 16 warps, 32-slot tiles), memcheck of test_moe_igw (SMALL), test_cuda_batch and
#     test_cuda_preview with K2 on, `clover run` ids with K2 on
#  b  K2 0 / 1 alternating, three rounds: bench_batch --mode diffusion --n 16 and bench_cuda_backend --prompt-only 1
#  x  the stacked diffusion pass under the tracer (PDL off) with K2 0 and 1: the experts' kernels' us a launch
# Predictions (before any run): t all pass, ids db3c58da3157 / ff19558da508 (unchanged). x: the gate / up launch
# 95 -> 75-80 us, down 97 -> 80-85. b: diffusion n 16 +4..+6% agg tok/s, prompt 512 +4..+7%, the commit after the
# prompt unchanged (its 256 slots take the few-slot tiles).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t b}
. "$PACK/lib.sh"
dr_init k2w39
dr_synth35
if has t; then
  tst test_cuda_matmul w 150 CLOVER_TEST_ONLY=test_igemm_wide,test_moe_igw
  tst test_cuda_batch k2 100 CLOVER_CUDA_IGW_K2=1
  tst test_cuda_preview k2 100 CLOVER_CUDA_IGW_K2=1
  CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_matmul test_moe_igw 150
  wait $SPID
  dr_run_ids k2 CLOVER_CUDA_IGW_K2=1
fi
if has b; then
  wait $SPID
  dr_ab CLOVER_CUDA_IGW_K2 "0 1"
fi
if has x; then
  wait $SPID
  for v in ${XV:-0 1}; do dr_trace_d16 k$v CLOVER_CUDA_IGW_K2=$v; done
fi
dr_end
