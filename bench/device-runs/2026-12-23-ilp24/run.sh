#!/usr/bin/env bash
# Written in the 2026-12-05 11:42 session (issue 24; not yet run when written). The chunked GDN form (gdn_chunked.cu,
# a commit's and a prompt's GDN layers) with every dot product and running sum in independent partial sums
# (CLOVER_CUDA_GDN_CHUNK_ILP=1, its NP = 4): ncu24 (H200, this session) put a 32-row commit's GDN layer at 82 us
# in gdn_chunked_kernel, issue 32% active at 8 warps an SM, "wait" (dependent FMA chains) the top stall.
#   run(command="ITEMS='ilp24:t,b,r' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t b r"):
#  t  test_cuda_gdn (both forms against the CPU's scalar chunked form, 1e-5), test_cuda_backend / test_cuda_preview
#     / test_cuda_batch with the switch on (the golden fixtures through the chunked form)
#  b  bench_cuda_preview --reps 3 (the 32-row block commit) and bench_cuda_backend --prompt-only 1 (prompt 512),
#     0 / 1 / 0 / 1
#  r  clover run ids (diffusion, and --ar) with the switch 0 and 1 (a reassociation: may differ where the random
#     35B file's near-ties are; reported)
# Predictions (before the run; H200 seq1 of this session: commit 13.61-13.66 ms with IG_SEG; prompt 512 ~6,300
# tok/s on the H100 last session): gdn_chunked_kernel ~2-3x faster; commit -1.0..-1.5 ms (~12.2-12.6 ms); prompt 512
# +10-20% (each 512-row chunk walks 8 chunks of 64 rows a head: ~20 ms of the ~80 ms prompt in this kernel);
# tests pass at the same bound; ids equal in most runs.
set -uo pipefail
PACK=${PACK:-.gpu-ilp24}
STEPS=${STEPS:-t b r}
. "$PACK/lib.sh"
dr_init ilp24
C=$D/bin/clover
CL=/tmp/synth35-clover.gguf
( [ -s $CL ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!
if has t; then
  tst test_cuda_gdn both 120
  for n in test_cuda_backend test_cuda_preview test_cuda_batch; do
    tst $n ilp 150 CLOVER_CUDA_GDN_CHUNK_ILP=1
  done
fi
if has b; then
  wait $CPID
  i=0
  for v in 0 1 0 1; do
    i=$((i + 1))
    [ "$(el)" -lt 420 ] || { say "bench: no time left for $v"; break; }
    CLOVER_CUDA_GDN_CHUNK_ILP=$v timeout 90 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview_$i.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_GDN_CHUNK_ILP=$v rc=$? at +$(el)s"
    grep -E "^(preview 32 rows, first pass, coreset|commit|block)" "$O/preview_$i.log" | cut -c1-110 | tee -a "$S"
    CLOVER_CUDA_GDN_CHUNK_ILP=$v timeout 60 "$D/bin/bench_cuda_backend" $CL --prompt-only 1 > "$O/backend_$i.log" 2>&1
    say "== bench_cuda_backend --prompt-only 1, CLOVER_CUDA_GDN_CHUNK_ILP=$v rc=$?"
    grep -E "prompt of|chunk commit" "$O/backend_$i.log" | cut -c1-140 | tee -a "$S"
  done
fi
if has r; then
  wait $CPID
  for mode in diffusion ar; do
    for v in 0 1; do
      [ "$(el)" -lt 520 ] || break
      CLOVER_CUDA_GDN_CHUNK_ILP=$v timeout 60 "$C" run -m $CL --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
        --no-visual --json $([ $mode = ar ] && echo --ar) > "$O/run_${mode}_$v.json" 2> "$O/run_${mode}_$v.err"
    done
    dr_ids_cmp "$O/run_${mode}_0.json" "$O/run_${mode}_1.json" "clover run $mode, GDN_CHUNK_ILP 0 / 1"
  done
fi
dr_end
