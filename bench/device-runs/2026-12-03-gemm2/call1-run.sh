#!/usr/bin/env bash
# gemm2 call 1 (issue 24): where a 32-row preview and a 32-row commit go, kernel
# by kernel. Binaries: branch gemm2 (= main d22a676 + bench_cuda_preview --profile).
# Steps: synth the 35B-A3B Clover file; ncu (one metric set, no sections) of
# bench_cuda_preview --profile: one eager preview with coreset, one without, one
# 32-row commit, each inside cudaProfilerStart/Stop; the raw CSV comes back.
# Predictions (written before the run): ~1,400 kernels a preview (~35 a layer);
# the preview's time spread over many ~10-15 us kernels: dense igemm<8> (qkv, z,
# alpha, out, shexp) ~40%, MoE igemm<12,1,1> ~25%, ig_quantize + moe_group +
# small ops ~20%; k_coreset ~80 us a layer (3.6 ms / 40 by difference);
# in the commit the MoE WIDE igemm ~40%, dense igemm ~35%, gdn chunked ~10%.
set -uo pipefail
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/logs; rm -rf $O; mkdir -p $O
D=/tmp/ck; mkdir -p "$D"; tar xzf .gpu-gemm2/pack.tgz -C "$D" || exit 2
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
S=$R/summary.txt
echo "start $(date -u +%T)" | tee "$S"
FD=/tmp/q35d.gguf
timeout 50 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $FD > "$O/synthd.log" 2>&1
echo "synth rc=$? $(date -u +%T)" | tee -a "$S"
timeout 85 ncu --clock-control none --profile-from-start off \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,sm__inst_executed.sum --csv \
  "$D/bin/bench_cuda_preview" $FD --profile > "$R/ncu_preview.csv" 2> "$O/ncu.err"
echo "ncu rc=$? $(date -u +%T) lines $(wc -l < $R/ncu_preview.csv)" | tee -a "$S"
grep -E "profiled|model" "$R/ncu_preview.csv" | head -5 | tee -a "$S"
tail -5 "$O/ncu.err" | tee -a "$S"
gzip -f "$R/ncu_preview.csv"
echo "end $(date -u +%T)" | tee -a "$S"
