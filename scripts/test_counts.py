#!/usr/bin/env python3
"""test_counts.py: the real counts of one ctest run, for scripts/test.sh.

    test_counts.py LABEL CTEST_JUNIT PYTEST_DIR ALLOWLIST

ctest sees one entry per C test binary (pass, fail, or skip: exit 77) and
one per pytest file; a pytest file with skipped cases still "passes" in
ctest. So the C entries are counted from ctest's JUnit file, and each pytest
entry from the JUnit file pytest itself wrote (PYTEST_DIR/<entry>.xml):
its passed, failed (failures + errors) and skipped cases. A pytest entry
that failed in ctest without a result file of its own (pytest missing,
a crash, a time-out) counts as one failure; so does a file whose cases all
passed while ctest says it failed.

Prints every failure and every skip with its reason, then the line
"LABEL: N passed, M failed, K skipped", and writes "N M K" to stdout's last
line prefixed with "counts " for the caller. Under CI=true a skip whose
reason matches no line of ALLOWLIST (tests/skip_allowlist.txt: machine
facts only) is also counted as a failure, and says so.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET


def allow_patterns(path):
    pats = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.strip() and not line.lstrip().startswith("#"):
                pats.append(re.compile(line))
    return pats


def c_skip_reason(case):
    out = case.findtext("system-out") or ""
    for line in out.splitlines():
        if line.startswith("SKIP: "):
            return line[len("SKIP: "):].strip()
    return "(no SKIP: line on stdout)"


def pytest_counts(path):
    """(passed, failed, [(case, reason) skipped], [failed case names]) of a pytest JUnit file, or None."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    passed, failed, skipped, failed_names = 0, 0, [], []
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            failed += 1
            # the head of the assertion's message, so a CI excerpt shows why
            why = " ".join(bad.get("message", "").split())
            failed_names.append(f"{name}: {why[:400]}" if why else name)
        elif case.find("skipped") is not None:
            skipped.append((name, case.find("skipped").get("message", "").strip()))
        else:
            passed += 1
    # a collection error has no <testcase> but counts in the suite's errors
    for suite in root.iter("testsuite"):
        n_err = int(suite.get("errors", "0")) - sum(
            1 for c in suite.iter("testcase") if c.find("error") is not None)
        if n_err > 0:
            failed += n_err
            failed_names.append(f"{suite.get('name', 'pytest')}: {n_err} collection errors")
    return passed, failed, skipped, failed_names


def main():
    label, ctest_junit, pytest_dir, allowlist = sys.argv[1:5]
    ci = os.environ.get("CI", "").lower() == "true"
    pats = allow_patterns(allowlist)
    passed = failed = 0
    skips = []  # (entry, reason)
    try:
        root = ET.parse(ctest_junit).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"{label}: no ctest results ({ctest_junit}: {e})")
        print(f"{label}: 0 passed, 1 failed, 0 skipped")
        print("counts 0 1 0")
        return
    for case in root.iter("testcase"):
        name, status = case.get("name"), case.get("status")
        if name.startswith("py_"):
            got = pytest_counts(os.path.join(pytest_dir, name + ".xml"))
            if got is None:
                failed += 1
                print(f"FAILED: {label} {name}: no pytest results (ctest status {status})")
                continue
            p, f, s, names = got
            passed += p
            failed += f
            skips += [(f"{name} {c}", r) for c, r in s]
            for n in names:
                print(f"FAILED: {label} {name} {n}")
            if status != "run" and f == 0:
                failed += 1
                print(f"FAILED: {label} {name}: ctest status {status} with no failed case (time-out or crash?)")
        elif status == "run":
            passed += 1
        elif status == "notrun" and case.find("skipped") is not None:
            skips.append((name, c_skip_reason(case)))
        else:
            failed += 1
            print(f"FAILED: {label} {name} (ctest status {status})")
    n_skipped = 0
    for entry, reason in skips:
        allowed = any(p.search(reason) for p in pats)
        if ci and not allowed:
            failed += 1  # a failure, then, not also a skip
            print(f"FAILED: {label} skip not allowed under CI=true (not in {os.path.basename(allowlist)}): "
                  f"{entry}: {reason}")
        else:
            n_skipped += 1
            print(f"SKIPPED: {label} {entry}: {reason}")
    print(f"{label}: {passed} passed, {failed} failed, {n_skipped} skipped")
    print(f"counts {passed} {failed} {n_skipped}")


if __name__ == "__main__":
    main()
