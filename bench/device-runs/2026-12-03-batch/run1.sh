#!/usr/bin/env bash
# batch (issue 25 step 3), device call 1: branch batch-untested 913bc0c (stacked decode:
# every one-row commit of a call is ONE pass on the backend's stacked executor, picks on
# the device). Steps: synth the 35B-A3B --no-diffusion file in the background, every
# test_cuda_* (test_cuda_batch now: batches 1..32 + 32 --ar requests, bit for bit = alone),
# then `clover serve --device cuda` AR only, 16 requests x 128 tokens, sequential vs concurrent.
# Predictions (before the run): every test passes (test_cuda_batch ~15 s);
# serve AR sequential ~140 tok/s (was 117.6 at 8x64: the device pick saves ~2 ms a token),
# 16 concurrent ~800-1000 tok/s (a 16-row step ~12-15 ms: the experts read grow ~12x with
# 16 rows, the dense weights once), ratio ~6-7x (bar 8x), answers identical.
set -uo pipefail
R=${OUT:-/tmp/out}; mkdir -p "$R"
P=/tmp/clover-pack; mkdir -p "$P"; tar xzf .gpu-batch/pack.tgz -C "$P" || exit 2
export LD_LIBRARY_PATH=$P/lib
( [ -s /tmp/synth35-ar.gguf ] || { timeout 300 "$P/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion \
    -o /tmp/synth35-ar.gguf.part > "$R/synth.log" 2>&1 && mv /tmp/synth35-ar.gguf.part /tmp/synth35-ar.gguf; } ) &
sp=$!
OUT=$R bash .gpu-batch/backend-run.sh .gpu-batch tests
wait $sp
OUT=$R SERVE_KINDS=ar SERVE_N=16 SERVE_TOKENS=128 bash .gpu-batch/backend-run.sh .gpu-batch serve
