#!/usr/bin/env bash
# interop.sh: llama.cpp's numbers on clover-written files, recorded as the
# expected values that tests/python/test_interop_llamacpp.py checks in CI
# (which never builds llama.cpp).
#
#   scripts/interop.sh [BUILD_DIR]      # default build/ (needs build/clover)
#
# 1. fetches llama.cpp's source as PyPI's llama-cpp-python source
#    distribution ships it (pinned version) into a cache directory outside
#    the repository ($CLOVER_INTEROP_CACHE, default ~/.cache/clover-interop);
# 2. builds its CPU library and llama-perplexity there (AMX off: its AMX
#    kernels die with SIGILL on some hosts), and scripts/interop/llama_probe.c
#    (teacher-forced NLL and greedy ids through llama.h) against it;
# 3. has clover write the files of tests/interop/cases.json (the tiny synth,
#    converted fixtures, quantised ones) and rewrites
#    tests/interop/llamacpp_expected.json with llama.cpp's NLL, greedy ids
#    and perplexities on them.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
cache=${CLOVER_INTEROP_CACHE:-$HOME/.cache/clover-interop}
version=0.3.36
jobs=${JOBS:-2}
py=${PYTHON:-$here/.venv/bin/python}
[ -x "$py" ] || py=python3
[ -x "$build/clover" ] || { echo "interop.sh: $build/clover is not built" >&2; exit 1; }

mkdir -p "$cache"
src=$cache/llama_cpp_python-$version/vendor/llama.cpp
if [ ! -f "$src/CMakeLists.txt" ]; then
    (cd "$cache" && pip download --no-deps --no-binary :all: "llama-cpp-python==$version" -d . >/dev/null &&
        tar xzf "llama_cpp_python-$version.tar.gz")
fi
lb=$cache/build-$version
if [ ! -x "$lb/bin/llama-perplexity" ] || [ ! -f "$lb/src/libllama.a" ]; then
    cmake -S "$src" -B "$lb" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
        -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
    cmake --build "$lb" -j"$jobs" --target llama-perplexity >/dev/null
fi
probe=$lb/llama_probe
if [ ! -x "$probe" ] || [ "$here/scripts/interop/llama_probe.c" -nt "$probe" ]; then
    cc -O2 -c "$here/scripts/interop/llama_probe.c" -I"$src/include" -I"$src/ggml/include" -o "$lb/llama_probe.o"
    c++ "$lb/llama_probe.o" "$lb/src/libllama.a" "$lb/ggml/src/libggml.a" "$lb/ggml/src/libggml-cpu.a" \
        "$lb/ggml/src/libggml-base.a" -fopenmp -lpthread -lm -o "$probe"
fi
"$py" "$here/scripts/interop/record.py" --clover "$build/clover" --probe "$probe" \
    --perplexity "$lb/bin/llama-perplexity" --llama-version "llama-cpp-python $version"
