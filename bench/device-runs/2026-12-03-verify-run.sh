#!/usr/bin/env bash
# 2026-12-03, call 1: merged main + branch kernels2 (decode's small kernels,
# never run on a GPU before) on the H200, before more GPU work builds on it.
#   PACK=.gpu-v1 bash bench/device-runs/2026-12-03-verify-run.sh
# Steps: every test_cuda_* (incl. test_cuda_batch and test_cuda_engine, never
# run on a device: the engine and the server on CUDA through src/backend/),
# memcheck of the kernels2 tests, the 35B-A3B end to end (bench_cuda_backend,
# bench_cuda_preview, clover run diffusion vs --ar), then `clover serve
# --device cuda` on both files, 8 requests sequential then concurrent.
# Predictions (before the run): every test passes, memcheck 0 errors; decode
# 168 -> ~185 tok/s (route/norm/attention launch fixes); preview ~23 ms,
# commit ~26 ms unchanged; run diffusion ~44 tok/s, --ar ~150 tok/s; serve:
# answers identical, concurrent ~= sequential (the backend still loops over
# sequences: ratio ~1.0x, the issue-25 bar is 8x / 4x).
set -uo pipefail
R=${OUT:-/tmp/out}; mkdir -p "$R"
export PACK=${PACK:-.gpu-v1}
OUT=$R/k MEMCHECK="test_cuda_ops test_cuda_attention" STEPS="t m e" bash bench/device-runs/2026-12-02-kernels-run.sh
ln -sf /tmp/q35.gguf /tmp/synth35-ar.gguf; ln -sf /tmp/q35d.gguf /tmp/synth35-clover.gguf
OUT=$R/serve SERVE_N=8 SERVE_TOKENS=64 bash bench/device-runs/2026-12-02-backend-run.sh "$PACK" serve
