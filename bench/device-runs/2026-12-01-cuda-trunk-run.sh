#!/usr/bin/env bash
# w13 device run: every CUDA test, bench_cuda_matmul, bench_cuda_mixer, synth + bench_cuda_backend.
set -o pipefail
mkdir -p /tmp/w13 && tar xzf "$(dirname "$0")/pack.tar.gz" -C /tmp/w13; P=/tmp/w13/pack
export LD_LIBRARY_PATH=$P/lib PYTHONUNBUFFERED=1 CLOVER_SOURCE_DIR=$PWD
L=$OUT/log
echo "start $(date -u +%T)" | tee $L
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv | tee -a $L
M=/tmp/synth35.gguf
( timeout 120 $P/bin/clover synth --preset qwen3.5-35b-a3b --no-diffusion -o $M > /tmp/synth.log 2>&1; echo "synth rc $?" >> /tmp/synth.log ) &
SP=$!
for t in $P/bin/test_cuda_*; do
  n=$(basename $t); s=$(date +%s%N)
  echo "== $n" >> $OUT/tests.txt; timeout 120 $t >> $OUT/tests.txt 2>&1; rc=$?
  echo "$n rc=$rc $(( ($(date +%s%N)-s)/1000000 )) ms" | tee -a $L
done
grep -E "FAIL|rror| [1-9][0-9]* failed" $OUT/tests.txt | head -20 | tee -a $L
echo "== bench_cuda_matmul $(date -u +%T)" | tee -a $L
timeout 150 $P/bin/bench_cuda_matmul 2>&1 | tee $OUT/bench_matmul.txt | grep -v "^chunk\|moe chk" | tee -a $L
wait $SP; tail -2 /tmp/synth.log | tee -a $L
echo "== bench_cuda_backend $(date -u +%T)" | tee -a $L
timeout 200 $P/bin/bench_cuda_backend $M 2>&1 | tee $OUT/bench_backend.txt | tee -a $L
echo "== memcheck test_cuda_matmul $(date -u +%T)" | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 120 $CS --tool memcheck --print-limit 20 $P/bin/test_cuda_matmul > $OUT/memcheck.txt 2>&1; echo "memcheck rc=$?" | tee -a $L; tail -4 $OUT/memcheck.txt | tee -a $L
echo "end $(date -u +%T)" | tee -a $L
