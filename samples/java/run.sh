#!/usr/bin/env bash
# Runs the Java sample on an archive written by Python, as docs/java.md shows:
#   samples/java/run.sh [BUILD_DIR]   (default: build)
# Needs the build's Python bindings, modelzip.jar, libmodelzip_jni.so and the
# sample jar (ninja -C BUILD_DIR).
set -euo pipefail
build=$(realpath "${1:-build}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PYTHONPATH="$build/src/python" /usr/bin/python3 -c '
import sys, numpy as np, modelzip
modelzip.save(sys.argv[1], "step-1", {
    "fc.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
    "fc.bias": np.array([0.5, -0.5], dtype=np.float32),
    "steps": np.array([100], dtype=np.int64)})
' "$work/model.zip"
java -Djava.library.path="$build/src/java" \
  -cp "$build/src/java/modelzip.jar:$build/samples/java/modelzip-sample.jar" \
  ReadAndExtend "$work/model.zip"
# What Java saved, read back by Python.
PYTHONPATH="$build/src/python" /usr/bin/python3 -c '
import sys, numpy as np, modelzip
w = modelzip.load(sys.argv[1], "step-1-java")["fc.weight"]
assert np.array_equal(w, np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5), w
print("python reads step-1-java: fc.weight =", w.tolist())
' "$work/model.zip"
