#!/usr/bin/env bash
# Issue 24, branch k4s: the few-row integer chunk products (src/cuda/matmul_igemm_few.cu: 1..32 rows, dense with
# scratch and grouped experts; 8 warps over 16..64 outputs, each warp one canonical partial chain or one
# super-block a round, weights straight into the mma fragments, 2 blocks an SM) behind CLOVER_CUDA_IGEMM_FEW=1
# (OFF by default: written 2026-12-03 without a device, UNVERIFIED until this run). Meant to give the old
# kernels' bits exactly (the canonical order of matmul_igemm.cu).
# Run from the source root on the device (the pack is .gpu-k4s/, ignored by git; this file is also committed as
# bench/device-runs/2026-12-06-k4s/run.sh):
#   run(command="bash .gpu-k4s/run.sh", carry=[".gpu-k4s"], timeout_s=300)      ~2-3 min, <= 200 s by its limits
# STEPS (default "t m r l e n"):
#  t  test_cuda_matmul (with the new case test_few_rows: the few-row kernel vs matmul_igemm.cu bit for bit, dense
#     rows 1..32 and grouped experts 1..16 experts, Q8_0/Q4_K/Q5_K/Q6_K), test_cuda_preview, test_cuda_backend:
#     once with CLOVER_CUDA_IGEMM_FEW=1, once with it 0
#  m  compute-sanitizer memcheck: test_cuda_matmul test_few_rows (CLOVER_TEST_SMALL: fewer row counts and experts)
#  r  racecheck: test_cuda_matmul test_few_rows (CLOVER_TEST_SMALL) (the K-quants' double-buffered terms in shared memory)
#  l  CLOVER_BENCH_LAYER=1 bench_cuda_matmul: every integer product of <= 32 rows twice, the old kernel's line
#     then a "[few]" line (the bench sets the switch itself), and both sums; then the pairs: dense qkv + z and the
#     shared expert's gate + up (cuda_matmul_chunk_ws_pair), the experts' gate + up (cuda_moe_chunk_pair): old =
#     their two calls, [few] = one quantisation (and grouping), one launch
#  e  bench_cuda_preview on the 35B-A3B synthetic file (made here first, in the background): switch 1, then 0
#  n  ncu of the few-row kernel (its first 5 launches, qkv: SOL, occupancy, warp stalls) when under 150 s so far
# Outputs: $OUT/summary.txt and $OUT/logs.tgz.
# Predictions (written before any run; "before" = bench/device-runs/2026-12-05-verify/out/k3, H200):
#  - t: every test passes with the switch on and off (the backend then takes the pairs: qkv + z, the shared
#    expert's and the experts' gate + up); test_few_rows: every case bit for bit, single products and pairs. Risk: a fragment or
#    index slip in the new kernel (then test_few_rows names type, n_in, rows, experts; set the switch 0).
#  - m: 0 errors. r: 0 hazards.
#  - l: the [few] lines: qkv 16.86 -> ~9 us, z 10.17 -> ~6, alpha 7.81 -> ~4, out 13.07 -> ~8, shexp gate/up
#    7.95 -> ~4, shexp down 4.78 -> ~3.5; moe preview gate 23.53 -> ~6, up 23.56 -> ~6, down 19.60 -> ~6;
#    moe commit gate 59.4 -> ~35, up 54.9 -> ~35, down 61.3 -> ~40; z at 2 rows 8.31 -> ~5. The old lines as
#    before. A preview GDN layer's ops 209.5 -> ~135 us (x40 8.38 -> ~5.4 ms). The gate+up pair in one launch:
#    preview 47.1 (gate + up) -> ~9 us, commit 114.3 -> ~65 us; dense qkv+z 27.0 -> ~12 us, shexp gate+up
#    15.9 -> ~5 us; with the pairs a preview GDN layer ~120 us (x40 ~4.8 ms).
#  - e (the backend then takes the pairs too): switch 1: preview first pass coreset 10.72 -> ~7.5 ms, no coreset
#    9.92 -> ~6.8 ms, commit 16.43 -> ~13 ms,
#    block-diffusion 87.6 -> ~115 tok/s. Switch 0: as before.
set -uo pipefail
PACK=${PACK:-.gpu-k4s}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/k4slogs; rm -rf $O; mkdir -p $O
D=/tmp/k4s; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$R/summary.txt"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
STEPS=${STEPS:-t m r l e n}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
say "start $(date -u +%T) steps: $STEPS pack $(cat "$PACK/COMMIT" 2>/dev/null)"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
F=/tmp/q35d.gguf
if has e; then ( [ -s $F ] || timeout 90 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $F > "$O/synth.log" 2>&1 ) & fi
ALL_BUT_FEW=test_act_quantize_bytes,test_decode_types,test_chunk_types,test_chunk_thin,test_exact,test_row_invariance
ALL_BUT_FEW=$ALL_BUT_FEW,test_moe_decode,test_moe_chunk,test_moe_many_experts,test_glu,test_multi,test_graph_capture
if has t; then
  for few in 1 0; do
    for n in test_cuda_matmul test_cuda_preview test_cuda_backend; do
      [ -x "$D/bin/$n" ] || { say "test $n: not in the pack"; continue; }
      only=; [ $n = test_cuda_matmul ] && [ $few = 0 ] && only=$ALL_BUT_FEW # test_few_rows sets the switch itself
      s=$(date +%s); CLOVER_TEST_ONLY=$only CLOVER_CUDA_IGEMM_FEW=$few timeout 90 "$D/bin/$n" > "$O/t_${n}_few$few.log" 2>&1; rc=$?
      say "test $n FEW=$few rc=$rc $(( $(date +%s) - s ))s $(tail -1 "$O/t_${n}_few$few.log")"
      [ $rc = 0 ] || grep -E "FAIL|differ|error" "$O/t_${n}_few$few.log" | head -8 | tee -a "$S"
    done
  done
  grep -E "few dense|few moe" "$O/t_test_cuda_matmul_few1.log" | tail -4 | tee -a "$S"
fi
SAN_OK=1
command -v compute-sanitizer > /dev/null || { SAN_OK=0; { has m || has r; } && say "compute-sanitizer: not on PATH"; }
san() { # TOOL LIMIT CASES
  local tool=$1 lim=$2 cases=$3 log="$O/$1-$3.log" s=$(date +%s)
  [ $SAN_OK = 1 ] || return 1
  env CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=$cases timeout "$lim" compute-sanitizer --tool "$tool" \
    "$D/bin/test_cuda_matmul" > "$log" 2>&1; local rc=$?
  say "$tool test_cuda_matmul [$cases] rc=$rc $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1) $(grep -E 'passed, [0-9]+ failed|SKIP' "$log" | tail -1)"
  if grep -qE "Device not supported|not supported on this|Unable to|LibraryNotLoaded" "$log"; then
    SAN_OK=0; say "compute-sanitizer cannot run here: $(grep -m1 -E 'not supported|Unable|Library' "$log")"; return 1
  fi
  [ $rc = 124 ] && say "  ($tool hit its ${lim}s limit: a partial run)"
  grep -m6 -E "Invalid|Race|Hazard|hazard|Error:|out of bounds|misaligned" "$log" | tee -a "$S"
}
has m && san memcheck 40 test_few_rows
has r && san racecheck 40 test_few_rows
# the layer lines with the before figure and the prediction beside them
annot() {
  awk '
    function a(b, p) { $0 = $0 "   [before " b " us; predicted " p " us]" }
    /\[few\] dense q8_0 qkv 8192x2048 \(chunk_ws\)/ { a("16.86", "~9") }
    /\[few\] dense q8_0 z 4096x2048  /              { a("10.17", "~6") }
    /\[few\] dense q8_0 alpha/                      { a("7.81", "~4") }
    /\[few\] dense q8_0 out/                        { a("13.07", "~8") }
    /\[few\] dense q8_0 shexp gate/                 { a("7.95", "~4") }
    /\[few\] dense q8_0 shexp up/                   { a("7.90", "~4") }
    /\[few\] dense q8_0 shexp down/                 { a("4.78", "~3.5") }
    /\[few\] moe q4_K gate 512x2048, preview/       { a("23.53", "~6") }
    /\[few\] moe q4_K up 512x2048, preview/         { a("23.56", "~6") }
    /\[few\] moe q4_K down 2048x512, preview/       { a("19.60", "~6") }
    /\[few\] moe q4_K gate 512x2048, commit/        { a("59.37", "~35") }
    /\[few\] moe q4_K up 512x2048, commit/          { a("54.91", "~35") }
    /\[few\] moe q4_K down 2048x512, commit/        { a("61.29", "~40") }
    /\[few\] dense q8_0 z 4096x2048 at 2 rows/      { a("8.31", "~5") }
    /\[few\] moe q4_K gate\+up pair, preview/      { a("47.09 (gate + up)", "~9") }
    /\[few\] moe q4_K gate\+up pair, commit/       { a("114.28 (gate + up)", "~65") }
    /\[few\] dense q8_0 qkv\+z pair/                { a("27.03 (qkv + z)", "~12") }
    /\[few\] dense q8_0 shexp gate\+up pair/        { a("15.85 (gate + up)", "~5") }
    /\[few\] with the pairs/ { $0 = $0 "   [before: a preview GDN layer 209.5 us; predicted ~120 us (~4.8 ms)]" }
    /\[few\] sums/ { $0 = $0 "   [before: a preview GDN layer 209.5 us (x40 8.38 ms); predicted ~135 us (~5.4 ms)]" }
    { print }'
}
if has l; then
  say "== layer bench: old kernel line, then its [few] line"
  timeout 50 env CLOVER_BENCH_LAYER=1 "$D/bin/bench_cuda_matmul" 2>&1 | annot | tee -a "$S" > "$O/layer.log"
fi
pannot() { # $1: 1|0 (the switch)
  awk -v f="$1" '
    /first pass, coreset/    { $0 = $0 "   [before 10.72 ms; predicted " (f == "1" ? "~7.5" : "~10.7") "]" }
    /first pass, no coreset/ { $0 = $0 "   [before 9.92 ms; predicted " (f == "1" ? "~6.8" : "~9.9") "]" }
    /half fixed, coreset/    { $0 = $0 "   [before 10.69 ms; predicted " (f == "1" ? "~7.5" : "~10.7") "]" }
    /half fixed, no coreset/ { $0 = $0 "   [before 9.96 ms; predicted " (f == "1" ? "~6.8" : "~10") "]" }
    /commit of a 32-row/     { $0 = $0 "   [before 16.43 ms; predicted " (f == "1" ? "~13" : "~16.4") "]" }
    /block-diffusion tokens/ { $0 = $0 "   [before 87.6; predicted " (f == "1" ? "~115" : "~88") "]" }
    { print }'
}
if has e; then
  wait; say "synth done $(date -u +%T) ($(el)s)"
  for few in 1 0; do
    CLOVER_CUDA_IGEMM_FEW=$few timeout 60 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_few$few.log" 2>&1
    say "bench_cuda_preview CLOVER_CUDA_IGEMM_FEW=$few rc=$?"; grep -E "ms|tok/s" "$O/preview_few$few.log" | pannot $few | tee -a "$S"
  done
fi
if has n && [ "$(el)" -lt 150 ] && command -v ncu > /dev/null; then
  # the few-row kernel's first 5 launches in the layer bench (qkv 8192x2048 at 32 rows: its eager launch, then
  # its graph's nodes, if ncu profiles graph nodes one by one)
  CLOVER_BENCH_LAYER=1 timeout 40 ncu -k regex:igemm_few -c 5 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats "$D/bin/bench_cuda_matmul" > "$O/ncu.log" 2>&1
  say "ncu rc=$? (the few-row kernel's first 5 launches, qkv 8192x2048 at 32 rows):"
  grep -E "igemm_few|Duration|DRAM Throughput|Achieved Occupancy|Registers Per" "$O/ncu.log" | head -25 | tee -a "$S"
fi
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
