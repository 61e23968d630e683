#!/usr/bin/env bash
# Issue 30's device run: the AVX-512 VNNI level of the multi-row integer
# products on the H200 machine's HOST CPU (no GPU used). One call, ~40 s.
# NOT RUN YET (2026-12-03 02:28 UTC): the session's device time (172 s) was
# below the 4-minute floor under which no machine is started. Note: $OUT
# brings back at most 8 files; this script leaves more (one log per test):
# tar the logs into one file before running it.
# PACK is a folder with pack.tgz (scripts/gpu-pack.sh's bin/ + lib/, plus
# test_quant_avx512, test_gemm_avx512_emu, test_gemm, test_matmul*,
# test_quant_act and bench_gemm_levels copied into bin/). Outputs to $OUT.
#
#   bash bench/device-runs/2026-12-03-avx512-run.sh PACK
#
# Predictions (written before the run, from the dev VM's Zen 4 figures and
# the Xeon's ports: 512-bit integer multiplies on port 0, so VNNI's fusion
# is the gain, not the width):
#   - every test PASSes at the three levels (auto = avx512-vnni, avx2 via
#     CLOVER_NO_AVX512=1, scalar via CLOVER_NO_SIMD=1; the AVX-512 tests skip
#     or run their scalar part at the lower levels);
#   - bench_gemm_levels, 1 thread, 2048 x 2048, 64 rows: Q8_0 avx512 / avx2
#     ~2.3x (AVX2 ~35 GMAC/s), K-quants ~1.35x;
#   - 16 threads: the same ratios within 15%;
#   - bench_backend, synthetic 35B-A3B geometry cut to 4 layers, 16 threads:
#     32-row preview 1.6-2x faster at avx512 (head Q8_0 dominates with 4
#     layers), prompt 512 1.3-1.5x, generation (decode) within +-10%.
set -uo pipefail
PACK=${1:?usage: $0 PACK}
O=${OUT:-/tmp/avx512-run}; mkdir -p "$O"
P=/tmp/clover-pack; mkdir -p "$P"; tar xzf "$PACK/pack.tgz" -C "$P" || exit 2
export LD_LIBRARY_PATH=$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
S=$O/summary.txt
T0=$(date +%s)
say() { echo "$*" | tee -a "$S"; }
left() { echo $(( 38 - ($(date +%s) - T0) )); } # seconds to the script's own deadline
say "start $(date -u +%T)"
lscpu | head -20 | tee -a "$S"
grep -o 'avx512[a-z_]*\|amx[a-z_0-9]*\|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ' | tee -a "$S"; echo | tee -a "$S"

M=/tmp/synth35-4l.gguf
( timeout 30 "$P/bin/clover" synth --preset qwen3.5-35b-a3b --layers 4 -t 8 -o $M > "$O/synth.log" 2>&1 ) &
SYN=$!

PIDS=()
TESTS="test_quant_avx512 test_gemm_avx512_emu test_gemm test_matmul test_matmul_batch test_matmul_group test_quant_act"
for lv in auto avx2 scalar; do
  for t in $TESTS; do
    (
      case $lv in avx2) export CLOVER_NO_AVX512=1 ;; scalar) export CLOVER_NO_SIMD=1 ;; esac
      t0=$(date +%s%N); timeout 25 "$P/bin/$t" > "$O/$lv-$t.log" 2>&1; rc=$?
      case $rc in 0) v=PASS ;; 77) v="SKIP($(grep -m1 SKIP "$O/$lv-$t.log"))" ;; *) v="FAIL(exit $rc)" ;; esac
      echo "$v $lv $t $(( ($(date +%s%N) - t0) / 1000000 ))ms" >> "$O/tests.txt"
    ) &
    PIDS+=($!)
  done
done
wait "${PIDS[@]}"
sort "$O/tests.txt" | tee -a "$S"
grep -h "level:" "$O"/auto-test_quant_avx512.log | tee -a "$S"

for th in 1 16; do
  for lv in auto avx2; do
    [ "$(left)" -gt 3 ] || break
    ( [ $lv = avx2 ] && export CLOVER_NO_AVX512=1; timeout "$(left)" "$P/bin/bench_gemm_levels" --threads $th --rows 8,64,512 --reps 4 ) > "$O/gemm-$lv-t$th.log" 2>&1
    cat "$O/gemm-$lv-t$th.log" | tee -a "$S"
  done
done

wait $SYN; say "synth rc=$? at $(( $(date +%s) - T0 ))s: $(tail -2 "$O/synth.log" | tr '\n' ' ')"
for lv in auto avx2; do
  [ "$(left)" -gt 4 ] || { say "no time left for bench_backend $lv"; continue; }
  timeout "$(left)" "$P/bin/bench_backend" $M --threads 16 --prompt 512 --gen 4 --reps 2 --rows 32 --mb 256 --simd $lv > "$O/backend-$lv.log" 2>&1
  say "bench_backend --simd $lv rc=$?:"
  grep "^threads" "$O/backend-$lv.log" | tee -a "$S"
  sed -n '/^summary/,/^$/p' "$O/backend-$lv.log" | tee -a "$S"
done
say "end $(date -u +%T), $(( $(date +%s) - T0 ))s"
