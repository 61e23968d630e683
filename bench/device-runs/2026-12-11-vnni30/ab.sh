#!/usr/bin/env bash
# The scale30 A/B of run.sh again with nothing else on the host (in run.sh's call of 2026-12-04 16:05 the new
# path's bench_backend runs overlapped the llama.cpp build, the old path's did not). bench_backend at 16 threads,
# 512-row chunks, new / old switches alternating, vnni and amx.
#   run(command="bash .gpu-vnni30/ab.sh", carry=[".gpu-vnni30"], timeout_s=240)
# Prediction (scale30's PREDICTIONS.md section): amx new 1.05-1.30x old on the prompt, preview 1.03-1.20x, vnni
# 1.00-1.10x; an engine-level loss would show here as new < old on a quiet host.
set -uo pipefail
PK=.gpu-vnni30; R=${OUT:-/tmp/out}; mkdir -p "$R"; S=$R/summary.txt; T0=$(date +%s)
say() { echo "$*" | tee -a "$S"; }
P=/tmp/vnni30-pack; rm -rf $P; mkdir -p $P; tar xJf $PK/pack.txz -C $P || { say "unpack failed"; exit 2; }
export LD_LIBRARY_PATH=$P/lib
M=/tmp/vnni30-35b-a3b.gguf
[ -s $M ] || timeout 120 $P/bin/clover synth --preset qwen3.5-35b-a3b -t 16 -o $M > "$R/synth.log" 2>&1
say "start $(date -u +%T) commit $(cat $PK/COMMIT) synth at $(( $(date +%s) - T0 ))s load $(cut -d' ' -f1-3 /proc/loadavg)"
for lv in avx512 auto; do
  for sw in new old new old; do
    [ $(( $(date +%s) - T0 )) -lt 200 ] || { say "no time for $lv $sw"; continue; }
    env $([ $sw = old ] && echo CLOVER_OLD_SPLIT=1 CLOVER_POOL_CONDVAR=1) timeout 40 $P/bin/bench_backend $M --threads 16 \
      --prompt 512 --gen 12 --block 32 --rows 512 --reps 1 --mb 256 --simd $lv > "$R/ab-$lv-$sw.log" 2>&1
    say "$lv $sw rc=$? at $(( $(date +%s) - T0 ))s: $(grep -E "^(prompt 512 tokens +median|decode|preview 32 rows, p|commit 32-row block +median)" "$R/ab-$lv-$sw.log" | awk "{printf \"%s | \", \$0}" | tr -s " " | cut -c1-400)"
  done
done
say "end $(date -u +%T)"
