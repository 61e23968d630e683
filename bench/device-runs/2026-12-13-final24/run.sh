#!/usr/bin/env bash
# 2026-12-04 17:54 session, call 3 (issues 24, 25, 30): the peer in the same run as the step, the rest of the
# lane form's tests, the experts' rows-a-warp A/B, the serve bench warm and cold, and (issue 30) the CPU preview.
#   cmake --build build -j2 && scripts/device-packs.sh build final24, then .gpu-final24/llama.txz: llama-bench built
#   on the dev VM (CUDA 13.0 sm_90a, PyPI llama-cpp-python 0.3.36's source via scripts/llama-src.sh, cmake -DGGML_CUDA=ON
#   -DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_NATIVE=OFF ... -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined: no
#   libcuda here) as llama/ with its ggml / llama libraries, stripped; the device's own CUDA 13.0 cuBLAS and
#   cudart (/usr/local/cuda/lib64) and NCCL (system) serve it there
#   run(command="bash .gpu-final24/run.sh", carry=[".gpu-final24"], timeout_s=600)
# STEPS (default "t d p s e"; c ran as its own call, .gpu-vnni30/prev30.sh):
#  t  test_cuda_matmul test_glu / test_multi / test_graph_capture (not run in calls 1-2), test_moe_fast
#     (CLOVER_TEST_SMALL) with CLOVER_CUDA_MOEF_RPW=2, backend / batch / engine with RPW=2
#  c  issue 30: bench/device-runs/2026-12-11-vnni30/prev30.sh if present (the CPU's 32-row preview, quiet host)
#  d  step (35B-A3B AR file): new, MOEF_RPW=2, =4; ops at 1 row new vs RPW=2 (the experts' lines)
#  p  llama-bench -ngl 99 -fa 1 -p 512 -n 128 (carried binary), then bench_cuda_backend with its figures as peers
#  s  clover serve 16 x 64 AR, serve_load twice on one server (round 1 creates the sessions, round 2 reuses them)
#  e  bench_cuda_preview --reps 3 on the 35B-A3B diffusion file (the preview / commit / block diffusion figures)
# Predictions:
#  - t: all pass (RPW changes which warp does a row, not a row's arithmetic).
#  - d: RPW=2 experts gate+up 9.1 -> ~7.5 us a layer, step -0.05 ms; RPW=4 about the same as 2 (or falls back).
#  - p: llama tg128 ~215-225 tok/s, pp512 ~5,100-5,250 (2026-12-06: 222.2 / 5,243.1); clover decode (bench_cuda_backend)
#    ~330-350 tok/s = ~1.5-1.6x (bar 1.5x); prompt 512 ~5,150 (0.98-1.0x; bar 1.0x).
#  - e: preview 32 rows ~10.5 ms (its products are the chunk form: unchanged), commit ~16.5, block diffusion at 1
#    token a pass ~90 tok/s (bar: >= --ar).
#  - s: round 2 concurrent >> round 1 if session creation is what the 16 concurrent requests wait for (call 2:
#    2.39x with the 16 sessions made during admission).
set -uo pipefail
PACK=${PACK:-.gpu-final24}
STEPS=${STEPS:-t d p s e}
. "$PACK/lib.sh"
dr_init final24
unset CLOVER_CUDA_MOEF_RPW
SPID=
if has d || has p || has s; then dr_synth35 --no-diffusion; fi
CL=/tmp/synth35-clover.gguf CPID=
if has e; then ( [ -s $CL ] || { sleep 30; timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!; fi
if has t; then
  tst test_cuda_matmul rest 150 CLOVER_TEST_ONLY=test_glu,test_multi,test_graph_capture
  for n in test_cuda_backend test_cuda_batch test_cuda_engine; do tst $n rpw2 120 CLOVER_CUDA_MOEF_RPW=2; done
fi
if has c && [ -f bench/device-runs/2026-12-11-vnni30/prev30.sh ]; then
  wait $SPID
  say "== issue 30 CPU preview (prev30.sh) at +$(el)s"
  PACK=$PACK timeout 200 bash bench/device-runs/2026-12-11-vnni30/prev30.sh > "$O/prev30.log" 2>&1
  say "prev30 rc=$?"; tail -25 "$O/prev30.log" | tee -a "$S"
fi
B=$D/bin/bench_cuda_decode
if has d; then
  wait $SPID; say "synth done at +$(el)s"
  for c in "new:" "rpw2:CLOVER_CUDA_MOEF_RPW=2" "rpw4:CLOVER_CUDA_MOEF_RPW=4"; do
    tag=${c%%:*} envs=${c#*:}
    env $envs CLOVER_BENCH_DECODE_ROWS=0 timeout 90 "$B" $F > "$O/step_$tag.log" 2>&1
    say "== step, $tag${envs:+ ($envs)}: rc=$? at +$(el)s"
    grep -E "STEP (seq_commit|batched commit, 16|lone pass in our graph, PDL on)" "$O/step_$tag.log" | tee -a "$S"
  done
  for c in "new:" "rpw2:CLOVER_CUDA_MOEF_RPW=2"; do
    tag=${c%%:*} envs=${c#*:}
    env $envs CLOVER_BENCH_DECODE_ROWS=1 timeout 60 "$B" > "$O/ops_$tag.log" 2>&1
    say "== ops at 1 row, $tag: rc=$?"; grep -E "experts|sums at|SUM" "$O/ops_$tag.log" | tee -a "$S"
    env $envs timeout 40 "$D/bin/clover" run -m $F --device cuda --ids $(seq -s, 11 30) -n 64 --ignore-eos --no-visual --ar \
      > "$O/run_$tag.txt" 2> "$O/run_$tag.err"
  done
  a=$(grep "^ids:" "$O/run_new.txt" 2>/dev/null); b=$(grep "^ids:" "$O/run_rpw2.txt" 2>/dev/null)
  if [ -n "$a" ] && [ "$a" = "$b" ]; then say "clover run --ar: RPW 1 and 2 give the same ids ($(echo $a | wc -w) words; predicted: always)"
  else say "clover run --ar: RPW 1 / 2 DIFFER or failed: $(tail -2 "$O/run_new.err" | tr '\n' ' ')"; fi
fi
if has p; then
  wait $SPID
  LB=$D/llama/llama-bench TG= PP=
  [ -s "$PACK/llama.txz" ] && tar xJf "$PACK/llama.txz" -C "$D"
  if [ -x "$LB" ]; then
    LD_LIBRARY_PATH=$D/llama:/usr/local/cuda/lib64:$D/lib timeout 150 "$LB" -m $F -ngl 99 -fa 1 -p 512 -n 128 -r 3 -o csv > $O/llama-bench.csv 2> $O/llama-bench.err
    say "llama-bench rc=$? at +$(el)s"; cat $O/llama-bench.csv | tee -a "$S"; tail -3 $O/llama-bench.err | tee -a "$S"
    PP=$(python3 -c "import csv,sys;r=[x for x in csv.DictReader(open(sys.argv[1])) if x['n_prompt']=='512'];print(r[0]['avg_ts'] if r else '')" $O/llama-bench.csv 2>/dev/null)
    TG=$(python3 -c "import csv,sys;r=[x for x in csv.DictReader(open(sys.argv[1])) if x['n_gen']=='128'];print(r[0]['avg_ts'] if r else '')" $O/llama-bench.csv 2>/dev/null)
  else say "llama-bench not carried: no peer in this run"; fi
  timeout 150 "$D/bin/bench_cuda_backend" $F ${TG:+--peer-tg $TG} ${PP:+--peer-pp512 $PP} > "$O/backend.log" 2>&1
  say "bench_cuda_backend rc=$? at +$(el)s (peer tg128 ${TG:-none}, pp512 ${PP:-none})"
  grep -E "decode|prompt of|chunk commit|peer" "$O/backend.log" | tee -a "$S"
fi
if has s; then
  wait $SPID
  SR=bench/device-runs/2026-12-05-serve25
  log=$O/serve-ar.log
  "$D/bin/clover" serve -m "$F" --device cuda --port 0 --max-batch 16 --sessions 1 --ctx 1024 > "$log" 2>&1 &
  pid=$! port=""
  for _ in $(seq 1 240); do
    port=$(grep -o 'listening on http://[^:]*:[0-9]*' "$log" | grep -o '[0-9]*$')
    [ -n "$port" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.25
  done
  if [ -n "$port" ]; then
    for round in 1 2; do
      [ "$(el)" -lt 540 ] || { say "serve: no time for round $round"; break; }
      r=$(timeout 60 python3 "$SR/serve_load.py" "$port" 16 64 "$O/serve-ar-$round.json" 2>&1)
      say "serve ar round $round (16 x 64): $r"
      # the server's own counters so far (passes, busy seconds, tokens): ticks per request tell whether the 16
      # requests' passes were stacked (next session: added after call 4, not run yet)
      python3 -c "import urllib.request,sys;t=urllib.request.urlopen('http://127.0.0.1:%s/metrics'%sys.argv[1],timeout=10).read().decode();print(' '.join(l for l in t.splitlines() if l.startswith(('clover_passes_total','clover_busy_seconds_total','clover_completion_tokens_total','clover_prompt_tokens_total','clover_generations_total'))))" "$port" 2>&1 | sed 's/^/  metrics: /' | tee -a "$S"
    done
  else say "serve: did not start: $(tail -2 "$log")"; fi
  kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
fi
if has e; then
  wait $CPID
  if [ "$(el)" -lt 520 ] && [ -s $CL ]; then
    timeout 60 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview.log" 2>&1
    say "bench_cuda_preview rc=$? at +$(el)s"; grep -E "ms|tok/s" "$O/preview.log" | tee -a "$S"
  else say "bench_cuda_preview: no time or no file"; fi
fi
if has t && [ "$(el)" -lt 400 ]; then # the fast expert form's own bit-for-bit test at RPW=2 (slow: its CPU quantising)
  tst test_cuda_matmul fast2 $(( 520 - $(el) )) CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=test_moe_fast CLOVER_CUDA_MOEF_RPW=2
  grep -E "cases bit-identical" "$O/t_test_cuda_matmul_fast2.log" | tee -a "$S"
fi
dr_end
