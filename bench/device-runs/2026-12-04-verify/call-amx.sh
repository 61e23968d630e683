#!/usr/bin/env bash
# Issue 30: the AMX int8 kernel's first run on real AMX tiles (the H200 machine's Xeon host), with the
# session's last ~290 s of device time: correctness only, plus bench_gemm_levels if time is left.
#   run(command="bash bench/device-runs/2026-12-04-verify/call-amx.sh", carry=[".gpu-amx"], timeout_s=150)
# .gpu-amx/pack.txz: branch amx (6f4954a) bin/{test_quant_amx,test_gemm_amx_emu,test_gemm,test_quant_avx512,
# bench_gemm_levels} (statically linked).
# Predictions: the host has amx_tile/amx_int8; test_quant_amx prints "level: amx" and passes (it skipped on
# the dev VM, Zen 4, no AMX); the others pass; bench: amx / avx512-vnni 0.9-1.3x at 64 and 512 rows.
set -uo pipefail
R=${OUT:-/tmp/out}; mkdir -p "$R"; S=$R/summary.txt; P=/tmp/amx; mkdir -p $P
tar xf .gpu-amx/pack.txz -C $P || exit 2
say() { echo "$*" | tee -a "$S"; }
say "start $(date -u +%T) pack $(cat .gpu-amx/COMMIT) cpu: $(grep -m1 'model name' /proc/cpuinfo)"
say "flags: $(grep -m1 -o -w -E 'amx_tile|amx_int8|amx_bf16|avx512_vnni|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
for n in test_quant_amx test_gemm_amx_emu test_gemm test_quant_avx512; do
  timeout 60 $P/bin/$n > $R/$n.log 2>&1; rc=$?
  say "$n rc=$rc $(grep -m1 -i 'level' $R/$n.log) | $(tail -1 $R/$n.log)"
  [ $rc = 0 ] || grep -m6 -E "FAIL|differ|mismatch" $R/$n.log | tee -a "$S"
done
for v in "" CLOVER_NO_AMX=1; do
  env $v timeout 25 $P/bin/bench_gemm_levels > $R/bench.log 2>&1; say "bench_gemm_levels ${v:-(auto)} rc=$?"
  grep -E "level|^q8_0" $R/bench.log >> "$S"
done
say "end $(date -u +%T)"
