#!/usr/bin/env bash
# w15 (issue 15), NOT RUN YET: the GPU side of the failover and `clover check`.
# Usage: 2026-12-01-offload-failover.sh BIN_DIR   (BIN_DIR holds a CUDA build's `clover`,
# e.g. a scripts/gpu-pack.sh pack's bin/, with its lib/ beside it); writes to $OUT (or /tmp).
# About 20-40 s of work on an H200, every command under `timeout`. It proves:
#  1. check.txt: `clover check --device cuda` on the embedded tiny model runs and prints the
#     per-layer errors of the CUDA backend against the CPU (expected ~1e-7..1e-5, "ok");
#  2. run-*.txt: the same greedy request on the CUDA device with faults injected at load,
#     mid prompt, the first block commit and the second resolve, once and dead, gives the tokens
#     of the uninjected --device cuda run (the session moves to the CPU: same tokens wherever the
#     margins exceed the CUDA-CPU difference; on the tiny model they should all agree), each with
#     exactly one warning; summary.txt lists per case: rc, warnings, tokens equal or not.
set -u -o pipefail
B=${1:?usage: $0 BIN_DIR}
O=${OUT:-/tmp/w15-offload}; mkdir -p "$O"
export LD_LIBRARY_PATH="$B/../lib:${LD_LIBRARY_PATH:-}"
C="$B/clover"
timeout 60 "$C" check --device cuda --blocks 3 > "$O/check.txt" 2>&1; echo "check rc=$?" | tee "$O/summary.txt"
ARGS=(run --device cuda --raw -p "Write a short poem about the sea." --max-tokens 100 --ignore-eos --json --no-visual)
timeout 60 "$C" "${ARGS[@]}" > "$O/run-plain.json" 2> "$O/run-plain.err"; echo "plain rc=$?" | tee -a "$O/summary.txt"
ref=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ids'])" "$O/run-plain.json" 2>/dev/null)
for f in load:1 commit:1 commit:2 commit:2:dead preview:2 preview:2:dead call:3:dead; do
  n=${f//:/_}
  CLOVER_FAULT_INJECT=$f timeout 60 "$C" "${ARGS[@]}" > "$O/run-$n.json" 2> "$O/run-$n.err"; rc=$?
  got=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ids'])" "$O/run-$n.json" 2>/dev/null)
  w=$(grep -c "warning:" "$O/run-$n.err")
  echo "$f rc=$rc warnings=$w tokens_equal=$([ "$got" = "$ref" ] && [ -n "$ref" ] && echo yes || echo no)" | tee -a "$O/summary.txt"
done
