#!/usr/bin/env bash
# Written in the 2026-12-05 14:27 session (issues 24, 25). The chunked GDN (a block commit's and a prompt's mixer)
# with register-tiled phases (gdn_chunked.cu's TILE, CLOVER_CUDA_GDN_CHUNK_TILE, on by default): a thread computes
# a small tile of outputs (A and q k^T 2x2, V' and O 2x2, the state 4x4), each shared load feeding several FMAs,
# the tile's chains independent; per element the NP=1 form's operations in its order, so its bits. The kernel
# alone on an H100 (the helper's bench, 32 heads x 128): 32 rows 57 -> 32 us, 150 rows 256 -> 150 us, bit for bit.
#   run(command="ITEMS='chunktile24:t,b,r' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t b r"):
#  t  test_cuda_gdn (chunked_tile_matches_np1: o and states bit for bit against NP=1, 1..150 rows, two geometries),
#     test_cuda_backend, test_cuda_preview, test_cuda_batch with it on (the default)
#  b  bench_cuda_preview --reps 3 (the commit) and bench_cuda_backend --prompt-only 1, TILE 0 / 1 / 0 / 1
#  r  clover run ids (diffusion, --ar) with 0 and 1: equal
# Predictions (before the run; prof24 (H100): the commit's chunked GDN 61.3 us x 30 = 1.84 ms of 13.97 ms):
#  b: the kernel ~1.75x faster in the graph: commit -0.7..-0.8 ms (13.1 -> ~12.3 ms), prompt 512 +3..+5%.
#  r: ids equal.
set -uo pipefail
PACK=${PACK:-.gpu-chunktile24}
STEPS=${STEPS:-t b r}
. "$PACK/lib.sh"
dr_init chunktile24
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_gdn tile 150
  for n in test_cuda_backend test_cuda_preview test_cuda_batch; do tst $n tile 150; done
fi
if has b; then
  wait $SPID
  for v in 0 1 0 1; do
    [ "$(el)" -lt 400 ] || { say "benches: no time left for $v"; break; }
    CLOVER_CUDA_GDN_CHUNK_TILE=$v timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_GDN_CHUNK_TILE=$v rc=$? at +$(el)s"
    grep -E "^(preview 32 rows, first pass, coreset|commit|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
    CLOVER_CUDA_GDN_CHUNK_TILE=$v timeout 60 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/backend_$v.log" 2>&1
    say "== bench_cuda_backend --prompt-only 1, CLOVER_CUDA_GDN_CHUNK_TILE=$v rc=$?"
    grep -E "prompt of|chunk commit" "$O/backend_$v.log" | cut -c1-140 | tee -a "$S"
  done
fi
if has r; then
  wait $SPID
  for mode in diffusion ar; do
    for v in 0 1; do
      [ "$(el)" -lt 470 ] || break
      CLOVER_CUDA_GDN_CHUNK_TILE=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 \
        --ignore-eos --no-visual --json $([ $mode = ar ] && echo --ar) > "$O/run_${mode}_$v.json" 2> "$O/run_${mode}_$v.err"
    done
    dr_ids_cmp "$O/run_${mode}_0.json" "$O/run_${mode}_1.json" "clover run $mode, CHUNK_TILE 0 / 1"
  done
fi
dr_end
