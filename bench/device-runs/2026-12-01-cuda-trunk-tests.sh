#!/usr/bin/env bash
# w13: every CUDA test of the merged branch (no benches).
set -o pipefail
mkdir -p /tmp/w13 && tar xzf "$(dirname "$0")/pack.tar.gz" -C /tmp/w13; P=/tmp/w13/pack
export LD_LIBRARY_PATH=$P/lib PYTHONUNBUFFERED=1 CLOVER_SOURCE_DIR=$PWD
L=$OUT/log
for t in $P/bin/test_cuda_*; do
  n=$(basename $t); s=$(date +%s%N)
  echo "== $n" >> $OUT/tests.txt; timeout 120 $t >> $OUT/tests.txt 2>&1; rc=$?
  echo "$n rc=$rc $(( ($(date +%s%N)-s)/1000000 )) ms" | tee -a $L
done
grep -E "FAIL|rror| [1-9][0-9]* failed" $OUT/tests.txt | head -20 | tee -a $L
