#!/usr/bin/env bash
# llama-cuda-pack.sh OUT.txz : the peer's CUDA llama-bench built here (no GPU needed: CUDA 13.0's nvcc, sm_90a for
# the H100 / H200), packed as llama/ (llama-bench, its ggml / llama libraries, stripped) for a device call to
# carry (bench/device-runs/*/run.sh unpack it with `tar xJf llama.txz -C DIR` and run DIR/llama/llama-bench with
# LD_LIBRARY_PATH=DIR/llama:/usr/local/cuda/lib64). The source is PyPI llama-cpp-python's sdist, cut by
# scripts/llama-src.sh; nothing of it is kept in this repository. libcuda is the device's: linked with
# --allow-shlib-undefined, since this machine has the toolkit but no driver. ~50-70 min on the 2-core dev VM
# (nice it beside other work); ~40 MB.
#   scripts/llama-cuda-pack.sh /tmp/llama.txz
set -euo pipefail
out=${1:?usage: llama-cuda-pack.sh OUT.txz}
case "$out" in /*) ;; *) out=$PWD/$out ;; esac
here=$(cd "$(dirname "$0")" && pwd)
work=${LLAMA_WORK:-/tmp/llama-cuda}
mkdir -p "$work"
[ -s "$work/src.txz" ] || "$here/llama-src.sh" "$work/src.txz"
[ -d "$work/llama.cpp" ] || tar xJf "$work/src.txz" -C "$work"
cmake -S "$work/llama.cpp" -B "$work/b" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_NATIVE=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined \
  -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--allow-shlib-undefined > "$work/configure.log" 2>&1
cmake --build "$work/b" --target llama-bench -j"${JOBS:-2}" > "$work/build.log" 2>&1
rm -rf "$work/pack" && mkdir -p "$work/pack/llama"
cp "$work/b/bin/llama-bench" "$work/pack/llama/"
find "$work/b" -name '*.so*' -exec cp -a {} "$work/pack/llama/" \;
strip "$work/pack/llama/llama-bench" "$work/pack/llama/"*.so* 2> /dev/null || true
tar -C "$work/pack" -cf - llama | xz -6 -T2 > "$out"
echo "llama-cuda-pack: $out ($(du -h "$out" | cut -f1))"
