#!/usr/bin/env python3
"""Counts test cases across every suite of a `meson test` run.

Reads meson's testlog.json. A doctest suite contributes its own counts
("[doctest] test cases: N | P passed | F failed"); a pytest suite its summary
("P passed, F failed"); any other test counts as one case. A suite that
failed without printing counts (a crash) adds one failure.
Prints "N passed, N failed" as the last line; exits 1 if anything failed.

With --total FILE it sums stage lines instead ("<stage>: P passed, F failed",
as tests/run.sh writes them): it prints each, then the sum as the last line.
A line without counts adds one failure. An empty file (no stage ran) is one
failure too: a run that tested nothing must not pass.
"""
import json
import re
import sys

DOCTEST = re.compile(r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed")
PYTEST_PASSED = re.compile(r"(\d+) passed")
PYTEST_FAILED = re.compile(r"(\d+) (?:failed|error)")


def counts(entry):
    out = entry.get("stdout", "") or ""
    ok = entry.get("result") in ("OK", "EXPECTEDFAIL")
    doctest = DOCTEST.findall(out)
    if doctest:
        passed = sum(int(p) for _, p, _ in doctest)
        failed = sum(int(f) for _, _, f in doctest)
        return passed, failed + (0 if ok or failed else 1)
    summary = [line for line in out.splitlines()
               if re.search(r"\d+ (passed|failed|errors?)\b.* in [\d.]+s", line)]
    if summary:
        line = summary[-1]
        passed = sum(int(n) for n in PYTEST_PASSED.findall(line))
        failed = sum(int(n) for n in PYTEST_FAILED.findall(line))
        return passed, failed + (0 if ok or failed else 1)
    return (1, 0) if ok else (0, 1)


STAGE = re.compile(r"^([^:]+): (\d+) passed, (\d+) failed")


def total(path):
    passed = failed = stages = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            stages += 1
            print(line)
            m = STAGE.match(line)
            if m:
                passed += int(m.group(2))
                failed += int(m.group(3))
            else:
                failed += 1
    if stages == 0:
        print("no stage ran")
        failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main(path):
    passed = failed = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            entry = json.loads(line)
            p, fl = counts(entry)
            print(f"{entry.get('name')}: {p} passed, {fl} failed")
            passed += p
            failed += fl
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--total":
        sys.exit(total(sys.argv[2]))
    sys.exit(main(sys.argv[1]))
