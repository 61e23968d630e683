#!/usr/bin/env bash
# llama-src.sh OUT.txz : llama.cpp's source for the peer's llama-bench, cut to what llama-bench needs, as one
# .txz (~2.3 MB) that a device call carries and builds there (bench/device-runs/2026-12-07-mmvs/run.sh builds
# it for CUDA in ~5 min, 2026-12-06-amx2/run.sh for the CPU in ~2 min). The source is PyPI llama-cpp-python
# 0.3.36's sdist (its vendor/llama.cpp), fetched with pip here; nothing of it is kept in this repository.
#   scripts/llama-src.sh .gpu-NAME/llama-src.txz
set -euo pipefail
out=${1:?usage: llama-src.sh OUT.txz}
case "$out" in /*) ;; *) out=$PWD/$out ;; esac
ver=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pip download --quiet "llama-cpp-python==$ver" --no-deps --no-binary :all: --no-build-isolation -d "$tmp" 2>/dev/null ||
  pip download --quiet "llama-cpp-python==$ver" --no-deps --no-binary :all: -d "$tmp"
tar xzf "$tmp"/llama_cpp_python-"$ver".tar.gz -C "$tmp"
src=$tmp/llama_cpp_python-$ver/vendor/llama.cpp d=$tmp/strip/llama.cpp
mkdir -p "$d/ggml/src" "$d/tools"
for f in CMakeLists.txt cmake include src common vendor licenses; do [ -e "$src/$f" ] && cp -r "$src/$f" "$d/"; done
cp -r "$src/ggml/CMakeLists.txt" "$src/ggml/cmake" "$src/ggml/include" "$d/ggml/"
cp "$src"/ggml/src/*.* "$d/ggml/src/"
cp -r "$src/ggml/src/ggml-cpu" "$src/ggml/src/ggml-cuda" "$d/ggml/src/"
cp -r "$src/tools/llama-bench" "$d/tools/"
echo 'add_subdirectory(llama-bench)' > "$d/tools/CMakeLists.txt" # only llama-bench of tools/
tar -C "$tmp/strip" -cf - llama.cpp | xz -6 -T2 > "$out"
echo "llama-src: $out ($(du -h "$out" | cut -f1)), llama.cpp of llama-cpp-python $ver"
