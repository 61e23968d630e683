#!/usr/bin/env bash
# batch (issue 25 step 3), device call 2 (refused: no device time left; ready for a later call):
# branch batch-untested (e97b023 when written; 98df4b6 adds the alone path for single blocks):
#  - stacked decode: more than 8 rows take the integer chunk GEMM for Q8_0/K-quant weights
#    (one weight read; the same bits as the decode kernel by cuda_matmul.h's contract);
#  - a call's previews and block resolves as stacked passes (blocks side by side).
# Steps: synth both 35B-A3B files in the background (AR first); test_cuda_batch,
# test_cuda_preview, test_cuda_engine, test_cuda_backend (kernels unchanged: their tests
# passed in call 1); test_cuda_batch again with CLOVER_CUDA_NO_STACK_PREVIEW=1 only if it
# failed; serve AR 16 x 64 tokens; serve clover 8 x 32 tokens (budget: ~85 s of command).
# Predictions (before the run): the four tests pass; serve AR sequential ~175 tok/s,
# 16 concurrent ~700-900 tok/s (call 1: 353), ratio ~4-5x (bar 8x), identical;
# serve clover sequential ~40 tok/s, 8 concurrent ~80-100, ratio ~2-2.5x (bar 4x), identical.
set -uo pipefail
R=${OUT:-/tmp/out}; mkdir -p "$R"
P=/tmp/clover-pack; mkdir -p "$P"; tar xzf .gpu-batch/pack.tgz -C "$P" || exit 2
export LD_LIBRARY_PATH=$P/lib CLOVER_SOURCE_DIR=$PWD
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
syn() { [ -s "$1" ] || { timeout 200 "$P/bin/clover" synth --preset qwen3.5-35b-a3b ${2:-} -o "$1.part" \
    > "$R/synth-$(basename "$1").log" 2>&1 && mv "$1.part" "$1"; }; }
( syn /tmp/synth35-ar.gguf --no-diffusion; syn /tmp/synth35-clover.gguf ) &
sp=$!
say "start $(date -u +%T)"
for n in test_cuda_batch test_cuda_preview test_cuda_engine test_cuda_backend; do
  t0=$(date +%s); timeout 60 "$P/bin/$n" > "$R/$n.log" 2>&1; rc=$?
  say "$n rc=$rc $(( $(date +%s) - t0 ))s $(tail -1 "$R/$n.log")"
  if [ $n = test_cuda_batch ] && [ $rc != 0 ]; then
    grep -m5 FAIL "$R/$n.log" | tee -a "$S"
    CLOVER_CUDA_NO_STACK_PREVIEW=1 timeout 60 "$P/bin/$n" > "$R/$n-nopreview.log" 2>&1
    say "$n with CLOVER_CUDA_NO_STACK_PREVIEW=1 rc=$? $(tail -1 "$R/$n-nopreview.log")"
  fi
done
while [ ! -s /tmp/synth35-ar.gguf ] && kill -0 $sp 2>/dev/null; do sleep 1; done
OUT=$R SERVE_KINDS=ar SERVE_N=16 SERVE_TOKENS=64 bash .gpu-batch/backend-run.sh .gpu-batch serve
wait $sp
OUT=$R SERVE_KINDS=clover SERVE_N=8 SERVE_TOKENS=32 bash .gpu-batch/backend-run.sh .gpu-batch serve
say "end $(date -u +%T)"
