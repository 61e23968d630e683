#!/usr/bin/env bash
# 2026-12-10 rows: where 2..8-row passes should leave the dp4a decode form for the tensor-core chunk form.
# 2026-12-10-verify measured the 8-row decode form 2.3x slower than the chunk form (qkv 8192x2048: 37.5 vs
# 15.95 us; head 713 vs 251 us), and moe24's bench_batch an 8-sequence AR step (18.5 ms) slower than a
# 16-sequence one (16.9 ms: past 8 rows the pass takes the chunk form). The switches (backend_cuda_pass.c):
# CLOVER_CUDA_DECODE_ROWS=K (dense products), CLOVER_CUDA_MOE_DECODE_ROWS=K (grouped experts): past K rows of a
# pass the chunk form (the same bits); 8 when unset = today.
#   scripts/device-packs.sh build rows
#   run(command="bash .gpu-rows/run.sh", carry=[".gpu-rows"], timeout_s=330)
# Steps and predictions (written before the run):
#  t  test_cuda_batch (a sequence alone = inside batches of 1..16, bit for bit), test_cuda_engine, test_cuda_backend
#     with both switches at 1, and test_cuda_batch with 2/8: every test passes (the forms share their bits).
#  m  bench_cuda_matmul (default list): q8_0 / q4_K 4096x2048 decode at 1 and 8 rows beside the chunk form at 2 and
#     8 rows: predicted chunk at 2 rows ~12-16 us vs decode 1 row ~6-8 us (crossover 2-3 rows); at 8 rows chunk
#     ~12 vs decode ~25-30.
#  b  bench_batch --device cuda --mode ar --n 1,2,4,8,16 (prompt 32, gen 64) at (dense, moe) = (8,8) today,
#     (1,8), (1,1), (2,2), (4,4). Predicted AR pass ms: N=1 ~4.8 in every run (1 row: decode form); N=8 (8,8)
#     ~18.5 -> (1,1) ~12-13; N=4 ~10.4 -> ~9; N=2 ~7.5 -> ~8 (chunk not better at 2 rows); N=16 unchanged ~16.9.
set -uo pipefail
PACK=${PACK:-.gpu-rows}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/rowslogs; rm -rf $O; mkdir -p $O
D=/tmp/rows; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$R/summary.txt"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
unset CLOVER_CUDA_DECODE_ROWS CLOVER_CUDA_MOE_DECODE_ROWS
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
say "start $(date -u +%T) pack $(cat "$PACK/COMMIT" 2>/dev/null); $(nproc) CPUs"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
F=/tmp/synth35-ar.gguf
( timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $F.part > $O/synth.log 2>&1 && mv $F.part $F ) &
SPID=$!
tst() { # NAME TAG LIMIT [ENV...]
  local n=$1 tag=$2 lim=$3; shift 3
  local s=$(date +%s); env "$@" timeout "$lim" "$D/bin/$n" > "$O/t_${n}_$tag.log" 2>&1; local rc=$?
  say "test $n ($tag${*:+: $*}) rc=$rc $(( $(date +%s) - s ))s $(tail -1 "$O/t_${n}_$tag.log")"
  [ $rc = 0 ] || grep -E "FAIL|differ|error|not finite" "$O/t_${n}_$tag.log" | head -8 | tee -a "$S"
}
tst test_cuda_batch r11 90 CLOVER_CUDA_DECODE_ROWS=1 CLOVER_CUDA_MOE_DECODE_ROWS=1
tst test_cuda_batch r28 90 CLOVER_CUDA_DECODE_ROWS=2 CLOVER_CUDA_MOE_DECODE_ROWS=8
tst test_cuda_engine r11 60 CLOVER_CUDA_DECODE_ROWS=1 CLOVER_CUDA_MOE_DECODE_ROWS=1
tst test_cuda_backend r11 60 CLOVER_CUDA_DECODE_ROWS=1 CLOVER_CUDA_MOE_DECODE_ROWS=1
timeout 90 "$D/bin/bench_cuda_matmul" > $O/mm.log 2>&1
say "== bench_cuda_matmul rc=$? at +$(el)s [pred: chunk 2 rows ~12-16 us vs decode 1 row ~6-8; 8 rows chunk ~12 vs decode ~25-30]"
grep -E "^(decode|chunk|moe)" $O/mm.log | head -40 | tee -a "$S"
grep -vE "^(decode|chunk|moe)" $O/mm.log | head -12 >> "$S"
wait $SPID; say "synth done at +$(el)s: $(ls -la $F 2>&1 | awk '{print $5}')"
for c in 8,8 1,8 1,1 2,2 4,4; do
  dn=${c%,*} mo=${c#*,}
  left=$(( 300 - $(el) )); [ $left -lt 20 ] && { say "no time left for ($c)"; break; }
  env CLOVER_CUDA_DECODE_ROWS=$dn CLOVER_CUDA_MOE_DECODE_ROWS=$mo timeout $left "$D/bin/bench_batch" $F --device cuda \
    --mode ar --n 1,2,4,8,16 --prompt 32 --gen 64 > "$O/batch_$dn$mo.log" 2>&1
  say "== bench_batch AR (dense $dn, moe $mo) rc=$? at +$(el)s"
  grep -A8 "^autoregressive" "$O/batch_$dn$mo.log" | head -9 | tee -a "$S"
done
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
