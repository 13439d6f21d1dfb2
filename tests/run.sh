#!/usr/bin/env bash
# Installs the dependencies, builds modelzip and runs every test.
# The last line is the summary "N passed, N failed" (test cases, from the
# real run of every suite). Exit status 0 only if nothing failed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps
build=${MODELZIP_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" --buildtype=debugoptimized
fi
ninja -C "$build"
status=0
meson test -C "$build" --print-errorlogs --num-processes 2 || status=$?
/usr/bin/python3 tests/summarize.py "$build/meson-logs/testlog.json" || status=1
exit $status
