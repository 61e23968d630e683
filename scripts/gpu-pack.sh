#!/usr/bin/env bash
# gpu-pack.sh BUILD_DIR OUT_DIR [ARCHIVE.txz]: copies what scripts/gpu-test.sh runs on the GPU
# machine (which builds nothing and may lack the libraries clover links):
# the CUDA test and bench binaries, clover, bench_backend, bench_lossless and
# bench_batch, and every shared
# library they need that is not the C/C++ runtime (set LD_LIBRARY_PATH=OUT_DIR/lib
# there; gpu-test.sh does).
# ARCHIVE: also writes OUT_DIR's bin/ and lib/ as one tar.xz with a 192 MiB
# window. Each test binary holds its own copy of the library (~10 MB), which
# gzip's 32 KiB window cannot see twice: a pack of 19 binaries is 31 MB as
# .tgz and 6 MB so (dev VM: ~3 minutes, one core). A device call sends 64 MiB
# at most, the 30 MB default model in models/ included. Unpack with
# `tar xJf ARCHIVE` (xz needs ~200 MiB of memory for it).
set -euo pipefail
build=${1:?usage: gpu-pack.sh BUILD_DIR OUT_DIR}
out=${2:?usage: gpu-pack.sh BUILD_DIR OUT_DIR}
mkdir -p "$out/bin" "$out/lib"
bins=("$build/clover" "$build/bench/bench_backend" "$build/bench/bench_lossless" "$build/bench/bench_batch")
for f in "$build"/tests/test_cuda_* "$build"/bench/bench_cuda_*; do
  [ -x "$f" ] && bins+=("$f")
done
for b in "${bins[@]}"; do cp "$b" "$out/bin/"; done
# clover itself without its built-in default model (30 MB, models/): the device
# runs name their models, and a call sends 64 MiB at most (the pack included)
[ -x "$build/clover_stage0" ] && cp "$build/clover_stage0" "$out/bin/clover"
for b in "${bins[@]}"; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
cp "$(dirname "$0")/gpu-test.sh" "$out/"
echo "packed ${#bins[@]} binaries and $(ls "$out/lib" | wc -l) libraries into $out"
if [ -n "${3:-}" ]; then
  # PACK_XZ_PRESET=6: ~4x faster than the default 9e on a dev VM core, ~10% larger (the window does the dedup)
  tar -C "$out" -cf - bin lib | xz --lzma2=preset="${PACK_XZ_PRESET:-9e}",dict=192MiB -T1 > "$3"
  echo "archive $3: $(du -h "$3" | cut -f1)"
fi
