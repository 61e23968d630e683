#!/usr/bin/env bash
# 2026-12-09 mmv25: the stream form of dense Q8_0 products at 9..32 rows (src/cuda/matmul_mmv_stream32.cu,
# CLOVER_CUDA_MMV_STREAM32=1, OFF by default; written 2026-12-04 without a device), and the backend's dense products
# through it (backend_cuda_pass.c: mm_as / mm_pair / mm_multi / mm_glu above 8 rows).
#   cmake --build build -j2 && scripts/device-packs.sh build mmv25      (every binary is in gpu-pack.sh's set)
#   run(command="bash .gpu-mmv25/run.sh", carry=[".gpu-mmv25"], timeout_s=600)
# STEPS (default "t m b n p"):
#  t  test_cuda_matmul's test_stream32 (every row count 9..32 of ten, n_in 256/768/2048/4096, 3 odd matrices or
#     9000 outputs: bit for bit the chunk form and the 8-row decode form, 1e-5 of the CPU oracle), then
#     test_cuda_matmul whole, and the backend's CUDA tests with CLOVER_CUDA_MMV_STREAM32=1
#  m  memcheck + racecheck of test_stream32 (CLOVER_TEST_SMALL: 4 cases)
#  b  CLOVER_BENCH_STREAM32=1 bench_cuda_matmul: the 35B-A3B dense products at 8/12/16/24/32 rows, chunk vs stream
#  n  ncu of ms_kernel on the qkv shape (8192x2048) at 16 and 32 rows
#  p  clover run --ids (20 ids, 64 tokens, greedy) block diffusion and --ar on the 35B file, switch off vs on:
#     the ids byte for byte (the backend's dense products at 32 rows through the stream form: same bits);
#     bench_cuda_preview (32-row preview, commit) on the 35B-A3B synthetic file, switch off then on; bench_batch
#     --device cuda --n 16 --mode ar (16 requests: the 16-row stacked AR step) off then on
# Predictions (written before the run; "before" = 2026-12-07-verify and 2026-12-06-k4s, H200):
#  - t: every test passes; test_stream32 prints "bit-identical to chunk and decode" 26 times; the CUDA tests pass
#    with the switch on (the bits of every product are those of the chunk form, so goldens hold).
#    Risk: a slip in the 34-byte block decode (ms_wblock's byte_perm) or the segment walk: outputs differ / NaN.
#  - m: 0 errors, 0 hazards.
#  - b (us; chunk ~ flat in rows): see the [pred] beside each line. Model: stream time ~ max(weights at ~3.3 TB/s,
#    dp4a issue ~10 us x ceil(rows/4)/8 for 8192x2048) + ~2 us (the separate quantiser launch). The 16-row figure
#    is the one issue 25's stacked step needs; at 32 rows the form is compute-bound and the margin over the
#    chunk form is smallest (crossover estimated past 32 rows).
#  - n: ms_kernel 16 rows ~6 us, DRAM ~60-70% of peak; 32 rows ~10 us, DRAM ~35-40%, issue-bound (IMAD pipe).
#  - p: preview first pass (coreset) 10.6 -> ~9.7 ms, commit 16.4 -> ~15.5 ms; bench_batch N=16 pass 12.5 -> ~11.2 ms.
set -uo pipefail
PACK=${PACK:-.gpu-mmv25}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/mmv25logs; rm -rf $O; mkdir -p $O
D=/tmp/mmv25; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$R/summary.txt"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
unset CLOVER_CUDA_MMV_STREAM32
STEPS=${STEPS:-t m b n p}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
say "start $(date -u +%T) steps: $STEPS pack $(cat "$PACK/COMMIT" 2>/dev/null); $(nproc) CPUs"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
CL=/tmp/synth35-clover.gguf # serve25's name: reused when a warm machine still has it
syn() { [ -s "$1" ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b ${2:-} -o "$1.part" \
    > "$O/synth-$(basename "$1").log" 2>&1 && mv "$1.part" "$1"; }; }
SPID=
if has p; then syn $CL & SPID=$!; fi
tst() { # NAME TAG LIMIT [ENV...]
  local n=$1 tag=$2 lim=$3; shift 3
  [ -x "$D/bin/$n" ] || { say "test $n: not in the pack"; return; }
  local s=$(date +%s); env "$@" timeout "$lim" "$D/bin/$n" > "$O/t_${n}_$tag.log" 2>&1; local rc=$?
  say "test $n ($tag${*:+: $*}) rc=$rc $(( $(date +%s) - s ))s $(tail -1 "$O/t_${n}_$tag.log")"
  [ $rc = 0 ] || grep -E "FAIL|differ|error|not finite" "$O/t_${n}_$tag.log" | head -8 | tee -a "$S"
}
if has t; then
  tst test_cuda_matmul s32 90 CLOVER_TEST_ONLY=test_stream32
  grep -c "bit-identical to chunk and decode" "$O/t_test_cuda_matmul_s32.log" | sed 's/^/     stream32 cases bit-identical: /;s/$/ (predicted 26)/' | tee -a "$S"
  tst test_cuda_matmul on 120 CLOVER_CUDA_MMV_STREAM32=1
  for n in test_cuda_backend test_cuda_engine test_cuda_preview test_cuda_batch test_cuda_split test_cuda_gpumem \
           test_cuda_ops test_cuda_gdn test_cuda_attention; do
    tst $n on 90 CLOVER_CUDA_MMV_STREAM32=1
  done
fi
SAN_OK=1
command -v compute-sanitizer > /dev/null || { SAN_OK=0; has m && say "compute-sanitizer: not on PATH"; }
san() { # TOOL LIMIT BIN LOGTAG [ENV...]
  local tool=$1 lim=$2 bin=$3 tag=$4; shift 4
  local log="$O/$tool-$tag.log" s=$(date +%s)
  [ $SAN_OK = 1 ] || return 1
  env CLOVER_TEST_SMALL=1 "$@" timeout "$lim" compute-sanitizer --tool "$tool" "$D/bin/$bin" > "$log" 2>&1; local rc=$?
  say "$tool $bin [$tag] rc=$rc $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1) $(grep -E 'passed, [0-9]+ failed' "$log" | tail -1)"
  [ $rc = 124 ] && say "  ($tool hit its ${lim}s limit: a partial run)"
  grep -m6 -E "Invalid|Race|Hazard|hazard|Error:|out of bounds|misaligned" "$log" | tee -a "$S"
}
if has m; then
  san memcheck 60 test_cuda_matmul s32 CLOVER_TEST_ONLY=test_stream32
  san racecheck 60 test_cuda_matmul s32 CLOVER_TEST_ONLY=test_stream32
fi
annot() { # [pred] beside each line: "name rows" -> "chunk pred / stream pred"
  awk '
    function pr(k) { return (k in P) ? "   [pred " P[k] "]" : "" }
    BEGIN {
      P["gdn qkv 8"]="chunk ~17, decode ~16"; P["gdn qkv 12"]="chunk ~17, stream ~7.5"; P["gdn qkv 16"]="chunk ~17, stream ~7.5"
      P["gdn qkv 24"]="chunk ~17, stream ~9.5"; P["gdn qkv 32"]="chunk 17.0, stream ~12"
      P["gdn z 8"]="chunk ~10, decode ~9"; P["gdn z 12"]="chunk ~10, stream ~5"; P["gdn z 16"]="chunk ~10, stream ~5"
      P["gdn z 24"]="chunk ~10, stream ~6"; P["gdn z 32"]="chunk 10.2, stream ~7"
      P["gdn out 8"]="chunk ~13, decode ~10"; P["gdn out 12"]="chunk ~13, stream ~7"; P["gdn out 16"]="chunk ~13, stream ~8"
      P["gdn out 24"]="chunk ~13, stream ~20 (x from L1)"; P["gdn out 32"]="chunk 13.1, stream ~25 (x from L1)"
      P["attn q 8"]="as gdn qkv"; P["attn q 12"]="as gdn qkv"; P["attn q 16"]="as gdn qkv"; P["attn q 24"]="as gdn qkv"; P["attn q 32"]="as gdn qkv"
      P["attn k 12"]="chunk ~6, stream ~5"; P["attn k 16"]="chunk ~6, stream ~5"; P["attn k 24"]="chunk ~6, stream ~7"; P["attn k 32"]="chunk ~6, stream ~9"
      P["attn o 12"]="as gdn out"; P["attn o 16"]="as gdn out"; P["attn o 24"]="as gdn out"; P["attn o 32"]="as gdn out"
      P["shexp up 12"]="chunk ~6, stream ~5"; P["shexp up 16"]="chunk ~6, stream ~5"; P["shexp up 32"]="chunk ~6, stream ~9"
      P["shexp down 12"]="chunk ~6, stream ~4"; P["shexp down 16"]="chunk ~6, stream ~4"; P["shexp down 32"]="chunk ~6, stream ~6"
      P["head 8"]="chunk ~450, decode ~240"; P["head 12"]="chunk ~450, stream ~175"; P["head 16"]="chunk ~450, stream ~180"
      P["head 24"]="chunk ~450, stream ~230"; P["head 32"]="chunk ~500, stream ~300"
    }
    /^s32 / { split($0, a, "rows "); split(a[2], b, ":"); r = b[1] + 0
              name = $0; sub(/^s32 /, "", name); sub(/ +[0-9]+ x .*/, "", name); $0 = $0 pr(name " " r) }
    { print }'
}
if has b; then
  timeout 90 env CLOVER_BENCH_STREAM32=1 "$D/bin/bench_cuda_matmul" > "$O/s32.log" 2>&1
  say "== bench_cuda_matmul CLOVER_BENCH_STREAM32=1 rc=$? at +$(el)s"; annot < "$O/s32.log" | tee -a "$S"
fi
if has n && command -v ncu > /dev/null && [ "$(el)" -lt 170 ]; then
  for r in 16 32; do
    timeout 60 ncu --kernel-name regex:ms_kernel --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section WarpStateStats env CLOVER_BENCH_QUICK=1 CLOVER_BENCH_STREAM32=1 \
      CLOVER_BENCH_STREAM32_ONLY="gdn qkv" CLOVER_BENCH_STREAM32_ROWS=$r "$D/bin/bench_cuda_matmul" > "$O/ncu$r.log" 2>&1
    say "== ncu ms_kernel qkv $r rows rc=$? (predicted: 16 rows ~6 us, DRAM ~60-70%; 32 rows ~10 us, issue-bound)"
    grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Issued Ipc|Warp Cycles Per Issued" "$O/ncu$r.log" | tee -a "$S"
  done
fi
pannot() { # $1: on|off
  awk -v f="$1" '
    /first pass, coreset/    { $0 = $0 "   [before 10.64 ms; predicted " (f == "on" ? "~9.7" : "~10.6") "]" }
    /commit of a 32-row/     { $0 = $0 "   [before 16.4 ms; predicted " (f == "on" ? "~15.5" : "~16.4") "]" }
    { print }'
}
if has p; then
  wait $SPID; say "synth done at +$(el)s: $(tail -1 "$O"/synth-*clover*.log 2>/dev/null) $(ls -la $CL 2>&1 | awk '{print $5}')"
  for sw in off on; do
    env $([ $sw = on ] && echo CLOVER_CUDA_MMV_STREAM32=1) timeout 60 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview_$sw.log" 2>&1
    say "bench_cuda_preview switch $sw rc=$?"; grep -E "ms|tok/s" "$O/preview_$sw.log" | pannot $sw | tee -a "$S"
  done
  # the backend's bits with the switch on: a greedy block-diffusion answer and an --ar one (32-row previews and
  # commits, 1-row decode) on the 35B file, off vs on, the generated ids byte for byte (predicted identical)
  IDS=$(seq -s, 11 30) # 20 rows: the prompt pass takes the stream form too
  for mode in diffusion ar; do
    for sw in off on; do
      env $([ $sw = on ] && echo CLOVER_CUDA_MMV_STREAM32=1) timeout 60 "$D/bin/clover" run -m $CL --device cuda \
        --ids $IDS -n 64 --ignore-eos --no-visual $([ $mode = ar ] && echo --ar) > "$O/run_${mode}_$sw.txt" 2> "$O/run_${mode}_$sw.err"
      echo "rc=$?" >> "$O/run_${mode}_$sw.err"
    done
    a=$(grep "^ids:" "$O/run_${mode}_off.txt"); b=$(grep "^ids:" "$O/run_${mode}_on.txt")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then
      say "clover run $mode: switch off and on give the same ids ($(echo $a | wc -w) words; predicted identical); on: $(grep -E '^time' "$O/run_${mode}_on.txt")"
    else
      say "clover run $mode: DIFFER or failed (predicted identical): $(tail -1 "$O/run_${mode}_off.err") / $(tail -1 "$O/run_${mode}_on.err")"
      head -c 300 "$O/run_${mode}_off.txt" "$O/run_${mode}_on.txt" | tee -a "$S"
    fi
  done
  for sw in off on; do
    [ -x "$D/bin/bench_batch" ] || { say "bench_batch: not in the pack"; break; }
    left=$(( 250 - $(el) )); [ $left -lt 25 ] && left=25
    env $([ $sw = on ] && echo CLOVER_CUDA_MMV_STREAM32=1) timeout $left "$D/bin/bench_batch" $CL --device cuda --n 16 \
      --mode ar --prompt 32 --gen 32 > "$O/batch_$sw.log" 2>&1
    say "bench_batch --n 16 switch $sw rc=$? (predicted AR N=16 pass: off ~12.5 ms, on ~11.2 ms)"
    grep -vE "^$" "$O/batch_$sw.log" | tail -12 | tee -a "$S"
  done
fi
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
