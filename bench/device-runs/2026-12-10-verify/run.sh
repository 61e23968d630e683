#!/usr/bin/env bash
# 2026-12-10 verify, call 1 (session of 2026-12-04 04:34 UTC): the three merged-but-unrun items in one call.
#   EXTRA_BINS="test_causal_rule" scripts/device-packs.sh build verify
#   run(command="bash .gpu-verify/run.sh", carry=[".gpu-verify"], timeout_s=560)
#  1. mmv25's run script (stream form of dense Q8_0 products at 9..32 rows, switch CLOVER_CUDA_MMV_STREAM32;
#     its predictions are in its header: bench/device-runs/2026-12-09-mmv25/run.sh)
#  2. test_cuda_gpumem with no switch at all (--gpu-mem on by default since 9e6b869) [predicted rc 0, 4 passed]
#  3. rule26's run script (the causal-fallback rule on CUDA; predictions in 2026-12-09-rule26/run.sh)
set -uo pipefail
R=${OUT:-/tmp/out}; mkdir -p "$R"
here=$(cd "$(dirname "$0")" && pwd)
T0=$(date +%s)
echo "verify start $(date -u +%T), pack $(cat "$here/COMMIT" 2>/dev/null)" | tee "$R/summary.txt"
mkdir -p "$R/mmv25" "$R/rule26"
OUT=$R/mmv25 PACK=$here timeout 330 bash bench/device-runs/2026-12-09-mmv25/run.sh > "$R/mmv25/stdout.txt" 2>&1
echo "mmv25 rc=$? at +$(( $(date +%s) - T0 ))s" | tee -a "$R/summary.txt"
D=/tmp/mmv25 # mmv25's unpacked binaries
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD
timeout 90 "$D/bin/test_cuda_gpumem" > "$R/gpumem.log" 2>&1
echo "test_cuda_gpumem (no switch) rc=$? [predicted rc 0, 4 passed]: $(tail -1 "$R/gpumem.log")" | tee -a "$R/summary.txt"
OUT=$R/rule26 PACK=$here timeout 150 bash bench/device-runs/2026-12-09-rule26/run.sh > "$R/rule26/stdout.txt" 2>&1
echo "rule26 rc=$? at +$(( $(date +%s) - T0 ))s" | tee -a "$R/summary.txt"
cat "$R/mmv25/summary.txt" "$R/rule26/summary.txt" 2>/dev/null | tail -c 9000
