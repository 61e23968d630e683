#!/usr/bin/env bash
# The session-3 device call (one H200, the project's last ~4.5 device minutes):
# issue 18's GPU figure first (lossless vs --ar vs lossy on the step-1000 demo
# model, lossless == --ar checked), then issue 15's failover / `clover check`
# on CUDA (bench/device-runs/2026-12-01-offload-failover.sh), then
# test_cuda_engine (every generation fixture through --device cuda) on this tree.
# PACK: a folder with pack.tgz (bin/ + lib/, stripped: clover, bench_lossless,
# test_cuda_engine and the .so files they need), demo-step1000.gguf and
# heldout_prompts.json. Every step under timeout; outputs go to $OUT as they come.
set -uo pipefail
PACK=${1:?usage: $0 PACK}
O=${OUT:-/tmp/final}; mkdir -p "$O"
D=/tmp/clover-pack; mkdir -p "$D"
tar xzf "$PACK/pack.tgz" -C "$D" && cp "$PACK/demo-step1000.gguf" "$PACK/heldout_prompts.json" "$D/" || exit 2
export LD_LIBRARY_PATH=$D/lib
echo "start $(date -u +%T)" | tee "$O/summary.txt"
timeout 10 nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$O/summary.txt"
OUT=$O TIMEOUT=50 TIMEOUT_CPU=25 N_PROMPTS=6 bash bench/device-runs/lossless-gpu.sh "$D" > "$O/lossless.log" 2>&1
echo "lossless-gpu rc=$? $(date -u +%T)" | tee -a "$O/summary.txt"
OUT=$O/failover timeout 45 bash bench/device-runs/2026-12-01-offload-failover.sh "$D/bin" > "$O/failover.log" 2>&1
echo "offload-failover rc=$? $(date -u +%T)" | tee -a "$O/summary.txt"
cat "$O/failover/summary.txt" >> "$O/summary.txt" 2>/dev/null
CLOVER_SOURCE_DIR=$PWD timeout 45 "$D/bin/test_cuda_engine" > "$O/test_cuda_engine.log" 2>&1
echo "test_cuda_engine rc=$? $(date -u +%T)" | tee -a "$O/summary.txt"
