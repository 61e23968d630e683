#!/usr/bin/env bash
# --gpu-mem's host modes (branch stage31, src/cuda/backend_cuda_experts.c): where a cache miss's expert bytes
# come from. gmdiag (2026-12-08) showed every staged pass's time in the copies: one pinned 64 MiB staging
# buffer, memcpy from the mapped file and a full sync whenever it fills, ~5 GB/s host to device against
# 54.7 GB/s from pinned memory (35B-A3B synthetic, --route-skew 4: decode 32.8 tok/s at --gpu-mem 16, 16.3 at
# --gpu-mem 8; prompt 512 at 129.7 tok/s). New, chosen by CLOVER_GPU_MEM_HOST:
#   copy   (the default, auto, when MemAvailable holds the experts + max(4 GiB, MemTotal/8)): an anonymous
#          region of slot images filled from the mapping by up to 16 threads at start-up, then cudaHostRegister'd;
#          a miss is one copy of its image from there (runs of consecutive experts/slots merged), no staging
#   ring   (auto's fallback): 8 pinned 4 MiB staging buffers, an event each, the memcpy into a buffer split
#          over up to 8 threads, only the buffer about to be reused waited for
#   stage1 the path gmdiag measured, unchanged (the switch that restores today's behaviour)
# CLOVER_GPU_MEM_STATS=1 now also prints: "host mode asked", "host copy: X GiB ... filling...", "host copy filled
# in T s (R GB/s, N threads), pinned in T s" (or "no host copy (why): the staging ring instead"), "host mode
# ring: ...", and the totals line names the mode; pass lines count staged images and ring waits.
# Run from the source root on the device (the pack is .gpu-stage31/, ignored by git):
#   scripts/device-packs.sh build stage31      (on the dev VM, from a CUDA build of the branch)
#   run(command="bash .gpu-stage31/run.sh", carry=[".gpu-stage31"], timeout_s=300)     <= 230 s
# Steps (each clover under its own timeout, cut to what is left of BUDGET; skipped when < 12 s are left):
#  1. synth the 35B-A3B file (--no-diffusion --route-skew 4, ~20.8 GB) in the background while
#     test_cuda_gpumem runs (every host mode forced and checked in use, bit-equal to the all-device run),
#     then compute-sanitizer memcheck of its q8_0 case (limit 45 s; a timeout is reported, not a failure)
#  2. A: the all-device reference, run --ids (8 tokens) --ar -n 32: its ids are what every later run must print
#  3. C16 (default: auto -> copy), R16 (ring), S16 (stage1) at --gpu-mem 16; C8, R8, S8 at --gpu-mem 8
#  4. B16: bench -b 512 (prompt 512, 16 decode) at --gpu-mem 16, default mode (copy); BR16 the same in ring
# Each run line says "ids equal" or "ids DIFFER" against A, and its decode rate = 31 / decode seconds.
# Predictions (before any run; the file: dense 2.48 GiB, 40 x 256 experts of 1.69 MiB = 16.9 GiB; a decode
# token at 16 GiB misses ~90 experts = ~150 MiB, at 8 GiB ~220 = ~370 MiB):
#  - test_cuda_gpumem rc 0 (4 passed), default host mode copy; memcheck 0 errors (or timed out at 45 s)
#  - synth 24-40 s (it took 24 s in gmdiag)
#  - A: decode 150-220 tok/s (graphs), ids the reference
#  - copy fill: 16.9 GiB in 1.5-6 s (3-11 GB/s, 16 threads: page faults on both sides), pin 0.3-2 s
#  - C16: decode passes 8-14 ms (copies ~150 MiB at 40-55 GB/s = 3-4 ms + ~5 ms of syncs and launches):
#    70-120 tok/s; copy GB/s in the totals 35-55; ids equal
#  - R16: memcpy 150 MiB a token at 15-35 GB/s (8 threads) + overlap: 45-90 tok/s; ids equal
#  - S16: 28-36 tok/s (gmdiag 32.8), ~5 GB/s; ids equal
#  - C8: ~370 MiB a token: 50-90 tok/s; R8: 30-60 tok/s; S8: 14-18 tok/s (gmdiag 16.3); ids equal
#  - B16 (copy): prompt 512 (17 GiB copied, ~10,240 misses merged into far fewer copies) 0.45-0.9 s =
#    570-1,100 tok/s; decode 70-120 tok/s. BR16 (ring): prompt 0.7-1.6 s = 320-730 tok/s; decode 45-90
# If instead: "no host copy (...)" -> the reason (MemAvailable, mmap, cudaHostRegister refused); a slow fill
# (< 2 GB/s) -> page faults (THP off?) dominate; copy GB/s far below 40 -> copies not from pinned memory or
# too small (see the cudaMemcpyAsync count in the totals); ring waits in the thousands a pass -> the memcpy is
# faster than the link (then larger buffers help); ids DIFFER -> a wrong slot image (the tests should say).
set -uo pipefail
PACK=${PACK:-.gpu-stage31}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/stage31logs; rm -rf $O; mkdir -p $O
D=/tmp/stage31; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
BUDGET=${BUDGET:-225}
tar xJf "$PACK/pack.txz" -C "$D" || { say "unpack failed"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD
unset CLOVER_GPU_MEM_STATS CLOVER_GPU_MEM_POLICY CLOVER_GPU_MEM_STAGING CLOVER_CUDA_GPU_MEM CLOVER_GPU_MEM_PIN_S \
  CLOVER_GPU_MEM_PIN CLOVER_GPU_MEM_HOST CLOVER_GPU_MEM_RING_BYTES CLOVER_GPU_MEM_PAR_MIN CLOVER_GPU_MEM_THREADS
C=$D/bin/clover
SB=(); command -v stdbuf > /dev/null && SB=(stdbuf -oL -eL) # stdout line-buffered: a killed bench keeps its rows
say "start $(date -u +%T) pack $(cat "$PACK/COMMIT" 2>/dev/null) budget ${BUDGET}s"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader 2>&1 | tee -a "$S"
free -g | tee -a "$S"
say "/tmp: $(df -hT /tmp 2>/dev/null | tail -1 | awk '{print $2, $3, "free", $5}'), $(nproc) CPUs, THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
# the lines worth keeping: the stats lines but only passes 1-3 and 20 of a run (logs.tgz has all)
keep() {
  grep --line-buffered -E '^gpu-mem|^clover|^\[|^rate|^time|^finish|^prompt|^decode|^device|expert cache|warning|error|Killed|^ids' |
    awk '/^gpu-mem: pass [0-9]+ \(/ { if ($3 + 0 > 3 && $3 + 0 != 20) next } { print substr($0, 1, 420); fflush() }'
}
# LABEL LIMIT_S PREDICTION [ENV=V...] -- CLOVER ARGS...
go() {
  local label=$1 lim=$2 pred=$3; shift 3
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local left=$(( BUDGET - $(el) )); [ "$lim" -gt "$left" ] && lim=$left
  if [ "$lim" -lt 12 ]; then say "== $label skipped: $left s left"; return; fi
  say "== $label ($(el)s, limit ${lim}s): ${envs[*]+${envs[*]} }clover $*   [predicted: $pred]"
  local s; s=$(date +%s)
  env CLOVER_GPU_MEM_STATS=1 ${envs[@]+"${envs[@]}"} timeout -k 3 "$lim" \
    ${SB[@]+"${SB[@]}"} "$C" "$@" > "$O/$label.log" 2>&1
  local rc=$?
  keep < "$O/$label.log" | tee -a "$S"
  local ids dec; ids=$(grep -m1 '^ids:' "$O/$label.log")
  dec=$(awk '/^time / { for (i = 1; i <= NF; i++) if ($i == "decode") print $(i + 1) }' "$O/$label.log" | head -1)
  local verdict=""
  if [ -n "$ids" ] && [ -s "$O/A.ids" ] && [ "$label" != A ]; then
    if [ "$ids" = "$(cat "$O/A.ids")" ]; then verdict="ids equal to A"; else verdict="ids DIFFER from A"; fi
  fi
  [ "$label" = A ] && [ -n "$ids" ] && echo "$ids" > "$O/A.ids"
  say "-- $label rc=$rc $(( $(date +%s) - s ))s$([ "$rc" = 124 ] && echo ' (TIMED OUT)'); ${dec:+decode $dec s = $(awk "BEGIN{if ($dec > 0) printf \"%.1f\", 31 / $dec}") tok/s; }$verdict   [predicted: $pred]"
  (cd "$O" && tar czf "$R/logs.tgz" .) # after every step: a run cut short still returns its logs
}
F=${F:-/tmp/q35skew4nd.gguf}
SYNTH=${SYNTH:---preset qwen3.5-35b-a3b --no-diffusion --route-skew 4}
s=$(date +%s)
if [ ! -s "$F" ]; then
  ( timeout 150 "$C" synth $SYNTH -o "$F.part" > "$O/synth.log" 2>&1 && mv "$F.part" "$F" ) &
fi
ts=$(date +%s)
CLOVER_GPU_MEM_STATS=1 timeout 90 "$D/bin/test_cuda_gpumem" > "$O/t_gpumem.log" 2>&1
rc=$?
say "test_cuda_gpumem: rc=$rc $(( $(date +%s) - ts ))s $(tail -1 "$O/t_gpumem.log")   [predicted rc=0, 4 passed, 0 failed]"
grep -E "^ +(auto host mode|1\.5 layers)" "$O/t_gpumem.log" | head -8 | cut -c1-200 | tee -a "$S"
[ $rc = 0 ] || grep -m8 -E "FAIL|differ|error|host mode" "$O/t_gpumem.log" | tee -a "$S"
if command -v compute-sanitizer > /dev/null; then
  ts=$(date +%s)
  CLOVER_TEST_ONLY=q8_0 timeout -k 3 45 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$D/bin/test_cuda_gpumem" > "$O/t_memcheck.log" 2>&1
  rc=$?
  say "memcheck test_cuda_gpumem q8_0: rc=$rc $(( $(date +%s) - ts ))s $(grep -m1 -E 'ERROR SUMMARY' "$O/t_memcheck.log")$([ $rc = 124 ] && echo ' (timed out)')   [predicted rc=0, 0 errors, or a timeout at 45 s]"
  [ $rc = 0 ] || [ $rc = 124 ] || grep -m6 -E "Invalid|FAIL|error" "$O/t_memcheck.log" | cut -c1-200 | tee -a "$S"
else
  say "compute-sanitizer: not on PATH (memcheck skipped)"
fi
(cd "$O" && tar czf "$R/logs.tgz" .)
wait
say "synth $(( $(date +%s) - s ))s: $(ls -l "$F" 2>/dev/null | awk '{print $5}') bytes   [predicted 24-40 s, ~20.8e9 bytes]"
[ -s "$F" ] || { tail -3 "$O/synth.log" | tee -a "$S"; say "no model: stop"; exit 1; }
free -g | sed -n 2p | tee -a "$S" # buff/cache should now hold the file
IDS=1000,1001,1002,1003,1004,1005,1006,1007
RUN=(run -m "$F" --ids "$IDS" --ar -n 32 -c 1024 --device cuda)
go A 30 "all-device reference: decode 150-220 tok/s; rc 0" -- "${RUN[@]}"
go C16 45 "default = copy (fill 1.5-6 s, pin 0.3-2 s); decode passes 8-14 ms, 70-120 tok/s; copies 35-55 GB/s; ids equal" -- \
  "${RUN[@]}" --gpu-mem 16
go R16 35 "ring: 45-90 tok/s; ids equal" CLOVER_GPU_MEM_HOST=ring -- "${RUN[@]}" --gpu-mem 16
go S16 35 "stage1 (as gmdiag): 28-36 tok/s, ~5 GB/s; ids equal" CLOVER_GPU_MEM_HOST=stage1 -- "${RUN[@]}" --gpu-mem 16
go C8 45 "copy: 50-90 tok/s; ids equal" CLOVER_GPU_MEM_HOST=copy -- "${RUN[@]}" --gpu-mem 8
go R8 35 "ring: 30-60 tok/s; ids equal" CLOVER_GPU_MEM_HOST=ring -- "${RUN[@]}" --gpu-mem 8
go S8 35 "stage1 (as gmdiag): 14-18 tok/s; ids equal" CLOVER_GPU_MEM_HOST=stage1 -- "${RUN[@]}" --gpu-mem 8
go B16 50 "copy: prompt 512 in 0.45-0.9 s = 570-1,100 tok/s; decode 70-120 tok/s; rc 0" -- \
  bench -m "$F" --prompt-tokens 512 --decode-tokens 16 --device cuda --gpu-mem 16
go BR16 40 "ring: prompt 512 in 0.7-1.6 s = 320-730 tok/s; decode 45-90 tok/s; rc 0" CLOVER_GPU_MEM_HOST=ring -- \
  bench -m "$F" --prompt-tokens 512 --decode-tokens 16 --device cuda --gpu-mem 16
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
