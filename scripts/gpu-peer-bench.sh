#!/usr/bin/env bash
# Same-run peer: llama.cpp's llama-bench (CUDA, sm_90a) and clover's bench_cuda_backend on one 35B-A3B synthetic file.
# Run on the GPU machine with $OUT set. PACKDIR holds clover and bench_cuda_backend (scripts/gpu-pack.sh),
# their lib/, and llama.tar.xz: llama.cpp's source from PyPI's llama-cpp-python 0.3.36 sdist (vendor/llama.cpp:
# CMakeLists.txt cmake ggml src include common tools vendor, without the non-CUDA ggml backends), never committed.
set -o pipefail
P=${1:?usage: gpu-peer-bench.sh PACKDIR (clover, bench_cuda_backend, lib/, llama.tar.xz of llama.cpp source)}; P=$(cd "$P" && pwd)
export LD_LIBRARY_PATH=$P/lib PYTHONUNBUFFERED=1
L=$OUT/log
echo "start $(date -u +%T)" | tee $L
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv | tee -a $L
mkdir -p /tmp/llama && tar xJf $P/llama.tar.xz -C /tmp/llama
( cd /tmp/llama && cmake -S . -B b -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DCMAKE_BUILD_TYPE=Release > /tmp/llama_cfg.log 2>&1 && timeout 430 cmake --build b --target llama-bench -j16 > /tmp/llama_build.log 2>&1; echo "llama build rc $? $(date -u +%T)" >> $L ) &
BPID=$!
M=/tmp/synth35.gguf
echo "== synth $(date -u +%T)" | tee -a $L
timeout 150 $P/clover synth --preset qwen3.5-35b-a3b --no-diffusion -o $M 2>&1 | tail -2 | tee -a $L
wait $BPID
tail -3 /tmp/llama_build.log | tee -a $L; cp /tmp/llama_cfg.log /tmp/llama_build.log $OUT/ 2>/dev/null
LB=$(find /tmp/llama/b -name llama-bench -type f | head -1)
echo "== llama-bench $LB $(date -u +%T)" | tee -a $L
[ -x "$LB" ] && timeout 70 $LB -m $M -ngl 99 -fa 1 -p 512,32 -n 128 -r 2 2>&1 | tee $OUT/llama_bench.txt | tail -12 | tee -a $L
echo "== bench_cuda_backend (machine idle) $(date -u +%T)" | tee -a $L
timeout 150 $P/bench_cuda_backend $M 2>&1 | tee $OUT/clover_bench_idle.txt | tail -25 | tee -a $L
echo "end $(date -u +%T)" | tee -a $L
