#!/usr/bin/env python3
"""The tree's C++ is formatted by its one .clang-format.

check_format.py --source-dir DIR --clang-format PROG
    fails naming every C++ file under src/, include/, tests/, samples/ and
    benchmarks/ that `clang-format` would change, with the first changed line.
check_format.py --self-test --clang-format PROG
    checks that a planted misformatted file is reported and a formatted one
    is not (so the check itself can fail).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOTS = ("src", "include", "tests", "samples", "benchmarks")
SUFFIXES = (".cpp", ".hpp", ".h", ".cc")


def cxx_files(source_dir):
    for root in ROOTS:
        top = os.path.join(source_dir, root)
        for folder, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if not d.startswith(("build", ".")))
            for name in sorted(names):
                if name.endswith(SUFFIXES):
                    yield os.path.join(folder, name)


def unformatted(paths, clang_format):
    """{path: 'line N'} for each of `paths` that clang-format would change."""
    # One process for many files; --dry-run --Werror reports
    # "PATH:LINE:COL: error: code should be clang-formatted" per change.
    found = {}
    for i in range(0, len(paths), 200):
        batch = paths[i:i + 200]
        out = subprocess.run([clang_format, "--style=file", "--dry-run", "--Werror"] + batch,
                             capture_output=True, text=True, timeout=600)
        for line in out.stderr.splitlines():
            if ": error: code should be clang-formatted" not in line:
                continue
            path, lineno = line.split(":")[0:2]
            found.setdefault(path, "line " + lineno)
        if out.returncode != 0 and not any(p in found for p in batch):
            raise RuntimeError("clang-format failed: " + out.stderr[:2000])
    return found


def check(source_dir, clang_format):
    paths = list(cxx_files(source_dir))
    if not paths:
        print("no C++ files found under", source_dir)
        return 1
    bad = unformatted(paths, clang_format)
    for path in paths:
        if path in bad:
            print("%s: %s" % (os.path.relpath(path, source_dir), bad[path]))
    if bad:
        print("%d of %d files are not formatted as .clang-format says; "
              "run clang-format -i on them" % (len(bad), len(paths)))
        return 1
    print("%d files formatted as .clang-format says" % len(paths))
    return 0


def self_test(clang_format):
    here = os.path.dirname(os.path.abspath(__file__))
    style = os.path.join(here, "..", "..", ".clang-format")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(style, os.path.join(tmp, ".clang-format"))
        os.makedirs(os.path.join(tmp, "src"))
        good = os.path.join(tmp, "src", "good.cpp")
        with open(good, "w") as f:
            f.write("int add(int a, int b) {\n  return a + b;\n}\n")
        if check(tmp, clang_format) != 0:
            print("self-test: a formatted file was reported")
            return 1
        bad = os.path.join(tmp, "src", "bad.cpp")
        with open(bad, "w") as f:
            f.write("int  sub(int a,int b){\nreturn a-b;}\n")
        if check(tmp, clang_format) != 1:
            print("self-test: a misformatted file was not reported")
            return 1
    print("self-test passed")
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir")
    parser.add_argument("--clang-format", required=True)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test(args.clang_format)
    return check(args.source_dir, args.clang_format)


if __name__ == "__main__":
    sys.exit(main())
