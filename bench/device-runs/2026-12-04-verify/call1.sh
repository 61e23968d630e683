#!/usr/bin/env bash
# Session 2026-12-03 (second), device call 1: issue 24 + 25 verification in one cold start.
#   run(command="bash bench/device-runs/2026-12-04-verify/call1.sh", carry=[".gpu-trial",".gpu-gemm2"], timeout_s=600)
# 1. .gpu-trial/run.sh: the trial merge gemm2+batch (e3cc79b), 8 CUDA test programs (~1 min).
#    Prediction: all pass (each branch's own tests; no file changed by both but tests/test.h).
# 2. gemm2 pack (f236844) run3 STEPS='l e': per-kernel before/after and the 35B-A3B end to end.
#    Predictions (run3's header): preview first pass with coreset 22.7 -> ~12 ms, commit 25.2 -> ~16 ms;
#    router f32 ~30 -> ~8 us, dense q8_0 qkv at 32 rows ~22 -> ~11 us.
# 3. gemm2 run3 STEPS='m r': compute-sanitizer memcheck + racecheck (cut by the call's limit if slow).
#    Prediction: 0 errors, 0 hazards.
set -uo pipefail
R=${OUT:-/tmp/out}
OUT=$R/trial bash .gpu-trial/run.sh
OUT=$R/gemm2-le PACK=.gpu-gemm2 STEPS='l e' bash .gpu-gemm2/run3.sh
OUT=$R/gemm2-mr PACK=.gpu-gemm2 STEPS='m r' bash .gpu-gemm2/run3.sh
