#!/usr/bin/env bash
# Written in the session of 2026-12-08 02:35 UTC (issue 24; no device was lent that session, so written, not run).
# From wr45's tracer table of the 16-row AR step (H100): k_route, the routing's own launch past 8 rows, 4.48 us a
# layer (1.7%) after the router's exact product (ex_rows_kernel, 7.03 us). r16 fused the routing into the router's
# launch at 16 rows with the fused router's own product (a warp a row) and lost 0.2-1.0%: on its product, not the
# tail. Here (CLOVER_CUDA_ROUTER_ROWS=N, read when a session is made: 9..64, off by default) k_router_rows runs
# ex_rows_kernel's very warps (matmul_exact.cuh's ex_rows_warp, the same grid) and the fused router's counter tail:
# the last block routes the rows, 8 at a time. 133 registers (ex_rows_kernel 128): one block an SM, so 16 rows (129
# blocks) fit a wave of 132 SMs and 32 rows (257) take two.
#   run(command="SEQ_LIMIT=420 ITEMS='rrows49:t,b' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
#   (a pack of this commit or later: scripts/device-packs.sh build seq)
# STEPS:
#  t  test_cuda_ops (the fused router to 64 rows against cuda_matmul_exact_multi + cuda_moe_route, both routing
#     forms, graphs, the CPU oracle), test_cuda_backend (a 12-row chunk at ROUTER_ROWS=12 = the two launches, a
#     16-row chunk past it), memcheck of test_router_small (3 and 12 rows); ids at ROUTER_ROWS=32 (diffusion's
#     32-row commits take it)
#  b  ROUTER_ROWS 0 / 16 alternating, two rounds: bench_batch --mode ar at n 16 and 12; then 0 / 32: the commit
#     (bench_cuda_preview), two rounds
#  s  serve AR 16 x 128 at ROUTER_ROWS 0 and 16 (one round each), where b gained
# Predictions (before the run; H100): t pass, ids dac8ccfd8b1c / 55bedcfef53b (the same bits by construction).
# b: AR n 16 +0.5..+1.0% (k_route's ~1.5-2.5 us a layer on the critical path with PDL, less the tail's two rounds of
# 8 rows in one block, ~0.5 us, x 40 layers of a ~7.6 ms step); n 12 likewise; the commit at 32 within +-0.05 ms
# (the product's second wave against k_route's launch). s: AR ratio +0.5..+1% (5.96 -> ~6.0x).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t b}
. "$PACK/lib.sh"
dr_init rrows49
dr_synth35
if has t; then
  tst test_cuda_ops rows 150
  tst test_cuda_backend rows 120
  dr_memcheck test_cuda_ops test_router_small 120
  wait $SPID
  dr_run_ids rows32 CLOVER_CUDA_ROUTER_ROWS=32
fi
if has b; then
  wait $SPID
  dr_ab_ar CLOVER_CUDA_ROUTER_ROWS "0 16" "16 12"
  for r in 1 2; do
    for v in 0 32; do
      [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 60 )) ] || break
      dr_preview "rows$v-$r" CLOVER_CUDA_ROUTER_ROWS=$v
    done
  done
fi
if has s; then
  dr_ar_file
  dr_serve $AR "CLOVER_CUDA_ROUTER_ROWS=0" 16 128 1 ar0
  dr_serve $AR "CLOVER_CUDA_ROUTER_ROWS=16" 16 128 1 ar16
fi
dr_end
