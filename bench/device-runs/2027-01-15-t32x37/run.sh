#!/usr/bin/env bash
# Written in the session of 2026-12-07 09:57 UTC (issue 25), from w16x36 seq2's kernel table of the stacked
# 16-sequence diffusion pass (H100): the experts' igw_k_kernel<Q4_K, 16> pair 98.6 us a layer (16.8%) and down
# 110.8 (9.4%) over 1,280 / 5,120 blocks of 512 threads, one an SM, tiles of ~16 of 64 slots: each block's 8 chunks
# of ring fill and barriers are most of its ~10 us. The change: CLOVER_CUDA_IGW_T32=1 groups the experts' slots in
# tiles of 32 (igw_k_kernel<T, 8, 32>: 8 warps over the 128 outputs, one m-tile each, 3 ring stages, 124-128
# registers: two blocks an SM); the same operations in the same order (same bits). Also in this pack: k2mins35
# landed (AR n 16 not slower over 3 rounds), CLOVER_CUDA_IGW_W16 default 3 (the K-quant kernel's 16 warps alone).
#   run(command="SEQ_LIMIT=400 ITEMS='t32x37:t,b,x' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  t  test_cuda_matmul b (test_moe_igw: the 32-slot tiles bit for bit against matmul_igemm.cu beside the 8- and
#     16-warp forms; K-quant few-row forms with k2mins), test_cuda_batch with T32 on (stacked passes against lone
#     sequences), test_cuda_preview, memcheck of test_moe_igw (SMALL); clover run ids at the new defaults
#  b  T32 0 / 1 alternating three rounds: bench_batch --mode diffusion --n 16 and bench_cuda_backend --prompt-only 1
#  x  the stacked diffusion pass under the tracer (PDL off) with T32 on: the experts' kernels' us a launch
# Predictions (before the run; H100): t all pass, ids db3c58da3157 / ff19558da508. x: the pair 98.6 -> 65-75 us a
# launch, down 110.8 -> 75-85. b: diffusion n 16 +4..+5% agg tok/s (~300 -> ~313), prompt 512 +3..+4% (~8,070 ->
# ~8,350: its 4,096 slots also ~16 an expert).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t b x}
. "$PACK/lib.sh"
dr_init t32x37
dr_synth35
B="test_moe_decode,test_moe_chunk,test_moe_igw,test_moe_persist,test_moe_tall,test_moe_many_experts,test_moe_dec32"
if has t; then
  tst test_cuda_matmul b 150 CLOVER_TEST_ONLY=$B
  tst test_cuda_batch t32 100 CLOVER_CUDA_IGW_T32=1
  tst test_cuda_preview all 100
  CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_matmul test_moe_igw 150
  wait $SPID
  dr_run_ids defaults
fi
if has b; then
  wait $SPID
  for r in 1 2 3; do
    for v in 0 1; do
      [ "$(el)" -lt "${DR_LIMIT:-585}" ] || break
      CLOVER_CUDA_IGW_T32=$v timeout 90 "$D/bin/bench_batch" $F --device cuda --mode diffusion --n 16 --prompt 32 \
        --gen 64 > "$O/bd_${v}_$r.log" 2>&1
      say "b rc=$? diffusion n 16 T32=$v: $(grep -E '^ +16 ' "$O/bd_${v}_$r.log" | tail -1 | cut -c1-110)"
      CLOVER_CUDA_IGW_T32=$v timeout 90 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/pp_${v}_$r.log" 2>&1
      say "   T32=$v prompt: $(grep -E '^prompt of 512|^32-row chunk commit' "$O/pp_${v}_$r.log" | cut -c1-60 | tr -s ' ' | tr '\n' ';')"
    done
  done
fi
if has x; then
  wait $SPID
  CLOVER_CUDA_IGW_T32=1 CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$O/trace_d16.txt \
    LD_PRELOAD=$D/bin/libclover_kernel_trace.so timeout 200 "$D/bin/bench_batch" $F --device cuda --mode diffusion \
    --prompt 32 --gen 64 --n 16 > "$O/dbatch_trace.log" 2>&1
  say "== bench_batch --mode diffusion --n 16 under the tracer (PDL off, T32 on) rc=$? at +$(el)s"
  if [ -f $O/trace_d16.txt ]; then
    c++filt < $O/trace_d16.txt > $O/trace_d16.dm.txt && rm -f $O/trace_d16.txt
    grep -E "^== window 0:" $O/trace_d16.dm.txt | head -1 | tee -a "$S"
    awk '$0 ~ "^== window 0:" {f++; next} /^== window/{if (f) exit} f == 1' $O/trace_d16.dm.txt | head -16 | \
      cut -c1-150 | tee -a "$S"
  fi
fi
dr_end
