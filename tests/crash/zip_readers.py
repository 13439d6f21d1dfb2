#!/usr/bin/env python3
"""Reads every archive listed in MANIFEST with Python's zipfile and, when
installed, `unzip -t` and Java's streaming java.util.zip.ZipInputStream
(ZipStreamCheck.java, compiled into a temporary folder), without any
modelzip code: the archives a killed writer left (tests/crash/
third_party_test.cpp).

usage: zip_readers.py MANIFEST [--java-strict]
MANIFEST lines: "<archive path> <expected tag>... [| -]": the tags that
readers of the central directory must find (and a streaming reader too,
unless the line ends in "| -": an archive in the window of streaming
readers, FORMAT.md 8.1, whose Java result is reported, never asserted).

Prints one line per failure and a last line "checked N archives: zipfile F,
unzip U, java J failures (java: skipped|ran)"; exits 1 when zipfile or unzip
failed on any archive (Java's result is reported, and fails the run only
with --java-strict).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

manifest = sys.argv[1]
java_strict = "--java-strict" in sys.argv
cases = []  # (archive, tags for central-directory readers, tags for streaming readers)
with open(manifest) as f:
    for line in f:
        parts = line.split()
        if parts:
            tags = parts[1:]
            cut = tags.index("|") if "|" in tags else len(tags)
            cases.append((parts[0], tags[:cut], tags[cut + 1:] != ["-"]))

failures = {"zipfile": 0, "unzip": 0, "java": 0, "java in the window": 0}
for path, expect, _ in cases:
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
            tags = z.read("tags.txt").decode().split()
        if bad is not None or tags != expect:
            raise ValueError(f"bad entry {bad}, tags {tags}, expected {expect}")
    except Exception as e:  # noqa: BLE001 - every failure is reported
        print(f"zipfile: {path}: {e}")
        failures["zipfile"] += 1
    if shutil.which("unzip"):
        r = subprocess.run(["unzip", "-tqq", path], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        if r.returncode != 0:
            print(f"unzip: {path}: {r.stdout.strip()}")
            failures["unzip"] += 1

java = "skipped"
if shutil.which("javac") and shutil.which("java"):
    java = "ran"
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ZipStreamCheck.java")
    with tempfile.TemporaryDirectory() as classes:
        subprocess.run(["javac", "-d", classes, source], check=True, timeout=300)
        for key, asserted in (("java", True), ("java in the window", False)):
            streaming = os.path.join(classes, "manifest.txt")
            with open(streaming, "w") as f:
                for path, expect, a in cases:
                    if a == asserted:
                        f.write(" ".join([path] + expect) + "\n")
            r = subprocess.run(["java", "-cp", classes, "ZipStreamCheck", streaming],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=300)
            for line in r.stdout.splitlines():
                if line.startswith("FAIL"):
                    print(f"{key}: " + line)
                    failures[key] += 1
            if r.returncode not in (0, 1):
                print(f"{key}: " + r.stdout)
                failures[key] += 1

window = sum(1 for c in cases if not c[2])
print(f"checked {len(cases)} archives: zipfile {failures['zipfile']}, unzip {failures['unzip']}, "
      f"java {failures['java']} failures (java: {java}); java in the window of streaming "
      f"readers (not asserted): {failures['java in the window']} of {window} failed")
bad = failures["zipfile"] + failures["unzip"] + (failures["java"] if java_strict else 0)
sys.exit(1 if bad else 0)
