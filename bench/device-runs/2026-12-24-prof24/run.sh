#!/usr/bin/env bash
# Written in the 2026-12-05 14:27 session (issue 24; not yet run when written). Where a 32-row preview and a block
# commit go now, kernel by kernel as their graphs replay them (bench/cuda_kernel_trace.c, PDL off so that a
# kernel's time is its own), after this session's pair launch, row PDL and 4-row head tiles; and the coreset
# kernel's stall samples at the finest sampling interval (pdlrows24's ncu got 19 samples of it), with its duration.
#   run(command="ITEMS='prof24:k,c' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "k c"):
#  k  LD_PRELOAD=libclover_kernel_trace.so bench_cuda_preview --profile, CLOVER_CUDA_PDL=0: windows 2 (the preview
#     with the coreset, graph) and 4 (the commit), the top 30 kernels of each
#  c  ncu of k_coreset_warp (range 5, the 3rd launch) with --sampling-interval 0: SASS stall samples split at the
#     barriers (sass_phases.py of pdlrows24) and its duration (the details page)
# Predictions (before the run; H100 headrt24: preview 7.19 ms, commit 13.07 ms; trace24 (H200, older kernels): the
#  grouped experts 2.24 ms, the router 1.69, dense Q8_0 2.9, coreset 1.04 of a ~9.5 ms preview):
#  k: the dense Q8_0 products the largest group (~2.3-2.7 ms), then the grouped experts (~1.3-1.6), the coreset
#     (~1.0), the block heads (~0.45), quantisers (~0.5), the rest small kernels; the commit: experts ~6 ms, the
#     chunked GDN ~1.8-2.4 ms.
#  c: the coreset's time in its float64 phases (exp, the one-lane row sums) and the barriers between them.
set -uo pipefail
PACK=${PACK:-.gpu-prof24}
STEPS=${STEPS:-k c}
. "$PACK/lib.sh"
dr_init prof24
dr_synth35
TR=$D/bin/libclover_kernel_trace.so
HERE=$(dirname "$(ls -d bench/device-runs/*-prof24/run.sh | sort | tail -1)")
PH=$(ls -d bench/device-runs/*-pdlrows24/sass_phases.py | sort | tail -1)
if has k; then
  wait $SPID
  CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_preview.txt LD_PRELOAD=$TR timeout 150 "$D/bin/bench_cuda_preview" $F \
    --profile > "$O/preview_profile.log" 2>&1
  say "== bench_cuda_preview --profile under the tracer (PDL off) rc=$? at +$(el)s"
  if [ -f $R/trace_preview.txt ]; then
    c++filt < $R/trace_preview.txt > $R/trace_preview.dm.txt
    grep -E "^(==|cuda_kernel)" $R/trace_preview.txt | tee -a "$S"
    for w in 2 4; do
      say "-- window $w, top 30:"
      awk -v w="$w" '$0 ~ "^== window "w {f=1;next} /^== window/{f=0} f' $R/trace_preview.dm.txt | head -32 | \
        cut -c1-200 | tee -a "$S"
    done
  fi
fi
if has c && command -v ncu > /dev/null; then
  wait $SPID
  CLOVER_BENCH_PROFILE_ONLY=5 timeout 120 ncu --profile-from-start off -k "regex:k_coreset_warp" -s 2 -c 1 \
    --warp-sampling-interval 0 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
    --section LaunchStats -f -o "$O/coreset" "$D/bin/bench_cuda_preview" $F --profile > "$O/coreset.out" 2>&1
  say "== ncu k_coreset_warp rc=$? at +$(el)s"
  timeout 60 ncu -i "$O/coreset.ncu-rep" --page details --csv > "$O/coreset_details.csv" 2>&1
  grep -E '"(Duration|Elapsed Cycles|SM Frequency|Registers Per Thread|Dynamic Shared Memory Per Block)"' \
    "$O/coreset_details.csv" | cut -c1-200 | tee -a "$S"
  timeout 60 ncu -i "$O/coreset.ncu-rep" --page source --csv --print-source sass > "$O/coreset_sass.csv" 2>&1
  python3 "$PH" "$O/coreset_sass.csv" 2>&1 | cut -c1-200 | tee -a "$S"
  python3 "$(dirname "$PH")/ncusrc.py" "$O/coreset_sass.csv" 25 2>&1 | cut -c1-200 | tee -a "$S"
fi
dr_end
