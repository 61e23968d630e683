#!/usr/bin/env bash
# Written in the session of 2026-12-06 22:43 UTC (issues 24, 25). Two per-pass plans from tall29's findings:
#  - the GDN heads' head-once form AUTO (gdn_block_fused.cu heads_launch: stacked passes of 2+ sequences only;
#    CLOVER_CUDA_GDN_HEAD_ONCE=0 never, =1 everywhere): tall29 h1 measured +3.6% on 16 stacked diffusion sequences
#    and h2 +0.52 ms on a lone preview, so AUTO should keep both gains;
#  - CLOVER_CUDA_MOE_TALL=3: the tall expert tiles for a coreset preview's down only (n_in <= 512: a warp one chunk,
#    tall29 k: 11.6 -> 9.8 us a layer), the pair on the WIDE tiles (the tall pair lost: 17.3 -> 22.0).
#   run(command="ITEMS='auto30:t,p,b,w,v' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=500)
# STEPS: t  test_cuda_preview (gdn_head_once: the AUTO cases, bit for bit, and its launch counts), test_cuda_matmul's
#           test_moe_tall (mode 3 now: tall only where n_in <= 512) and test_pdl_rows_passes (modes 6 / 7, mark 8),
#           test_cuda_batch, test_cuda_backend; clover run ids at the defaults, with TALL=3 and with PDL_ROWS=6
#        p  dr_preview (bench_cuda_preview --reps 3) TALL 0 / 3 alternating twice (HEAD_ONCE AUTO: lone, so tiles)
#        b  bench_batch --mode diffusion --n 1,16 HEAD_ONCE 0 / unset (AUTO) alternating twice
#        w  dr_preview CLOVER_CUDA_PDL_ROWS unset (AUTO: the lone coreset preview's row launches plain) / 6 (plain only
#           for its routed experts: router to the experts' sum, pdlwhy28's place of PDL's cost; PDL for the rest) / 7
#           (6 and the side stream plain) / 1 (PDL everywhere), alternating twice
#        d  the first sweep of the 16-sequence stacked diffusion pass (bench_batch --mode diffusion --n 16 --prompt 32
#           --gen 64; issue 25's furthest bar): the base and each of DV's switches (forms with the same bits only),
#           two rounds, the base first in each
#        v  serve 16 x 128 AR (the --no-diffusion file) and 16 x 64 diffusion at the defaults (issue 25's ratios;
#           last measured state24 on an H200: 5.28x / 1.90x, occ25 2.03x)
# Predictions (before the run):
#  t: all pass; ids db3c58da3157 / ff19558da508 in all three forms.
#  p: TALL=3 the coreset preview -0.05..-0.09 ms (40 downs x 1.8 us; H200 5.30 -> ~5.23, H100 5.43 -> ~5.36), the
#     preview without the coreset and the commit unchanged (+-0.02), block diffusion +1..+2 tok/s.
#  b: n 16 AUTO / 0 +3..+4% (H200 297 -> 308); n 1 equal within 1% (a lone block: tiles either way).
#  w: 6 the coreset preview -0.05..-0.15 ms against AUTO (H200 tall29 seq3: =1 was -0.06 there, block diffusion -0.7
#     tok/s; 6 keeps =1's gain on the dense launches without the experts' cost), the commit and the preview without
#     the coreset equal (unmarked); 7 within 0.03 of 6.
#  d: every form within +-2% of the base except IGW_MOE=0 / IGEMM_WIDE=0 (the 512-row tiles off: -10..-30%),
#     MOE_TALL=2 (-3..-8%: the AR step's -6%), PDL_ROWS=0 (-1..-3%); a gain of >= 2% would be a default to move.
#  v: AR 5.2-5.4x; diffusion 2.0-2.2x (AUTO's +3.6% on the stacked passes); answers identical.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t p b w d v}
. "$PACK/lib.sh"
dr_init auto30
C=$D/bin/clover
AR=/tmp/synth35-ar.gguf
dr_synth35
if has t; then
  tst test_cuda_preview all 150
  tst test_cuda_matmul tall 200 CLOVER_TEST_ONLY=test_moe_tall,test_pdl_rows_passes
  for n in test_cuda_batch test_cuda_backend; do tst $n all 120; done
  wait $SPID
  for v in def 3 p6; do
    case $v in 3) e="CLOVER_CUDA_MOE_TALL=3" ;; p6) e="CLOVER_CUDA_PDL_ROWS=6" ;; *) e="CLOVER_NOTHING=1" ;; esac
    env $e timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
      > "$O/run_$v.json" 2> "$O/run_$v.err"
    env $e timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual \
      --json > "$O/ar_$v.json" 2> "$O/ar_$v.err"
    say "clover run $v: diffusion $(dr_ids "$O/run_$v.json"), --ar $(dr_ids "$O/ar_$v.json") (db3c58da3157 / ff19558da508)"
  done
fi
if has p; then
  wait $SPID
  for r in 1 2; do
    dr_preview TALL_0_$r CLOVER_CUDA_MOE_TALL=0
    dr_preview TALL_3_$r CLOVER_CUDA_MOE_TALL=3
  done
fi
if has b; then
  wait $SPID
  for r in 1 2; do
    for v in 0 auto; do
      e="CLOVER_CUDA_GDN_HEAD_ONCE=0"; [ $v = 0 ] || e="CLOVER_NOTHING=1"
      env $e timeout 120 "$D/bin/bench_batch" $F --device cuda --mode diffusion --n 1,16 --prompt 32 --gen 64 \
        > "$O/dbatch_${v}_$r.log" 2>&1
      say "== bench_batch --mode diffusion --n 1,16 HEAD_ONCE=$v rc=$? at +$(el)s"
      grep -E "^ +(1|16) " "$O/dbatch_${v}_$r.log" | cut -c1-130 | tee -a "$S"
    done
  done
fi
if has w; then
  wait $SPID
  for r in 1 2; do
    dr_preview PDLR_auto_$r CLOVER_NOTHING=1
    dr_preview PDLR_6_$r CLOVER_CUDA_PDL_ROWS=6
    dr_preview PDLR_7_$r CLOVER_CUDA_PDL_ROWS=7
    dr_preview PDLR_1_$r CLOVER_CUDA_PDL_ROWS=1
  done
fi
DV=${DV:-"CLOVER_CUDA_PDL_ROWS=3 CLOVER_CUDA_PDL_ROWS=0 CLOVER_CUDA_IG_X2=0 CLOVER_CUDA_IG_X2=1
 CLOVER_CUDA_MOE_TILE_LOOP=0 CLOVER_CUDA_EXACT_TILE=0 CLOVER_CUDA_IGW_MOE=0 CLOVER_CUDA_MOE_PERSIST=1
 CLOVER_CUDA_GDN_HEAD_ONCE_G=2 CLOVER_CUDA_IGEMM_WIDE=0 CLOVER_CUDA_SHARE_XQ=0 CLOVER_CUDA_GLU_QUANT=0
 CLOVER_CUDA_NORM_Q8=0 CLOVER_CUDA_MOE_TALL=2"}
if has d; then
  wait $SPID
  for round in 1 2; do
    for v in base $DV; do
      [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 30 )) ] || { say "d: no time for $v (round $round)"; continue; }
      e="CLOVER_NOTHING=1"; [ "$v" = base ] || e=${v//,/ }
      env $e timeout 60 "$D/bin/bench_batch" $F --device cuda --mode diffusion --n 16 --prompt 32 --gen 64 \
        > "$O/d_${round}_${v//[^A-Za-z0-9]/_}.log" 2>&1
      say "d$round rc=$? ${v}: $(grep -E '^ +16 ' "$O/d_${round}_${v//[^A-Za-z0-9]/_}.log" | tail -1 | cut -c1-110)"
    done
  done
fi
if has v; then
  wait $SPID
  [ -s $AR ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b --no-diffusion -o $AR.part > "$O/synth-ar.log" \
    2>&1 && mv $AR.part $AR; }
  say "AR file at +$(el)s"
  dr_serve $AR "" 16 128 1 ar
  dr_serve $F "" 16 64 1 diffusion
fi
dr_end
