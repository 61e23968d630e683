#!/usr/bin/env bash
# 2026-12-04 (helper moe24): the routed experts' own decode form for 1..32 rows (src/cuda/moe_decode.cu,
# cuda_moe_dec32 / _glu; CLOVER_CUDA_MOE_DEC32=1 takes it at 2..32 rows, =2 at 1..32; OFF by default), written
# without a device. The backend's stacked AR step of 9..32 sequences took the chunk form (tensor-core tiles of up
# to 32 slots of one expert, ~1.3 rows an expert at 16 sequences); now one warp a weight row does every slot of
# its expert, each routed expert read once.
#   scripts/device-packs.sh build moe24
#   run(command="bash .gpu-moe24/run.sh", carry=[".gpu-moe24"], timeout_s=600)
# STEPS (default "t m d b n"):
#  t  test_cuda_matmul (the new cases test_moe_dec32: bit for bit against cuda_moe_decode on 8-row groups and the
#     chunk form, rows 1..32, k 1..16, 9..129 experts, spread / duplicate-heavy / one-expert / bad-id routings,
#     pooled slot ids, every type), then the backend's CUDA tests with CLOVER_CUDA_MOE_DEC32=2 (and =1 for the
#     backend test)
#  m  memcheck of test_moe_dec32 (CLOVER_TEST_SMALL)
#  d  bench_cuda_decode: ops at 1 and 16 rows, switch off then =2; the backend's step on the 35B-A3B AR file
#     off / =1 / =2
#  b  bench_batch --device cuda --mode ar --n 1,4,8,16, switch off then =1
#  n  ncu of moed_kernel (SpeedOfLight + Occupancy + LaunchStats) at 1 row and at 16 rows
# Predictions (written before the run; "before" = 2026-12-07-verify/out/dec, H200):
#  - t: every test passes; "dec32 ... bit-identical" for every case (~100); CPU error <= 1e-5 (integer types).
#    Risk: the list kernel (atomicMin table, prefix scans) mis-assigns a slot (outputs differ / stay NaN).
#  - m: 0 errors.
#  - d, 16 rows (us a layer): experts gate + up 85.1 (chunk pair) + swiglu 1.75 -> ~45 (dec32 fused; 35-60);
#    down 42.95 -> ~28 (20-35). Routed experts 5.25 ms -> ~2.9 ms over 40 layers. STEP 16 sequences stacked
#    12.72 ms -> ~10.4 ms (=1 and =2 the same).
#    1 row (=2 only): gate + up 11.70 -> ~11 (the lists + 8-bit rows launch ~2 us, the in-block rounding gone);
#    down 8.26 -> ~9. The grid is not what limits 1 row (Little's law: 4.2 TB/s x ~0.7 us = 2.9 MB in flight,
#    ~22 KB an SM; one wave of 512 blocks stages 9.4 MB at once): a chain of latencies (ids, staging, dots,
#    writes) is. STEP lone pass: unchanged within +-0.1 ms (=2 maybe +0.1 ms: 80 more launches).
#  - b: AR aggregate tok/s at N = 1/4/8 unchanged (4 and 8 rows took the decode form already; =1 leaves 1 row
#    alone); N = 16: +15-25% decode tok/s (the stacked step ~12.7 -> ~10.4 ms).
#  - n: at 16 rows (gate + up) DRAM throughput ~60-75% of peak, achieved occupancy ~20-25% (2 blocks of 8 warps
#    an SM); at 1 row DRAM ~25-35% (one short wave).
# Run 1 (out1/, 00:08 UTC, commit f71224c; run by the helper itself): every test passes, 101 dec32 cases
# bit-identical to the decode and chunk forms, memcheck 0 errors; the backend's CUDA tests pass with =2 and =1.
# SLOWER than both old forms: 16 rows gate + up 172.1 us (chunk pair 85.1 + swiglu 1.7), down 136.0 (42.9);
# 1 row 16.6 (11.7) and 14.7 (8.3). Step: 16 stacked 12.72 -> 19.74 ms; lone 4.00 -> 4.57 ms with =2.
# Run 2 (out2/, 00:17, cf12050: each group's 8-bit rows staged in shared memory, lists without atomics): the
# same bits, 168.3 / 114.4 us at 16 rows, 15.6 / 13.5 at 1 row; step 16 stacked 18.8 ms; bench_batch AR decode
# tok/s off -> =1: N=1 214.7 -> 211.3, N=4 415.4 -> 402.3, N=8 480.9 -> 521.9 (+8.5%), N=16 1246 -> 853.
# ncu (16 rows, gate + up, 215 us at 1.48 GHz): Compute (SM) 57.7%, DRAM 11.4%, 3.9 warps a scheduler, one
# instruction every 1.7 cycles, stalls mostly fixed-latency dependencies: INSTRUCTION-bound, not memory-bound.
# The decode dot (mmv_block: 16 lanes a Q4_K super-block, 8 shuffles a slot) costs ~0.5 warp-instructions a
# weight byte a slot; at ~2 warp-instructions a cycle an SM digests ~7 GB/s, ~0.9 TB/s for the chip: the 1-row
# form's ~800 GB/s is this same ceiling (so filling the grid cannot help it), and at 16 rows the ~1.3 slots an
# expert multiply it. Verdict: leave CLOVER_CUDA_MOE_DEC32 off; the chunk form's tensor cores stay the form for
# 9..32 rows. What would move it: a dot with fewer instructions a byte (4 lanes a super-block, 2 shuffle rounds,
# the bsums of the 8-bit rows instead of dp4a sums of ones, terms gathered into the canonical even/odd order).
set -uo pipefail
PACK=${PACK:-.gpu-moe24}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/moe24logs; rm -rf $O; mkdir -p $O
D=/tmp/moe24; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$R/summary.txt"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
unset CLOVER_CUDA_MOE_DEC32
STEPS=${STEPS:-t m d b n}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
say "start $(date -u +%T) steps: $STEPS pack $(cat "$PACK/COMMIT" 2>/dev/null); $(nproc) CPUs"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
F=/tmp/synth35-ar.gguf
SPID=
if has d || has b; then ( [ -s $F ] || { timeout 120 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $F.part \
  > "$O/synth.log" 2>&1 && mv $F.part $F; } ) &
SPID=$!; fi
tst() { # NAME TAG LIMIT [ENV...]
  local n=$1 tag=$2 lim=$3; shift 3
  [ -x "$D/bin/$n" ] || { say "test $n: not in the pack"; return; }
  local s=$(date +%s); env "$@" timeout "$lim" "$D/bin/$n" > "$O/t_${n}_$tag.log" 2>&1; local rc=$?
  say "test $n ($tag${*:+: $*}) rc=$rc $(( $(date +%s) - s ))s $(tail -1 "$O/t_${n}_$tag.log")"
  [ $rc = 0 ] || grep -E "FAIL|differ|error|not finite" "$O/t_${n}_$tag.log" | head -8 | tee -a "$S"
}
if has t; then
  tst test_cuda_matmul all 150
  say "     dec32 cases bit-identical: $(grep -c 'dec32 .*bit-identical' "$O/t_test_cuda_matmul_all.log") (predicted ~100, every case)"
  grep -E "^  dec32  " "$O/t_test_cuda_matmul_all.log" | tee -a "$S"
  for n in test_cuda_backend test_cuda_batch test_cuda_engine test_cuda_split test_cuda_gpumem test_cuda_preview; do
    tst $n dec2 90 CLOVER_CUDA_MOE_DEC32=2
  done
  tst test_cuda_backend dec1 90 CLOVER_CUDA_MOE_DEC32=1
fi
if has m; then
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=test_moe_dec32 timeout 150 compute-sanitizer --tool memcheck \
      "$D/bin/test_cuda_matmul" > "$O/memcheck.log" 2>&1
    say "memcheck test_moe_dec32 rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1) (predicted 0 errors)"
    grep -m6 -E "Invalid|Error:|out of bounds|misaligned" "$O/memcheck.log" | tee -a "$S"
  else say "compute-sanitizer: not on PATH"; fi
fi
B=$D/bin/bench_cuda_decode
PAT="experts|sums at|by kind"
if has d; then
  timeout 60 "$B" > "$O/ops_off.log" 2>&1; say "== ops, switch off, rc=$? at +$(el)s"
  grep -E "$PAT" "$O/ops_off.log" | tee -a "$S"
  CLOVER_CUDA_MOE_DEC32=2 timeout 60 "$B" > "$O/ops_on.log" 2>&1; say "== ops, CLOVER_CUDA_MOE_DEC32=2, rc=$? at +$(el)s"
  say "   (predicted at 16 rows: gate + up ~45 us (85.1 + 1.75 before), down ~28 (42.95); at 1 row ~11 and ~9)"
  grep -E "$PAT" "$O/ops_on.log" | tee -a "$S"
  wait $SPID; say "synth done at +$(el)s: $(tail -1 "$O/synth.log")"
  for sw in off 1 2; do
    env $([ $sw = off ] || echo CLOVER_CUDA_MOE_DEC32=$sw) CLOVER_BENCH_DECODE_ROWS=0 timeout 90 "$B" $F > "$O/step_$sw.log" 2>&1
    say "== step, CLOVER_CUDA_MOE_DEC32=$sw: rc=$? at +$(el)s (predicted: lone ~4.2 ms unchanged; 16 stacked 12.7 -> ~10.4 with the switch)"
    grep -E "STEP" "$O/step_$sw.log" | tee -a "$S"
  done
fi
if has b && [ -x "$D/bin/bench_batch" ]; then
  wait $SPID
  for sw in off 1; do
    env $([ $sw = off ] || echo CLOVER_CUDA_MOE_DEC32=$sw) timeout 120 "$D/bin/bench_batch" $F --device cuda --mode ar \
      --n 1,4,8,16 --prompt 32 --gen 64 > "$O/batch_$sw.log" 2>&1
    say "== bench_batch AR, CLOVER_CUDA_MOE_DEC32=$sw: rc=$? at +$(el)s (predicted: N=16 decode +15-25% with =1; N=1/4/8 unchanged)"
    grep -A6 "^autoregressive" "$O/batch_$sw.log" | head -8 | tee -a "$S"
  done
fi
if has n && command -v ncu > /dev/null && [ "$(el)" -lt 420 ]; then
  for rows in 1 16; do
    CLOVER_CUDA_MOE_DEC32=2 CLOVER_BENCH_DECODE_ROWS=$rows timeout 60 ncu -k regex:moed_kernel -c 2 --section SpeedOfLight \
      --section Occupancy --section LaunchStats "$B" > "$O/ncu_$rows.log" 2>&1
    say "ncu moed_kernel at $rows row(s) rc=$? (the first two launches: gate + up, then down; predicted DRAM ~25-35% at 1 row, ~60-75% at 16):"
    grep -E "moed_kernel|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Grid Size" "$O/ncu_$rows.log" | head -16 | tee -a "$S"
  done
fi
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
