#!/usr/bin/env bash
# Written in the 2026-12-06 16:57 session (issue 24; not run: the session's device time was spent). Why the many-row
# launches' PDL costs a lone coreset preview ~0.37 ms (pdlrows27: 5.91 -> 5.54 ms with them plain, AUTO now) and
# nothing elsewhere. The CUPTI tracer records each kernel's start and end as it ran; with PDL on, a kernel's start
# is when its blocks became resident (early, waiting in griddepcontrol.wait), so its "duration" includes its wait:
# the two tables say which kernels wait longer or run longer when the row launches take PDL in the coreset pass.
#   run(command="ITEMS='pdlwhy28:k' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=200)
#   (any pack since 13ef736 with libclover_kernel_trace.so: scripts/device-packs.sh with EXTRA_BINS)
# STEPS (default "k"):
#  k  bench_cuda_preview --profile under the tracer, PDL on (the decode kernels' and the cluster's in both):
#     CLOVER_CUDA_PDL_ROWS=1 (the row launches with PDL) then AUTO (plain in this pass); window 2 (the coreset
#     preview, graph) and window 3 (without the coreset), the top 40 kernels of each
# Predictions (before any run): window 2's span 0.3-0.4 ms longer with =1; the difference in k_coreset_route's
#  line (the cluster launch waiting for 8 SMs of a GPC while the row kernels' early blocks hold them) or in the
#  experts' first tiles after it; window 3 within 0.05 ms.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-k}
. "$PACK/lib.sh"
dr_init pdlwhy28
dr_synth35
TR=$D/bin/libclover_kernel_trace.so
top() { # FILE WINDOW N: the window's header and its top N rows
  grep -E "^== window $2:" "$1" | tee -a "$S"
  awk -v w="$2" '$0 ~ "^== window "w":" {f=1;next} /^== window/{f=0} f' "$1" | head -$(( $3 + 1 )) | \
    cut -c1-170 | tee -a "$S"
}
if has k; then
  wait $SPID
  [ -f "$TR" ] || { say "k: no libclover_kernel_trace.so in the pack"; dr_end; exit 0; }
  for v in 1 2; do
    CLOVER_CUDA_PDL_ROWS=$v CLOVER_TRACE_OUT=$R/trace_rows$v.txt LD_PRELOAD=$TR timeout 150 \
      "$D/bin/bench_cuda_preview" $F --profile > "$O/profile_rows$v.log" 2>&1
    say "== bench_cuda_preview --profile under the tracer, PDL on, PDL_ROWS=$v rc=$? at +$(el)s"
    if [ -f $R/trace_rows$v.txt ]; then
      c++filt < $R/trace_rows$v.txt > $R/trace_rows$v.dm.txt && rm -f $R/trace_rows$v.txt
      top $R/trace_rows$v.dm.txt 2 40
      top $R/trace_rows$v.dm.txt 3 40
    fi
  done
fi
dr_end
