#!/usr/bin/env bash
# Written in the 2026-12-05 11:42 session (issue 24; not yet run when written). The dense Q8_0 products of 2..63
# rows that share their 8-bit rows (chunk_ws_shared: a GDN layer's qkv / z / alpha / beta, the attention's q / k / v,
# the shared expert's gate / up) in ONE igemm_q8_kernel launch, product after product along grid.y
# (CLOVER_CUDA_IG_SEG=1, matmul_igemm.cu's ig_launch_seg): the same blocks, so the same bits; fewer launches and
# one tail instead of one a product (trace24: the small products' launches 6-9 us each for < 1 MB, the 4096-output
# z 8.5 us after the 8192-output qkv's 1.3 waves).
#   run(command="ITEMS='seg24:t,b,r' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t b r"):
#  t  test_cuda_matmul test_chunk_seg (bit for bit against one launch a product; the form taken), test_chunk_multi /
#     test_row_invariance / test_graph_capture with it on; memcheck of test_chunk_seg; test_cuda_backend /
#     test_cuda_preview / test_cuda_batch with it on
#  b  bench_cuda_preview --reps 3 on the 35B-A3B diffusion file, CLOVER_CUDA_IG_SEG 0 / 1 / 0 / 1
#  r  clover run ids (diffusion, and --ar) with the switch 0 and 1: equal
# Predictions (before the run; H100 2026-12-05 08:52: preview 8.44 ms, commit 14.49, block diffusion 111.6 tok/s):
#  t: every case bit-identical, memcheck 0 errors, backend / preview / batch pass.
#  b: preview -0.5..-0.9 ms (~7.6-7.9), commit -0.4..-0.8 ms (~13.7-14.1), block diffusion ~116-122 tok/s.
#  r: ids equal.
set -uo pipefail
PACK=${PACK:-.gpu-seg24}
STEPS=${STEPS:-t b r}
. "$PACK/lib.sh"
dr_init seg24
C=$D/bin/clover
CL=/tmp/synth35-clover.gguf
( [ -s $CL ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!
if has t; then
  tst test_cuda_matmul seg 240 CLOVER_TEST_ONLY=test_chunk_seg
  grep -E "segmented" "$O/t_test_cuda_matmul_seg.log" | head -6 | cut -c1-170 | tee -a "$S"
  tst test_cuda_matmul seg_on 240 CLOVER_CUDA_IG_SEG=1 CLOVER_TEST_ONLY=test_chunk_multi,test_row_invariance,test_graph_capture
  if command -v compute-sanitizer > /dev/null; then
    CLOVER_TEST_ONLY=test_chunk_seg timeout 200 compute-sanitizer --tool memcheck "$D/bin/test_cuda_matmul" \
      > "$O/memcheck.log" 2>&1
    say "memcheck test_chunk_seg rc=$?: $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1)"
  fi
  for n in test_cuda_backend test_cuda_preview test_cuda_batch; do
    tst $n seg 150 CLOVER_CUDA_IG_SEG=1
  done
fi
if has b; then
  wait $CPID
  for v in 0 1 0 1; do
    [ "$(el)" -lt 430 ] || { say "bench_cuda_preview: no time left for $v"; break; }
    CLOVER_CUDA_IG_SEG=$v timeout 90 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_IG_SEG=$v rc=$? at +$(el)s"
    grep -E "^(preview|commit|resolve|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
fi
if has r; then
  wait $CPID
  for mode in diffusion ar; do
    for v in 0 1; do
      [ "$(el)" -lt 500 ] || break
      CLOVER_CUDA_IG_SEG=$v timeout 60 "$C" run -m $CL --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
        --no-visual --json $([ $mode = ar ] && echo --ar) > "$O/run_${mode}_$v.json" 2> "$O/run_${mode}_$v.err"
    done
    dr_ids_cmp "$O/run_${mode}_0.json" "$O/run_${mode}_1.json" "clover run $mode, IG_SEG 0 / 1"
  done
fi
dr_end
