#!/usr/bin/env bash
# Written in the 2026-12-05 21:10 session (issue 25's stacked step; issue 24's decode): the GDN recurrence at two
# blocks an SM. gdn_rec_reg_kernel took 96 registers a thread (launch bounds 512 x 1), so a 16-sequence AR step's
# 512 blocks (32 heads x 16) ran in ~4 waves on 132 SMs: 45.4 us a layer (H100 step25) against 9.8 at one sequence.
# At MINB 2 ptxas fits it in 64 registers (8 bytes of stack, one 64-bit refill a row) and the waves halve; the same
# instructions in the same order, so the same bits. CLOVER_CUDA_GDN_REC=reg1 runs the old one-block form (A/B).
#   cmake --build build -j2 && EXTRA_BINS="libclover_kernel_trace.so bench_backend bench_ops" \
#     scripts/device-packs.sh build seq;  ITEMS='occ25:t,r,b,k' bash .gpu-seq/run.sh
# STEPS:
#  t  test_cuda_gdn, test_cuda_batch, test_cuda_backend whole; memcheck of test_cuda_gdn (small)
#  r  clover run ids (diffusion, --ar; 64 tokens) with the default and with reg1: equal, and equal to k2core24 seq1's
#     hashes 2cdbf2f9ccaf / d1f13e945396
#  b  bench_batch --device cuda --mode ar --n 1 / 16 (--prompt 32 --gen 96), default and reg1 alternating, twice
#  k  the kernel trace of bench_batch --n 16 (PDL off), default and reg1: gdn_rec_reg_kernel's us a launch
#  d  (added after seq2) the stacked diffusion pass (serve's diffusion ratio 2.03x, bar 4x: seq2's concurrent run did
#     32 passes a step of ~12.8 sequences' 32-row previews at ~22 ms a pass, against ~6.7 ms a sequence alone):
#     bench_batch --mode diffusion --prompt 32 --gen 64 --n 1,16 with the defaults, with CLOVER_CUDA_MOE_PERSIST=1
#     (auto tiles) and with its 32-slot tiles (a stacked preview gives an expert ~30 slots: the case the 4-tile
#     persistent form was built for, slower on one preview's ~4-8); then the kernel trace of --n 16 (PDL off), the
#     top 32 kernels. Predicted: PERSIST TS=32 -5..+10% at n 16 (unknown: fuse24 seq8 had it +25% slower on one
#     preview), the defaults' n 16 ~270-290 tok/s; the trace's top: the grouped experts (pair + down ~35-45%), the
#     preview's attention and GDN block operators, the coresets.
# Predicted (H200; fuse24 seq5-7: bench_batch n 16 ~1,100-1,300 agg tok/s, the step ~12-13 ms): the recurrence at 16
#  sequences 45 -> 24-28 us a launch (-0.5..-0.6 ms a step, +4..5% agg tok/s at n 16), at one sequence within +-0.5 us
#  (32 blocks either way); ids equal in both forms; tests pass.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t r b k}
. "$PACK/lib.sh"
dr_init occ25
C=$D/bin/clover
dr_synth35
if has t; then
  for n in test_cuda_gdn test_cuda_batch test_cuda_backend; do tst $n all 150; done
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$D/bin/test_cuda_gdn" \
      > "$O/memcheck_gdn.log" 2>&1
    say "memcheck test_cuda_gdn rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_gdn.log" | tail -1)"
  fi
fi
if has r; then
  wait $SPID
  for sw in def reg1; do
    e=""; [ $sw = def ] || e="CLOVER_CUDA_GDN_REC=$sw"
    env $e timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
      > "$O/run_$sw.json" 2> "$O/run_$sw.err"
    env $e timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual \
      --json > "$O/ar_$sw.json" 2> "$O/ar_$sw.err"
    say "clover run ${e:-(default)}: diffusion $(dr_ids "$O/run_$sw.json"), --ar $(dr_ids "$O/ar_$sw.json") \
(k2core24 seq1: 2cdbf2f9ccaf / d1f13e945396)"
  done
fi
if has b; then
  wait $SPID
  for rep in 1 2; do
    for sw in def reg1; do
      e=""; [ $sw = def ] || e="CLOVER_CUDA_GDN_REC=$sw"
      for n in 1 16; do
        [ "$(el)" -lt "${OCC_BUDGET:-300}" ] || { say "bench_batch: no time left"; break 3; }
        env $e timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n $n --prompt 32 --gen 96 \
          > "$O/batch_${sw}_${n}_$rep.log" 2>&1
        say "== bench_batch --mode ar --n $n ${e:-(default)} rc=$? at +$(el)s: \
$(grep -E "^ +$n " "$O/batch_${sw}_${n}_$rep.log" | tail -1)"
      done
    done
  done
fi
if has k; then
  wait $SPID
  TR=$D/bin/libclover_kernel_trace.so
  for sw in def reg1; do
    [ "$(el)" -lt "${OCC_BUDGET:-300}" ] || { say "trace: no time left"; break; }
    e=""; [ $sw = def ] || e="CLOVER_CUDA_GDN_REC=$sw"
    env $e CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_$sw.txt LD_PRELOAD=$TR timeout 90 "$D/bin/bench_batch" $F \
      --device cuda --mode ar --n 16 --prompt 32 --gen 96 > "$O/trace_$sw.log" 2>&1
    say "== trace n 16 ${e:-(default)} (PDL off) rc=$? at +$(el)s: $(grep -E '^ +16 ' "$O/trace_$sw.log" | tail -1)"
    c++filt < $R/trace_$sw.txt | grep -E "gdn_rec_reg_kernel|^== window" | head -3 | cut -c1-170 | tee -a "$S"
  done
fi
if has d; then
  wait $SPID
  for e in "" "CLOVER_CUDA_MOE_PERSIST=1" "CLOVER_CUDA_MOE_PERSIST=1 CLOVER_CUDA_MOE_PERSIST_TS=32"; do
    [ "$(el)" -lt "${OCC_DBUDGET:-400}" ] || { say "diffusion batch: no time left"; break; }
    env $e timeout 120 "$D/bin/bench_batch" $F --device cuda --mode diffusion --prompt 32 --gen 64 --n 1,16 \
      > "$O/dbatch_${#e}.log" 2>&1
    say "== bench_batch --mode diffusion --n 1,16 ${e:-(default)} rc=$? at +$(el)s"
    tail -3 "$O/dbatch_${#e}.log" | cut -c1-160 | tee -a "$S"
  done
  TR=$D/bin/libclover_kernel_trace.so
  CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_d16.txt LD_PRELOAD=$TR timeout 150 "$D/bin/bench_batch" $F \
    --device cuda --mode diffusion --prompt 32 --gen 64 --n 16 > "$O/trace_d16.log" 2>&1
  say "== trace diffusion n 16 (PDL off) rc=$? at +$(el)s: $(tail -1 "$O/trace_d16.log" | cut -c1-140)"
  c++filt < $R/trace_d16.txt | awk '/^== window/ {w++} w <= 1' | head -36 | cut -c1-200 | tee -a "$S"
fi
dr_end
