#!/usr/bin/env bash
# selftest.sh: the self-test of the tests. Plants faults and expects red;
# each fault has a control (the same command without the fault) that must
# be green, so a red result is the fault's doing and not a broken set-up.
#
#   tests/selftest.sh [BUILD_DIR]     (default: build; it must be built)
#
# Faults:
#  - the harness (tests/test.h): a failed check outside any case, a binary
#    that runs no case, a skip after a failed check: exit 1; a skip: 77;
#  - a skip under CI=true: scripts/test_counts.py over a real ctest run of
#    a skipping C binary and a skipping pytest file counts each as a
#    failure unless its reason is in tests/skip_allowlist.txt;
#  - a fixture directory removed (tests/fixtures/tiny_clover): the golden
#    C tests and the converter's fixture test fail;
#  - one fixture logit perturbed by 1e-3 of the logit scale: the golden test
#    fails (SPEC's bound is 1e-4);
#  - SPEC 2.1's ln(b/B) history term dropped (selftest_golden_clover_no_ln_ratio,
#    linked with tests/selftest/fault_no_ln_ratio.c): the golden test fails;
#  - the scalar Q4_K dequantiser with sub-blocks 0 and 1 swapped
#    (selftest_golden_quant_q4_k_fault, tests/selftest/fault_q4_k_sub_blocks.c,
#    run with CLOVER_NO_SIMD=1): the 256-wide q4_k_m golden case fails;
#  - the shared directory missing (CLOVER_SHARED_DIR pointing nowhere) and
#    the clover binary missing (CLOVER_BUILD_DIR empty): the Python tests
#    that need them fail (not skip).
# Prints one "selftest ...: red as expected" line per fault; exits 1 if any
# fault stayed green or any control went red. About 15 s on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=$(cd "${1:-build}" && pwd) || { echo "selftest: no build directory ${1:-build}"; exit 1; }
python=${CLOVER_PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || python=python3
tmp=$(mktemp -d /tmp/clover-selftest-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
bad=0
tools="$build/tests/selftest"

# expect NAME WANT(0|77|red) COMMAND...: red = any status but 0 and 77
expect() {
  local name=$1 want=$2; shift 2
  "$@" >"$tmp/out.log" 2>&1
  local rc=$?
  local ok=0
  case $want in
    red) [ $rc -ne 0 ] && [ $rc -ne 77 ] && ok=1 ;;
    *) [ $rc -eq "$want" ] && ok=1 ;;
  esac
  if [ $ok -eq 1 ]; then
    if [ "$want" = red ]; then echo "selftest $name: red as expected (exit $rc)"; else echo "selftest $name: exit $rc as expected"; fi
  else
    echo "selftest $name: WRONG: exit $rc, expected $want"
    tail -20 "$tmp/out.log"
    bad=1
  fi
}

for t in selftest_harness_cases selftest_golden_clover_no_ln_ratio selftest_golden_quant_q4_k_fault; do
  [ -x "$tools/$t" ] || { echo "selftest: $tools/$t is not built (cmake --build $build)"; exit 1; }
done

# ---- the harness
expect "harness: one passing case (control)" 0 "$tools/selftest_harness_cases" pass
expect "harness: a failed check outside any case" red "$tools/selftest_harness_cases" check-outside
expect "harness: no case ran" red "$tools/selftest_harness_cases" no-cases
expect "harness: a skip is exit 77, not 0" 77 "$tools/selftest_harness_cases" skip
expect "harness: a skip after a failed check" red "$tools/selftest_harness_cases" skip-after-fail

# ---- skips under CI=true, through a real ctest run and a real pytest run
mkdir -p "$tmp/ct/pytest-results"
cat >"$tmp/ct/test_planted_skip.py" <<'EOF'
import pytest


def test_runs():
    assert 1 + 1 == 2


def test_planted_skip():
    pytest.skip("planted: a reason that is not a machine fact")
EOF
cat >"$tmp/ct/CTestTestfile.cmake" <<EOF
add_test(c_pass "$tools/selftest_harness_cases" pass)
add_test(c_skip "$tools/selftest_harness_cases" skip)
set_tests_properties(c_skip PROPERTIES SKIP_RETURN_CODE 77)
add_test(c_skip_allowed "$tools/selftest_harness_cases" skip-allowed)
set_tests_properties(c_skip_allowed PROPERTIES SKIP_RETURN_CODE 77)
add_test(py_planted "$python" -m pytest -q -p no:cacheprovider --junitxml=$tmp/ct/pytest-results/py_planted.xml $tmp/ct/test_planted_skip.py)
EOF
(cd "$tmp/ct" && ctest --output-junit ctest.xml >ctest.log 2>&1)
counts() { # CI value -> "passed failed skipped"
  CI=$1 python3 scripts/test_counts.py planted "$tmp/ct/ctest.xml" "$tmp/ct/pytest-results" tests/skip_allowlist.txt |
    awk '/^counts /{print $2, $3, $4}'
}
got=$(counts false)
if [ "$got" = "2 0 3" ]; then echo "selftest skips counted as skips, not passes (control): $got"
else echo "selftest skips without CI: WRONG: passed/failed/skipped $got, expected 2 0 3"; bad=1; fi
got=$(counts true)
if [ "$got" = "2 2 1" ]; then echo "selftest skips under CI=true: red as expected (the C and the pytest skip fail, the allow-listed one stays a skip)"
else echo "selftest skips under CI=true: WRONG: passed/failed/skipped $got, expected 2 2 1"; bad=1; fi

# ---- fixtures: a source tree of links to the real one, then faults in it
mk_source() { # DIR: tests/ of links, tests/fixtures/tiny_clover a real copy
  mkdir -p "$1/tests/fixtures"
  ln -s "$root/tests/data" "$1/tests/data"
  for f in "$root"/tests/fixtures/*; do
    [ "$(basename "$f")" = tiny_clover ] || ln -s "$f" "$1/tests/fixtures/$(basename "$f")"
  done
  cp -r "$root/tests/fixtures/tiny_clover" "$1/tests/fixtures/tiny_clover"
}
mk_source "$tmp/src"
golden() { CLOVER_SOURCE_DIR=$1 CLOVER_BUILD_DIR=$build "$2"; }
expect "golden test on a copy of the fixtures (control)" 0 golden "$tmp/src" "$build/tests/test_golden_clover"

# one logit moved by 1e-3 of the logit scale max(1, max|ref|)
python3 - "$tmp/src/tests/fixtures/tiny_clover/data/causal_logits.f32" <<'EOF'
import array, sys
a = array.array("f")
with open(sys.argv[1], "rb") as f:
    a.frombytes(f.read())
scale = max(1.0, max(abs(x) for x in a))
a[len(a) // 2] += 1e-3 * scale
with open(sys.argv[1], "wb") as f:
    f.write(a.tobytes())
EOF
expect "one fixture logit perturbed by 1e-3 of its scale" red golden "$tmp/src" "$build/tests/test_golden_clover"
expect "ln(b/B) term dropped" red golden "$root" "$tools/selftest_golden_clover_no_ln_ratio"
golden_no_simd() { CLOVER_NO_SIMD=1 golden "$@"; }
expect "Q4_K dequantiser: sub-blocks 0 and 1 swapped (CLOVER_NO_SIMD=1, tiny_clover_k)" red \
  golden_no_simd "$root" "$tools/selftest_golden_quant_q4_k_fault"

rm -rf "$tmp/src/tests/fixtures/tiny_clover"
for t in test_golden_clover test_golden_generate test_golden_quant test_backend_cpu test_engine_snapshot test_text_api; do
  expect "fixture directory removed: $t" red golden "$tmp/src" "$build/tests/$t"
done
pyt() { # SOURCE BUILD SHARED pytest-args...
  local s=$1 b=$2 sh=$3; shift 3
  CLOVER_SOURCE_DIR=$s CLOVER_BUILD_DIR=$b CLOVER_SHARED_DIR=$sh "$python" -m pytest -q -p no:cacheprovider "$@"
}
expect "fixture directory removed: py test_convert_fixtures" red \
  pyt "$tmp/src" "$build" "$root/../shared" "$root/tests/python/test_convert_fixtures.py" -k "tiny_clover and scores"

# ---- the shared directory and the clover binary missing
expect "shared directory missing: py test_tokenizer_parity" red \
  pyt "$root" "$build" "$tmp/no-shared" "$root/tests/python/test_tokenizer_parity.py" -k test_special_ids
mkdir -p "$tmp/empty-build"
expect "clover binary missing: py test_convert_fixtures" red \
  pyt "$root" "$tmp/empty-build" "$root/../shared" "$root/tests/python/test_convert_fixtures.py" -k "tiny_ar and scores"

if [ $bad -ne 0 ]; then echo "selftest: FAILED"; exit 1; fi
echo "selftest: every planted fault turned red"
