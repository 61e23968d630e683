#!/usr/bin/env bash
# Issue 24, branch gemm2-untested: the verification call its kernel changes still need (NOT yet run:
# the session's device budget fell under its floor after the profiling call, see
# bench/device-runs/2026-12-03-gemm2/). Run from the source root:
#   PACK=.gpu-gemm2 bash bench/device-runs/2026-12-03-gemm2-run.sh      (STEPS="t l" by default, ~40 s)
# $PACK/pack.tgz: stripped bin/ + lib/ of gemm2-untested (scripts/gpu-pack.sh); $PACK/base.tgz: bin/
# bench_cuda_matmul built from main d22a676 with this branch's bench_cuda_matmul.c (the "before").
# Steps (STEPS=...): t = test_cuda_matmul, _preview, _backend, _engine; l = CLOVER_BENCH_LAYER=1
# bench_cuda_matmul: before (base), the new binary with CLOVER_CUDA_IG_Q8=0 (old Q8_0 GEMM form) and as
# built; m = memcheck of test_cuda_matmul and test_cuda_preview; e = the 35B-A3B file end to end
# (bench_cuda_preview; needs ~20 s of synth).
# Predictions (written before any run of these changes):
#  - every test passes (the thin float form = mmv bits: test_decode_types' rows alone vs together;
#    test_chunk_thin; the Q8_0 form at 1..64 rows = the decode kernel's bits: test_row_invariance;
#    the coreset = the CPU's kept sets and the GDN block operator at the 35B heads within 1e-4 of
#    gdn_block_scalar: test_cuda_preview); memcheck 0 errors.
#  - layer bench, before -> after: router f32 256x2048 (4 decode x 8 rows) ~30 -> ~8 us; shexp gate logit
#    f32 1x2048 at 32 rows (TF32, one block) ~90 -> ~4 us; coreset + routing ~90 -> ~40 us; dense q8_0
#    at 32 rows: qkv 8192x2048 ~22 -> ~11 us, z 4096x2048 15.8 -> ~8 us, alpha 32x2048 ~11 -> ~5 us,
#    out 2048x4096 ~22 -> ~12 us, shexp 512-wide ~10 -> ~5 us; z at 2 rows 13.3 -> ~5 us; qkv at 512
#    rows ~300 -> ~250 us; gdn block operator ~70 -> ~15 us (its heads kernel staged); each expert
#    product -20 us (the grouping kernel, 28 -> ~4 us) and ~15% of the rest (copy addresses set once),
#    preview ~35 -> ~12 us, commit ~110 -> ~80 us.
#    A preview GDN layer's ops ~500 -> ~220 us.
#  - e: preview first pass with coreset 22.7 -> ~12 ms, without 19.1 -> ~10 ms; commit 25.2 -> ~16 ms.
set -uo pipefail
PACK=${PACK:-.gpu-gemm2}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/logs; rm -rf $O; mkdir -p $O
D=/tmp/ck; B=/tmp/base; mkdir -p "$D" "$B"
tar xzf "$PACK/pack.tgz" -C "$D" || exit 2
[ -f "$PACK/base.tgz" ] && tar xzf "$PACK/base.tgz" -C "$B"
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
STEPS=${STEPS:-t l}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
echo "start $(date -u +%T) steps: $STEPS" | tee "$S"
if has e; then F=/tmp/q35d.gguf; ( timeout 60 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $F > "$O/synth.log" 2>&1 ) & fi
if has t; then
  for n in test_cuda_matmul test_cuda_preview test_cuda_backend test_cuda_engine; do
    s=$(date +%s); timeout 60 "$D/bin/$n" > "$O/t_$n.log" 2>&1; rc=$?
    echo "test $n rc=$rc $(( $(date +%s) - s ))s" | tee -a "$S"
    [ $rc = 0 ] || grep -E "FAIL|fail|differ|error" "$O/t_$n.log" | head -8 | tee -a "$S"
  done
fi
if has l; then
  run_layer() { echo "== $1" | tee -a "$S"; shift; timeout 40 env CLOVER_BENCH_LAYER=1 "$@" 2>&1 | tee -a "$S" | tail -0; }
  [ -x "$B/bin/bench_cuda_matmul" ] && run_layer "before (main d22a676 kernels)" "$B/bin/bench_cuda_matmul"
  run_layer "after, previous Q8_0 GEMM form (CLOVER_CUDA_IG_Q8=0)" env CLOVER_CUDA_IG_Q8=0 "$D/bin/bench_cuda_matmul"
  run_layer "after" "$D/bin/bench_cuda_matmul"
fi
if has m; then
  for n in test_cuda_matmul test_cuda_preview; do
    timeout 200 compute-sanitizer --tool memcheck "$D/bin/$n" > "$O/memcheck-$n.log" 2>&1
    echo "memcheck $n rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck-$n.log")" | tee -a "$S"
  done
fi
if has e; then
  wait; echo "synth done $(date -u +%T)" | tee -a "$S"
  timeout 120 "$D/bin/bench_cuda_preview" /tmp/q35d.gguf --reps 3 > "$O/preview.log" 2>&1
  echo "bench_cuda_preview rc=$?" | tee -a "$S"; grep -E "ms|tok/s" "$O/preview.log" | tee -a "$S"
fi
echo "end $(date -u +%T)" | tee -a "$S"
(cd "$O" && tar czf "$R/logs.tgz" .)
