#!/usr/bin/env bash
# Written in the session of 2026-12-07 09:57 UTC (issue 25), from t32x37 step a: the few-row attention's target at
# 32 blocks gave the stacked 16-sequence diffusion pass +2.4% (its sequences see ~64-128 keys and planned 4-6
# splits of 16 keys: ~2,048 one-an-SM blocks and a merge) but the lone preview over 544 keys +0.47 ms. A plan by the
# sequence's own keys instead: CLOVER_CUDA_ATTN_FEW_MIN_SPLIT (the fewest keys a split; default 16 = today's
# plan): at 64, a context under ~256 keys takes 1-4 splits of >= 64 keys, one of <= 64 no merge; 544 keys keep 4 of
# 136. The plan still depends on the sequence alone (batch invariance); the bits of short contexts move (a split
# plan is a merge order), so the ids move with it and the CPU oracle's bound is the check (test_cuda_attention).
#   run(command="SEQ_LIMIT=560 ITEMS='split38:t,b' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  with MIN_SPLIT 64: test_cuda_attention, test_cuda_split, test_cuda_preview, test_cuda_batch (stacked = lone
#     bit for bit under the new plan), `clover run` ids (new references if they move)
#  b  MIN_SPLIT 16 / 64 / 128, two rounds: bench_batch --mode diffusion --n 16 and --n 1 (--prompt 32 --gen 64: a
#     short context), bench_cuda_preview (544 keys: the plan unchanged at 64 and 128, so equal)
# Predictions (before any run; H100): t passes; ids move at 64. b: n 16 +2..+3% at 64 and 128 (as the target knob's
# +2.4%); n 1 within +-1% (its lone previews over ~64-128 keys: 32 blocks of 64+ keys instead of 128 of 16, one
# merge less); bench_cuda_preview equal at all three. If so: 64 the default (FEW_MIN_SPLIT's role in
# few_cfg_get), the new ids references written into lib.sh's dr_run_ids and the scripts that compare them.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t b}
. "$PACK/lib.sh"
dr_init split38
dr_synth35
if has t; then
  for t in test_cuda_attention test_cuda_split test_cuda_preview test_cuda_batch; do
    tst $t ms64 100 CLOVER_CUDA_ATTN_FEW_MIN_SPLIT=64
  done
  wait $SPID
  dr_run_ids ms64 CLOVER_CUDA_ATTN_FEW_MIN_SPLIT=64
fi
if has b; then
  wait $SPID
  for r in $(seq 1 ${ROUNDS:-2}); do
    for v in 16 64 128; do
      [ "$(el)" -lt "${DR_LIMIT:-585}" ] || break
      for n in 16 1; do
        CLOVER_CUDA_ATTN_FEW_MIN_SPLIT=$v timeout 90 "$D/bin/bench_batch" $F --device cuda --mode diffusion --n $n \
          --prompt 32 --gen 64 > "$O/b_${v}_${n}_$r.log" 2>&1
        say "b rc=$? diffusion n $n MIN_SPLIT=$v: $(grep -E "^ +$n " "$O/b_${v}_${n}_$r.log" | tail -1 | cut -c1-110)"
      done
      dr_preview MIN_SPLIT_${v}_$r CLOVER_CUDA_ATTN_FEW_MIN_SPLIT=$v
    done
  done
fi
dr_end
