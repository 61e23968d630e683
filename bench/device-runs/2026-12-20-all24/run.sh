#!/usr/bin/env bash
# Written in the 2026-12-05 07:04 session (issue 24; no device was lent that session: not run yet). The three forms
# prepared that session, together, after each has passed its own script (2026-12-20-q8rows24, -attnfew24, -route24):
# CLOVER_CUDA_Q8_ROWS32=1 (dense Q8_0 products of 1..32 rows, K split over a cluster), CLOVER_CUDA_ATTN_FEW=1 (the
# few-row attention for 2..64-row sequences), CLOVER_CUDA_ROUTE_FAST=1 (the routing's top-k by redux.sync, the
# fused router's one acq_rel atom). Whether they pass together and what the preview, the commit and block
# diffusion gain with all three, against none, in the same call.
#   cmake --build build -j2 && scripts/device-packs.sh build all24
#   run(command="bash .gpu-all24/run.sh", carry=[".gpu-all24"], timeout_s=600)
# STEPS (default "t b r"):
#  t  test_cuda_backend, test_cuda_preview, test_cuda_batch, test_cuda_engine with the three on
#  b  bench_cuda_preview --reps 3 none / all / none / all; bench_cuda_backend decode none / all
#  r  clover run ids none / all (diffusion and --ar)
# Predictions (before the run; none = this session's defaults: preview 9.1 ms, commit 14.8 ms, block diffusion ~103
# tok/s, decode (device pick) 353-363 tok/s):
#  t: all pass.
#  b: preview ~9.1 -> ~6.9-7.4 ms (dense products -1.2..-1.4, attention -0.9, routing -0.05); commit ~14.8 ->
#     ~13.0-13.6; block diffusion ~103 -> ~125-135 tok/s; decode +1-2% (the router's tail only).
#  r: --ar ids equal; diffusion ids equal or a late first difference (the attention's last bits differ with the few
#     form; the other two are the same bits).
set -uo pipefail
PACK=${PACK:-.gpu-all24}
STEPS=${STEPS:-t b r}
. "$PACK/lib.sh"
dr_init all24
ALL="CLOVER_CUDA_Q8_ROWS32=1 CLOVER_CUDA_ATTN_FEW=1 CLOVER_CUDA_ROUTE_FAST=1"
NONE="CLOVER_CUDA_Q8_ROWS32=0 CLOVER_CUDA_ATTN_FEW=0 CLOVER_CUDA_ROUTE_FAST=0"
CL=/tmp/synth35-clover.gguf
( [ -s $CL ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!
dr_synth35 --no-diffusion
if has t; then
  for n in test_cuda_backend test_cuda_preview test_cuda_batch test_cuda_engine; do tst $n all 240 $ALL; done
fi
if has b; then
  wait $CPID
  for c in none all none all; do
    [ "$(el)" -lt 420 ] || { say "bench_cuda_preview: no time left for $c"; break; }
    k=0; while [ -e "$O/preview_$c$k.log" ]; do k=$((k + 1)); done; L=$O/preview_$c$k.log
    if [ $c = all ]; then envs=$ALL; else envs=$NONE; fi
    env $envs timeout 120 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$L" 2>&1
    say "== bench_cuda_preview --reps 3, $c rc=$? at +$(el)s"
    grep -E "^(preview|commit|resolve|block)" "$L" | cut -c1-110 | tee -a "$S"
  done
  wait $SPID
  for c in none all; do
    [ "$(el)" -lt 500 ] || { say "bench_cuda_backend: no time left for $c"; break; }
    if [ $c = all ]; then envs=$ALL; else envs=$NONE; fi
    env $envs timeout 120 "$D/bin/bench_cuda_backend" $F > "$O/backend_$c.log" 2>&1
    say "== bench_cuda_backend (--no-diffusion file), $c rc=$? at +$(el)s"
    grep -E "decode|prompt of|chunk commit" "$O/backend_$c.log" | cut -c1-140 | tee -a "$S"
  done
fi
if has r; then
  wait $CPID; wait $SPID
  for m in diffusion ar; do
    for c in none all; do
      if [ $c = all ]; then envs=$ALL; else envs=$NONE; fi
      if [ $m = ar ]; then file=$F extra=--ar; else file=$CL extra=; fi
      env $envs timeout 60 "$D/bin/clover" run -m $file --device cuda $extra --ids $(seq -s, 11 40) -n 64 \
        --ignore-eos --no-visual --json > "$O/run_${m}_$c.json" 2> "$O/run_${m}_$c.err"
    done
    dr_ids_cmp "$O/run_${m}_none.json" "$O/run_${m}_all.json" "clover run $m, none / all"
  done
fi
dr_end
