#!/usr/bin/env bash
# Issue 24 device call (branch kernels): the integer tensor-core chunk GEMM
# (src/cuda/matmul_igemm.cu) and the decode products in the same float order.
# Run from the source root with PACK=.gpu-kernels (pack.tgz: stripped bin/ +
# lib/ from scripts/gpu-pack.sh). Steps, each under a timeout, outputs to $OUT:
# the CUDA tests, compute-sanitizer memcheck of test_cuda_matmul, the product
# bench, ncu of the integer GEMM (bench in quick mode), then the 35B-A3B
# synthetic files end to end (bench_cuda_backend, bench_cuda_preview, clover run
# block diffusion vs --ar), then ncu of a short clover run kernel by kernel. STEPS=... selects (t m b n e p).
set -uo pipefail
PACK=${PACK:-.gpu-kernels}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/logs; rm -rf $O; mkdir -p $O  # $OUT gets summary.txt + logs.tgz
D=/tmp/ck; mkdir -p "$D"; tar xzf "$PACK/pack.tgz" -C "$D" || exit 2
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
STEPS=${STEPS:-t m b n e p}
S=$O/summary.txt
echo "start $(date -u +%T)" | tee "$S"
timeout 10 nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$S"
has() { [[ " $STEPS " == *" $1 "* ]]; }
if has t; then
  for t in "$D"/bin/test_cuda_*; do
    n=$(basename "$t"); s=$(date +%s)
    timeout 200 "$t" > "$O/t_$n.log" 2>&1; rc=$?
    echo "test $n rc=$rc $(( $(date +%s) - s ))s" | tee -a "$S"
    [ $rc = 0 ] || tail -20 "$O/t_$n.log" | tee -a "$S"
  done
fi
if has m; then
  for t in ${MEMCHECK:-test_cuda_matmul}; do  # MEMCHECK: the tests to run under memcheck
    timeout 240 compute-sanitizer --tool memcheck "$D/bin/$t" > "$O/memcheck-$t.log" 2>&1
    echo "memcheck $t rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck-$t.log")" | tee -a "$S"
  done
fi
if has b; then
  timeout 150 "$D/bin/bench_cuda_matmul" > "$O/bench_matmul.log" 2>&1
  echo "bench_cuda_matmul rc=$?" | tee -a "$S"; grep -E "^device|chunk|moe chk|q8_0 4096x2048|q4_K 4096x2048" "$O/bench_matmul.log" | head -60 >> "$S"
fi
if has n; then
  CLOVER_BENCH_QUICK=1 timeout 200 ncu --clock-control none -k regex:igemm_kernel \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
    "$D/bin/bench_cuda_matmul" > "$O/ncu_igemm.log" 2>&1
  echo "ncu igemm rc=$?" | tee -a "$S"
  timeout 100 ncu --clock-control none -k regex:mmv_kernel --launch-count 6 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats "$D/bin/bench_cuda_matmul" > "$O/ncu_mmv.log" 2>&1
  echo "ncu mmv rc=$?" | tee -a "$S"
fi
if has e; then
  F=/tmp/q35.gguf; FD=/tmp/q35d.gguf
  ( timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $F > "$O/synth.log" 2>&1 ) &
  ( timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $FD > "$O/synthd.log" 2>&1 ) &
  wait
  echo "synth done $(date -u +%T)" | tee -a "$S"
  timeout 200 "$D/bin/bench_cuda_backend" $F > "$O/e2e.log" 2>&1; echo "bench_cuda_backend rc=$?" | tee -a "$S"
  timeout 200 "$D/bin/bench_cuda_preview" $FD >> "$O/e2e.log" 2>&1; echo "bench_cuda_preview rc=$?" | tee -a "$S"
  IDS=$(seq -s, 1000 1027)
  for a in "" "--ar"; do
    timeout 90 "$D/bin/clover" run -m $FD --ids $IDS --max-tokens 64 --device cuda $a > "$O/run$a.log" 2>&1
    echo "clover run $a rc=$?: $(grep -iE 'tok/s' "$O/run$a.log" | tail -2 | tr '\n' ' ')" | tee -a "$S"
  done
  grep -iE "tok/s|ms|floor" "$O/e2e.log" | head -60 >> "$S"
fi
if has p; then  # where a block-diffusion run's GPU time goes, kernel by kernel (no graph, so each is timed)
  CLOVER_CUDA_NO_GRAPH=1 timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    "$D/bin/clover" run -m /tmp/q35d.gguf --ids $(seq -s, 1000 1027) --max-tokens 8 --device cuda > "$O/ncu_run.csv" 2>/dev/null
  echo "ncu clover run rc=$?" | tee -a "$S"
  python3 - "$O/ncu_run.csv" >> "$S" <<'PY'
import csv, sys, collections
t = collections.defaultdict(float); n = collections.Counter()
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
for r in rows[1:]:
    v = float(r[vi].replace(",", "")); v *= {"nsecond": 1e-3, "usecond": 1, "msecond": 1e3}.get(r[ui], 1)
    k = r[ki].split("(")[0]; t[k] += v; n[k] += 1
tot = sum(t.values()); print("kernel time by kernel (us, calls, share) of %.0f us in all:" % tot)
for k, v in sorted(t.items(), key=lambda x: -x[1])[:25]: print("  %-60s %10.0f %6d %5.1f%%" % (k[:60], v, n[k], 100 * v / tot))
PY
fi
echo "end $(date -u +%T)" | tee -a "$S"
cp "$S" "$R/summary.txt"; (cd "$O" && tar czf "$R/logs.tgz" .); ls -la "$R"
