#!/usr/bin/env bash
# Issue 31, branch gmdiag: where does --gpu-mem's time go? gpumem31's first H200 run (2026-12-07-gpumem31)
# passed every test bit-equal, but `clover bench -b 512 --gpu-mem 16` on the 35B-A3B synthetic file had not
# finished after 200 s (predicted ~1-2 s of prompt, ~95 tok/s decode) and no log came back (and bench's
# stdout is block-buffered: a killed bench prints nothing). This run is short, prints as it goes (every line
# is tee'd into $OUT/summary.txt at once, logs.tgz is rewritten after every step, so a killed run still
# returns them), and runs each clover under its own timeout with CLOVER_GPU_MEM_STATS=1, which now prints on
# stderr (src/cuda/backend_cuda_experts.c):
#   gpu-mem: budget ... (slots)                        when the pool is made
#   gpu-mem: pinning the experts' X GiB ... / pinned a of b GiB in t s (every 2 s) / pinned X GiB in T s
#            (or: cannot be pinned (why) after T s: staging copies)
#   gpu-mem: pass N (commit|preview, R rows): W ms wall = syncs (the routing-id syncs: they also wait for the
#            pass's earlier kernels and the previous layer's copies) + steps (the pool's host bookkeeping) +
#            issue (the cudaMemcpyAsync calls; the staging memcpy and its syncs) + rest (kernel launches) (tail:
#            the wait after the last enqueue); layer steps, uses, misses, copies, MiB, staged copies, syncs
#   gpu-mem: pass N layer L: the routing-id sync took T s    (at once, for any sync over 1 s: a stall)
#   gpu-mem: pass N failed: ...; "clover: warning: the cuda backend failed ... moved to the cpu backend"
#            (the failover: a CUDA error in a pass silently finishes the request on the CPU, which for this
#            35B file on 16 cores would take minutes: one candidate for the 200 s)
#   gpu-mem: totals, hit rate, GB/s, pin time; unpinned in T s     when the pool is freed (at exit)
# Also changed on the branch: LRU's victim is the head of a list, not a scan of ~7,600 slots per miss
# (expert_cache.c; the same decisions, test_expert_cache checks it against the scan; measured on the dev VM:
# 7.6 -> 0.07 us a miss at 7,600 slots); the pin stops after CLOVER_GPU_MEM_PIN_S seconds (default 30): the
# layers pinned by then are copied from directly, the rest through staging (a pin that crawls can no longer
# take the request: the pool is allocated right before the pin, and gpumem31's stuck bench held 15.3 GB).
# Run from the source root on the device (the pack is .gpu-gmdiag/, ignored by git):
#   scripts/device-packs.sh build gmdiag      (on the dev VM, from a CUDA build of the branch)
#   run(command="bash .gpu-gmdiag/run.sh", carry=[".gpu-gmdiag"], timeout_s=300)     <= 240 s
# Steps (each clover under its own timeout, cut to what is left of 235 s; skipped when < 15 s are left):
#  0. nvidia-smi memory, free -g, /tmp's file system (tmpfs or disk: what cudaHostRegister pins)
#  1. synth: the 35B-A3B file, --no-diffusion --route-skew 4 (~20 GB), in the background while
#     test_cuda_gpumem runs twice: as merged (every comparison bit-equal, rc 0) and with
#     CLOVER_GPU_MEM_PIN_S=1e-9 (the limit stops the pin after its first range: the partly-pinned path, the
#     rest staged; every comparison still bit-equal, rc 0)                        [predicted 25-60 s]
#  2. L16: run --ar -p hi -n 8 at --gpu-mem 16 (-c 1024)
#  3. L8:  the same at --gpu-mem 8
#  4. P128: a 128-token prompt (--ids), 8 tokens, at --gpu-mem 16
#  2b. pin: bench_cuda_pin on the file (what pinning costs here, and which kind: anonymous, malloc'd, the
#     file's pages MAP_PRIVATE / MAP_SHARED, 64 MiB against 1 GiB), at most 30 s, left out when < 108 s remain
#  5. B16: bench, 512 prompt, 16 decode tokens, at --gpu-mem 16
#  6. if time is left: S16 (L16 through staging: CLOVER_GPU_MEM_STAGING=1, nothing pinned), then A (L16 on the
#     whole device, no --gpu-mem: the reference for the decode rate)
#  When L16's pin takes over 10 s (or never says it finished), L8, P128 and B16 run with
#  CLOVER_GPU_MEM_STAGING=1 so that their passes are measured and not their pins (said in the summary), and
#  S16 is skipped (they are it).
# What gpumem31's stuck run already says: its GPU peak, 15,343 MiB, is the CUDA context + the dense 2.49 GiB +
# a pool of ~12.3 GiB, without the session's ~1.1 GiB arena (512 rows: the logits and the pick copies are
# 485 MiB each), and the arena is allocated right after cuda_experts_create, whose last step is the pin. So
# the 200 s were most likely inside cudaHostRegister of the 16.9 GiB file mapping (< 0.1 GB/s), not in passes.
# Predictions (before any run; the file: dense ~2.5 GiB, 40 x 256 experts of 1,769,472 B = 16.9 GiB):
#  - pin: crawls, < 0.1 GB/s ("pinned a of b GiB" lines every 2 s), the 30 s limit stops it with < 3 GiB pinned
#    and the rest staged; then L8, P128 and B16 stage everything. (Had it been a healthy pin: 3-15 s.)
#  - L16: pool ~12.5 GiB, ~7,600 slots (74%); the prompt pass (23 chat-template tokens): ~3,000-4,500 misses,
#    5-7 GiB, 150-400 ms wall, mostly syncs (they wait for the copies); decode passes 8-25 ms wall (syncs
#    ~5-15 ms, steps < 0.3 ms with the list LRU, issue 0.5-2 ms for ~50-200 copies); ~40-100 tok/s; whole
#    command 10-30 s (load + dense upload ~2-5 s, pin, exit + unpin 1-5 s). rc 0.
#  - L8: pool ~4.5 GiB, ~2,750 slots (27%); decode passes 15-35 ms (more misses); 30-70 tok/s; rc 0.
#  - P128: the 128-row pass: ~200 distinct experts a layer, ~8,000 misses, ~13 GiB: 0.3-0.8 s wall (syncs),
#    issue 30-100 ms (24,000 cudaMemcpyAsync); decode as L16 or slower (the prompt evicted its start); rc 0.
#  - B16: prompt 512 ~10,240 misses ~17 GiB: 0.4-0.9 s = 550-1,300 tok/s; decode 40-100 tok/s; rc 0.
#  - S16: issue time = the staging memcpy: 5-7 GiB at 4-10 GB/s -> 0.5-1.5 s in the prompt pass; 20-60 tok/s.
#  - A: decode ~170-200 tok/s (graph), the reference.
#  If instead: a pass line with syncs of seconds -> the copies (GB/s) or a stall; steps of seconds -> the
#  pool's bookkeeping; issue of seconds -> cudaMemcpyAsync from the mapping (or staging); "pass ... failed"
#  or "moved to the cpu backend" -> a CUDA error sent the request to the CPU; "pinned a of b GiB" lines
#  crawling -> cudaHostRegister (then the 30 s limit and the staging lines show the passes without it).
set -uo pipefail
PACK=${PACK:-.gpu-gmdiag}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/gmdiaglogs; rm -rf $O; mkdir -p $O
D=/tmp/gmdiag; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
BUDGET=${BUDGET:-235}
tar xJf "$PACK/pack.txz" -C "$D" || { say "unpack failed"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD
unset CLOVER_GPU_MEM_STATS CLOVER_GPU_MEM_POLICY CLOVER_GPU_MEM_STAGING CLOVER_CUDA_GPU_MEM CLOVER_GPU_MEM_PIN_S
C=$D/bin/clover
SB=(); command -v stdbuf > /dev/null && SB=(stdbuf -oL -eL) # stdout line-buffered: a killed bench keeps its rows
say "start $(date -u +%T) pack $(cat "$PACK/COMMIT" 2>/dev/null) budget ${BUDGET}s"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader 2>&1 | tee -a "$S"
free -g | tee -a "$S"
say "/tmp: $(df -hT /tmp 2>/dev/null | tail -1 | awk '{print $2, $3, "free", $5}'), $(nproc) CPUs"
# the lines worth keeping from a run's stdout + stderr
KEEP='^gpu-mem|^clover|^\[|^rate|^time|^finish|^prompt|^decode|^device|expert cache|warning|error|Killed|^ids'
# LABEL LIMIT_S PREDICTION [ENV=V...] -- CLOVER ARGS...: every kept line into the summary as it comes
go() {
  local label=$1 lim=$2 pred=$3; shift 3
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local left=$(( BUDGET - $(el) )); [ "$lim" -gt "$left" ] && lim=$left
  if [ "$lim" -lt 15 ]; then say "== $label skipped: $left s left"; return; fi
  say "== $label ($(el)s, limit ${lim}s): ${envs[*]+${envs[*]} }clover $*   [predicted: $pred]"
  local s; s=$(date +%s)
  env CLOVER_CUDA_GPU_MEM=1 CLOVER_GPU_MEM_STATS=1 ${envs[@]+"${envs[@]}"} timeout -k 3 "$lim" \
    ${SB[@]+"${SB[@]}"} "$C" "$@" 2>&1 | tee "$O/$label.log" | grep --line-buffered -E "$KEEP" | cut -c1-400 | tee -a "$S"
  local rc=${PIPESTATUS[0]}
  say "-- $label rc=$rc $(( $(date +%s) - s ))s$([ "$rc" = 124 ] && echo ' (TIMED OUT)')"
  (cd "$O" && tar czf "$R/logs.tgz" .) # after every step: a run cut short still returns its logs
}
F=${F:-/tmp/q35skew4nd.gguf}
SYNTH=${SYNTH:---preset qwen3.5-35b-a3b --no-diffusion --route-skew 4}
s=$(date +%s)
if [ ! -s "$F" ]; then
  ( timeout 150 "$C" synth $SYNTH -o "$F.part" > "$O/synth.log" 2>&1 && mv "$F.part" "$F" ) &
fi
for pin in default 1e-9; do # while synth runs; 1e-9: the limit stops the pin after one range (partly pinned)
  ts=$(date +%s)
  if [ $pin = default ]; then timeout 60 "$D/bin/test_cuda_gpumem" > "$O/t_gpumem_$pin.log" 2>&1
  else CLOVER_GPU_MEM_PIN_S=$pin timeout 60 "$D/bin/test_cuda_gpumem" > "$O/t_gpumem_$pin.log" 2>&1; fi
  rc=$?
  say "test_cuda_gpumem, pin limit $pin: rc=$rc $(( $(date +%s) - ts ))s $(tail -1 "$O/t_gpumem_$pin.log")   [predicted rc=0, all passed]"
  [ $rc = 0 ] || grep -m6 -E "FAIL|differ|error" "$O/t_gpumem_$pin.log" | tee -a "$S"
done
wait
say "synth $(( $(date +%s) - s ))s: $(ls -l "$F" 2>/dev/null | awk '{print $5}') bytes   [predicted 25-60 s, ~20.8e9 bytes]"
[ -s "$F" ] || { tail -3 "$O/synth.log" | tee -a "$S"; say "no model: stop"; exit 1; }
free -g | sed -n 2p | tee -a "$S" # buff/cache should now hold the file
IDS128=$(seq -s, 1000 1127)
go L16 60 "pin crawls (< 0.1 GB/s), stopped at 30 s with < 3 GiB pinned, the rest staged: prompt pass 0.5-1.5 s (issue = staging memcpy), decode passes 15-50 ms, 20-60 tok/s; (a healthy pin: 3-15 s, prompt 0.15-0.4 s, 40-100 tok/s); rc 0" -- \
  run -m "$F" -p hi --ar -n 8 -c 1024 --device cuda --gpu-mem 16
# a slow pin: the later lines measure passes, not pins
PIN_S=$(grep -oE "^gpu-mem: pinned [0-9.]+ GiB in [0-9.]+ s \(" "$O/L16.log" | tail -1 | awk '{print $6}')
X=(CLOVER_GPU_MEM_PIN_S=30)
if grep -q "cannot be pinned" "$O/L16.log"; then
  say "L16: the mapping cannot be pinned: every line stages"
elif [ -z "$PIN_S" ] || awk "BEGIN{exit !($PIN_S > 10)}"; then
  X=(CLOVER_GPU_MEM_STAGING=1)
  say "L16's pin: ${PIN_S:-never finished} s: L8, P128 and B16 run with CLOVER_GPU_MEM_STAGING=1, S16 skipped"
fi
# the pin's mechanism: bench_cuda_pin (cudaMallocHost, a malloc'd region registered, the file's pages read then
# registered read-only at 64 MiB and 1 GiB, MAP_PRIVATE as clover maps it and MAP_SHARED, copy rates)
left=$(( BUDGET - $(el) )); lim=30; [ $lim -gt $((left - 100)) ] && lim=$((left - 100))
if [ $lim -ge 8 ]; then
  say "== pin ($(el)s, limit ${lim}s): bench_cuda_pin $F   [predicted: cudaMallocHost 1 GiB 0.1-0.6 s; malloc'd 1 GiB registered 0.05-0.3 s; pages read 0.1-0.5 s; the file's 1 GiB registered read-only: the crawl if L16's pin crawled (< 0.1 GB/s), else 0.05-0.5 s; copies from pinned 20-50 GB/s, from unpinned file pages 3-10 GB/s]"
  timeout -k 3 $lim ${SB[@]+"${SB[@]}"} "$D/bin/bench_cuda_pin" "$F" 2>&1 | tee "$O/pin.log" | cut -c1-200 | tee -a "$S"
  say "-- pin rc=${PIPESTATUS[0]}"
fi
go L8 45 "pool ~2,750 slots; staged (expected): decode passes 25-70 ms, 15-40 tok/s; (pinned: 15-35 ms, 30-70 tok/s); rc 0" "${X[@]}" -- \
  run -m "$F" -p hi --ar -n 8 -c 1024 --device cuda --gpu-mem 8
go P128 45 "128-row pass (~8,000 misses, ~13 GiB): staged 1.5-3.5 s, pinned 0.3-0.8 s; decode staged 15-50, pinned 30-100 tok/s; rc 0" "${X[@]}" -- \
  run -m "$F" --ids "$IDS128" --ar -n 8 -c 1024 --device cuda --gpu-mem 16
go B16 70 "prompt 512 (~17 GiB copied): staged 2-4.5 s = 110-250 tok/s, pinned 550-1,300 tok/s; decode staged 15-50, pinned 40-100 tok/s; rc 0" "${X[@]}" -- \
  bench -m "$F" --prompt-tokens 512 --decode-tokens 16 --device cuda --gpu-mem 16
if [ "${X[0]}" != CLOVER_GPU_MEM_STAGING=1 ]; then
  go S16 35 "staging: prompt pass issue 0.5-1.5 s (host memcpy), decode 20-60 tok/s; rc 0" CLOVER_GPU_MEM_STAGING=1 -- \
    run -m "$F" -p hi --ar -n 8 -c 1024 --device cuda --gpu-mem 16
fi
go A 30 "all-device reference: decode ~170-200 tok/s; rc 0" -- \
  run -m "$F" -p hi --ar -n 8 -c 1024 --device cuda
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
