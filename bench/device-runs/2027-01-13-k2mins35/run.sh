#!/usr/bin/env bash
# Written in the session of 2026-12-07 07:33 UTC (issue 24), from opmix34's counts: the Q4_K / Q5_K super-block's
# integer sums (matmul_igemm.cu's ig_k_superblock2 and its X2 twin, every few-row K-quant form: the experts' WIDE
# pair and down of previews, commits and the stacked AR steps) in fewer instructions, the same integers:
#  - the mins' term sum_j m_j (s_2j + s_2j+1) by two IMMA a row tile (ig_k_mins_mma: the mins doubled as the A rows,
#    the rows' int16 pair sums split into u8 low and s8 high bytes as B; sum = C_lo + 256 C_hi) instead of 32
#    dp2a and 8 shared loads (opmix34: IDP 4.0 + ~1 LDS an IMMA of the pair's 51);
#  - each sub-block's 6-bit scale byte by one PRMT (was a shift and a mask).
# No switch (device functions inlined into every form): the A/B is the pack before (84570fa, .gpu-old) against
# this one (.gpu-seq), both carried, each's binaries by path, alternating.
#   run(command="SEQ_LIMIT=400 ITEMS='k2mins35:t,p,b' OUT=$OUT/seqN bash .gpu-seq/run.sh",
#       carry=[".gpu-seq", ".gpu-old"])
# STEPS:
#  t  (new pack) test_cuda_matmul in two parts (every K-quant form bit for bit against the decode products and the
#     CPU), test_cuda_moe_tiles, test_cuda_ig_x2 (the X2 forms against the one-chunk form), test_cuda_preview,
#     test_cuda_batch; memcheck of test_cuda_ig_x2; clover run ids (db3c58da3157 / ff19558da508)
#  p  bench_cuda_preview --reps 3, old / new alternating twice: coreset preview, commit, block diffusion
#  b  bench_batch --mode ar --n 16 and --mode diffusion --n 16, old / new
# Predictions (before the run; H100): t all pass, ids equal. p: the pair and down ~6-8% fewer instructions
# (~5 of 51 an IMMA), at ~half issue efficiency ~4% faster: coreset preview -0.03..-0.05 ms, commit -0.15..-0.25
# ms (its experts 5.5 ms). b: ar n 16 +1..+2% (experts 4.1 of ~9 ms a step), diffusion n 16 +0..+1% (the 512-row
# pass's experts take igw_k_kernel, not changed).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t p b}
. "$PACK/lib.sh"
dr_init k2mins35
dr_synth35
OLD=/tmp/k2old; rm -rf $OLD; mkdir -p $OLD; tar xJf .gpu-old/pack.txz -C $OLD && say "old pack $(cat .gpu-old/COMMIT) in $OLD"
A="test_bad_arguments,test_act_quantize_bytes,test_decode_types,test_chunk_types,test_chunk_thin,test_exact,test_exact_multi,test_chunk_multi,test_chunk_seg,test_row_invariance,test_few_rows,test_mma_rows,test_igemm_wide,test_q8_rows32,test_mmv_stream,test_mmv_lane,test_stream32"
B="test_moe_decode,test_moe_chunk,test_moe_igw,test_moe_persist,test_moe_tall,test_moe_many_experts,test_moe_dec32,test_moe_fast,test_glu,test_glu_quant,test_multi,test_graph_capture,test_pdl_rows,test_pdl_rows_passes,test_norm_q8"
if has t; then
  tst test_cuda_matmul a 170 CLOVER_TEST_ONLY=$A
  tst test_cuda_matmul b 170 CLOVER_TEST_ONLY=$B
  tst test_cuda_moe_tiles all 100
  tst test_cuda_ig_x2 all 100
  tst test_cuda_preview all 100
  tst test_cuda_batch all 100
  CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_ig_x2 test_moe_wide 150
  wait $SPID
  dr_run_ids new
fi
pv() { # LABEL BINDIR
  timeout 60 "$2/bench_cuda_preview" $F --reps 3 > "$O/p_$1.log" 2>&1; local rc=$?
  local l=$(grep -E "^(preview 32 rows, first|commit|block)" "$O/p_$1.log" | \
      awk '{for (i = 2; i <= NF; i++) if ($i == "ms" || $i == "tok/s") { printf "%s ", $(i - 1); break }}')
  say "p rc=$rc $1: coreset/nocoreset/commit ms, block tok/s: $l"
}
if has p; then
  wait $SPID
  for r in 1 2; do pv old_$r $OLD/bin; pv new_$r $D/bin; done
fi
if has b; then
  wait $SPID
  for m in ar diffusion; do
    for v in old new; do
      [ "$(el)" -lt "${DR_LIMIT:-585}" ] || break
      bin=$D/bin; [ $v = old ] && bin=$OLD/bin
      timeout 90 "$bin/bench_batch" $F --device cuda --mode $m --n 16 --prompt 32 --gen 64 > "$O/b_${m}_$v.log" 2>&1
      say "b rc=$? $m n 16 $v: $(grep -E '^ +16 ' "$O/b_${m}_$v.log" | tail -1 | cut -c1-110)"
    done
  done
fi
dr_end
