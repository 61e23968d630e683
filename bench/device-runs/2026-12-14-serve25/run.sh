#!/usr/bin/env bash
# 2026-12-14 serve25 (helper serve25, branch serve25; issue 25's serve bar): where the 16 concurrent AR requests'
# time goes on the H200, from the server's new step counters; the prompt chunks stacked (CLOVER_CUDA_STACK_CHUNKS=1)
# and the prompt snapshots kept in device memory (CLOVER_CUDA_DEVICE_SNAPSHOT=1), both off by default until this run.
#   cmake --build build -j2 && EXTRA_BINS=test_engine_snapshot scripts/device-packs.sh build serve25
#   run(command="bash .gpu-serve25/run.sh", carry=[".gpu-serve25"], timeout_s=600)        ~7-9 min
#   (STEPS=s for the serve rounds alone if the tests leave them no time)
# STEPS (default "t s"):
#  t  while the 35B file is made: test_cuda_batch, test_cuda_engine, test_cuda_backend with
#     CLOVER_CUDA_STACK_CHUNKS=1 (a sequence alone = inside batches, bit for bit, now with the prompt chunks
#     stacked too); test_engine_snapshot (auto picks the GPU here: the snapshot through a session's device copy
#     must give what the committed prefix gives, bit for bit) with CLOVER_CUDA_DEVICE_SNAPSHOT=0 and =1; after
#     the serve rounds, if time is left, clover run --ar ids with the chunk switch on and off (a prompt alone:
#     the stacked pass of one against the one-sequence pass)
#  s  clover serve --device cuda on the 35B-A3B AR file, three servers (old: both switches off; chunks:
#     CLOVER_CUDA_STACK_CHUNKS=1; both: and CLOVER_CUDA_DEVICE_SNAPSHOT=1), each with serve_load (this folder:
#     2026-12-05-serve25's client plus the /metrics deltas of each phase) twice, 16 x 64 (round 1 makes the
#     sessions and takes the snapshots, round 2 reuses them), then both 16 x 128 (the bar's length); the answers
#     of each new server against the old one (compare.py of 2026-12-05-serve25)
# What the dev VM showed (2 cores, CPU backend, synthetic AR model hidden 512 x 8 layers, 16 x 64, the same client):
#   concurrent: 65 steps, 15.75 sequences a step (histogram: 1 step each at 1, 2, 4, 8; the rest at 16), 1.05
#   model passes a step; wall 0.599 s = backend calls 0.589 + step host 0.003 + the rest of the scheduler 0.002
#   + idle 0.004: the scheduler stacks every running request into each step and waits on nothing. The ratio there
#   (3.2x) is the CPU backend's own 16-row pass against its 1-row pass. So on the H200 the loss is inside the
#   steps: (1) the CUDA backend stacks one-row commits only; each request's prompt chunks (a chat prompt of 74
#   ids: 61 to the snapshot point, then 13) run one sequence at a time (commit_one: a pass, a sync, a host pick
#   of a 1 MB logits row each) while the other 15 wait: ~32 passes before the first stacked decode step;
#   (2) the prompt snapshot (~63 MB of GDN state a request) copied to host memory on the scheduler thread
#   (export, round 1; import, round 2) between passes; (3) the stacked 16-row decode step itself, ~16 ms in the
#   engine (bench_batch) against ~3.6-4 ms for one row: at most ~4x however well the requests stack.
# Predictions (written before the run):
#  t  all pass; clover run --ar ids with the switch on = off (the same kernel choices: float products by the
#     chunk's own rows, integer products the same bits at any row count, GDN chunked, the head on the last row).
#     test_engine_snapshot has not run on a GPU before (auto picks it here): =0 and =1 give the same outcome
#     (predicted: pass; if its golden tolerance fails on the GPU, it fails alike at =0 and =1, and the shim part,
#     on the CPU, passes).
#  s  old, round 1: sequential 235-260 tok/s, concurrent 560-620, ratio 2.3-2.6x (final24 call 4: 2.48x);
#       concurrent split: ~66 steps, seqs/step ~15.5, passes ~95 (63 stacked decode + 32 prompt chunks: ~1.45 a
#       step, ~11 seqs a pass), backend 1.35-1.55 s of ~1.7 s wall, step host 0.1-0.35 s (snapshots most of it:
#       clover_snapshot_seconds_total 0.1-0.3 s), scheduler other < 0.03 s, idle < 0.05 s.
#     old, round 2 (snapshots restored: 1 prompt chunk of 13 + an import a request): passes ~79, ratio 2.0-2.5x.
#     new, round 1: passes ~66 (the 16 chunks of 61 rows in 2 stacked passes of 8 x 61 rows, the 16 tails in
#       one of 208 rows), backend -0.15..-0.3 s, concurrent 650-720 tok/s, ratio 2.7-3.0x; round 2 ~2.5-2.9x.
#     both (device snapshots too): clover_snapshot_seconds_total < 0.01 s a round (a 63 MiB device copy ~50 us,
#       against an export / import over the host link), step host < 0.03 s; round 1 ~+0.1-0.25 s faster than
#       chunks (ratio 2.9-3.3x), round 2 the most (the imports gone): 2.8-3.3x.
#     both 16 x 128: ratio 3.1-3.5x (the decode steps dominate: 127 x ~16 ms against 16 x 127 x ~3.8 ms).
#     answers: identical within each server (concurrent = sequential) and chunks = both = old, 16/16.
#     The bar (8x) is not reached: with the prompt work stacked, the ratio is bounded by the 16-row step / the
#     1-row step (~4x); the next work is that step (11.6 ms in bench_cuda_decode, ~16 ms in the engine).
set -uo pipefail
PACK=${PACK:-.gpu-serve25}
STEPS=${STEPS:-t s}
. "$PACK/lib.sh"
dr_init serve25
H=$(cd "$(dirname "$0")" && pwd)
CMP=bench/device-runs/2026-12-05-serve25/compare.py
SPID=
if has s || has t; then dr_synth35 --no-diffusion; fi
if has t; then # while the 35B file is made (CPU): the fixtures' tests on the GPU, test_cuda_batch beside the rest
  ( tst test_cuda_batch chunks 150 CLOVER_CUDA_STACK_CHUNKS=1 ) & TB=$!
  tst test_cuda_engine chunks 90 CLOVER_CUDA_STACK_CHUNKS=1
  tst test_cuda_backend chunks 90 CLOVER_CUDA_STACK_CHUNKS=1
  tst test_engine_snapshot hostsnap 60 CLOVER_CUDA_DEVICE_SNAPSHOT=0
  tst test_engine_snapshot devsnap 60 CLOVER_CUDA_DEVICE_SNAPSHOT=1
  wait $TB
fi
# serve LABEL ROUNDS... [-- ENV...]: one server, serve_load once per round ("16x64" ...), its lines and the split
serve() {
  local label=$1; shift
  local rounds=() envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do rounds+=("$1"); shift; done
  [ "${1:-}" = "--" ] && { shift; envs=("$@"); }
  local log=$O/serve-$label.log
  env "${envs[@]}" "$D/bin/clover" serve -m "$F" --device cuda --port 0 --max-batch 16 --sessions 1 --ctx 1024 \
    > "$log" 2>&1 &
  local pid=$! port=""
  for _ in $(seq 1 480); do
    port=$(grep -o 'listening on http://[^:]*:[0-9]*' "$log" | grep -o '[0-9]*$')
    [ -n "$port" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.25
  done
  if [ -z "$port" ]; then say "serve $label: did not start: $(tail -2 "$log")"; kill $pid 2>/dev/null; return; fi
  local k=0
  for r in "${rounds[@]}"; do
    k=$((k + 1))
    [ "$(el)" -lt 540 ] || { say "serve $label: no time for round $k ($r)"; break; }
    local res; res=$(timeout 120 python3 "$H/serve_load.py" "$port" ${r%x*} ${r#*x} "$O/serve-$label-$k.json" 2>&1)
    say "serve $label round $k ($r) at +$(el)s: $res"
  done
  kill -TERM $pid; wait $pid 2>/dev/null
}
if has s; then
  wait $SPID
  [ -s "$F" ] || { say "no model: $(tail -2 $O/synth.log)"; dr_end; exit 1; }
  say "AR file ready at +$(el)s"
  serve old 16x64 16x64 -- CLOVER_CUDA_STACK_CHUNKS=0 CLOVER_CUDA_DEVICE_SNAPSHOT=0
  serve chunks 16x64 16x64 -- CLOVER_CUDA_STACK_CHUNKS=1 CLOVER_CUDA_DEVICE_SNAPSHOT=0
  serve both 16x64 16x64 16x128 -- CLOVER_CUDA_STACK_CHUNKS=1 CLOVER_CUDA_DEVICE_SNAPSHOT=1
  for n in chunks both; do
    for k in 1 2; do
      [ -s $O/serve-$n-$k.json ] && [ -s $O/serve-old-$k.json ] &&
        say "$n round $k answers: $(python3 $CMP $O/serve-$n-$k.json $O/serve-old-$k.json)   (predicted: 16/16)"
    done
  done
fi
if has t; then # after the serve rounds, if time is left: a prompt alone, stacked or not
  if [ "$(el)" -lt 500 ] && [ -s "$F" ]; then
    for c in "off:CLOVER_CUDA_STACK_CHUNKS=0" "on:CLOVER_CUDA_STACK_CHUNKS=1"; do
      tag=${c%%:*} envs=${c#*:}
      env $envs timeout 45 "$D/bin/clover" run -m $F --device cuda --ids $(seq -s, 11 90) -n 48 --ignore-eos \
        --no-visual --ar > "$O/run_$tag.txt" 2> "$O/run_$tag.err"
    done
    a=$(grep "^ids:" "$O/run_off.txt" 2>/dev/null); b=$(grep "^ids:" "$O/run_on.txt" 2>/dev/null)
    if [ -n "$a" ] && [ "$a" = "$b" ]; then say "clover run --ar (80-id prompt): chunks stacked = not, same ids"
    else say "clover run --ar: stacked chunks DIFFER or failed: $(tail -2 "$O/run_on.err" | tr '\n' ' ')"; fi
  else say "clover run --ar on / off: no time left"; fi
fi
dr_end
