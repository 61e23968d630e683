#!/usr/bin/env bash
# device-packs.sh BUILD_DIR NAME... : (re)makes the device packs .gpu-NAME/ from a build of this checkout,
# for the run scripts committed as bench/device-runs/*-NAME/run.sh.
#
# Why: a pack is an ignored folder (binaries do not belong in git), and a session's machine is not kept, so
# the packs a session prepares for the next one are lost with it (2026-12-03: four prepared branches and
# their packs were). The run scripts are committed; this rebuilds what they unpack:
#   .gpu-NAME/pack.txz   bin/ + lib/ as scripts/gpu-pack.sh makes them (the CUDA tests and benches, clover,
#                        bench_backend, bench_lossless, bench_batch), plus EXTRA_BINS (below) and, when
#                        LLAMA_BENCH names a built llama-bench, llama/llama-bench and its libraries
#   .gpu-NAME/run.sh     the newest bench/device-runs/*-NAME/run.sh (and the files beside it)
#   .gpu-NAME/lib.sh     bench/device-runs/lib.sh, the helpers the run scripts source
#   .gpu-NAME/COMMIT     the commit the binaries were built from
# One archive is made and copied into every NAME (each ~5 MB; a call carries 64 MiB in all: hide the default
# model with scripts/device-tree.sh hide when several travel, and check with device-tree.sh size).
#
#   cmake --build build -j2 && scripts/device-packs.sh build k4s k4l dec
#   PACK_XZ_PRESET=6 ...: xz's preset (default 9e; 6 packs in ~5 min instead of ~9 on a dev VM core, about the same size)
#   EXTRA_BINS="test_act_stage test_matmul test_matmul_batch test_quant_amx test_matmul_amx_emu bench_gemm_levels" \
#     LLAMA_BENCH=/path/to/llama-bench scripts/device-packs.sh build amx2
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: device-packs.sh BUILD_DIR NAME...}
shift
(($#)) || { echo "device-packs: name at least one pack (the X of bench/device-runs/*-X/run.sh)" >&2; exit 2; }
for n in "$@"; do
  ls -d bench/device-runs/*-"$n"/run.sh >/dev/null 2>&1 || { echo "device-packs: no bench/device-runs/*-$n/run.sh" >&2; exit 2; }
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
scripts/gpu-pack.sh "$build" "$tmp/p" >/dev/null
for b in ${EXTRA_BINS:-}; do
  f=$(find "$build" -maxdepth 3 -type f -name "$b" -perm -u+x | head -1)
  [ -n "$f" ] || { echo "device-packs: $b not built in $build" >&2; exit 1; }
  cp "$f" "$tmp/p/bin/"
done
if [ -n "${LLAMA_BENCH:-}" ]; then
  mkdir -p "$tmp/p/llama"; cp "$LLAMA_BENCH" "$tmp/p/llama/"
  ldd "$LLAMA_BENCH" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
      *) cp -L "$lib" "$tmp/p/lib/" ;;
    esac
  done
fi
# the extra binaries' libraries too (gpu-pack.sh copied those of its own list)
for f in "$tmp"/p/bin/*; do ldd "$f" 2>/dev/null | awk '/=> \// {print $3}'; done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
    *) [ -f "$tmp/p/lib/$(basename "$lib")" ] || cp -L "$lib" "$tmp/p/lib/" ;;
  esac
done
strip --strip-unneeded "$tmp"/p/bin/* 2>/dev/null || true
dirs=(bin lib); [ -d "$tmp/p/llama" ] && dirs+=(llama)
tar -C "$tmp/p" -cf - "${dirs[@]}" | xz --lzma2=preset="${PACK_XZ_PRESET:-9e}",dict=192MiB -T1 > "$tmp/pack.txz"
commit=$(git rev-parse --short HEAD)
for n in "$@"; do
  src=$(dirname "$(ls -d bench/device-runs/*-"$n"/run.sh | sort | tail -1)")
  rm -rf ".gpu-$n"; mkdir -p ".gpu-$n"
  cp "$tmp/pack.txz" ".gpu-$n/"
  cp "$src"/* ".gpu-$n/" 2>/dev/null || true
  cp bench/device-runs/lib.sh ".gpu-$n/" # what the run scripts share (sourced from the pack)
  echo "$commit" > ".gpu-$n/COMMIT"
  echo "device-packs: .gpu-$n ($(du -sh ".gpu-$n" | cut -f1), binaries of $commit, run.sh from $src)"
done
