#!/usr/bin/env bash
# gpu-test.sh PACK_DIR [OUT_DIR]: every CUDA test and benchmark in one run on
# the GPU machine, building nothing (scripts/gpu-pack.sh made PACK_DIR on the
# build machine). Run from the source root (the fixtures live there). Each
# test's output goes to OUT_DIR/tests.log; a test passes, fails, or skips
# (exit 77: no device) and is counted as such, never a skip as a pass.
# Environment: GPU_TEST_BENCH=0 skips the benchmarks; GPU_TEST_MODEL=FILE
# adds bench_cuda_backend on that model; GPU_TEST_SYNTH=1 first makes it
# (clover synth --preset qwen3.5-35b-a3b --no-diffusion, about a minute).
# GPU_TEST_PREVIEW_MODEL=FILE adds bench_cuda_preview on that Clover file (GPU_TEST_SYNTH=1: made
# first by clover synth --preset qwen3.5-35b-a3b, with the block-diffusion record).
# GPU_TEST_ONLY=REGEX runs only the tests whose name matches.
set -uo pipefail
pack=${1:?usage: gpu-test.sh PACK_DIR [OUT_DIR]}
out=${2:-${OUT:-.}}
mkdir -p "$out"
export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CLOVER_SOURCE_DIR=${CLOVER_SOURCE_DIR:-$PWD}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$out/gpu.txt"
pass=0 fail=0 skip=0
for t in "$pack"/bin/test_cuda_*; do
  name=$(basename "$t")
  [[ -n "${GPU_TEST_ONLY:-}" && ! "$name" =~ ${GPU_TEST_ONLY} ]] && continue
  echo "== $name" | tee -a "$out/tests.log"
  start=$(date +%s%N)
  timeout 300 "$t" >>"$out/tests.log" 2>&1
  rc=$?
  secs=$(( ($(date +%s%N) - start) / 1000000 ))ms
  case $rc in
    0) pass=$((pass + 1)); verdict=PASS ;;
    77) skip=$((skip + 1)); verdict=SKIP ;;
    *) fail=$((fail + 1)); verdict="FAIL (exit $rc)" ;;
  esac
  echo "$verdict $name $secs" | tee -a "$out/tests.log" "$out/summary.txt"
done
echo "tests: $pass passed, $fail failed, $skip skipped" | tee -a "$out/summary.txt"
if [ "${GPU_TEST_BENCH:-1}" != 0 ]; then
  for b in "$pack"/bin/bench_cuda_*; do
    [ -x "$b" ] || continue
    case "$(basename "$b")" in bench_cuda_backend|bench_cuda_preview) continue ;; esac # need a model: below
    echo "== $(basename "$b")" | tee -a "$out/bench.log"
    timeout 300 "$b" 2>&1 | tee -a "$out/bench.log"
  done
  if [ -n "${GPU_TEST_MODEL:-}" ]; then
    if [ "${GPU_TEST_SYNTH:-0}" = 1 ] && [ ! -s "$GPU_TEST_MODEL" ]; then
      echo "== clover synth --preset qwen3.5-35b-a3b --no-diffusion" | tee -a "$out/bench.log"
      /usr/bin/time -f "synth %e s" "$pack/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion \
        -o "$GPU_TEST_MODEL" 2>&1 | tail -3 | tee -a "$out/bench.log"
    fi
    echo "== bench_cuda_backend $GPU_TEST_MODEL" | tee -a "$out/bench.log"
    timeout 400 "$pack/bin/bench_cuda_backend" "$GPU_TEST_MODEL" ${GPU_TEST_BENCH_ARGS:-} 2>&1 | tee -a "$out/bench.log"
  fi
  if [ -n "${GPU_TEST_PREVIEW_MODEL:-}" ]; then
    if [ "${GPU_TEST_SYNTH:-0}" = 1 ] && [ ! -s "$GPU_TEST_PREVIEW_MODEL" ]; then
      echo "== clover synth --preset qwen3.5-35b-a3b" | tee -a "$out/bench.log"
      "$pack/bin/clover" synth --preset qwen3.5-35b-a3b -o "$GPU_TEST_PREVIEW_MODEL" 2>&1 | tail -3 | tee -a "$out/bench.log"
    fi
    echo "== bench_cuda_preview $GPU_TEST_PREVIEW_MODEL" | tee -a "$out/bench.log"
    timeout 400 "$pack/bin/bench_cuda_preview" "$GPU_TEST_PREVIEW_MODEL" 2>&1 | tee -a "$out/bench.log"
  fi
fi
[ "$fail" = 0 ]
