#!/usr/bin/env bash
# Written in the session of 2026-12-07 23:53 UTC (issues 25 and 24), from wr45's tracer table of the 16-row AR step
# (k_route 4.48 us x 40 behind ex_rows' 7.03: a launch and a dependency a layer). The change: the fused router
# (moe_router.cu: the router product, the shared expert's gate logit and the routing in one launch, its last block
# routing) up to 16 rows instead of 8; past 8 the launches it replaces are the thin exact product's
# (cuda_matmul_exact_multi, every row the decode bits) and k_route: the same bits. CLOVER_CUDA_ROUTER_FUSED=8: the
# old limit (A/B).
#   run(command="SEQ_LIMIT=300 ITEMS='r16:t,b' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  test_cuda_ops (test_router_fused / _fast: rows 1..16 against the two launches bit for bit, the CPU oracle, the
#     counter), test_cuda_backend, test_cuda_batch (stacked = lone), memcheck of test_router_fused, ids
#  b  ROUTER_FUSED 8 / default alternating, two rounds: bench_batch --mode ar --n 16 and --n 12
# Predictions (before the run; H100): t pass, ids dac8ccfd8b1c / 55bedcfef53b. b: AR n 16 +1..+2% (one launch of
# ~4.5 us a layer of a ~7.7 ms step, less the router's longer last block), n 12 the same.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t b}
. "$PACK/lib.sh"
dr_init r16
dr_synth35
if has t; then
  tst test_cuda_ops all 150
  tst test_cuda_backend all 100
  tst test_cuda_batch all 100
  dr_memcheck test_cuda_ops test_router_fused 150
  wait $SPID
  dr_run_ids def
fi
if has b; then
  wait $SPID
  for r in 1 2; do
    for v in 8 1; do
      for n in 16 12; do
        [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 40 )) ] || break
        CLOVER_CUDA_ROUTER_FUSED=$v timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n $n --prompt 32 \
          --gen 96 > "$O/ar_${v}_${n}_$r.log" 2>&1
        say "b$r rc=$? AR n $n ROUTER_FUSED=$v: $(grep -E "^ +$n " "$O/ar_${v}_${n}_$r.log" | tail -1 | cut -c1-110)"
      done
    done
  done
fi
dr_end
