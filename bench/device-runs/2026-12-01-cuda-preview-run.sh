#!/usr/bin/env bash
# w14's device run: CUDA preview tests, memcheck, bench_cuda_preview on the 35B-A3B Clover synth.
set -o pipefail
P=.gpu-w14/pack
export LD_LIBRARY_PATH=$P/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
L=$OUT/log
echo "start $(date -u +%T)" | tee $L
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv | tee -a $L
M=/tmp/s35.gguf
( timeout 200 $P/bin/clover synth --preset qwen3.5-35b-a3b -o $M > $OUT/synth.txt 2>&1; echo "synth rc $? $(date -u +%T)" >> $OUT/synth.txt ) &
SP=$!
for t in ${TESTS:-test_cuda_preview test_cuda_engine test_cuda_backend test_cuda_ops}; do
  echo "== $t $(date -u +%T)" | tee -a $L
  timeout 150 $P/bin/$t > $OUT/$t.txt 2>&1; rc=$?
  echo "rc $rc" | tee -a $L; tail -40 $OUT/$t.txt | tee -a $L
done
wait $SP; tail -3 $OUT/synth.txt | tee -a $L
echo "== bench_cuda_preview $(date -u +%T)" | tee -a $L
timeout 200 $P/bin/bench_cuda_preview $M ${BARGS:-} 2>&1 | tee $OUT/bench.txt | tee -a $L
if [ "${MEMCHECK:-1}" = 1 ]; then
  echo "== memcheck test_cuda_preview $(date -u +%T)" | tee -a $L
  timeout 120 compute-sanitizer --tool memcheck --print-limit 20 $P/bin/test_cuda_preview > $OUT/memcheck.txt 2>&1; echo "rc $?" | tee -a $L
  tail -25 $OUT/memcheck.txt | tee -a $L
fi
echo "end $(date -u +%T)" | tee -a $L
