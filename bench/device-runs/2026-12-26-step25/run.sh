#!/usr/bin/env bash
# Written in the 2026-12-05 16:54 session (issues 25, 24; not yet run when written). Where a 16-sequence stacked
# decode step goes, kernel by kernel: the serve bar (16 concurrent AR requests >= 8x one) was 4.87x on an H100
# (k2core24 seq2), and bench_batch had the 16-row pass at 15.7 ms against 3.8 ms for one row (32 rows: 26.3 ms).
# bench_batch --mode ar under the CUPTI tracer (one window: the prompts' chunks are in it too, but at --gen 96 the
# decode steps are ~95% of the kernel time), N = 1 and N = 16 in two runs, PDL off so a kernel's time is its own.
#   run(command="ITEMS='step25:k' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "k"):
#  k  the two traces, the top 30 kernels of each
# Predictions (before the run): at N=16 the grouped experts (igemm_kernel WIDE, ~100 experts a layer with 1-2
#  slots) ~55-65% of the step (~9 ms of 15.7), the dense Q8_0 products ~1.5 ms, the rest the per-sequence
#  attention / GDN kernels; at N=1 the decode kernels (mmv) ~70%.
set -uo pipefail
PACK=${PACK:-.gpu-step25}
STEPS=${STEPS:-k}
. "$PACK/lib.sh"
dr_init step25
dr_synth35 --no-diffusion
TR=$D/bin/libclover_kernel_trace.so
if has k; then
  wait $SPID
  for n in 1 16; do
    CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_n$n.txt LD_PRELOAD=$TR timeout 200 "$D/bin/bench_batch" $F \
      --device cuda --mode ar --n $n --prompt 32 --gen 96 > "$O/batch_n$n.log" 2>&1
    say "== bench_batch --mode ar --n $n under the tracer (PDL off) rc=$? at +$(el)s"
    grep -E "^ +$n " "$O/batch_n$n.log" | tail -1 | tee -a "$S"
    if [ -f $R/trace_n$n.txt ]; then
      c++filt < $R/trace_n$n.txt > $R/trace_n$n.dm.txt && rm -f $R/trace_n$n.txt
      grep -E "^== window" $R/trace_n$n.dm.txt | tee -a "$S"
      awk '/^== window/ {w++; f = w == 1; next} f' $R/trace_n$n.dm.txt | head -32 | cut -c1-200 | tee -a "$S"
    fi
  done
fi
dr_end
