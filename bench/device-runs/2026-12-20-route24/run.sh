#!/usr/bin/env bash
# Written in the 2026-12-20 session (issue 24: the GPU passes at the memory floor), not yet run. The decode step's
# fused router (moe_router.cu's k_router) took 13.4-13.7 us a layer under ncu (igw25), x 40 layers: the blocks'
# part (stage, dot, fence, count) and then one routing warp a row in the last block. CLOVER_CUDA_ROUTE_FAST=1 runs
# moe_route.cuh's fast form (the same ids and weight bits): the max by one redux.sync, the top-k by one redux max +
# a ballot a round (a redux min only when lanes tie) over each lane's best by a 3-deep tree, the weights' sum in the
# rounds, and in k_router one atom.add.acq_rel.gpu instead of the fences. Off by default: this run decides.
#   cmake --build build -j2 && scripts/device-packs.sh build route24
#   run(command="bash .gpu-route24/run.sh", carry=[".gpu-route24"], timeout_s=600)
#   (if one call runs short: STEPS="t n" first, then STEPS="b")
# STEPS (default "t n b"):
#  t  test_cuda_ops test_route_fast / test_router_fast (both forms bit for bit: k_route, the allowed form, the
#     fused router, its graph replay; and the fast form against the CPU); test_cuda_ops whole with the switch off
#     and on; test_cuda_backend (route_fast_equals_other: whole passes, off vs on, logits and state bit for bit),
#     test_cuda_batch / preview / engine with it on; memcheck of test_router_small in the fast form;
#     clover run --ar ids with the switch off / on
#  n  ncu of k_router (one eager decode pass, CLOVER_BENCH_DECODE_NCU=1), the switch off and on
#  b  bench_cuda_backend (the --no-diffusion 35B-A3B file) off / on / off / on; bench_cuda_decode's backend step
#     (CLOVER_BENCH_DECODE_ROWS=0: the lone pass replayed in a graph, the batched 1- and 16-sequence steps) off / on
# Predictions (before the run):
#  t: every case passes; ids and weight bits equal in every form; memcheck 0 errors; --ar ids equal off / on.
#  n: off 13.4-13.7 us (igw25); on ~11.8-12.5 us (-1.0 to -1.8 us: the 8 top-k rounds ~2,200 -> ~700 cycles, the
#     weights' sum's serial shuffles gone, the max 5 shuffle stages -> 1 redux, one membar.gl fewer on the count).
#     Registers of k_router<8>: 48 -> 44. DRAM still < 5%: a latency chain either way.
#  b: decode (device pick) ~353-358 tok/s off -> +1 to +2% on (40 x ~1.3 us = ~50 us of ~2.8 ms a step); decode from
#     an empty cache likewise; prompts unchanged (+-1%: the 512-row chunks route with k_route, a few rows a warp).
#     bench_cuda_decode: the lone pass in our graph (PDL on) -40 to -60 us; 16 sequences < 1% (k_route, not the
#     fused router).
set -uo pipefail
PACK=${PACK:-.gpu-route24}
STEPS=${STEPS:-t n b}
. "$PACK/lib.sh"
dr_init route24
C=$D/bin/clover
dr_synth35 --no-diffusion
if has t; then
  tst test_cuda_ops fast 300 CLOVER_TEST_ONLY=test_route_fast,test_router_fast
  tst test_cuda_ops off 300
  tst test_cuda_ops on 300 CLOVER_CUDA_ROUTE_FAST=1
  for n in test_cuda_backend test_cuda_batch test_cuda_preview test_cuda_engine; do
    tst $n on 150 CLOVER_CUDA_ROUTE_FAST=1
  done
  grep -E "fast routing" "$O/t_test_cuda_backend_on.log" | head -4 | tee -a "$S"
  if command -v compute-sanitizer > /dev/null; then
    CLOVER_CUDA_ROUTE_FAST=1 CLOVER_TEST_ONLY=test_router_small timeout 150 compute-sanitizer --tool memcheck \
      "$D/bin/test_cuda_ops" > "$O/memcheck.log" 2>&1
    say "memcheck test_router_small (fast) rc=$?: $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1)"
  fi
  wait $SPID; say "synth done at +$(el)s"
  IDS=$(seq -s, 11 90)
  for v in 0 1; do
    CLOVER_CUDA_ROUTE_FAST=$v timeout 90 "$C" run -m $F --ids $IDS --ar -n 64 -c 1024 --device cuda --ignore-eos \
      --no-visual --json > "$O/run_ar$v.json" 2> "$O/run_ar$v.err"
    a=$(dr_ids "$O/run_ar$v.json")
    say "clover run --ar ROUTE_FAST=$v: ids $a"
  done
fi
if has n && command -v ncu > /dev/null; then
  wait $SPID
  for v in 0 1; do
    [ "$(el)" -lt 480 ] || { say "ncu ROUTE_FAST=$v: no time left"; continue; }
    CLOVER_CUDA_ROUTE_FAST=$v CLOVER_BENCH_DECODE_ROWS=0 CLOVER_BENCH_DECODE_NCU=1 timeout 90 \
      ncu --profile-from-start off --kernel-name-base demangled -k "regex:k_router" -c 3 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
      "$D/bin/bench_cuda_decode" $F > "$O/ncu_router$v.log" 2>&1
    say "== ncu k_router ROUTE_FAST=$v rc=$?"
    grep -E "k_router|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued" \
      "$O/ncu_router$v.log" | head -24 | tee -a "$S"
  done
fi
if has b; then
  wait $SPID
  i=0
  for v in 0 1 0 1; do
    i=$((i + 1))
    [ "$(el)" -lt 470 ] || { say "bench_cuda_backend ROUTE_FAST=$v: no time left"; continue; }
    CLOVER_CUDA_ROUTE_FAST=$v timeout 120 "$D/bin/bench_cuda_backend" $F > "$O/backend_$i.log" 2>&1
    say "bench_cuda_backend ROUTE_FAST=$v (run $i) rc=$? at +$(el)s:"
    grep -E "^decode|prompt of" "$O/backend_$i.log" | cut -c1-110 | tee -a "$S"
  done
  for v in 0 1; do
    [ "$(el)" -lt 530 ] || { say "bench_cuda_decode ROUTE_FAST=$v: no time left"; continue; }
    CLOVER_CUDA_ROUTE_FAST=$v CLOVER_BENCH_DECODE_ROWS=0 timeout 60 "$D/bin/bench_cuda_decode" $F \
      > "$O/decode_$v.log" 2>&1
    say "bench_cuda_decode step ROUTE_FAST=$v rc=$?:"
    grep -E "^STEP" "$O/decode_$v.log" | cut -c1-120 | tee -a "$S"
  done
fi
dr_end
