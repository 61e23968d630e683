#!/usr/bin/env bash
# Written 2026-12-05 10:33 (issues 24, 25), after seq1 / seq2 of the same session passed every prepared form's tests
# on an H100: which of the six switches win, together and each left out, in one call on a warm machine.
#   run(command="ITEMS='on24:b' bash .gpu-seq/run.sh", carry=[".gpu-seq"])   (the seq pack of 33b9184)
# STEPS (default "b"; "c" added after b's run, "v" after the defaults changed, same session):
#  v  with the new defaults (ATTN_FEW and ROUTE_FAST on, no variable set): the CUDA test programs (attention, ops,
#     backend, preview, batch, engine, matmul's q8 rows) and bench_cuda_preview --reps 3 (predicted ~8.4-8.5 ms)
#  c  single switches: bench_cuda_preview --reps 3 none / few / few+route / few+persist / none / few;
#     bench_cuda_backend --prompt-only 1 none / rb / none / rb; bench_batch diffusion N=16 none / once / rb / few /
#     none; bench_cuda_backend (decode) none / route / none / route
#     Predictions (written after b: all six together were 0.3 ms slower than none, ATTN_FEW the one that helps):
#     few alone 9.2 -> ~8.6 ms; +route / +persist within +-0.1 ms of few; rb: prompt 512 +1% (b: +1.1%); once at
#     N=16 +2-4% agg tok/s (its target, k_block_head_fused_multi); route decode +0-2%.
#  b  bench_cuda_preview --reps 3 on the 35B-A3B diffusion file: none, all, none, all; then all but each one;
#     bench_cuda_backend --prompt-only 1 none / all; bench_batch diffusion (prompt 32, gen 64) N=16 none / all
# "all" = CLOVER_CUDA_Q8_ROWS32=1 ATTN_FEW=1 ROUTE_FAST=1 MOE_PERSIST=1 GDN_HEAD_ONCE=1 EXACT_RB=1.
# Predictions (before the run; the H200's figures scaled by nothing: this machine is an H100, so the baseline is
# re-measured here): preview none -> all -30 to -40% (q8rows -1.4, persist -0.8..-1.4, attn few -0.9, gdn head
# -0.2..-0.3, route -0.05 ms of ~9-10 ms); each left out costs its own share back; prompt 512 +4-5% (exact rb);
# N=16 diffusion +10-20%.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-b}
. "$PACK/lib.sh"
dr_init on24
dr_synth35
SW="CLOVER_CUDA_Q8_ROWS32 CLOVER_CUDA_ATTN_FEW CLOVER_CUDA_ROUTE_FAST CLOVER_CUDA_MOE_PERSIST CLOVER_CUDA_GDN_HEAD_ONCE CLOVER_CUDA_EXACT_RB"
envset() { # $1: none | all | -NAME (all but NAME)
  local e=() s
  for s in $SW; do
    case $1 in none) e+=("$s=0") ;; all) e+=("$s=1") ;; *) [ "-$s" = "$1" ] && e+=("$s=0") || e+=("$s=1") ;; esac
  done
  echo "${e[@]}"
}
if has b; then
  wait $SPID; say "synth done at +$(el)s"
  k=0
  for v in none all none all -CLOVER_CUDA_Q8_ROWS32 -CLOVER_CUDA_ATTN_FEW -CLOVER_CUDA_MOE_PERSIST -CLOVER_CUDA_GDN_HEAD_ONCE \
           -CLOVER_CUDA_ROUTE_FAST -CLOVER_CUDA_EXACT_RB; do
    k=$((k + 1))
    [ "$(el)" -lt 380 ] || { say "preview $v: no time left"; break; }
    env $(envset $v) timeout 60 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_$k.log" 2>&1
    say "== bench_cuda_preview --reps 3, $v rc=$? at +$(el)s"
    grep -E "^(preview|commit|block)" "$O/preview_$k.log" | cut -c1-120 | tee -a "$S"
  done
  for v in none all; do
    [ "$(el)" -lt 450 ] || break
    env $(envset $v) timeout 60 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/backend_$v.log" 2>&1
    say "== bench_cuda_backend --prompt-only 1, $v rc=$?"
    grep -E "prompt of|chunk commit" "$O/backend_$v.log" | cut -c1-150 | tee -a "$S"
  done
  for v in none all; do
    [ "$(el)" -lt 500 ] || break
    env $(envset $v) timeout 80 "$D/bin/bench_batch" $F --device cuda --mode diffusion --prompt 32 --gen 64 --n 1,16 \
      > "$O/batch_$v.log" 2>&1
    say "== bench_batch diffusion N=1,16, $v rc=$?"
    tail -3 "$O/batch_$v.log" | cut -c1-150 | tee -a "$S"
  done
fi
if has v; then
  for n in test_cuda_attention test_cuda_ops test_cuda_backend test_cuda_preview test_cuda_batch test_cuda_engine; do
    tst $n defaults 200
  done
  tst test_cuda_matmul q8r 120 CLOVER_TEST_ONLY=test_q8_rows32
  wait $SPID
  timeout 60 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/v_preview.log" 2>&1
  say "== v: bench_cuda_preview --reps 3, the defaults rc=$?"
  grep -E "^(preview 32 rows, first pass, coreset|commit|block)" "$O/v_preview.log" | cut -c1-100 | tee -a "$S"
fi
if has c; then
  wait $SPID
  one() { # $1 label, rest: switches set to 1 (the other five 0)
    local lab=$1 e=() s; shift
    for s in $SW; do e+=("$s=0"); done
    for s in "$@"; do e+=("$s=1"); done
    echo "${e[@]}"
  }
  k=0
  for v in none few few+route few+persist none few; do
    k=$((k + 1)); [ "$(el)" -lt 450 ] || break
    case $v in
      none) E=$(one none) ;; few) E=$(one few CLOVER_CUDA_ATTN_FEW) ;;
      few+route) E=$(one x CLOVER_CUDA_ATTN_FEW CLOVER_CUDA_ROUTE_FAST) ;;
      few+persist) E=$(one x CLOVER_CUDA_ATTN_FEW CLOVER_CUDA_MOE_PERSIST) ;;
    esac
    env $E timeout 60 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/c_preview_$k.log" 2>&1
    say "== c: bench_cuda_preview --reps 3, $v rc=$?"
    grep -E "^(preview 32 rows, first pass, coreset|commit|block)" "$O/c_preview_$k.log" | cut -c1-100 | tee -a "$S"
  done
  k=0
  for v in none rb none rb; do
    k=$((k + 1)); [ "$(el)" -lt 480 ] || break
    E=$(one x); [ $v = rb ] && E=$(one x CLOVER_CUDA_EXACT_RB)
    env $E timeout 60 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/c_backend_$k.log" 2>&1
    say "== c: bench_cuda_backend --prompt-only 1, $v rc=$?"
    grep -E "prompt of 512|chunk commit" "$O/c_backend_$k.log" | cut -c1-110 | tee -a "$S"
  done
  for v in none once rb few none; do
    [ "$(el)" -lt 520 ] || break
    case $v in
      none) E=$(one x) ;; once) E=$(one x CLOVER_CUDA_GDN_HEAD_ONCE) ;; rb) E=$(one x CLOVER_CUDA_EXACT_RB) ;;
      few) E=$(one x CLOVER_CUDA_ATTN_FEW) ;;
    esac
    env $E timeout 60 "$D/bin/bench_batch" $F --device cuda --mode diffusion --prompt 32 --gen 64 --n 16 \
      > "$O/c_batch_$v.log" 2>&1
    say "== c: bench_batch diffusion N=16, $v rc=$?: $(tail -1 "$O/c_batch_$v.log" | cut -c1-120)"
  done
  dr_synth35 --no-diffusion; wait $SPID
  k=0
  for v in none route none route; do
    k=$((k + 1)); [ "$(el)" -lt 560 ] || break
    E=$(one x); [ $v = route ] && E=$(one x CLOVER_CUDA_ROUTE_FAST)
    env $E timeout 60 "$D/bin/bench_cuda_backend" $F > "$O/c_decode_$k.log" 2>&1
    say "== c: bench_cuda_backend (decode), $v rc=$?: $(grep -E '^decode' "$O/c_decode_$k.log" | head -1 | cut -c1-110)"
  done
fi
dr_end
