#!/usr/bin/env bash
# Written in the 2026-12-05 18:56 session (issues 24, 25). Fewer launches a layer, the same bits: each form on by
# default in the pack and behind its switch (CLOVER_CUDA_<SW>=0 the old launches), listed in SWITCHES.
#   run(command="ITEMS='fuse24:t,r,b' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t r b"):
#  t  test_cuda_preview, test_cuda_batch, test_cuda_backend, test_cuda_ops, test_cuda_matmul's quantiser / GLU / multi
#     / row-invariance tests, and test_cuda_preview's small cases under compute-sanitizer memcheck
#  r  clover run ids (diffusion and --ar, 64 tokens) against k2core24 seq1's hashes (2cdbf2f9ccaf / d1f13e945396:
#     the bits of every earlier pack since), and with each switch of SWITCHES at 0
#  b  bench_cuda_preview --reps 3, every switch on then each off (alternating twice); bench_cuda_backend
#     --prompt-only 1 (prompt 512, the 32-row chunk commit)
#  k  bench_batch --device cuda --mode ar --n 16 --prompt 32 --gen 96 (issue 25's stacked step), all on / all off twice
#  p  (added after seq7; NOT YET RUN: the session's device time ran out) the persistent grouped experts again
#     (CLOVER_CUDA_MOE_PERSIST=1, tiles of 8 / 16 / 32 slots: igp_kernel decodes a weight fragment once for up to 4
#     row tiles, where the 8-slot WIDE tiles of a coreset preview decode each expert's weights ~4 times; the SASS
#     had that decode at ~2/3 of the WIDE kernel's instructions): bench_cuda_preview alternating with the defaults
#     twice, and the kernel trace at TS=16 / 32.
#     Predicted (H200 seq5: preview 5.80-5.82 ms, commit 10.39): TS=32 the preview's experts 20 + 16.6 -> ~12 + ~12
#     us a layer, preview -0.3..-0.5 ms; TS=8 ~ the defaults; the commit unchanged (2 slots an expert: 8-slot tiles).
# The forms (SWITCHES="GLU_QUANT GROUP_QUANT"; the preview's GDN alpha product in the qkv/z launch has no switch: its
# bits are checked by the ids' hashes):
#  - GLU_QUANT: a down product's 8-bit rows formed as silu(g) * u by its quantiser (cuda_matmul_chunk_ws_glu,
#    cuda_moe_args.x_up): no k_swiglu launch (2 a MoE layer) and no float copy;
#  - GROUP_QUANT: a grouped product's slot grouping and its 8-bit rows in one launch (moe_group_quant_kernel);
#  - a preview's GDN qkv, z and alpha products in one mm_multi (one quantiser, one segmented launch, as the commit);
#  - IG_ALIGNED: igemm_kernel's weight copies without range checks where every row's chunks are 16-byte aligned and
#    whole (ig_pieces.aligned): ncu's SASS of the commit's Q4_K pair had ~175 of ~500 instructions a warp a chunk in
#    the copies (the kernel ~54% issue-busy), ~30-40 expected after.
# Predictions (before seq2; H100 seq1 / k2core24: preview 6.49-6.53 ms, commit 11.38-11.40, the 16-row AR step
#  14.26 ms traced with PDL off): ids equal to seq1's hashes with every form on and with each off; tests pass;
#  preview -0.3..-0.5 ms (~650 us of kernel time removed, PDL overlaps part of it), commit -0.2..-0.3 ms, prompt 512
#  within +-2%, bench_batch n 16 +2..+4% (the step's 80 swiglu and ~93 grouping launches). IG_ALIGNED: the experts'
#  pair and down -10..-20% where they are issue-bound: commit -0.6..-1.2 ms, the 16-row step -0.4..-0.8 ms, preview
#  -0.1..-0.3 ms. Run as: SWITCHES="GLU_QUANT GROUP_QUANT IG_ALIGNED".
# seq3's pack adds (predicted before seq3, H100 seq2: preview 6.12-6.13 ms, commit 10.92-11.07, bench_batch n 16
#  1,106-1,125 agg tok/s):
#  - IG_ALIGNED for igemm_q8_kernel too (the dense Q8_0 products' copies): preview -0.05..-0.15 ms;
#  - IG_ROWS16: dense Q8_0 products of 17..32 rows with fewer output tiles than SMs in 16-row tiles (the 2048-output
#    products 128 -> 256 blocks, the shared expert's gate/up 64 -> 128): those kernels -20..-35% (8.3 -> ~6 us,
#    13.0 -> ~9 us): preview -0.25..-0.4 ms, commit -0.15..-0.3 ms. Run as: SWITCHES="IG_ROWS16 IG_ALIGNED".
set -uo pipefail
PACK=${PACK:-.gpu-fuse24}
STEPS=${STEPS:-t r b}
SWITCHES=${SWITCHES:-}
. "$PACK/lib.sh"
dr_init fuse24
C=$D/bin/clover
dr_synth35
if has t; then
  for n in test_cuda_preview test_cuda_batch test_cuda_backend test_cuda_ops; do tst $n all 150; done
  tst test_cuda_matmul sub 240 CLOVER_TEST_ONLY=test_row_invariance,test_glu,test_glu_quant,test_multi,test_moe_chunk,test_moe_igw,test_moe_many_experts,test_graph_capture,test_chunk_multi,test_chunk_seg,test_act_quantize_bytes,test_few_rows,test_pdl_rows
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_SMALL=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$D/bin/test_cuda_preview" \
      > "$O/memcheck_preview.log" 2>&1
    say "memcheck test_cuda_preview (small) rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_preview.log" | tail -1)"
  fi
fi
if has r; then
  wait $SPID
  for sw in on $SWITCHES; do
    e=""; [ "$sw" = on ] || e="CLOVER_CUDA_$sw=0"
    env $e timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
      > "$O/run_$sw.json" 2> "$O/run_$sw.err"
    env $e timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual \
      --json > "$O/ar_$sw.json" 2> "$O/ar_$sw.err"
    say "clover run ${e:-(all on)}: diffusion $(dr_ids "$O/run_$sw.json"), --ar $(dr_ids "$O/ar_$sw.json") \
(k2core24 seq1: 2cdbf2f9ccaf / d1f13e945396)"
  done
fi
if has b; then
  wait $SPID
  for rep in 1 2; do
    for sw in on $SWITCHES; do
      [ "$(el)" -lt 470 ] || { say "bench_cuda_preview: no time left for $sw"; break; }
      e=""; [ "$sw" = on ] || e="CLOVER_CUDA_$sw=0"
      env $e timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_${sw}_$rep.log" 2>&1
      say "== bench_cuda_preview --reps 3 ${e:-(all on)} rc=$? at +$(el)s"
      grep -E "^(preview 32 rows, first|commit|block)" "$O/preview_${sw}_$rep.log" | cut -c1-110 | tee -a "$S"
    done
  done
  for sw in on $SWITCHES; do
    [ "$(el)" -lt 500 ] || { say "bench_cuda_backend: no time left for $sw"; break; }
    e=""; [ "$sw" = on ] || e="CLOVER_CUDA_$sw=0"
    env $e timeout 90 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/prompt_$sw.log" 2>&1
    say "== bench_cuda_backend --prompt-only 1 ${e:-(all on)} rc=$? at +$(el)s"
    grep -E "prompt|commit" "$O/prompt_$sw.log" | head -4 | cut -c1-140 | tee -a "$S"
  done
fi
if has p; then
  wait $SPID
  for rep in 1 2; do
    for ts in def auto 8 16 32; do
      e="CLOVER_CUDA_MOE_PERSIST=1 CLOVER_CUDA_MOE_PERSIST_TS=$ts"; [ $ts = def ] && e=""
      [ $ts = auto ] && e="CLOVER_CUDA_MOE_PERSIST=1"
      env $e timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/persist_${ts}_$rep.log" 2>&1
      say "== bench_cuda_preview --reps 3 ${e:-(defaults: PERSIST off)} rc=$? at +$(el)s"
      grep -E "^(preview 32 rows, first|commit|block)" "$O/persist_${ts}_$rep.log" | cut -c1-110 | tee -a "$S"
    done
  done
  TR=$D/bin/libclover_kernel_trace.so
  for ts in 16 32; do
    CLOVER_CUDA_MOE_PERSIST=1 CLOVER_CUDA_MOE_PERSIST_TS=$ts CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_p$ts.txt \
      LD_PRELOAD=$TR timeout 150 "$D/bin/bench_cuda_preview" $F --profile > "$O/persist_profile_$ts.log" 2>&1
    say "== the kernel trace, PERSIST TS=$ts (PDL off) rc=$? at +$(el)s; a preview's experts (window 2):"
    c++filt < $R/trace_p$ts.txt | awk '$0 ~ "^== window 2" {f=1;next} /^== window/{f=0} f' | \
      grep -E "igp_kernel|igemm_kernel" | head -4 | cut -c1-160 | tee -a "$S"
    rm -f $R/trace_p$ts.txt
  done
fi
if has k; then
  wait $SPID
  off=""; for sw in $SWITCHES; do off="$off CLOVER_CUDA_$sw=0"; done
  for rep in 1 2; do
    for e in "" "$off"; do
      [ "$(el)" -lt 520 ] || { say "bench_batch: no time left"; break; }
      env $e timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 --gen 96 \
        > "$O/batch_${rep}_${#e}.log" 2>&1
      say "== bench_batch --mode ar --n 16 ${e:-(all on)} rc=$? at +$(el)s: $(grep -E '^ +16 ' "$O/batch_${rep}_${#e}.log" | tail -1)"
    done
  done
fi
dr_end
