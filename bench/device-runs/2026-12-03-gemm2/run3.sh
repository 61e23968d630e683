#!/usr/bin/env bash
# Issue 24, branch gemm2-untested merged with main (wt-gemm2 HEAD when packed: see $PACK/COMMIT), device call
# "run3": the first run of its kernel changes (float products a warp per (row, output) and cuda_matmul_exact;
# igemm_q8_kernel, Q8_0 weights decoded once for all row tiles, CLOVER_CUDA_IG_Q8=0 = the previous form;
# ig_pieces copy addresses set once; moe_group_fast_kernel; k_block_head_s; k_coreset 16 warps + bit mask),
# with compute-sanitizer. Run from the source root:
#   run(command="PACK=.gpu-gemm2 bash .gpu-gemm2/run3.sh", carry=[".gpu-gemm2"], timeout_s=600)  ~3-5 min (limits: <= 8)
#   run(command="PACK=.gpu-gemm2 STEPS='l e' bash .gpu-gemm2/run3.sh", carry=[".gpu-gemm2"], timeout_s=420)
# STEPS (default "t m r"):
#  t  test_cuda_matmul, _preview, _backend, _engine, _batch (each <= 120 s; 0-5 s each on main, 2026-12-02)
#  m  compute-sanitizer memcheck: all of test_cuda_matmul (<= 180 s), test_cuda_preview's coreset, GDN block
#     and golden cases (<= 90 s)
#  r  racecheck, the changed kernels at small shapes: test_cuda_matmul's test_chunk_thin, test_exact,
#     test_moe_many_experts (q8 tiles of 32 slots, the parallel grouping's scans) and test_chunk_types (the
#     q8 dense tiles with scratch, 77 rows) (<= 120 s); test_cuda_preview's coreset_kernel and gdn_block_35b
#     (<= 60 s). On a gVisor machine compute-sanitizer refuses the device: the summary says so, steps m/r stop.
#  l  CLOVER_BENCH_LAYER=1 bench_cuda_matmul: before ($PACK/base.tgz), CLOVER_CUDA_IG_Q8=0, as built
#  e  the 35B-A3B file end to end (bench_cuda_preview; synth ~20 s first)
# Outputs: $OUT/summary.txt and $OUT/logs.tgz (every log), nothing else.
# Predictions (written before any run, dev VM review 2026-12-03):
#  - t: every test passes, including the new test_moe_many_experts (100/300/1100 experts), test_chunk_thin,
#    test_exact, gdn_block_35b; test_row_invariance bit-identical at 1..64 rows with the q8 tile kernel.
#    Risk: test_row_invariance at 4096 wide if the q8 kernel's partial order differs from igemm_kernel's.
#  - m: 0 errors in both. r: 0 hazards (the reduction overlays the stages only after cp.async.wait_all and
#    a barrier; the staged GDN head and the grouping's scans have a barrier between writes and reads).
#  - l (from run2's header): router f32 256x2048 at 8 rows ~30 -> ~8 us; shexp gate 1x2048 at 32 rows ~90 ->
#    ~4 us; dense q8_0 at 32 rows about halved (qkv 8192x2048 ~22 -> ~11 us); expert grouping 28 -> ~4 us;
#    gdn block operator ~70 -> ~15 us; coreset + routing ~90 -> ~40 us.
#  - e: preview first pass with coreset 22.7 -> ~12 ms, without 19.1 -> ~10 ms; commit 25.2 -> ~16 ms.
set -uo pipefail
PACK=${PACK:-.gpu-gemm2}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/logs; rm -rf $O; mkdir -p $O
D=/tmp/ck; B=/tmp/base; mkdir -p "$D" "$B"
tar xzf "$PACK/pack.tgz" -C "$D" || exit 2
[ -f "$PACK/base.tgz" ] && tar xzf "$PACK/base.tgz" -C "$B"
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
STEPS=${STEPS:-t m r}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
say "start $(date -u +%T) steps: $STEPS pack $(cat "$PACK/COMMIT" 2>/dev/null)"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
if has e; then F=/tmp/q35d.gguf; ( [ -s $F ] || timeout 90 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $F > "$O/synth.log" 2>&1 ) & fi
if has t; then
  for n in test_cuda_matmul test_cuda_preview test_cuda_backend test_cuda_engine test_cuda_batch; do
    [ -x "$D/bin/$n" ] || { say "test $n: not in the pack"; continue; }
    s=$(date +%s); timeout 120 "$D/bin/$n" > "$O/t_$n.log" 2>&1; rc=$?
    say "test $n rc=$rc $(( $(date +%s) - s ))s $(tail -1 "$O/t_$n.log")"
    [ $rc = 0 ] || grep -E "FAIL|differ|error" "$O/t_$n.log" | head -8 | tee -a "$S"
  done
fi
# SAN TOOL LIMIT BIN [CASES]: one compute-sanitizer run; 1 when the tool cannot run on this machine
SAN_OK=1
command -v compute-sanitizer > /dev/null || { SAN_OK=0; has m || has r && say "compute-sanitizer: not on PATH"; }
san() {
  local tool=$1 lim=$2 n=$3 cases=${4:-} log="$O/$1-$3.log" s=$(date +%s)
  [ $SAN_OK = 1 ] || return 1
  CLOVER_TEST_ONLY=$cases timeout "$lim" compute-sanitizer --tool "$tool" "$D/bin/$n" > "$log" 2>&1; local rc=$?
  say "$tool $n${cases:+ [$cases]} rc=$rc $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1) $(grep -E 'passed, [0-9]+ failed|SKIP' "$log" | tail -1)"
  if grep -qE "Device not supported|not supported on this|Unable to|LibraryNotLoaded" "$log"; then
    SAN_OK=0; say "compute-sanitizer cannot run here: $(grep -m1 -E 'not supported|Unable|Library' "$log")"; return 1
  fi
  [ $rc = 124 ] && say "  ($tool $n hit its ${lim}s limit: a partial run)"
  grep -m6 -E "Invalid|Race|Hazard|hazard|Error:|out of bounds|misaligned" "$log" | tee -a "$S"
}
if has m; then
  san memcheck 180 test_cuda_matmul
  san memcheck 90 test_cuda_preview coreset_kernel,gdn_block_35b,golden_previews,batched_equals_alone
fi
if has r; then
  san racecheck 120 test_cuda_matmul test_chunk_thin,test_exact,test_moe_many_experts,test_chunk_types
  san racecheck 60 test_cuda_preview coreset_kernel,gdn_block_35b
fi
if has l; then
  run_layer() { say "== $1"; shift; timeout 40 env CLOVER_BENCH_LAYER=1 "$@" 2>&1 | tee -a "$S" > /dev/null; }
  [ -x "$B/bin/bench_cuda_matmul" ] && run_layer "before (main d22a676 kernels)" "$B/bin/bench_cuda_matmul"
  run_layer "after, previous Q8_0 GEMM form (CLOVER_CUDA_IG_Q8=0)" env CLOVER_CUDA_IG_Q8=0 "$D/bin/bench_cuda_matmul"
  run_layer "after" "$D/bin/bench_cuda_matmul"
fi
if has e; then
  wait; say "synth done $(date -u +%T)"
  timeout 150 "$D/bin/bench_cuda_preview" /tmp/q35d.gguf --reps 3 > "$O/preview.log" 2>&1
  say "bench_cuda_preview rc=$?"; grep -E "ms|tok/s" "$O/preview.log" | tee -a "$S"
fi
say "end $(date -u +%T)"
(cd "$O" && tar czf "$R/logs.tgz" .)
