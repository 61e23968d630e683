#!/usr/bin/env bash
# Written in the 2026-12-06 16:57 session (issues 24, 25), after sweep27 (the on/off switches; one default was wrong:
# the row launches' PDL in coreset previews, now AUTO) and pdlrows27. The numeric knobs of the AUTO heuristics
# against their defaults, on the pack of 13ef736 (PDL_ROWS AUTO): each an environment knob of the same binary.
#   run(command="ITEMS='knobs27:p,b,c' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "p b c"):
#  p  bench_cuda_preview --reps 3: base and GDN_HEAD_RT=4 / 8 (the lone preview's GDN head row tiles; AUTO 4),
#     IG_X2_STAGES=2 / 3 (the one-wave dense products' two-chunk ring), MOE_TILE_CAP=16 / 66 (the tile loop's grid.y;
#     by shape ~33), ATTN_FEW_NG=1 / 2 / 8 (default 4), ATTN_FEW_TARGET=264, ATTN_COMB_ROWS=32 (default 64); 2 rounds
#  b  bench_batch --mode ar --n 16: base, IG_X2_STAGES=2 / 3, MOE_TILE_CAP=16 / 66, ATTN_COMB_ROWS=16; 2 rounds
#  c  bench_cuda_backend (decode from an empty cache and at 4,096, prompts 512 / 2,048, the 32-row commit): the
#     figures now, once (llama.cpp's are the stored ones it prints, not measured in this run)
# Predictions (before the run; H100, pdlrows27 seq4: coreset preview 5.54-5.56 ms, commit 10.61-10.64, block
#  diffusion 160.6-160.7, ar n16 1,020-1,120 agg): every knob within +-1% of the base on its pass (they were each
#  chosen by a device run), except ATTN_FEW_NG / TARGET +-2% (chosen on an H200: 132 SMs there too, so likely
#  none) and MOE_TILE_CAP=16 +1..+3% on the coreset preview (fewer blocks for ~30 tiles a product).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-p b c}
. "$PACK/lib.sh"
dr_init knobs27
dr_synth35
pv() { # LABEL ENV...: one bench_cuda_preview --reps 3, its four figures said
  local lab=$1; shift
  env "$@" timeout 60 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/p_$lab.log" 2>&1; local rc=$?
  local l=$(grep -E "^(preview 32 rows, first|commit|block)" "$O/p_$lab.log" | \
      awk '{for (i = 2; i <= NF; i++) if ($i == "ms" || $i == "tok/s") { printf "%s ", $(i - 1); break }}')
  say "p rc=$rc $lab ($*): coreset/nocoreset/commit ms, block tok/s: $l"
}
bb() { # LABEL ENV...: one bench_batch --mode ar --n 16, its line said
  local lab=$1; shift
  env "$@" timeout 90 "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 --gen 96 \
    > "$O/b_$lab.log" 2>&1
  say "b rc=$? $lab (ar n16 $*): $(grep -E '^ +16 ' "$O/b_$lab.log" | tail -1 | cut -c1-110)"
}
if has p; then
  wait $SPID
  for r in 1 2; do
    pv base_$r
    for k in GDN_HEAD_RT=4 GDN_HEAD_RT=8 IG_X2_STAGES=2 IG_X2_STAGES=3 MOE_TILE_CAP=16 MOE_TILE_CAP=66 \
      ATTN_FEW_NG=1 ATTN_FEW_NG=2 ATTN_FEW_NG=8 ATTN_FEW_TARGET=264 ATTN_COMB_ROWS=32; do
      [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 150 )) ] || { say "p: no time for $k (round $r)"; continue; }
      pv ${k//=/_}_$r CLOVER_CUDA_$k
    done
  done
fi
if has b; then
  wait $SPID
  for r in 1 2; do
    bb base_$r
    for k in IG_X2_STAGES=2 IG_X2_STAGES=3 MOE_TILE_CAP=16 MOE_TILE_CAP=66 ATTN_COMB_ROWS=16; do
      [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 80 )) ] || { say "b: no time for $k (round $r)"; continue; }
      bb ${k//=/_}_$r CLOVER_CUDA_$k
    done
  done
fi
if has c; then
  wait $SPID
  left=$(( ${DR_LIMIT:-585} - $(el) - 10 ))
  if [ $left -gt 30 ]; then
    timeout $left "$D/bin/bench_cuda_backend" $F > "$O/backend.log" 2>&1
    say "== bench_cuda_backend rc=$? at +$(el)s"
    grep -vE "^(model|device) " "$O/backend.log" | cut -c1-160 | head -20 | tee -a "$S"
  else say "c: no time ($left s)"; fi
fi
dr_end
