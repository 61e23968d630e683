#!/usr/bin/env bash
# 2026-12-04 20:39 session, call 4 (issues 24, 25): the peer in the same run as clover's figures with the many-row
# router form on (matmul_exact.cu: a 512-row prompt chunk's router was 64 decode launches a layer, now one), and the
# serve rounds with the server's new step counters (serve25's serve_load.py).
#   cmake --build build -j2 && scripts/device-packs.sh build peer24 && cp /tmp/llama.txz .gpu-peer24/ (final24's
#   llama-bench: PyPI llama-cpp-python 0.3.36's source, CUDA 13.0 sm_90a, built on the dev VM)
#   run(command="bash .gpu-peer24/run.sh", carry=[".gpu-peer24"], timeout_s=600)   (hide the models to fit 64 MiB)
# STEPS (default "p s"):
#  p  llama-bench -ngl 99 -fa 1 -p 512 -n 128 -r 3; bench_cuda_backend with its figures as peers; then
#     bench_cuda_backend --prompt-only 1 with CLOVER_CUDA_EXACT_ROWS=0 and =1 alternating (the router's A/B)
#  s  clover serve --device cuda (AR file), serve_load 16 x 64 twice, the step split from /metrics
# Predictions (before the run):
#  p: llama tg128 ~220-227, pp512 ~5,150-5,530 (+-10% between calls); clover decode (device pick) ~355 (unchanged:
#     1-row passes keep the fused router); prompt 512 5,005 -> ~5,600-5,900 tok/s (the router's 64 launches of
#     ~7 us a layer, ~18 ms of the ~102 ms prompt, -> one ~25-40 us launch): >= pp512 (the bar) in this run;
#     --prompt-only EXACT_ROWS=0 ~5,000-5,080, =1 ~5,600-5,900.
#  s: ratio 2.0-2.5x -> ~2.2-2.7x (the 16-row step 11.6 -> 10.7 ms); seqs/step ~15; passes ~1.4 a step.
set -uo pipefail
PACK=${PACK:-.gpu-peer24}
STEPS=${STEPS:-p s}
. "$PACK/lib.sh"
dr_init peer24
dr_synth35 --no-diffusion
if has p; then
  wait $SPID; say "synth done at +$(el)s"
  LB=$D/llama/llama-bench TG= PP=
  [ -s "$PACK/llama.txz" ] && tar xJf "$PACK/llama.txz" -C "$D"
  if [ -x "$LB" ]; then
    LD_LIBRARY_PATH=$D/llama:/usr/local/cuda/lib64:$D/lib timeout 150 "$LB" -m $F -ngl 99 -fa 1 -p 512 -n 128 -r 3 -o csv > $O/llama-bench.csv 2> $O/llama-bench.err
    say "llama-bench rc=$? at +$(el)s"; cat $O/llama-bench.csv | cut -d, -f1,30- | tee -a "$S"; tail -3 $O/llama-bench.err | tee -a "$S"
    PP=$(python3 -c "import csv,sys;r=[x for x in csv.DictReader(open(sys.argv[1])) if x['n_prompt']=='512'];print(r[0]['avg_ts'] if r else '')" $O/llama-bench.csv 2>/dev/null)
    TG=$(python3 -c "import csv,sys;r=[x for x in csv.DictReader(open(sys.argv[1])) if x['n_gen']=='128'];print(r[0]['avg_ts'] if r else '')" $O/llama-bench.csv 2>/dev/null)
  else say "llama-bench not carried: no peer in this run"; fi
  timeout 150 "$D/bin/bench_cuda_backend" $F ${TG:+--peer-tg $TG} ${PP:+--peer-pp512 $PP} > "$O/backend.log" 2>&1
  say "bench_cuda_backend rc=$? at +$(el)s (peer tg128 ${TG:-none}, pp512 ${PP:-none})"
  grep -E "decode|prompt of|chunk commit|peer" "$O/backend.log" | tee -a "$S"
  for ex in 0 1 0 1; do
    CLOVER_CUDA_EXACT_ROWS=$ex timeout 60 "$D/bin/bench_cuda_backend" $F --prompt-only 1 ${PP:+--peer-pp512 $PP} > "$O/prompt_$ex.log" 2>&1
    say "prompt-only CLOVER_CUDA_EXACT_ROWS=$ex rc=$?: $(grep -E "prompt of 512" "$O/prompt_$ex.log" | head -1)"
  done
fi
if has s; then
  wait $SPID
  log=$O/serve-ar.log
  "$D/bin/clover" serve -m "$F" --device cuda --port 0 --max-batch 16 --sessions 1 --ctx 1024 > "$log" 2>&1 &
  pid=$! port=""
  for _ in $(seq 1 240); do
    port=$(grep -o 'listening on http://[^:]*:[0-9]*' "$log" | grep -o '[0-9]*$')
    [ -n "$port" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.25
  done
  if [ -n "$port" ]; then
    for round in 1 2; do
      [ "$(el)" -lt 480 ] || { say "serve: no time for round $round"; break; }
      r=$(timeout 90 python3 bench/device-runs/2026-12-14-serve25/serve_load.py "$port" 16 64 "$O/serve-ar-$round.json" 2>&1)
      say "serve ar round $round (16 x 64):"; echo "$r" | tee -a "$S"
    done
  else say "serve: did not start: $(tail -2 "$log")"; fi
  kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
fi
dr_end
