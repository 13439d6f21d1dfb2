#!/usr/bin/env bash
# The demo: installs the dependencies, builds modelzip, creates an archive with
# two tags that share parameters, and shows it with modelzip and unzip.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps
# Its own build folder without the test suite, and only the two programs it
# runs (the library, the CLI and samples/quickstart): not every test and
# fuzz target (minutes on a fresh machine).
build=${MODELZIP_DEMO_BUILD_DIR:-build-demo}
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=debugoptimized -Dtests=false
ninja -C "$build" src/cli/modelzip samples/quickstart
modelzip="$build/src/cli/modelzip"
demo=$(mktemp -d)
archive="$demo/model.zip"

echo "== samples/quickstart writes two tags; step-2 shares what did not change"
"$build/samples/quickstart" "$archive"
echo
echo "== modelzip tags $archive"
"$modelzip" tags "$archive"
echo
echo "== modelzip ls $archive            (newest tag)"
"$modelzip" ls "$archive"
echo
echo "== modelzip ls $archive --tag step-1 --json"
"$modelzip" ls "$archive" --tag step-1 --json
echo
echo "== unzip -l $archive               (an ordinary zip)"
unzip -l "$archive"
echo
echo "== modelzip cat $archive fc.bias | od -f   (newest bias, raw float32)"
"$modelzip" cat "$archive" fc.bias | od -A d -t f4 | head -3
echo
echo "== modelzip verify $archive"
"$modelzip" verify "$archive"
echo
echo "demo archive kept at $archive"
