#!/usr/bin/env bash
# test.sh: the whole test suite, from a fresh Debian 12 machine.
#  1. installs what it needs (scripts/setup.sh --test);
#  2. builds with warnings as errors and runs every test (ctest);
#  3. builds again with AddressSanitizer + UndefinedBehaviorSanitizer and
#     runs every test again;
#  4. builds the libFuzzer targets with clang and runs each for a bounded
#     time (CLOVER_FUZZ_SECONDS, default 60) over its seed corpus.
# Ends with one summary line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)
fuzz_seconds=${CLOVER_FUZZ_SECONDS:-60}

scripts/setup.sh --test || { echo "setup failed"; exit 1; }

passed=0
failed=0
record() { # name status
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi
}

run_suite() { # build-dir, cmake options...
  local dir=$1; shift
  cmake -S . -B "$dir" -DCLOVER_WERROR=ON "$@" >/dev/null &&
    cmake --build "$dir" -j"$jobs" >"$dir.build.log" 2>&1
  local st=$?
  if [ $st -ne 0 ]; then tail -50 "$dir.build.log"; record "build $dir" 1; return; fi
  record "build $dir" 0
  (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 900) | tee "$dir.ctest.log"
  local total fails
  total=$(grep -Eo 'tests failed out of [0-9]+' "$dir.ctest.log" | grep -Eo '[0-9]+$' || echo 0)
  fails=$(grep -Eo '[0-9]+ tests failed' "$dir.ctest.log" | grep -Eo '^[0-9]+' || echo 1)
  [ -z "$total" ] && total=0
  passed=$((passed + total - fails))
  failed=$((failed + fails))
}

echo "== release build, warnings as errors"
run_suite build
echo "== ASan + UBSan build"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 run_suite build-asan -DCLOVER_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug

echo "== fuzzing (${fuzz_seconds}s per target)"
if CC=clang cmake -S . -B build-fuzz -DCLOVER_FUZZ=ON -DCLOVER_TESTS=OFF -DCLOVER_WERROR=ON >/dev/null &&
   cmake --build build-fuzz -j"$jobs" >build-fuzz.build.log 2>&1; then
  for fz in build-fuzz/tests/fuzz/fuzz_*; do
    [ -x "$fz" ] || continue
    name=$(basename "$fz")
    corpus="$root/build-fuzz/corpus/$name"
    mkdir -p "$corpus"
    seeds="$root/tests/fuzz/corpus/$name"
    # A seed generator may sit beside the fuzzer (gen_seeds_NAME) to add valid files.
    [ -x "build/tests/tools/seeds_$name" ] && "build/tests/tools/seeds_$name" "$corpus" >/dev/null
    args=("$corpus")
    [ -d "$seeds" ] && args+=("$seeds")
    if "$fz" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -print_final_stats=1 \
         "${args[@]}" >"build-fuzz/$name.log" 2>&1; then
      echo "fuzz $name: $(grep -E 'stat::number_of_executed_units' "build-fuzz/$name.log" | awk '{print $2}') executions, no finding"
      record "fuzz $name" 0
    else
      tail -40 "build-fuzz/$name.log"
      record "fuzz $name" 1
    fi
  done
else
  tail -50 build-fuzz.build.log
  record "build build-fuzz" 1
fi

echo
echo "suite: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
