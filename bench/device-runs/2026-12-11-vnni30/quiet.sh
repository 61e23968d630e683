#!/usr/bin/env bash
# On the still-warm machine of ab.sh (its /tmp kept): llama.cpp's llama-bench (built by run.sh in /tmp/llama-cpu)
# alone, then clover's bench_backend at the amx and avx2 levels, one after the other: the peer and clover on a
# quiet host in one call (run.sh overlapped its llama.cpp build and llama-bench with clover's runs).
#   run(command="bash .gpu-vnni30/quiet.sh", carry=[".gpu-vnni30"], timeout_s=200)
set -uo pipefail
R=${OUT:-/tmp/out}; mkdir -p "$R"; S=$R/summary.txt; T0=$(date +%s)
say() { echo "$*" | tee -a "$S"; }
P=/tmp/vnni30-pack; export LD_LIBRARY_PATH=$P/lib
M=/tmp/vnni30-35b-a3b.gguf; A=/tmp/vnni30-35b-a3b-ar.gguf
LB=$(ls /tmp/llama-cpu/bin/llama-bench 2>/dev/null)
[ -x "$P/bin/bench_backend" ] && [ -s $M ] || { say "not warm: no pack or model in /tmp"; exit 3; }
[ -s $A ] || timeout 60 $P/bin/clover synth --preset qwen3.5-35b-a3b --no-diffusion -t 16 -o $A > "$R/synth-ar.log" 2>&1
say "start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) llama-bench: ${LB:-none}"
if [ -n "$LB" ]; then
  LD_LIBRARY_PATH=/tmp/llama-cpu/bin timeout 90 $LB -m $A -p 512 -n 32 -t 16 -r 2 > "$R/llama-bench.log" 2>&1
  say "llama-bench rc=$? at $(( $(date +%s) - T0 ))s"; grep -E "pp512|tg32" "$R/llama-bench.log" | tee -a "$S"
fi
for lv in ${LEVELS-auto avx2}; do
  timeout 45 $P/bin/bench_backend $M --threads 16 --prompt 512 --gen 12 --block 32 --rows 512 --reps 1 --mb 256 \
    --simd $lv > "$R/q-$lv.log" 2>&1
  say "$lv rc=$? at $(( $(date +%s) - T0 ))s"
  grep -E "^(prompt 512 tokens +median|decode|preview 32 rows, p=0.90 +median|commit 32-row block +median)" "$R/q-$lv.log" | tee -a "$S"
done
say "end $(date -u +%T)"
