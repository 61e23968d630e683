#!/usr/bin/env bash
# Written in the 2026-12-05 14:27 session (issues 24, 25; not yet run when written). Programmatic dependent launch
# for the many-row kernels (cuda_pdl.cuh's pdl_launch_rows; on by default, CLOVER_CUDA_PDL_ROWS=0 = plain
# launches): the integer products (igemm_q8_kernel, igemm_kernel, igw_*, igp), their quantiser, the experts'
# grouping, the TF32 product, the chunked GDN, the row gather. ncu24 counted ~20 of a preview layer's ~32 launches
# as plain: each waited for the kernel before to finish and flush before its launch and ramp; now each starts
# early, igemm_q8_kernel pulls its weight rows into L2 meanwhile, then waits (griddepcontrol.wait).
# Beside it, the experts' gate and up of a grouped pass in ONE igemm_kernel launch (grid.z the product;
# CLOVER_CUDA_MOE_PAIR1, on by default, 0 = the two launches): the same blocks, so the same bits; in a preview the
# gate's launch ran ~128 live 8-slot tiles on 132 SMs (ncu24: occupancy 14%), the pair fills both block slots an SM.
#   run(command="ITEMS='pdlrows24:t,b,r,s' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t b r s"):
#  t  test_cuda_matmul's test_pdl_rows (a chain of row products with every intermediate poisoned, a PDL graph
#     replayed 8 times against the plain chain, bit for bit), test_few_rows (the pair in one launch against two
#     separate calls, bit for bit) and the row forms' tests; test_cuda_gdn,
#     test_cuda_backend, test_cuda_preview, test_cuda_batch (all with it on, the default)
#  b  bench_cuda_preview --reps 3, (CLOVER_CUDA_PDL_ROWS, CLOVER_CUDA_MOE_PAIR1) = 00 10 11 01, twice;
#     bench_cuda_backend --prompt-only 1 00 / 11 twice; bench_batch diffusion N=1,16 00 / 11
#  r  clover run ids (diffusion, --ar) with 00 and 11: equal
#  s  ncu source counters (stall samples per SASS instruction and per source line) of the commit's
#     gdn_chunked_kernel and the preview's grouped expert product igemm_kernel<12,1,1>, coreset (k_coreset_warp)
#     and GDN block heads (k_block_head_fused): where their time goes (ncusrc.py beside this script prints the top
#     lines)
# Predictions (before the run; seg24, H200: preview 8.26-8.28 ms, commit 13.61-13.66, block diffusion 112.9 tok/s):
#  t: every case bit-identical, the suites pass.
#  b: PDL: ~0.6 us saved a converted launch (the decode's PDL A/B: 0.33 ms over 533 kernels): preview ~800
#     launches -> -0.3..-0.6 ms, commit -0.3..-0.6 ms, prompt 512 +1..+3%. The pair: one launch of ~15-20 us
#     fewer a layer in a preview -> -0.3..-0.6 ms; in a commit (~160 experts, many tiles) one tail fewer, -0.1..-0.3
#     ms. Both: preview 8.27 -> 7.3-7.7 ms, commit 13.6 -> 12.9-13.3 ms, block diffusion 113 -> 121-128 tok/s,
#     bench_batch N=16 diffusion +5..+10%.
#  r: ids equal.
#  s: gdn_chunked_kernel: most samples at the forward substitution's barrier and its dependent chains, and in
#     the A / q k^T products' FMA chains; igemm_kernel: the cp.async wait at each chunk (few blocks in flight);
#     k_coreset_warp: the float64 exp and the one-lane float64 sums; k_block_head_fused: the state's loads.
set -uo pipefail
PACK=${PACK:-.gpu-pdlrows24}
STEPS=${STEPS:-t b r s}
. "$PACK/lib.sh"
dr_init pdlrows24
C=$D/bin/clover
dr_synth35
HERE=$(dirname "$(ls -d bench/device-runs/*-pdlrows24/run.sh | sort | tail -1)")
if has t; then
  tst test_cuda_matmul rows 240 CLOVER_TEST_ONLY=test_pdl_rows,test_few_rows,test_graph_capture,test_chunk_seg,test_chunk_multi,test_row_invariance,test_moe_chunk,test_moe_igw,test_igemm_wide,test_chunk_types
  grep -E "pdl rows" "$O/t_test_cuda_matmul_rows.log" | head -4 | cut -c1-170 | tee -a "$S"
  for n in test_cuda_gdn test_cuda_backend test_cuda_preview test_cuda_batch; do
    tst $n on 150
  done
fi
if has b; then
  wait $SPID
  for v in 00 10 11 01 00 10 11 01; do
    [ "$(el)" -lt 360 ] || { say "bench_cuda_preview: no time left for $v"; break; }
    CLOVER_CUDA_PDL_ROWS=${v:0:1} CLOVER_CUDA_MOE_PAIR1=${v:1:1} timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 \
      > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, PDL_ROWS / MOE_PAIR1 $v rc=$? at +$(el)s"
    grep -E "^(preview|commit|resolve|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
  i=0
  for v in 00 11 00 11; do
    i=$((i + 1))
    [ "$(el)" -lt 400 ] || { say "bench_cuda_backend $v: no time left"; break; }
    CLOVER_CUDA_PDL_ROWS=${v:0:1} CLOVER_CUDA_MOE_PAIR1=${v:1:1} timeout 60 "$D/bin/bench_cuda_backend" $F \
      --prompt-only 1 > "$O/backend_$i.log" 2>&1
    say "== bench_cuda_backend --prompt-only 1, PDL_ROWS / MOE_PAIR1 $v rc=$?"
    grep -E "prompt of|chunk commit" "$O/backend_$i.log" | cut -c1-140 | tee -a "$S"
  done
  for v in 00 11; do
    [ "$(el)" -lt 430 ] || { say "bench_batch $v: no time left"; break; }
    CLOVER_CUDA_PDL_ROWS=${v:0:1} CLOVER_CUDA_MOE_PAIR1=${v:1:1} timeout 90 "$D/bin/bench_batch" $F --device cuda \
      --mode diffusion --prompt 32 --gen 64 --n 1,16 > "$O/batch_$v.log" 2>&1
    say "== bench_batch diffusion N=1,16, PDL_ROWS / MOE_PAIR1 $v rc=$?"
    tail -4 "$O/batch_$v.log" | cut -c1-160 | tee -a "$S"
  done
fi
if has r; then
  wait $SPID
  for mode in diffusion ar; do
    for v in 00 11; do
      [ "$(el)" -lt 460 ] || break
      CLOVER_CUDA_PDL_ROWS=${v:0:1} CLOVER_CUDA_MOE_PAIR1=${v:1:1} timeout 60 "$C" run -m $F --device cuda \
        --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json $([ $mode = ar ] && echo --ar) \
        > "$O/run_${mode}_$v.json" 2> "$O/run_${mode}_$v.err"
    done
    dr_ids_cmp "$O/run_${mode}_00.json" "$O/run_${mode}_11.json" "clover run $mode, PDL_ROWS / MOE_PAIR1 00 / 11"
  done
fi
if has s && command -v ncu > /dev/null; then
  wait $SPID
  # range 4: the block commit (graph nodes); range 5: the eager preview with the coreset
  for k in "4 gdn_chunked_kernel gdn" "5 igemm_kernel moe" "5 k_coreset_warp coreset" "5 k_block_head_fused head"; do
    set -- $k
    [ "$(el)" -lt 480 ] || { say "ncu source $3: no time left"; continue; }
    CLOVER_BENCH_PROFILE_ONLY=$1 timeout 100 ncu --profile-from-start off -k "regex:$2" -s 2 -c 1 \
      --section SourceCounters --section WarpStateStats --section SpeedOfLight --import-source yes \
      --source-folders "$PWD/src/cuda" -f -o "$O/src_$3" \
      "$D/bin/bench_cuda_preview" $F --profile > "$O/src_$3.out" 2>&1
    say "== ncu source $3 ($2, range $1) rc=$? at +$(el)s"
    for v in sass cuda; do
      timeout 60 ncu -i "$O/src_$3.ncu-rep" --page source --csv --print-source $v > "$O/src_$3_$v.csv" \
        2> "$O/src_$3_$v.err"
      say "   source page $v rc=$? $(wc -l < "$O/src_$3_$v.csv") lines"
      python3 "$HERE/ncusrc.py" "$O/src_$3_$v.csv" 30 2>&1 | cut -c1-200 | tee -a "$S"
    done
    python3 "$HERE/ncusrc.py" "$O/src_$3_cuda.csv" 60 > "$R/src_$3_top.txt" 2>&1
  done
fi
dr_end
