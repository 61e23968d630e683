#!/usr/bin/env bash
# Written in the 2026-12-05 02:35 session after pool30's run (same session): the pool's yielding poll
# (src/base/threadpool.c: after the 50 us spin an idle thread polls with sched_yield() for CLOVER_POOL_YIELD_US more,
# default 2000; 0 = the pool30 behaviour) on the H200 host, 16 threads, the 35B-A3B file.
#   cmake --build build -j2 && EXTRA_BINS="bench_pool test_threadpool test_batch" scripts/device-packs.sh build yield30
#   run(command="bash .gpu-yield30/run.sh", carry=[".gpu-yield30"], timeout_s=300)  (or riding after another call)
# STEPS (default "t p b"):
#  t  test_threadpool (with the yielding-poll case), test_batch (its step-count case now pinned to the CPU backend)
#  p  bench_pool at 16 threads, default (yield 2000) and CLOVER_POOL_YIELD_US=0
#  b  bench_backend preview / commit / prompt 512 / decode: amx and avx2, default and YIELD_US=0, alternating
# Predictions (before the run; pool30 measured: amx 0.249 s with the 50 us spin, 0.151 with a 2000 us pure spin,
# avx2 0.368 with the 50 us spin; 262 of 282 preview runs woke sleeping workers):
#  t: all pass.
#  p: after a gap (300 us): the last arrival ~3-5 us (pool30: 3540 us at spin 50, 3.1 at spin 500).
#  b: amx default 0.150-0.160 s, runs that woke sleepers < 20 of 282; YIELD=0 ~0.25 (as pool30's amx-new);
#     avx2 default ~0.27-0.30 (the same ~0.1 s of wake-ups gone); ratio avx2 / amx ~1.8-2.0x (bar 3x: not met);
#     prompt 512 amx ~2.8 s (pool30 spin2000 2.77), decode (generation, 4 tokens) ~0.045 s.
set -uo pipefail
PACK=${PACK:-.gpu-yield30}
STEPS=${STEPS:-t p b}
. "$PACK/lib.sh"
dr_init yield30
unset CLOVER_POOL_WAIT_ALL CLOVER_POOL_SPIN_US CLOVER_POOL_YIELD_US CLOVER_POOL_CONDVAR CLOVER_NO_AMX CLOVER_NO_AVX512
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cpus); load $(cut -d' ' -f1-3 /proc/loadavg)"
TH=16
M=${YIELD30_MODEL:-/tmp/pool30-35b-a3b.gguf}
SPID=
if has b && [ ! -s "$M" ]; then
  ( timeout 170 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o "$M.part" > "$O/synth.log" 2>&1 && mv "$M.part" "$M" ) &
  SPID=$!
fi
if has t; then
  tst test_threadpool yield 60
  tst test_batch cpu 120
fi
if has p; then
  for c in yield2000: yield0:CLOVER_POOL_YIELD_US=0; do
    tag=${c%%:*}; envs=${c#*:}
    env $envs timeout 60 "$D/bin/bench_pool" --threads $TH --reps 300 > "$O/pool_$tag.log" 2>&1
    say "bench_pool $tag ($envs) rc=$? at +$(el)s"
    grep -E "arrive|empty|work \(" "$O/pool_$tag.log" | sed 's/^/    /' | tee -a "$S" > /dev/null
  done
fi
fig() { awk -v p="$2" 'index($0, p) == 1 && $0 ~ /median/ { for (i = 1; i <= NF; i++) if ($i == "median") { print $(i + 1); exit } }' "$1" 2>/dev/null; }
ops() { grep -A1 -E "^$2" "$1" 2>/dev/null | sed -n 2p | sed -E 's/ +/ /g; s/^ per run: //; s/ s;.*//'; }
pl() { grep -A2 -E "^$2" "$1" 2>/dev/null | grep -m1 "pool per run" | sed -E 's/ +/ /g; s/^ pool per run: //'; }
if has b; then
  [ -z "$SPID" ] || { wait $SPID; say "synth at +$(el)s: $(tail -1 "$O/synth.log")"; }
  [ -s "$M" ] || { say "no model file $M"; dr_end; exit 3; }
  for c in amx-y2000:auto: avx2-y2000:avx2: amx-y0:auto:CLOVER_POOL_YIELD_US=0 avx2-y0:avx2:CLOVER_POOL_YIELD_US=0 \
           amx-y2000:auto: avx2-y2000:avx2:; do
    IFS=: read -r tag lv envs <<< "$c"
    [ "$(el)" -lt "${YIELD30_BUDGET:-240}" ] || { say "no time for $tag"; continue; }
    k=0; while [ -e "$O/b_$tag$k.log" ]; do k=$((k + 1)); done; L=$O/b_$tag$k.log
    env $envs timeout 80 "$D/bin/bench_backend" "$M" --threads $TH --prompt 512 --gen 4 --block 32 --rows 512 \
      --reps 3 --mb 256 --simd $lv > "$L" 2>&1
    say "$tag ($envs) rc=$? at +$(el)s: preview p=0.9 $(fig "$L" 'preview 32 rows, p') s ($(ops "$L" 'preview 32 rows, p'); pool $(pl "$L" 'preview 32 rows, p')); commit 32 $(fig "$L" 'commit 32-row') s; prompt 512 $(fig "$L" 'prompt 512') s; generation $(fig "$L" 'generation') s"
  done
  a=$(for f in "$O"/b_amx-y2000*.log; do fig "$f" 'preview 32 rows, p'; done | sort -g | head -1)
  v=$(for f in "$O"/b_avx2-y2000*.log; do fig "$f" 'preview 32 rows, p'; done | sort -g | head -1)
  say "preview 32 rows p=0.9 (yield 2000), best median: amx ${a:-?} s, avx2 ${v:-?} s, ratio $(awk -v a="$a" -v v="$v" 'BEGIN { if (a > 0 && v > 0) printf "%.2fx", v / a; else print "?" }') (bar 3x)"
fi
dr_end
