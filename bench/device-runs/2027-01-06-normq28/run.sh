#!/usr/bin/env bash
# Written in the 2026-12-06 16:57 session (issue 24; NOT run: written after the session's device time was spent).
# The residual add + norm that also writes the normed rows' Q8_0 8-bit copy (cuda_add_rms_norm_q8, ops_small.cu's
# k_norm_vec<VPT, true, true>: the quantiser's codes, mm_act_store_32x4 beside mm_act_blocks_32x8), so the next
# layer's first products (GDN qkv / z / alpha, attention q / k / v: cuda_matmul_chunk_ws_multi_xq) launch no
# quantiser: one launch less a layer in every pass of 9+ rows (prof26's trace: the 256-block quantiser 1.98 us x
# 81 a preview). The code is in untested.patch (kept out of main until this runs; made on ec237dd): `git apply`
# it, build, pack (PACK_XZ_PRESET=6 EXTRA_BINS="libclover_kernel_trace.so" scripts/device-packs.sh build seq).
#   (its lib.sh needs dr_preview: a pack made from 2027-01-06 on)
#   run(command="ITEMS='normq28:t,p' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=300)
# STEPS: t  test_cuda_matmul (test_norm_q8: h, x, the 8-bit rows and three products against the plain path, bit and
#           byte for byte, 12 shapes; test_chunk_multi, test_chunk_seg), test_cuda_preview, test_cuda_backend,
#           test_cuda_batch; memcheck of test_cuda_matmul's test_norm_q8; clover run ids with the form on and off
#        p  bench_cuda_preview --reps 3 and bench_cuda_backend --prompt-only 1, CLOVER_CUDA_NORM_Q8=0 / on twice
# Predictions (before any run; H100): t all pass, memcheck 0 errors, ids equal on and off (db3c58da3157 /
#  ff19558da508: the products read the same bytes); p: the coreset preview and the commit -0.04..-0.08 ms each
#  (one ~2 us launch a layer, 39 layers, partly hidden by PDL), prompt 512 +0.5..+1.5%.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t p}
. "$PACK/lib.sh"
dr_init normq28
dr_synth35
C=$D/bin/clover
if has t; then
  tst test_cuda_matmul nq 150 CLOVER_TEST_ONLY=test_norm_q8,test_chunk_multi,test_chunk_seg
  for n in test_cuda_preview test_cuda_backend test_cuda_batch; do tst $n all 120; done
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_ONLY=test_norm_q8 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$D/bin/test_cuda_matmul" > "$O/memcheck_nq.log" 2>&1
    say "memcheck test_norm_q8 rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_nq.log" | tail -1)"
  fi
  wait $SPID
  for v in on 0; do
    e=""; [ $v = on ] || e="CLOVER_CUDA_NORM_Q8=0"
    env $e timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
      > "$O/run_$v.json" 2> "$O/run_$v.err"
    env $e timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual \
      --json > "$O/ar_$v.json" 2> "$O/ar_$v.err"
    say "clover run NORM_Q8 $v: diffusion $(dr_ids "$O/run_$v.json"), --ar $(dr_ids "$O/ar_$v.json") (db3c58da3157 / ff19558da508)"
  done
fi
if has p; then
  wait $SPID
  for r in 1 2; do
    for v in 0 on; do
      e=""; [ $v = on ] || e="CLOVER_CUDA_NORM_Q8=0"
      dr_preview NORM_Q8_${v}_$r $e
      env $e timeout 90 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/b_${v}_$r.log" 2>&1
      say "   prompt: $(grep -E '^prompt of 512|^32-row chunk commit' "$O/b_${v}_$r.log" | cut -c1-60 | tr -s ' ' | tr '\n' ';')"
    done
  done
fi
dr_end
