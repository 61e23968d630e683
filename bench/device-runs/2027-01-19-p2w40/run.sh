#!/usr/bin/env bash
# Written in the session of 2026-12-07 12:38 UTC (issues 24 and 25), from t32x37 seq3's ncu of a stacked pass's
# 32-slot expert tiles (H100): L2 hit 94%, DRAM 2%, a warp's issues 5.5 cycles apart, the top stall `wait` (1.86):
# each IMMA's four `sq += sc * d` multiply-adds wait on it, and with 4 warps a scheduler little else is ready. The
# change: CLOVER_CUDA_IGW_P2=1 issues two live n-tiles' IMMA before their multiply-adds (iwk_mma_nt<MT, 2>); the
# same integer sums, so the same bits (P2 off: the kernel's PTX is the committed one's, entry for entry).
#   run(command="SEQ_LIMIT=400 ITEMS='p2w40:t,b,x' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  with P2 on: test_cuda_matmul's test_igemm_wide and test_moe_igw (every form bit for bit against
#     matmul_igemm.cu's kernels), memcheck of test_moe_igw (SMALL), test_cuda_batch, `clover run` ids
#  b  P2 0 / 1 alternating, three rounds: bench_batch --mode diffusion --n 16 and bench_cuda_backend --prompt-only 1
#  x  the stacked diffusion pass under the tracer (PDL off) with P2 on: the experts' kernels' us a launch
# Predictions (before any run; H100): t all pass, ids dac8ccfd8b1c / 55bedcfef53b. x: gate / up 83 -> 72-78 us a
# launch, down 88 -> 78-84. b: diffusion n 16 +2..+3%, prompt 512 +1..+2%.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t b}
. "$PACK/lib.sh"
dr_init p2w40
dr_synth35
if has t; then
  tst test_cuda_matmul w 150 CLOVER_TEST_ONLY=test_igemm_wide,test_moe_igw CLOVER_CUDA_IGW_P2=1
  tst test_cuda_batch p2 100 CLOVER_CUDA_IGW_P2=1
  CLOVER_CUDA_IGW_P2=1 CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_matmul test_moe_igw 150
  wait $SPID
  dr_run_ids p2 CLOVER_CUDA_IGW_P2=1
fi
if has b; then
  wait $SPID
  dr_ab CLOVER_CUDA_IGW_P2 "0 1"
fi
if has x; then
  wait $SPID
  dr_trace_d16 p2 CLOVER_CUDA_IGW_P2=1
fi
dr_end
