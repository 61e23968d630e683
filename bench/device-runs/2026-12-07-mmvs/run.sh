#!/usr/bin/env bash
# Issue 24, 2026-12-07: the persistent dense decode product (src/cuda/matmul_mmv_stream.cu, CLOVER_CUDA_MMV_STREAM=1)
# and the cluster-split GDN decode step (src/cuda/gdn_recurrent_split.cu, CLOVER_CUDA_GDN_SPLIT=1), both written
# this session without a device (OFF by default until this run), plus llama.cpp's CUDA llama-bench on the same
# 35B-A3B file in the same run (built here from llama-src.txz: PyPI llama-cpp-python 0.3.36's vendored llama.cpp,
# only what llama-bench needs; sm_90a).
#   scripts/device-packs.sh build mmvs && scripts/llama-src.sh .gpu-mmvs/llama-src.txz
#   run(command="bash .gpu-mmvs/run.sh", carry=[".gpu-mmvs"], timeout_s=600)
# STEPS (default "L t m d p"):
#  L  start the llama.cpp CUDA build in the background (-j14, <= 420 s)
#  t  test_cuda_matmul test_mmv_stream (stream vs mmv_kernel bit for bit: dense, GLU, multi; a 3-block cap and
#     every resident block), test_cuda_gdn (every decode case: split vs one-block bit for bit; the new cases
#     dv 32/64/128/256, 1-4 rows a sequence); then the CUDA tests with both switches on
#  m  memcheck + racecheck: test_mmv_stream (CLOVER_TEST_SMALL), test_cuda_gdn with the split on
#  d  bench_cuda_decode: the ops at 1 and 16 rows with the switches off, then on; the backend's decode step on
#     the 35B-A3B AR file: off / STREAM / SPLIT / both
#  p  llama-bench -ngl 99 -fa 1 -p 512 -n 128 on the same file, then bench_cuda_backend with its figures as peers,
#     switches off and on
# Predictions (written before the run; "before" = 2026-12-07-verify/out/dec, H200):
#  - t: every test passes; test_mmv_stream prints bit-identical for every case; the split decode form
#    bit-identical on the 6 decode cases of dv 32-256 (2 odd dv40 cases keep the one-block form: "bit-identical"
#    too, trivially). Risk: the cluster launch refused (then the one-block form runs: still identical, and the
#    step figures show no gain), or a wait_group / barrier slip in the stream kernel (outputs differ).
#  - m: 0 errors, 0 hazards.
#  - d, ops at 1 row: "output head" 331 -> ~170 us (STREAM); "gdn in-proj" 19.0 -> ~14 us; "attn q+gate/k/v"
#    15.0 -> ~12 us; "gdn mix" 15.1 -> ~6 us (SPLIT: 128 blocks instead of 32); the rest unchanged.
#    STEP lone pass (PDL on) 4.19 ms -> STREAM ~3.9, SPLIT ~3.9, both ~3.6 ms (~275 tok/s).
#    16 rows: unchanged by STREAM (the stacked step takes the chunk products); SPLIT: "gdn mix" 45 -> ~20 us.
#  - p: llama-bench tg128 ~200-230 tok/s, pp512 ~5,000-5,400 (issue 24's 216 / 5,073); clover decode ~235 tok/s
#    off, ~270 on (bar: 1.5x tg128); prompt 512 ~5,150 (k4l's wide kernel now on) vs pp512.
# Run 1 (out/, 16:47 UTC): test_mmv_stream's multi case read 17 rows past its weights (a test bug: the old kernel's
# outputs not finite there, memcheck's out-of-bounds reads); every other stream case bit-identical; the split GDN
# form bit-identical but no faster (15.1 -> 15.0 us at 1 row, 45 -> 72 us at 16): removed. Run 2 (out2/, STEPS="t m"):
# the test fixed; the layer range (issue 31) now on by default: test_cuda_split with it.
set -uo pipefail
PACK=${PACK:-.gpu-mmvs}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/mmvslogs; rm -rf $O; mkdir -p $O
D=/tmp/mmvs; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$R/summary.txt"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
unset CLOVER_CUDA_MMV_STREAM CLOVER_CUDA_GDN_SPLIT
STEPS=${STEPS:-L t m d p}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
say "start $(date -u +%T) steps: $STEPS pack $(cat "$PACK/COMMIT" 2>/dev/null); $(nproc) CPUs"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
LB=/tmp/llama-build/bin/llama-bench
if has L && [ -s "$PACK/llama-src.txz" ]; then
  ( mkdir -p /tmp/llama-src && tar xJf "$PACK/llama-src.txz" -C /tmp/llama-src &&
    timeout 100 cmake -S /tmp/llama-src/llama.cpp -B /tmp/llama-build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
      -DLLAMA_BUILD_TOOLS=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_BUILD_TYPE=Release > $O/llama-cmake.log 2>&1 &&
    timeout 420 nice -n 5 cmake --build /tmp/llama-build -j14 --target llama-bench > $O/llama-build.log 2>&1
    echo "llama build rc=$? at +$(el)s" > $O/llama-done ) &
  LPID=$!
fi
F=/tmp/synth35-ar.gguf
SPID=
if has d || has p; then ( [ -s $F ] || { timeout 120 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $F.part \
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
  tst test_cuda_matmul stream 60 CLOVER_TEST_ONLY=test_mmv_stream
  grep -c "bit-identical" "$O/t_test_cuda_matmul_stream.log" | sed 's/^/     stream cases bit-identical: /;s/$/ (predicted 4 types x 13 = 52)/' | tee -a "$S"
  tst test_cuda_gdn split 90
  grep -E "split decode form" "$O/t_test_cuda_gdn_split.log" | tee -a "$S"
  for n in test_cuda_matmul test_cuda_gdn test_cuda_backend test_cuda_engine test_cuda_preview test_cuda_batch test_cuda_ops test_cuda_split; do
    tst $n on 90 CLOVER_CUDA_MMV_STREAM=1 CLOVER_CUDA_GDN_SPLIT=1
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
  san memcheck 50 test_cuda_matmul stream CLOVER_TEST_ONLY=test_mmv_stream
  san racecheck 50 test_cuda_matmul stream CLOVER_TEST_ONLY=test_mmv_stream
  san memcheck 60 test_cuda_gdn split CLOVER_CUDA_GDN_SPLIT=1
  san racecheck 60 test_cuda_gdn split CLOVER_CUDA_GDN_SPLIT=1
fi
B=$D/bin/bench_cuda_decode
if has d; then
  timeout 60 "$B" > "$O/ops_off.log" 2>&1; say "== ops, switches off, rc=$? at +$(el)s"
  grep -E "output head|gdn in-proj|gdn mix|attn q|gdn out|attn o|SUM" "$O/ops_off.log" | tee -a "$S"
  CLOVER_CUDA_MMV_STREAM=1 CLOVER_CUDA_GDN_SPLIT=1 timeout 60 "$B" > "$O/ops_on.log" 2>&1; say "== ops, STREAM=1 SPLIT=1, rc=$? at +$(el)s"
  grep -E "output head|gdn in-proj|gdn mix|attn q|gdn out|attn o|SUM" "$O/ops_on.log" | tee -a "$S"
  wait $SPID; say "synth done at +$(el)s: $(tail -1 "$O/synth.log")"
  for sw in "off" "CLOVER_CUDA_MMV_STREAM=1" "CLOVER_CUDA_GDN_SPLIT=1" "CLOVER_CUDA_MMV_STREAM=1 CLOVER_CUDA_GDN_SPLIT=1"; do
    env $([ "$sw" = off ] || echo $sw) CLOVER_BENCH_DECODE_ROWS=0 timeout 60 "$B" $F > "$O/step.log" 2>&1
    say "== step, $sw: rc=$?"; grep -E "STEP" "$O/step.log" | tee -a "$S"
  done
fi
if has p; then
  wait $SPID
  if [ -n "${LPID:-}" ]; then wait $LPID; cat $O/llama-done 2>/dev/null | tee -a "$S"; tail -3 $O/llama-build.log | tee -a "$S"; fi
  TG=; PP=
  if [ -x $LB ] && [ -s $F ]; then
    timeout 150 $LB -m $F -ngl 99 -fa 1 -p 512 -n 128 -r 3 -o csv > $O/llama-bench.csv 2> $O/llama-bench.err
    say "llama-bench rc=$? at +$(el)s"; cat $O/llama-bench.csv | tee -a "$S"; tail -3 $O/llama-bench.err | tee -a "$S"
    PP=$(python3 -c "import csv,sys;r=[x for x in csv.DictReader(open(sys.argv[1])) if x['n_prompt']=='512'];print(r[0]['avg_ts'] if r else '')" $O/llama-bench.csv 2>/dev/null)
    TG=$(python3 -c "import csv,sys;r=[x for x in csv.DictReader(open(sys.argv[1])) if x['n_gen']=='128'];print(r[0]['avg_ts'] if r else '')" $O/llama-bench.csv 2>/dev/null)
  else
    say "llama-bench not built: no peer in this run"
  fi
  for sw in off on; do
    env $([ $sw = on ] && echo CLOVER_CUDA_MMV_STREAM=1 CLOVER_CUDA_GDN_SPLIT=1) timeout 120 "$D/bin/bench_cuda_backend" $F \
      ${TG:+--peer-tg $TG} ${PP:+--peer-pp512 $PP} > "$O/backend_$sw.log" 2>&1
    say "bench_cuda_backend, switches $sw, rc=$? (peer tg128 ${TG:-none}, pp512 ${PP:-none})"
    grep -E "decode|prompt of|chunk commit" "$O/backend_$sw.log" | tee -a "$S"
  done
fi
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
