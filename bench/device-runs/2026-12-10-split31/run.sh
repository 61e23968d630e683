#!/usr/bin/env bash
# 2026-12-10 split31: the offload bar run. clover --gpu-mem 16 / 8 (host copy of the experts, the default since
# stage31) against llama.cpp's best split at the same device budgets (-ngl 99 with --n-cpu-moe swept), on the
# same 35B-A3B synthetic file (--no-diffusion --route-skew 4), same machine, same call; clover's preview and
# commit at both budgets on the diffusion file of the same geometry.
#   scripts/device-packs.sh build split31 && scripts/llama-src.sh .gpu-split31/llama-src.txz
#   run(command="bash .gpu-split31/run.sh", carry=[".gpu-split31"], timeout_s=600)
# Steps:
#  1. llama.cpp's CUDA llama-bench built in the background (sm_90a, -j12 at nice 10, <= 330 s); both files
#     synthesised meanwhile; clover's runs (step 2) overlap the build (GPU-bound; 4 host cores left free), and
#     its decode is timed again after the build (step 4) when time is left.
#  2. clover: run --ar all-device (reference ids), --gpu-mem 16 and 8 (ids against the reference), `bench` at
#     --gpu-mem 16 and 8 on the diffusion file (prompt 512, decode, preview, commit); GPU memory peak of each
#     run from nvidia-smi sampled every 100 ms.
#  4. clover bench --gpu-mem 16 / 8 decode again on the AR file, the build done.
#  3. llama-bench -ngl 99 -fa 1 -p 0 -n 32 -r 2 with --n-cpu-moe N (N layers' experts on the CPU, 16 threads):
#     N = 8, 11, 14 (16 GiB) and 27, 30 (8 GiB), each run's GPU memory peak sampled; the best
#     split at a budget is the fastest N whose peak stays within it.
# Predictions (written before the run):
#  - build ~300 s (2026-12-07-mmvs: 303 s)
#  - clover decode (bench, warm pool): 16 GiB ~90 tok/s (stage31: 91.0), 8 GiB ~65; ids equal the reference;
#    GPU peak <= the budget + ~0.6 GiB (CUDA context)
#  - clover bench on the diffusion file: prompt 512 ~1,100 tok/s at 16 GiB; preview 32 rows ~15-25 ms (the
#    coreset's ~7 experts a layer mostly hit); commit ~40-120 ms
#  - llama.cpp: per layer the experts are ~0.42 GiB, dense + KV + buffers ~3.5 GiB: at 16 GiB N ~10 fits,
#    tg32 ~45-70 tok/s (CPU: ~10 layers' 8 experts a token from DDR); at 8 GiB N ~30, tg32 ~22-30 tok/s
#  - bar: clover faster at both budgets (predicted ~1.5x at 16 GiB, ~2.5x at 8 GiB)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PACK=${PACK:-$here}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/split31logs; rm -rf $O; mkdir -p $O
D=/tmp/split31; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
tar xJf "$PACK/pack.txz" -C "$D" || { say "unpack failed"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD
unset CLOVER_GPU_MEM_STATS CLOVER_GPU_MEM_HOST CLOVER_GPU_MEM_POLICY CLOVER_GPU_MEM_PIN
C=$D/bin/clover
say "start $(date -u +%T) pack $(cat "$PACK/COMMIT" 2>/dev/null); $(nproc) CPUs; $(free -g | awk '/Mem:/ {print $2 " GiB"}')"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader 2>&1 | tee -a "$S"
LB=/tmp/llama-build/bin/llama-bench
( mkdir -p /tmp/llama-src && tar xJf "$PACK/llama-src.txz" -C /tmp/llama-src &&
  timeout 100 cmake -S /tmp/llama-src/llama.cpp -B /tmp/llama-build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_BUILD_TYPE=Release > $O/llama-cmake.log 2>&1 &&
  timeout 330 nice -n 10 cmake --build /tmp/llama-build -j${JOBS:-12} --target llama-bench > $O/llama-build.log 2>&1
  echo "llama build rc=$? at +$(el)s" > $O/llama-done ) &
LPID=$!
F=/tmp/q35skew4nd.gguf FD=/tmp/q35skew4d.gguf
STEPS=${STEPS:-clover llama} # "llama": the peer only (its build and sweep), for a call after one that timed clover
has() { [[ " $STEPS " == *" $1 "* ]]; }
( [ -s $F ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b --no-diffusion --route-skew 4 -o $F.part > $O/synth1.log 2>&1 && mv $F.part $F; }
  has clover && { [ -s $FD ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b --route-skew 4 -o $FD.part > $O/synth2.log 2>&1 && mv $FD.part $FD; }; } ) &
SPID=$!
wait $SPID; say "synth done at +$(el)s: $(ls -l $F $FD 2>&1 | awk '{print $5}' | tr '\n' ' ')"
# LABEL LIMIT CMD...: runs CMD with the GPU's memory sampled; prints its last lines and the peak
peak() { sort -n "$1" | tail -1; }
mrun() {
  local label=$1 lim=$2; shift 2
  local left=$(( ${LIMIT:-590} - $(el) )); [ "$lim" -gt "$left" ] && lim=$left
  [ "$lim" -lt 10 ] && { say "== $label skipped: $left s left"; return 1; }
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > $O/mem_$label.txt 2>/dev/null &
  local mp=$! s=$(date +%s)
  timeout -k 3 "$lim" "$@" > $O/$label.log 2>&1; local rc=$?
  kill $mp 2>/dev/null; wait $mp 2>/dev/null
  say "== $label rc=$rc $(( $(date +%s) - s ))s, GPU peak $(peak $O/mem_$label.txt) MiB: $*"
}
if has clover; then
IDS=1000,1001,1002,1003,1004,1005,1006,1007
RUN=(run -m $F --ids $IDS --ar -n 32 -c 1024 --device cuda)
ids() { grep -m1 '^ids:' $O/$1.log; }
mrun A 40 $C "${RUN[@]}"; grep -E '^time' $O/A.log | tee -a "$S"
for g in 16 8; do
  mrun R$g 60 env CLOVER_GPU_MEM_STATS=1 $C "${RUN[@]}" --gpu-mem $g
  say "   ids $([ -n "$(ids A)" ] && [ "$(ids A)" = "$(ids R$g)" ] && echo 'equal to the all-device run' || echo DIFFER); $(grep -E '^time' $O/R$g.log)"
  grep -E 'gpu-mem: (totals|host copy filled)' $O/R$g.log | cut -c1-300 | tee -a "$S"
done
for g in 16 8; do
  mrun B$g 80 env CLOVER_GPU_MEM_STATS=1 $C bench -m $FD --prompt-tokens 512 --decode-tokens 32 --device cuda --gpu-mem $g
  grep -vE '^gpu-mem' $O/B$g.log | tail -14 | tee -a "$S"
done
mrun BA 60 $C bench -m $F --prompt-tokens 512 --decode-tokens 32 --device cuda; grep -vE '^gpu-mem' $O/BA.log | tail -6 | tee -a "$S"
fi
wait $LPID; say "$(cat $O/llama-done 2>/dev/null || echo 'llama build: no result')"; tail -2 $O/llama-build.log | cut -c1-200 | tee -a "$S"
if [ -x $LB ]; then
  for n in 11 30 8 14 27; do # the likeliest best first, in case the call's time runs out
    mrun L$n 45 $LB -m $F -ngl 99 -fa 1 -p 0 -n 32 -r 2 -t 16 --n-cpu-moe $n -o csv || break
    if ! grep -q avg_ts $O/L$n.log; then # older flag spelling: the experts of the first n layers by tensor override
      pat="blk\\.($(seq -s'|' 0 $((n - 1))))\\.ffn_(up|down|gate)_exps\\.=CPU"
      mrun L$n 45 $LB -m $F -ngl 99 -fa 1 -p 0 -n 32 -r 2 -t 16 -ot "$pat" -o csv || break
    fi
    grep -E 'avg_ts|,' $O/L$n.log | tail -2 | tee -a "$S"
  done
  mrun LP16 60 $LB -m $F -ngl 99 -fa 1 -p 512 -n 0 -r 1 -t 16 --n-cpu-moe 11 -o csv && tail -1 $O/LP16.log | tee -a "$S"
else
  say "llama-bench not built: no peer in this run"; tail -20 $O/llama-build.log > $R/llama-build-tail.txt
fi
if has clover; then
# clover's decode again with the build done (the runs above overlapped it): the clean figures
for g in 16 8; do
  mrun C$g 40 $C bench -m $F --prompt-tokens 64 --decode-tokens 32 --device cuda --gpu-mem $g || break
  grep -vE '^gpu-mem' $O/C$g.log | tail -4 | tee -a "$S"
done
fi
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" --exclude='*.gguf' .)
