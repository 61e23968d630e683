#!/usr/bin/env bash
# Written in the 2026-12-05 16:54 session (issue 24; ran the same session: RESULTS.md, no gain, the form removed;
# written off by default). igemm_q8_kernel with an 8-stage cp.async ring where a dense Q8_0 product's grid is at most one block an SM
# (CLOVER_CUDA_IG_Q8_DEEP=1, off by default until this runs): k2core24's ncu had the preview's 2048-output product
# (128 blocks) waiting on its 4-stage ring at the loop head, DRAM 15%; the shared expert's gate/up (64 blocks) and
# the a/b products (2 blocks) are of the same kind. The same blocks and arithmetic: the same bits.
#   cmake --build build -j2 && EXTRA_BINS="libclover_kernel_trace.so bench_backend bench_ops" \
#     scripts/device-packs.sh build seq
#   run(command="ITEMS='q8deep24:t,b,r' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t b r"):
#  t  test_cuda_matmul's test_q8_deep (the deep ring = the 4-stage ring bit for bit, the launch taken),
#     test_chunk_seg and test_row_invariance with the switch on; test_cuda_backend / preview / batch with it on
#  b  bench_cuda_preview --reps 3 with CLOVER_CUDA_IG_Q8_DEEP 0 / 1 / 0 / 1; bench_cuda_backend --prompt-only 1 0 / 1
#  r  clover run ids (diffusion and --ar) with 0 and 1: equal
# Q8_TESTS (test_cuda_matmul's tests for t) and Q8_ALT (b's alternation) shorten a call with few device seconds left.
# Predictions (before the run; H100, k2core24 seq4's trace: 2048-output 8.0 us x 80, the shared expert's gate/up
#  13.7 x 40, a/b 6.4 x 30 in a preview; 8.9 x 80 and 7.5 x 40 in a commit):
#  t: every case bit for bit, the deep launch taken.
#  b: those products 1.2-1.5x faster: a preview -0.25..-0.45 ms (6.5 -> ~6.1-6.25 on an H100), a commit -0.15..-0.3 ms,
#     block diffusion +4..+7%; the prompt unchanged (its grids are many waves).
set -uo pipefail
PACK=${PACK:-.gpu-q8deep24}
STEPS=${STEPS:-t b r}
. "$PACK/lib.sh"
dr_init q8deep24
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_matmul deep 200 CLOVER_TEST_ONLY=${Q8_TESTS:-test_q8_deep,test_chunk_seg,test_row_invariance} \
    CLOVER_CUDA_IG_Q8_DEEP=1
  grep -E "deep ring|segmented|invariance" "$O/t_test_cuda_matmul_deep.log" | head -4 | cut -c1-200 | tee -a "$S"
  for n in test_cuda_backend test_cuda_preview test_cuda_batch; do tst $n deep 150 CLOVER_CUDA_IG_Q8_DEEP=1; done
fi
if has b; then
  wait $SPID
  for v in ${Q8_ALT:-0 1 0 1}; do
    [ "$(el)" -lt 420 ] || { say "bench_cuda_preview: no time left for $v"; break; }
    CLOVER_CUDA_IG_Q8_DEEP=$v timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_IG_Q8_DEEP=$v rc=$? at +$(el)s"
    grep -E "^(preview 32 rows, first|commit|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
  for v in 0 1; do
    CLOVER_CUDA_IG_Q8_DEEP=$v timeout 90 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/prompt_$v.log" 2>&1
    say "== bench_cuda_backend --prompt-only 1, CLOVER_CUDA_IG_Q8_DEEP=$v rc=$? at +$(el)s"
    grep -E "prompt|commit" "$O/prompt_$v.log" | head -4 | cut -c1-140 | tee -a "$S"
  done
fi
if has r; then
  wait $SPID
  for v in 0 1; do
    CLOVER_CUDA_IG_Q8_DEEP=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/run_$v.json" 2> "$O/run_$v.err"
    CLOVER_CUDA_IG_Q8_DEEP=$v timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/ar_$v.json" 2> "$O/ar_$v.err"
  done
  dr_ids_cmp "$O/run_0.json" "$O/run_1.json" "clover run diffusion, IG_Q8_DEEP 0 / 1"
  dr_ids_cmp "$O/ar_0.json" "$O/ar_1.json" "clover run --ar, IG_Q8_DEEP 0 / 1"
fi
dr_end
