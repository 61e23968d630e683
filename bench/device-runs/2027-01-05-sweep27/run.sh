#!/usr/bin/env bash
# Written in the 2026-12-06 16:57 session (issues 24, 25). The switches' defaults against their other forms, on
# today's code (pack 1986805 = main + the deep ring, off): many defaults were chosen sessions ago on older kernels
# (the branch-free chunk sums landed last session and cost the first coreset preview pass ~0.11 ms while every
# other pass gained). Each form is an environment switch of the same binary, so one pack and one synth serve all.
#   run(command="ITEMS='sweep27:p,b' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "p b"):
#  p  bench_cuda_preview --reps 3 (the first preview pass with / without the coreset, the commit, block diffusion)
#     for the base and each of PV's assignments, two rounds, the base first in each
#  b  bench_batch --mode ar --n 16 --prompt 32 --gen 96 (the 16-row stacked AR step, serve AR's) for the base and
#     each of BV's, two rounds
# Predictions (before the run; H100, prof26 seq1: preview 5.90-5.91 ms, commit 10.60-10.61, n16 ~1,100-1,170 agg):
#  every form within +-1% of the base except: IG_X2=0 (the dense one-wave products' two-chunk stages off) -0.5..+1%
#  on the preview (its no_instruction stalls in prof26's ncu: 12-29% on the X2 kernels); MOE_TILE_LOOP=0 +1..+3%
#  (the tile loop won 2026-12-31); SHEXP_SIDE=0 +2..+5% (the side stream overlaps ~0.4 ms); MOE_DEC32=1 on n16
#  -5..+5% (never timed on this code); GDN_REC=smem on n16 slower (occ25's reg form won).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-p b}
. "$PACK/lib.sh"
dr_init sweep27
dr_synth35
PV=${PV:-"CLOVER_CUDA_IG_X2=0 CLOVER_CUDA_IG_X2=1 CLOVER_CUDA_MOE_TILE_LOOP=0 CLOVER_CUDA_SHEXP_SIDE=0
 CLOVER_CUDA_PDL_ROWS=0 CLOVER_CUDA_IG_K2=0 CLOVER_CUDA_MOE_DEC32=1,CLOVER_CUDA_MOE_DEC32_NARROW=1
 CLOVER_CUDA_MOE_PERSIST=1 CLOVER_CUDA_IGEMM_FEW=1 CLOVER_CUDA_MMA_ROWS=32 CLOVER_CUDA_GDN_HEAD_ONCE=1
 CLOVER_CUDA_EXACT_TILE=1 CLOVER_CUDA_ROUTER_FUSED=0 CLOVER_CUDA_Q8_ROWS32=0 CLOVER_CUDA_IGW_MOE=0"}
BV=${BV:-"CLOVER_CUDA_MOE_DEC32=1 CLOVER_CUDA_MOE_DEC32=2 CLOVER_CUDA_IG_X2=0 CLOVER_CUDA_IG_X2=1
 CLOVER_CUDA_MOE_TILE_LOOP=0 CLOVER_CUDA_SHEXP_SIDE=0 CLOVER_CUDA_MMA_ROWS=16 CLOVER_CUDA_IGEMM_FEW=1
 CLOVER_CUDA_GDN_REC=smem CLOVER_CUDA_IGW_MOE=0"}
if has p; then
  wait $SPID
  for round in 1 2; do
    for v in base $PV; do
      [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 40 )) ] || { say "p: no time for $v (round $round)"; continue; }
      e=""; [ "$v" = base ] || e=${v//,/ }
      env $e timeout 60 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/p_${round}_${v//[^A-Za-z0-9]/_}.log" 2>&1
      rc=$?
      l=$(grep -E "^(preview 32 rows, first|commit|block)" "$O/p_${round}_${v//[^A-Za-z0-9]/_}.log" | \
          awk '{for (i = 2; i <= NF; i++) if ($i == "ms" || $i == "tok/s") { printf "%s ", $(i - 1); break }}')
      say "p$round rc=$rc ${v}: coreset/nocoreset/commit ms, block tok/s: $l"
    done
  done
fi
if has b; then
  wait $SPID
  for round in 1 2; do
    for v in base $BV; do
      [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 30 )) ] || { say "b: no time for $v (round $round)"; continue; }
      e=""; [ "$v" = base ] || e=${v//,/ }
      env $e timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 --gen 96 \
        > "$O/b_${round}_${v//[^A-Za-z0-9]/_}.log" 2>&1
      say "b$round rc=$? ${v}: $(grep -E '^ +16 ' "$O/b_${round}_${v//[^A-Za-z0-9]/_}.log" | tail -1 | cut -c1-110)"
    done
  done
fi
dr_end
