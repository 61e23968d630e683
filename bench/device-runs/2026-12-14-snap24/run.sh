#!/usr/bin/env bash
# 2026-12-04 20:39 session, call 5 (issue 25): prompt snapshots in device memory ON by default now
# (CLOVER_CUDA_DEVICE_SNAPSHOT=0 = the host export / import), the failover keeping the copy's replay log.
#   cmake --build build -j2 && EXTRA_BINS=test_engine_snapshot scripts/device-packs.sh build snap24
#   run(command="bash .gpu-snap24/run.sh", carry=[".gpu-snap24"], timeout_s=600)
# STEPS (default "t s"):
#  t  test_engine_snapshot (the GPU picked: snapshots through device copies), test_cuda_batch / engine / backend
#  s  clover serve --device cuda (35B-A3B AR file), serve_load 16 x 64 twice with the default, once with
#     CLOVER_CUDA_DEVICE_SNAPSHOT=0 (the A/B), then 16 x 128 (the bar's length) with the default
# Predictions (before the run; call 4's old path: concurrent wall 2.04 s = backend 0.84 + snapshots 1.19, ratio 2.20x):
#  t: all pass.
#  s: default: snapshots ~0.01 s a round; concurrent ~0.9-1.0 s (~1,000-1,100 tok/s), sequential ~3.5 s (~290
#     tok/s): ratio ~3.5-4x, answers identical; =0: as call 4 (2.2x); 16 x 128: ~4-4.5x.
set -uo pipefail
PACK=${PACK:-.gpu-snap24}
STEPS=${STEPS:-t s}
. "$PACK/lib.sh"
dr_init snap24
dr_synth35 --no-diffusion
if has t; then
  tst test_engine_snapshot gpu 150
  for n in test_cuda_backend test_cuda_batch test_cuda_engine; do tst $n new 150; done
fi
serve_round() { # ENV-ASSIGNMENTS N TOKENS ROUNDS TAG
  local envs=$1 n=$2 tok=$3 rounds=$4 tag=$5 log=$O/serve-$5.log
  env $envs "$D/bin/clover" serve -m "$F" --device cuda --port 0 --max-batch 16 --sessions 1 --ctx 1024 > "$log" 2>&1 &
  local pid=$! port=""
  for _ in $(seq 1 240); do
    port=$(grep -o 'listening on http://[^:]*:[0-9]*' "$log" | grep -o '[0-9]*$')
    [ -n "$port" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.25
  done
  if [ -n "$port" ]; then
    for round in $(seq 1 $rounds); do
      [ "$(el)" -lt 500 ] || { say "serve $tag: no time for round $round"; break; }
      local r=$(timeout 120 python3 bench/device-runs/2026-12-14-serve25/serve_load.py "$port" $n $tok "$O/serve-$tag-$round.json" 2>&1)
      say "serve $tag${envs:+ ($envs)} round $round ($n x $tok):"; echo "$r" | tee -a "$S"
    done
  else say "serve $tag: did not start: $(tail -2 "$log")"; fi
  kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
}
if has s; then
  wait $SPID; say "synth done at +$(el)s"
  serve_round "" 16 64 2 default
  serve_round "CLOVER_CUDA_DEVICE_SNAPSHOT=0" 16 64 1 host
  serve_round "" 16 128 1 default128
fi
dr_end
