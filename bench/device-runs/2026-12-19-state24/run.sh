#!/usr/bin/env bash
# Written in the 2026-12-05 05:00 session (issues 24, 25): where the bars stand with this session's defaults
# (stacked coresets / routing / GDN blocks, the grouped experts on the wide kernel, the 256-thread merge from 64
# rows), llama.cpp in the same call.
#   cmake --build build -j2 && scripts/device-packs.sh build state24 && cp /tmp/llama.txz .gpu-state24/
#   (final24's llama-bench: PyPI llama-cpp-python 0.3.36's source, CUDA 13.0 sm_90a, built on the dev VM; hide
#   models/ and the bf16 fixture to fit 64 MiB)
#   run(command="bash .gpu-state24/run.sh", carry=[".gpu-state24"], timeout_s=600)
# STEPS (default "t p v s"):
#  t  (added 2026-12-05 07:04, not yet run) test_cuda_attention as is (the decode form's key walk moved to
#     attention_lanes.cuh: the same PTX operations) and test_cuda_matmul's test_moe_igw (the 05:00 session's
#     review refactor: moe_tiles_launch), both never run on a device since those changes
#  p  llama-bench -ngl 99 -fa 1 -p 512 -n 128 -r 3 on the --no-diffusion file; bench_cuda_backend with its figures
#  v  bench_cuda_preview --reps 3 on the diffusion file (preview, commit, block diffusion)
#  s  serve 16 x 128 AR (the --no-diffusion file) and 16 x 64 diffusion
# Predictions (before the run):
#  t: both pass.
#  p: llama tg128 ~215-230, pp512 ~5,150-5,350; clover decode (device pick) ~355-363 (1.55-1.65x), prompt 512
#     ~6,000-6,100 (igw25: 6,068; ~1.13-1.18x).
#  v: preview 9.1 ms, commit 14.8, block diffusion ~103 tok/s (a lone block keeps the few-slot tiles: unchanged).
#  s: AR 16 x 128 ~4.3-4.5x; diffusion 16 x 64 ~2.5-2.6x; answers identical.
set -uo pipefail
PACK=${PACK:-.gpu-state24}
STEPS=${STEPS:-t p v s}
. "$PACK/lib.sh"
dr_init state24
C=$D/bin/clover
CL=/tmp/synth35-clover.gguf
( [ -s $CL ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!
dr_synth35 --no-diffusion
if has t; then
  tst test_cuda_attention asis 240
  tst test_cuda_matmul igw 240 CLOVER_TEST_ONLY=test_moe_igw
fi
if has p; then
  wait $SPID; say "synth done at +$(el)s"
  LB=$D/llama/llama-bench TG= PP=
  [ -s "$PACK/llama.txz" ] && tar xJf "$PACK/llama.txz" -C "$D"
  if [ -x "$LB" ]; then
    LD_LIBRARY_PATH=$D/llama:/usr/local/cuda/lib64:$D/lib timeout 150 "$LB" -m $F -ngl 99 -fa 1 -p 512 -n 128 -r 3 -o csv > $O/llama-bench.csv 2> $O/llama-bench.err
    say "llama-bench rc=$? at +$(el)s"; cut -d, -f1,30- $O/llama-bench.csv | tee -a "$S"
    PP=$(python3 -c "import csv,sys;r=[x for x in csv.DictReader(open(sys.argv[1])) if x['n_prompt']=='512'];print(r[0]['avg_ts'] if r else '')" $O/llama-bench.csv 2>/dev/null)
    TG=$(python3 -c "import csv,sys;r=[x for x in csv.DictReader(open(sys.argv[1])) if x['n_gen']=='128'];print(r[0]['avg_ts'] if r else '')" $O/llama-bench.csv 2>/dev/null)
  else say "llama-bench not carried: no peer in this run"; fi
  timeout 150 "$D/bin/bench_cuda_backend" $F ${TG:+--peer-tg $TG} ${PP:+--peer-pp512 $PP} > "$O/backend.log" 2>&1
  say "bench_cuda_backend rc=$? at +$(el)s (peer tg128 ${TG:-none}, pp512 ${PP:-none})"
  grep -E "decode|prompt of|chunk commit" "$O/backend.log" | tee -a "$S"
fi
if has v; then
  wait $CPID
  timeout 120 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview.log" 2>&1
  say "== bench_cuda_preview --reps 3 rc=$? at +$(el)s"
  grep -E "^(preview|commit|resolve|block)" "$O/preview.log" | cut -c1-150 | tee -a "$S"
fi
if has s; then
  wait $CPID $SPID
  dr_serve $F "" 16 128 1 ar
  dr_serve $CL "" 16 64 1 diffusion
fi
dr_end
