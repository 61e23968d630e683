#!/usr/bin/env bash
# Issue 25 (helper serve25, branch serve25): `clover serve --device cuda` with the step's overheads cut:
#  1. decode steps bring no logits back (the backend picks on the device and keeps the last row's logits in the
#     session, backend_ops.last_logits; only log-probability rows come back)   old: CLOVER_ENGINE_EAGER_LOGITS=1
#  2. one grouped pick launch set for every row of every sequence of a stacked pass (decode and previews)
#                                                                                old: CLOVER_CUDA_PICK_EACH=1
#  3. one pinned transfer set per backend instead of one per session (64 MB each) old: CLOVER_CUDA_OWN_PINNED=1
#  4. bench_batch prints the step split (pass / pick / host ms per step)
# Run from the source root on the device (pack: .gpu-serve25/pack.txz, made on the dev VM by scripts/gpu-pack.sh,
# stripped; the fixtures come from the source tree):
#   run(command="bash .gpu-serve25/run.sh", carry=[".gpu-serve25"], timeout_s=600)      ~3.5 min, <= 240 s
# STEPS (default "t s b"): t the CUDA tests, s the serve runs, b bench_batch's split.
# Outputs: $OUT/summary.txt (printed at the end) and $OUT/logs.tgz.
# Before = bench/device-runs/2026-12-04-verify/RESULTS.md (call 2, main b30f7e7 + batch): AR 16 x 64 sequential
# 148.7 tok/s, concurrent 426.0 (2.86x); block diffusion 8 x 32 sequential 35.8, concurrent 65.2 (1.82x).
# Predictions (dev VM, before the run):
#  t  test_cuda_batch (batches 1..32 = alone; new path = old switches = alone incl. sampled --ar and --ar with
#     logprobs), test_cuda_engine (continue from kept logits = eager; kept logits = returned ones),
#     test_cuda_backend, test_cuda_preview: all pass.
#  s  AR 16 x 64: sequential ~155 tok/s (new) / ~150 (old); concurrent 450-520 (new) / ~430 (old); ratio
#     2.9-3.4x new (bar 8x: not reached; the 16-row pass itself is most of the step, see b); answers identical
#     (concurrent = sequential, new = old).
#     Diffusion 8 x 32: sequential ~36, concurrent ~65-72, ratio 1.8-2.0x (bar 4x), identical.
#  b  bench_batch (prompt 32, gen 32) split per step: AR N=1 pass ~6 ms, pick <0.1 ms, host <0.3 ms; AR N=16
#     pass 25-35 ms, pick ~0.1 ms (one grouped launch), host ~1 ms; diffusion N=16 pass >> pick, host < 5%.
set -uo pipefail
H=$(cd "$(dirname "$0")" && pwd)
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/serve25-logs; rm -rf $O; mkdir -p $O
P=/tmp/clover-pack-serve25; mkdir -p "$P"
if [ -f "$H/pack.txz" ]; then tar xJf "$H/pack.txz" -C "$P" || exit 2; else P=$H; fi
export LD_LIBRARY_PATH=$P/lib CLOVER_SOURCE_DIR=$PWD
STEPS=${STEPS:-t s b}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt; : > "$S"
say() { echo "$*" | tee -a "$S"; }
T0=$(date +%s)
say "start $(date -u +%T) steps: $STEPS pack $(cat "$H/COMMIT" 2>/dev/null)"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
AR=/tmp/synth35-ar.gguf CL=/tmp/synth35-clover.gguf
syn() { [ -s "$1" ] || { timeout 150 "$P/bin/clover" synth --preset qwen3.5-35b-a3b ${2:-} -o "$1.part" \
    > "$O/synth-$(basename "$1").log" 2>&1 && mv "$1.part" "$1"; }; }
sp=""
if has s || has b; then ( syn $AR --no-diffusion & syn $CL; wait ) & sp=$!; fi
if has t; then
  for n in test_cuda_batch test_cuda_engine test_cuda_backend test_cuda_preview; do
    t0=$(date +%s); lim=45; [ $n = test_cuda_batch ] && lim=100
    timeout $lim "$P/bin/$n" > "$O/$n.log" 2>&1; rc=$?
    say "$n rc=$rc $(( $(date +%s) - t0 ))s $(tail -1 "$O/$n.log")   (predicted: pass)"
    [ $rc = 0 ] || grep -m6 -E "FAIL|differ|CHECK failed" "$O/$n.log" | tee -a "$S"
  done
fi
# serve KIND LABEL N TOKENS [ENV...]: one server, the client's sequential then concurrent requests
serve() {
  local kind=$1 label=$2 n=$3 tok=$4; shift 4
  local M=$AR; [ $kind = clover ] && M=$CL
  [ -s "$M" ] || { say "serve $kind $label: no model (synth: $(tail -1 $O/synth-*.log 2>/dev/null))"; return; }
  local log=$O/serve-$kind-$label.log
  env "$@" "$P/bin/clover" serve -m "$M" --device cuda --port 0 --max-batch 16 --sessions 1 --ctx 1024 > "$log" 2>&1 &
  local pid=$! port=""
  for _ in $(seq 1 240); do
    port=$(grep -o 'listening on http://[^:]*:[0-9]*' "$log" | grep -o '[0-9]*$')
    [ -n "$port" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.25
  done
  if [ -z "$port" ]; then say "serve $kind $label: did not start: $(tail -2 "$log")"; kill $pid 2>/dev/null; return; fi
  grep -m1 'on the .* backend' "$log" | sed "s/^/  $label: /" | tee -a "$S"
  local r; r=$(timeout 100 python3 "$H/serve_load.py" "$port" $n $tok "$O/serve-$kind-$label.json" 2>&1)
  say "serve $kind $label ($n x $tok): $r"
  kill -TERM $pid; wait $pid 2>/dev/null
}
if has s || has b; then
  while [ ! -s $AR ] && kill -0 $sp 2>/dev/null; do sleep 1; done
  say "AR file ready at +$(( $(date +%s) - T0 ))s"
fi
if has s; then
  serve ar new 16 64
  say "  (predicted new: sequential ~155, concurrent 450-520 tok/s, ratio 2.9-3.4x, identical; bar 8x)"
  serve ar old 16 64 CLOVER_ENGINE_EAGER_LOGITS=1 CLOVER_CUDA_PICK_EACH=1 CLOVER_CUDA_OWN_PINNED=1
  say "  (predicted old: ~150 / ~430 tok/s, 2.86x as measured before)"
  [ -s $O/serve-ar-new.json ] && [ -s $O/serve-ar-old.json ] &&
    say "serve ar: $(python3 "$H/compare.py" $O/serve-ar-new.json $O/serve-ar-old.json)   (predicted: 16/16)"
  wait $sp
  serve clover new 8 32
  say "  (predicted new: sequential ~36, concurrent 65-72 tok/s, ratio 1.8-2.0x, identical; bar 4x)"
  serve clover old 8 32 CLOVER_ENGINE_EAGER_LOGITS=1 CLOVER_CUDA_PICK_EACH=1 CLOVER_CUDA_OWN_PINNED=1
  [ -s $O/serve-clover-new.json ] && [ -s $O/serve-clover-old.json ] &&
    say "serve clover: $(python3 "$H/compare.py" $O/serve-clover-new.json $O/serve-clover-old.json)   (predicted: 8/8)"
fi
if has b; then
  wait $sp
  left=$(( 235 - ($(date +%s) - T0) )); [ $left -lt 20 ] && left=20
  timeout $left "$P/bin/bench_batch" $CL --device cuda --n 1,16 --prompt 32 --gen 32 > "$O/bench_batch.log" 2>&1
  say "bench_batch rc=$? (split per step; predicted AR N=16: pass 25-35 ms, pick ~0.1, host ~1; N=1: pass ~6)"
  grep -vE "^$" "$O/bench_batch.log" | tee -a "$S"
fi
say "end $(date -u +%T), $(( $(date +%s) - T0 ))s"
(cd "$O" && tar czf "$R/logs.tgz" .)
cat "$S" > /dev/null
