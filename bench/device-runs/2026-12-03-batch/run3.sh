#!/usr/bin/env bash
# Issue 25, branch batch-untested merged with main (HEAD when packed: $PACK/COMMIT), device call "run3" (the
# first run of its changes: the stacked decode's integer chunk GEMM for more than 8 rows, the stacked previews
# and block resolves; since the review: the executor's pinned logits sized for its 64 decode rows, plog for
# 256 rows, a 64-row executor where the 512-row one does not fit). Run from the source root:
#   run(command="bash .gpu-batch/run.sh", carry=[".gpu-batch"], timeout_s=600)        ~4-6 min
#   run(command="STEPS='b' bash .gpu-batch/run.sh", carry=[".gpu-batch"], timeout_s=600) bench_batch, ~5 min
# STEPS (default "t m s"):
#  t  test_cuda_batch, _preview, _engine, _backend, _matmul (<= 120 s each; 10, 1, 0, 1, 5 s on main's call 1);
#     when test_cuda_batch fails, again with CLOVER_CUDA_NO_STACK_PREVIEW=1 and with
#     CLOVER_CUDA_STACK_DECODE_ONLY=1 (which switch's path broke it)
#  m  compute-sanitizer memcheck of test_cuda_batch's q8_0 case (the stacked executor's 512-row buffers and
#     per-sequence offsets; <= 240 s) and of test_cuda_preview's batched_equals_alone (<= 90 s). No kernel
#     changed on this branch, so no racecheck. On gVisor the tool refuses the device: said, and skipped.
#  s  clover serve --device cuda, 35B-A3B synthetic: AR 16 x 64 tokens, then block diffusion 8 x 32 tokens
#     (synth of both files in the background from the start, ~20 s each)
#  b  bench_batch --device cuda at 1..32 requests (backend-run.sh's batch step)
# Outputs: $OUT/summary.txt and $OUT/logs.tgz (every log), nothing else.
# Predictions (before the run; dev VM review 2026-12-03):
#  - t: all pass; the batch test's q8_0 batches of 12..32 now take the integer chunk GEMM for the stacked
#    decode (bits = the decode kernel's, test_row_invariance on main) and previews stack: still identical.
#    If only q8_batches fails and passes under CLOVER_CUDA_STACK_DECODE_ONLY=1: the chunk path's bits differ
#    from the decode kernel's for some product (an integer-path bug, not a stacking one).
#  - m: 0 errors.
#  - s, AR: sequential ~180 tok/s (call 1: 181), 16 concurrent 500-800 tok/s (call 1 with decode kernels per 8
#    rows: 353), ratio 3-4.5x (bar 8x; the remaining gap: per-step host work, 1 MB of logits per row copied back
#    and memcpy'd every step because engine_ar_plan asks for last_logits even when the device picks), identical.
#  - s, clover: sequential 15-40 tok/s, 8 concurrent 1.5-2.5x that (bar 4x), identical.
set -uo pipefail
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/logs; rm -rf $O; mkdir -p $O
P=/tmp/clover-pack; mkdir -p "$P"; tar xzf .gpu-batch/pack.tgz -C "$P" || exit 2
export LD_LIBRARY_PATH=$P/lib CLOVER_SOURCE_DIR=$PWD
STEPS=${STEPS:-t m s}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
say "start $(date -u +%T) steps: $STEPS pack $(cat .gpu-batch/COMMIT 2>/dev/null)"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
syn() { [ -s "$1" ] || { timeout 200 "$P/bin/clover" synth --preset qwen3.5-35b-a3b ${2:-} -o "$1.part" \
    > "$O/synth-$(basename "$1").log" 2>&1 && mv "$1.part" "$1"; }; }
sp=""
if has s; then ( syn /tmp/synth35-ar.gguf --no-diffusion; syn /tmp/synth35-clover.gguf ) & sp=$!; fi
if has t; then
  for n in test_cuda_batch test_cuda_preview test_cuda_engine test_cuda_backend test_cuda_matmul; do
    t0=$(date +%s); timeout 120 "$P/bin/$n" > "$O/$n.log" 2>&1; rc=$?
    say "$n rc=$rc $(( $(date +%s) - t0 ))s $(tail -1 "$O/$n.log")"
    [ $rc = 0 ] || grep -m5 -E "FAIL|differ" "$O/$n.log" | tee -a "$S"
    if [ $n = test_cuda_batch ] && [ $rc != 0 ] && [ $rc != 77 ]; then
      for v in CLOVER_CUDA_NO_STACK_PREVIEW CLOVER_CUDA_STACK_DECODE_ONLY; do
        env $v=1 timeout 120 "$P/bin/$n" > "$O/$n-$v.log" 2>&1
        say "  $n with $v=1 rc=$? $(tail -1 "$O/$n-$v.log")"
      done
    fi
  done
fi
SAN_OK=1
command -v compute-sanitizer > /dev/null || { SAN_OK=0; has m || has r && say "compute-sanitizer: not on PATH"; }
san() { # TOOL LIMIT BIN CASES
  local tool=$1 lim=$2 n=$3 cases=${4:-} log="$O/$1-$3.log" s=$(date +%s)
  [ $SAN_OK = 1 ] || return 1
  CLOVER_TEST_ONLY=$cases timeout "$lim" compute-sanitizer --tool "$tool" "$P/bin/$n" > "$log" 2>&1; local rc=$?
  say "$tool $n${cases:+ [$cases]} rc=$rc $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$log" | tail -1) $(grep -E 'passed, [0-9]+ failed|SKIP' "$log" | tail -1)"
  if grep -qE "Device not supported|not supported on this|Unable to|LibraryNotLoaded" "$log"; then
    SAN_OK=0; say "compute-sanitizer cannot run here: $(grep -m1 -E 'not supported|Unable|Library' "$log")"; return 1
  fi
  [ $rc = 124 ] && say "  ($tool $n hit its ${lim}s limit: a partial run)"
  grep -m6 -E "Invalid|Error:|out of bounds|misaligned" "$log" | tee -a "$S"
}
if has m; then
  san memcheck 240 test_cuda_batch q8_batches
  san memcheck 90 test_cuda_preview batched_equals_alone
fi
if has s; then
  while [ ! -s /tmp/synth35-ar.gguf ] && kill -0 $sp 2>/dev/null; do sleep 1; done
  OUT=$O/serve-ar SERVE_KINDS=ar SERVE_N=16 SERVE_TOKENS=64 bash .gpu-batch/backend-run.sh .gpu-batch serve > /dev/null 2>&1
  grep -E "serve|backend|clover_device" $O/serve-ar/summary.txt | tee -a "$S"
  wait $sp
  OUT=$O/serve-clover SERVE_KINDS=clover SERVE_N=8 SERVE_TOKENS=32 bash .gpu-batch/backend-run.sh .gpu-batch serve > /dev/null 2>&1
  grep -E "serve|backend|clover_device" $O/serve-clover/summary.txt | tee -a "$S"
fi
if has b; then
  OUT=$O/batch bash .gpu-batch/backend-run.sh .gpu-batch batch > /dev/null 2>&1
  cat $O/batch/summary.txt >> "$S"
fi
say "end $(date -u +%T)"
(cd "$O" && tar czf "$R/logs.tgz" .)
