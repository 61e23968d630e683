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
#  a  (no code: an existing knob) CLOVER_CUDA_ATTN_FEW_TARGET 132 (default) / 32 / 8: bench_batch --mode diffusion
#     --n 16 (16 sequences of 32 rows over ~64-96 keys each plan 4-6 splits x 16 query sets x 2 KV heads = 128+
#     blocks: 2,048+ one-an-SM blocks of ~16 keys, ~16 waves, attn_few 204 us a layer + the merge 51) and the lone
#     preview / commit (bench_cuda_preview), and `clover run` ids at 32 (a split plan changes the merge order:
#     the bits may move within the float bound)
# Predictions (before the run; H100): t all pass, ids db3c58da3157 / ff19558da508. x: the pair 98.6 -> 65-75 us a
# launch, down 110.8 -> 75-85. b: diffusion n 16 +4..+5% agg tok/s (~300 -> ~313), prompt 512 +3..+4% (~8,070 ->
# ~8,350: its 4,096 slots also ~16 an expert). a: TARGET 32 gives 1-2 splits: the stacked attention ~204 -> ~60
# us a layer and the merge mostly gone: diffusion n 16 +2..+3%; the lone preview +-0.02 ms (128 -> 32 blocks of 4x
# the keys, one merge less).
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
  dr_ab CLOVER_CUDA_IGW_T32 "0 1"
fi
if has x; then
  wait $SPID
  TOP=16 dr_trace_d16 d16 CLOVER_CUDA_IGW_T32=1
fi
if has a; then
  wait $SPID
  for r in 1 2; do
    for v in 132 32 8; do
      [ "$(el)" -lt "${DR_LIMIT:-585}" ] || break
      CLOVER_CUDA_ATTN_FEW_TARGET=$v timeout 90 "$D/bin/bench_batch" $F --device cuda --mode diffusion --n 16 \
        --prompt 32 --gen 64 > "$O/ad_${v}_$r.log" 2>&1
      say "a rc=$? diffusion n 16 TARGET=$v: $(grep -E '^ +16 ' "$O/ad_${v}_$r.log" | tail -1 | cut -c1-110)"
      [ $v = 8 ] || dr_preview TARGET_${v}_$r CLOVER_CUDA_ATTN_FEW_TARGET=$v
    done
  done
  dr_run_ids target32 CLOVER_CUDA_ATTN_FEW_TARGET=32
fi
# (added after seq1, with T32 made the default)
#  f  the pack of the session's last commit at its defaults: every test_cuda_* binary (test_cuda_matmul in its parts
#     a, b, d; test_moe_fast left out: untouched, past the step's time), `clover run` ids, serve AR and diffusion,
#     ncu of the first igw_k_kernel<Q4_K, 8, 32> of a stacked diffusion run (DRAM %, occupancy, stalls)
#     Predicted: all pass, ids db3c58da3157 / ff19558da508, serve AR ~5.4x, diffusion ~2.0-2.1x; ncu DRAM ~40-50% of
#     peak, occupancy ~25% (2 blocks of 8 warps), the top stall long_scoreboard or barrier.
if has f; then
  dr_cuda_tests
  wait $SPID
  dr_run_ids final
  if command -v ncu > /dev/null; then
    timeout 120 ncu -k "regex:igw_k_kernel" -c 1 --section WarpStateStats --section LaunchStats --section Occupancy \
      --section SpeedOfLight --section MemoryWorkloadAnalysis -f -o "$O/igwk_t32" "$D/bin/bench_batch" $F \
      --device cuda --mode diffusion --n 16 --prompt 32 --gen 32 > "$O/ncu_igwk_t32.log" 2>&1
    say "== ncu igwk_t32 rc=$? at +$(el)s"
    ncu --import "$O/igwk_t32.ncu-rep" --page details --print-details all > "$O/igwk_t32_details.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Hit|Achieved Occupancy|Warp Cycles Per Issued|Registers Per|Stall" \
      "$O/igwk_t32_details.txt" | head -16 | sed 's/  */ /g' | tee -a "$S"
    gzip -c "$O/igwk_t32_details.txt" > "$R/igwk_t32_details.txt.gz"
    rm -f "$O"/*.ncu-rep
  fi
  AR=/tmp/synth35-ar.gguf
  [ -s $AR ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $AR.part \
    > "$O/synth-ar.log" 2>&1 && mv $AR.part $AR; }
  say "AR file at +$(el)s"
  dr_serve $AR "" 16 128 1 ar
  dr_serve $F "" 16 64 1 diffusion
fi
dr_end
