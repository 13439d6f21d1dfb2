#!/usr/bin/env bash
# Fuzzes every libFuzzer target of a -Dfuzzing=true build for a bounded time.
#
#   tests/fuzz/run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]
#
# Each target (default: every tests/fuzz/corpus/<target>/ that has a
# BUILD_DIR/tests/fuzz/fuzz_<target> executable) runs for SECONDS on a
# temporary copy of its checked-in corpus (the repository is never written
# to), MODELZIP_FUZZ_JOBS targets at a time (default: nproc). A target
# passes when libFuzzer finds no crash, sanitizer report, leak, timeout (an
# input taking over 30 s) or memory blow-up (over 2048 MB). A failing input is kept in
# BUILD_DIR/fuzz-findings/<target>/ and its path printed.
#
# Output: one line per target, then as the last line exactly
# "N passed, N failed". Exit status 1 if a target failed or none ran.
set -u

if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS [TARGET...]" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd) || exit 2
seconds=$2
shift 2
case "$seconds" in
  '' | *[!0-9]*) echo "SECONDS must be a whole number: $seconds" >&2; exit 2 ;;
esac
jobs=${MODELZIP_FUZZ_JOBS:-$(nproc)}
case "$jobs" in
  '' | *[!0-9]* | 0) echo "MODELZIP_FUZZ_JOBS must be a positive whole number: $jobs" >&2; exit 2 ;;
esac

fuzz_dir=$(cd "$(dirname "$0")" && pwd)
corpus_root="$fuzz_dir/corpus"
findings="$build_dir/fuzz-findings"

if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for dir in "$corpus_root"/*/; do
    targets+=("$(basename "$dir")")
  done
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/modelzip-fuzz.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

# fuzz_one TARGET: fuzzes one target; its verdict ("ok ..." or "FAIL ...")
# goes to $work/TARGET.result.
fuzz_one() {
  local target=$1 exe corpus artifacts max_len seed size log status runs found
  local result="$work/$target.result"
  exe="$build_dir/tests/fuzz/fuzz_$target"
  if [ ! -x "$exe" ]; then
    echo "FAIL $target: $exe not built (configure with -Dfuzzing=true and build it)" >"$result"
    return
  fi
  corpus="$work/$target/corpus"
  artifacts="$work/$target/artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp "$corpus_root/$target"/* "$corpus"/ 2>/dev/null
  # Inputs up to the largest seed (at least 4 KiB), as libFuzzer would guess,
  # but stated so that every run explores the same sizes.
  max_len=4096
  for seed in "$corpus"/*; do
    [ -f "$seed" ] || continue
    size=$(stat -c %s "$seed")
    [ "$size" -gt "$max_len" ] && max_len=$size
  done
  log="$work/$target/log"
  "$exe" -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 -timeout=30 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$corpus" >"$log" 2>&1
  status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  found=$(ls "$artifacts" 2>/dev/null | head -1)
  if [ $status -eq 0 ] && [ -z "$found" ]; then
    echo "ok   $target: ${runs:-?} runs in ${seconds} s, corpus $(ls "$corpus" | wc -l) inputs" \
      >"$result"
    return
  fi
  mkdir -p "$findings/$target"
  cp "$log" "$findings/$target/log"
  if [ -n "$found" ]; then
    cp "$artifacts/$found" "$findings/$target/$found"
    echo "FAIL $target: libFuzzer exit status $status, input $findings/$target/$found" \
      "(log: $findings/$target/log). Reproduce: $exe $findings/$target/$found;" \
      "once fixed, add it as a regression file to tests/fuzz/corpus/$target/" >"$result"
  else
    echo "FAIL $target: libFuzzer exit status $status without a saved input" \
      "(log: $findings/$target/log)" >"$result"
  fi
}

# Up to $jobs targets at once (libFuzzer runs one thread per target).
running=0
for target in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  fuzz_one "$target" &
  running=$((running + 1))
done
wait

passed=0
failed=0
for target in "${targets[@]}"; do
  if [ -f "$work/$target.result" ]; then
    line=$(cat "$work/$target.result")
  else
    line="FAIL $target: no verdict (the fuzzing job died)"
  fi
  echo "$line"
  case $line in
    ok*) passed=$((passed + 1)) ;;
    *) failed=$((failed + 1)) ;;
  esac
done

[ $((passed + failed)) -eq 0 ] && failed=1
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
