#!/usr/bin/env bash
# Session 2026-12-03 (second), device call 2: the demo model on CUDA, then issue 25's batch pack.
#   run(command="bash bench/device-runs/2026-12-04-verify/call2.sh", carry=[".gpu-main",".gpu-batch"], timeout_s=600)
# 1. demo-cuda-run.sh with .gpu-main (main 68389a7): predictions in its header (CUDA --ar ~300-600 tok/s,
#    diffusion ~1.5x that; CUDA text equals the CPU's on most prompts).
# 2. .gpu-batch/run.sh STEPS='s m' (b30f7e7; tests ran in call 1's trial merge): serve AR 16x64 and
#    diffusion 8x32 on the 35B-A3B files; then memcheck. Predictions in .gpu-batch/run.sh's header
#    (AR 16 concurrent 3-4.5x sequential, diffusion 1.5-2.5x, identical answers; memcheck 0 errors).
set -uo pipefail
R=${OUT:-/tmp/out}
OUT=$R/demo PACK=.gpu-main timeout 150 bash bench/device-runs/demo-cuda-run.sh
OUT=$R/batch STEPS='s m' bash .gpu-batch/run.sh
