#!/usr/bin/env bash
# Written in the session of 2026-12-07 01:52 UTC (issue 24: decode; issue 25: the stacked steps of 2-4 sequences).
# The GDN decode recurrence split over a thread-block cluster (gdn_recurrent.cu, gdn_rec_reg_kernel<.., SPLIT 4>):
# a head's 128 value columns over 4 blocks of 128 threads instead of one of 512, the gated norm's warp partials
# summed through the cluster's shared memory in the head's warp order (the same bits). CLOVER_CUDA_GDN_REC_SPLIT=2
# (AUTO): where one block a head gives fewer blocks than SMs (32 heads x n_seq < 132: a lone decode step and stacks
# of up to 4); =1 wherever dv is a multiple of 32; unset / 0 never (the default until this run: make 2 the default
# if t passes and b gains).
#   run(command="ITEMS='gdnsplit31:t,b' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=500)
# STEPS: t  test_cuda_gdn (recurrent_split_matches_reg: y and states bit for bit against one block a head, and
#           the CPU bound), the same under compute-sanitizer memcheck, test_cuda_backend, test_cuda_batch,
#           test_cuda_preview; clover run ids with SPLIT=2 (AUTO: split) and 0
#        b  bench_cuda_decode (CLOVER_BENCH_DECODE_ROWS=1: the 1-row ops, then the backend's decode step) SPLIT 0 /
#           2 alternating twice; bench_batch --mode ar --n 1,2,4,16 SPLIT 0 / 2 once each
#        q  b's first round of bench_cuda_decode only (a short call)
#        c  bench_cuda_backend at the defaults (decode / prompt / commit figures; llama.cpp's are the stored ones)
#        v  serve AR 16 x 128 (the --no-diffusion file) at the defaults (the one-request rate gains, so the
#           ratio may fall)
# Predictions (before the run; H100 auto30 seq2 / prof26 s: serve AR sequential 327.6 tok/s, decode step ~3.05 ms):
#  t: all pass; ids db3c58da3157 / ff19558da508 in both forms (the same bits); memcheck 0 errors.
#  b: the GDN op at 1 row ~8 -> 3-4 us (128 blocks on 132 SMs instead of 32); the decode step -0.10..-0.15 ms
#     (30 layers x 4-5 us: +3..+5% tok/s); bench_batch ar n 1 +3..+5%, n 2 +2..+4%, n 4 +1..+3%, n 16 equal
#     (AUTO keeps one block a head there).
#  v: sequential +3..+5% (~340 tok/s), 16 concurrent equal (~1,750): the ratio ~5.1x (v runs the defaults:
#     set CLOVER_CUDA_GDN_REC_SPLIT=2 in dr_serve's ENVS, or run it after the default moves).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t b}
. "$PACK/lib.sh"
dr_init gdnsplit31
C=$D/bin/clover
AR=/tmp/synth35-ar.gguf
dr_synth35
if has t; then
  tst test_cuda_gdn all 150
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_ONLY=recurrent_split_matches_reg timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$D/bin/test_cuda_gdn" > "$O/memcheck_gdn.log" 2>&1
    say "memcheck test_cuda_gdn rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_gdn.log" | tail -1)"
  fi
  for n in test_cuda_backend test_cuda_batch test_cuda_preview; do tst $n all 150; done
  wait $SPID
  for v in 2 0; do dr_run_ids split$v CLOVER_CUDA_GDN_REC_SPLIT=$v; done
fi
if has b || has q; then
  wait $SPID
  rounds="1 2"; has b || rounds=1 # q: one round of the decode step, no bench_batch (a short call)
  for r in $rounds; do
    for v in 0 auto; do
      e="CLOVER_CUDA_GDN_REC_SPLIT=0"; [ $v = 0 ] || e="CLOVER_CUDA_GDN_REC_SPLIT=2"
      env $e CLOVER_BENCH_DECODE_ROWS=1 timeout 90 "$D/bin/bench_cuda_decode" $F > "$O/decode_${v}_$r.log" 2>&1
      say "bench_cuda_decode SPLIT=$v rc=$? at +$(el)s:"
      grep -iE "^STEP|gdn" "$O/decode_${v}_$r.log" | cut -c1-150 | head -8 | tee -a "$S"
    done
  done
  has b && for v in 0 auto; do
    e="CLOVER_CUDA_GDN_REC_SPLIT=0"; [ $v = 0 ] || e="CLOVER_CUDA_GDN_REC_SPLIT=2"
    env $e timeout 150 "$D/bin/bench_batch" $F --device cuda --mode ar --n 1,2,4,16 --prompt 32 --gen 96 \
      > "$O/batch_$v.log" 2>&1
    say "== bench_batch --mode ar --n 1,2,4,16 SPLIT=$v rc=$? at +$(el)s"
    grep -E "^ +(1|2|4|16) " "$O/batch_$v.log" | cut -c1-130 | tee -a "$S"
  done
fi
if has c; then
  wait $SPID
  dr_backend
fi
if has v; then
  wait $SPID
  [ -s $AR ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b --no-diffusion -o $AR.part > "$O/synth-ar.log" \
    2>&1 && mv $AR.part $AR; }
  dr_serve $AR "" 16 128 1 ar
fi
dr_end
