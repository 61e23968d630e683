#!/usr/bin/env bash
# lossless-gpu.sh DIR: issue 18's GPU figure, for the one final device call.
# Lossless block diffusion vs --ar vs lossy on the CUDA backend, on the
# step-1000 demo model of issue 16, with its held-out prompts (chat
# template, thinking off, greedy, each answer to its stop or 96 tokens),
# at the record's threshold (0.9) and 0.5, 0.3, 0.1; bench_lossless checks
# that lossless == --ar on every prompt (up to near-tie flips: a first
# difference only where --ar's top-2 log-probability gap is <= --bound;
# anything else is "NO" and exit 1). Then the same on the host's CPU (16
# cores) for the CPU/GPU comparison, fewer thresholds.
#
# DIR (made on the dev box):
#   scripts/gpu-pack.sh build-cuda DIR        # bin/ (bench_lossless, clover, ...) and lib/
#   cp /work/cache/demo-step1000.gguf tools/train/heldout_prompts.json DIR/
# On the device: bench/device-runs/lossless-gpu.sh DIR   (writes $OUT/lossless-*.txt when $OUT is set)
# Every command is under timeout; about 15-25 s of work on an H200 (the demo
# model is 18M parameters: each pass is launch-bound, ~1-3 ms).
# Tested on the dev VM's CPU path: DEVICE=cpu TIMEOUT=600 N_PROMPTS=2 (the 2 loaded cores
# there need minutes; bench/RESULTS.md).
set -uo pipefail
D=${1:?usage: lossless-gpu.sh DIR (bin/bench_lossless, lib/, demo-step1000.gguf, heldout_prompts.json)}
B=$D/bin/bench_lossless
M=${MODEL:-$D/demo-step1000.gguf}
PR=${PROMPTS:-$D/heldout_prompts.json}
DEV=${DEVICE:-cuda}
O=${OUT:-/tmp}
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for f in "$B" "$M" "$PR"; do
  [ -e "$f" ] || { echo "lossless-gpu.sh: $f is missing" >&2; exit 2; }
done
rc=0
echo "start $(date -u +%T)"
command -v nvidia-smi > /dev/null && timeout 10 nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
COMMON=(--prompts "$PR" --n-prompts "${N_PROMPTS:-6}" --chat --no-think --stop-at-eos --gen 96)
echo "== bench_lossless --device $DEV $(date -u +%T)"
timeout "${TIMEOUT:-60}" "$B" "$M" --device "$DEV" "${COMMON[@]}" --threshold -1,0.5,0.3,0.1 2>&1 | tee "$O/lossless-$DEV.txt"
r=${PIPESTATUS[0]}; echo "rc $r"; [ "$r" = 0 ] || rc=1
if [ "$DEV" != cpu ] && [ "${CPU_TOO:-1}" = 1 ]; then
  echo "== bench_lossless --device cpu $(date -u +%T)"
  timeout "${TIMEOUT_CPU:-45}" "$B" "$M" --device cpu "${COMMON[@]}" --threshold 0.3,0.1 2>&1 | tee "$O/lossless-cpu.txt"
  r=${PIPESTATUS[0]}; echo "rc $r"; [ "$r" = 0 ] || rc=1
fi
echo "end $(date -u +%T) rc $rc"
exit $rc
