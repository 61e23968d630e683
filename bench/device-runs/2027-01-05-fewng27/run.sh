#!/usr/bin/env bash
# Written in the 2026-12-06 16:57 session (issue 24), after knobs27 (same session, H100): the few-row attention's
# query groups a block (CLOVER_CUDA_ATTN_FEW_NG, default 4, chosen on an H200) at 2: coreset preview 5.544 / 5.543 ->
# 5.475 / 5.500 ms, without the coreset 5.257 / 5.245 -> 5.182 / 5.176, commit 10.613 / 10.646 -> 10.539 / 10.606,
# block diffusion 160.4 / 160.2 -> 163.1 / 162.8 tok/s (1: 162.0 / 162.3; 8: slower). NG changes the plan (kw key
# lanes a block, the splits: 32 rows over 544 keys 8 x 68 -> 4 x 136), so the merge order and the bits of the
# attention outputs (f32, within the tests' bounds of the CPU): before the default moves, every CUDA test that
# compares with the CPU, a float64 oracle or the golden fixtures runs with NG=2 here (the env read by the same
# binaries), and the ids of `clover run` are compared with NG 4's.
#   run(command="ITEMS='fewng27:t,p' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=300)
# STEPS: t  with CLOVER_CUDA_ATTN_FEW_NG=2: test_cuda_attention, test_cuda_preview, test_cuda_backend,
#           test_cuda_engine, test_cuda_batch, test_cuda_split; clover run diffusion / --ar ids (NG 4 and 2)
#        p  bench_cuda_preview --reps 3, NG 4 / 2 alternating twice
# Predictions (before the run): every test passes (the few form's bounds hold at any plan); the --ar ids equal
#  (decode rows never take the few form), the diffusion ids equal or, on this random model's thin margins, a late
#  divergence; p: NG=2 -0.05..-0.08 ms on the coreset preview, block diffusion +1..+2%.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t p}
. "$PACK/lib.sh"
dr_init fewng27
dr_synth35
C=$D/bin/clover
if has t; then
  for n in test_cuda_attention test_cuda_preview test_cuda_backend test_cuda_engine test_cuda_batch test_cuda_split; do
    tst $n ng2 120 CLOVER_CUDA_ATTN_FEW_NG=2
  done
  wait $SPID
  for v in 4 2; do
    CLOVER_CUDA_ATTN_FEW_NG=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/run_$v.json" 2> "$O/run_$v.err"
    CLOVER_CUDA_ATTN_FEW_NG=$v timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 \
      --ignore-eos --no-visual --json > "$O/ar_$v.json" 2> "$O/ar_$v.err"
    say "clover run NG=$v: diffusion $(dr_ids "$O/run_$v.json"), --ar $(dr_ids "$O/ar_$v.json")"
  done
  dr_ids_cmp "$O/run_4.json" "$O/run_2.json" "diffusion NG 4 / 2"
fi
if has p; then
  wait $SPID
  for r in 1 2; do
    for v in 4 2; do
      CLOVER_CUDA_ATTN_FEW_NG=$v timeout 60 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/p_${v}_$r.log" 2>&1
      l=$(grep -E "^(preview 32 rows, first|commit|block)" "$O/p_${v}_$r.log" | \
          awk '{for (i = 2; i <= NF; i++) if ($i == "ms" || $i == "tok/s") { printf "%s ", $(i - 1); break }}')
      say "p NG=$v round $r: coreset/nocoreset/commit ms, block tok/s: $l"
    done
  done
fi
dr_end
