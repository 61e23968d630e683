#!/usr/bin/env bash
# Written in the 2026-12-06 05:51 session (issue 24; not run yet). The wide integer kernel (matmul_igemm_wide.cu's
# igw_q8_kernel: 64 outputs x 64 rows a block, the rows read once per 64 outputs) for dense Q8_0 products of 17..63
# rows whose 64-output grid is >= 4 waves (CLOVER_CUDA_IGW_TALL=1, off by default until this runs): in the 35B-A3B
# model only the output head of a 32-row preview (248320 x 2048: igemm_q8_kernel's 15,520 blocks of 16 outputs each
# pull the 32 rows' 8-bit chunks through L2, ~1.1 GB of row reads for 540 MB of weights; 340 us on an H100).
#   cmake --build build -j2 && EXTRA_BINS="libclover_kernel_trace.so" scripts/device-packs.sh build seq
#   run(command="ITEMS='tall24:t,m,p' bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t m p"; ~150 s with the 35B synth):
#  t  test_cuda_matmul's test_igemm_wide (the TALL cases: 17 / 32 / 33 / 63 rows of a >= 4-wave grid against the
#     16 x 32 kernels, memcmp, launches counted, the CPU oracle) and its small cases under compute-sanitizer memcheck
#  m  bench_cuda_matmul CLOVER_BENCH_X2=1 with CLOVER_CUDA_IGW_TALL=0 and 1: its last line is the head at 32 rows
#  p  bench_cuda_preview --reps 3, CLOVER_CUDA_IGW_TALL=0 / 1 / 0 / 1; clover run ids (diffusion, --ar) with 0 and 1
# Predictions: RESULTS.md (written before any run).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t m p}
. "$PACK/lib.sh"
dr_init tall24
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_matmul wide 150 CLOVER_TEST_ONLY=test_igemm_wide
  grep -E "wide x(17|32|33|63|16)/" "$O/t_test_cuda_matmul_wide.log" | head -8 | cut -c1-160 | tee -a "$S"
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=test_igemm_wide timeout 150 compute-sanitizer --tool memcheck \
      --error-exitcode 9 "$D/bin/test_cuda_matmul" > "$O/memcheck_tall.log" 2>&1
    say "memcheck test_igemm_wide (small) rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_tall.log" | tail -1)"
  fi
fi
if has m; then
  for v in 0 1; do
    CLOVER_CUDA_IGW_TALL=$v CLOVER_BENCH_X2=1 timeout 120 "$D/bin/bench_cuda_matmul" > "$O/bench_tall_$v.log" 2>&1
    say "== bench_cuda_matmul CLOVER_BENCH_X2=1 CLOVER_CUDA_IGW_TALL=$v rc=$? at +$(el)s (the head: both columns)"
    grep -E "^x2 +head" "$O/bench_tall_$v.log" | cut -c1-230 | tee -a "$S"
  done
fi
if has p; then
  wait $SPID
  for v in 0 1 0 1; do
    [ "$(el)" -lt "${TALL_BUDGET:-380}" ] || { say "bench_cuda_preview: no time left for $v"; break; }
    CLOVER_CUDA_IGW_TALL=$v timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_IGW_TALL=$v rc=$? at +$(el)s"
    grep -E "^(preview 32 rows, first|commit|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
  for v in 0 1; do
    CLOVER_CUDA_IGW_TALL=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/run_$v.json" 2> "$O/run_$v.err"
    CLOVER_CUDA_IGW_TALL=$v timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/ar_$v.json" 2> "$O/ar_$v.err"
  done
  say "clover run IGW_TALL=0: diffusion $(dr_ids "$O/run_0.json"), --ar $(dr_ids "$O/ar_0.json")"
  dr_ids_cmp "$O/run_0.json" "$O/run_1.json" "clover run diffusion, IGW_TALL 0 / 1"
  dr_ids_cmp "$O/ar_0.json" "$O/ar_1.json" "clover run --ar, IGW_TALL 0 / 1"
fi
dr_end
