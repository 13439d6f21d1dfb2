#!/usr/bin/env bash
# Installs the dependencies, builds modelzip and runs every test stage:
#
#   normal    gcc build (MODELZIP_BUILD_DIR, default build/): every suite,
#             C++ (doctest), CLI and Python (pytest), Java (JUnit), samples.
#   sanitize  clang build with AddressSanitizer + UndefinedBehaviorSanitizer
#             and libFuzzer targets (MODELZIP_SANITIZE_BUILD_DIR, default
#             build-sanitize/): every suite except the Python and Java
#             bindings, which /usr/bin/python3 and the JVM cannot load under
#             ASan. Any finding is fatal.
#   valgrind  the normal build's fast C++ suites under valgrind memcheck
#             (errors and definite or indirect leaks are failures).
#   fuzz      tests/fuzz/run_fuzzers.sh on the sanitizer build for
#             MODELZIP_FUZZ_SECONDS (default 12) per target, nproc targets at
#             a time (the checked-in corpora also replay as plain tests in
#             every stage), if it exists.
#
# Builds use MODELZIP_BUILD_JOBS parallel jobs (default: nproc, the cores
# this process may use; ninja's own default, nproc + 2, oversubscribes a
# small CI machine).
#
# MODELZIP_TEST_STAGES selects stages (default: all four), e.g.
# `MODELZIP_TEST_STAGES=normal bash tests/run.sh` for the fast one. The
# sanitize stage builds what the fuzz stage runs; fuzz alone builds it too.
#
# Every stage prints "<stage>: N passed, N failed" (counted test cases); a
# stage that stops without counts (build error, crash) counts one failure.
# The last line is the sum over the stages: "N passed, N failed". Exit
# status 0 only if nothing failed.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! bash .ci/install-deps; then
  echo "0 passed, 1 failed"
  exit 1
fi

stages=${MODELZIP_TEST_STAGES:-normal sanitize valgrind fuzz}
build=${MODELZIP_BUILD_DIR:-build}
sanitize_build=${MODELZIP_SANITIZE_BUILD_DIR:-build-sanitize}
fuzz_seconds=${MODELZIP_FUZZ_SECONDS:-12}
jobs=${MODELZIP_BUILD_JOBS:-$(nproc)}
results=$(mktemp)
trap 'rm -f "$results"' EXIT

# Tests run under valgrind: the fast C++ suites. Left out: finalfusion
# (minutes), hostile (its peak-memory checks measure the allocator valgrind
# replaces), crash (forked children that _exit leave their heap behind as
# leaks). Within them, valgrind_skipped_cases (doctest names, wildcards) are
# left out under memcheck only, through tests/test_main.cpp: the slowest
# cases there, whose data (a sparse archive past 4 GiB, entries of 9-20 MiB
# copied or read several times) or loops (a byte flip at every offset of an
# input) memcheck runs many times slower. They run in full in the normal and
# sanitize stages (AddressSanitizer checks their memory accesses there).
# doctest splits its filters at commas: a comma in a name is written `?`.
# The five checkpoint cases below took 179 of checkpoint's 324 s under
# memcheck on the 2-core VM (492 s in CI, where the eight other tests took
# 434 s on the other core, so that it ended the stage alone).
# meson test runs named tests in the order given here: the longest under
# memcheck first (in CI: checkpoint, io 120 s, zip 102 s), so that none of
# them ends the stage alone.
valgrind_tests=(checkpoint zip io graph convert format core sample_quickstart sample_mlp)
valgrind_skipped_cases=(
  'parallel_copy copies every job exactly*'              # checkpoint: up to 20 MiB, 1-5 threads
  "Large blobs: dedup's CRC-32s*"                        # checkpoint: 70 MiB of floats, saved 3 times
  'New saves and appends? durable or not*'               # checkpoint: 9 + 5 MiB entries, twice
  'EntryStream reads an entry front to back in parts*'   # checkpoint: 9 MiB deflated, read in 3 part sizes
  'entry_part reads a range? decompressing*'             # checkpoint: a 12 MiB entry, stored and deflated
  'verify lists 20 bad lines of a table*'                # checkpoint: 100,000 bad lines, one problem each
  'Entries past 4 GiB (ZIP64 offsets)*'                  # zip: a sparse archive past 4 GiB
  'read_owned_all: a damaged stored entry anywhere*'     # zip: a 9 MiB entry, 4 damaged copies
  'Large data written directly*'                         # zip: 16 MiB written 3 times
  'Byte flips give an Error or a valid value*'           # graph: 4 flips at every byte, several files
  'Vectors of 8-byte elements at 4-aligned addresses*'   # graph: 4 flips at every byte
)

# ccache (meson uses it when installed; .ci/install-deps installs it) leaves
# the build folder out of its hash for -g and rewrites absolute paths below
# the source tree: the two package builds of the test python_wheel, each in a
# folder of its own with build/'s compile commands, then find build/'s
# objects instead of compiling the library twice more.
export CCACHE_NOHASHDIR=1 CCACHE_BASEDIR=$PWD

# Strict sanitizers for every process a test starts (children included).
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:strict_string_checks=1:print_summary=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:print_summary=1
export LSAN_OPTIONS=print_suppressions=0

# record STAGE COUNTS_LINE: appends the stage's counts, or one failure when
# the stage printed none.
record() {
  local stage=$1 line=$2
  if [[ $line =~ ^[0-9]+\ passed,\ [0-9]+\ failed$ ]]; then
    echo "$stage: $line" >>"$results"
  else
    echo "$stage: 0 passed, 1 failed (no counts: stopped early)" >>"$results"
  fi
}

# setup DIR [meson options...]: configures DIR unless already configured.
setup() {
  local dir=$1
  shift
  [ -f "$dir/build.ninja" ] || meson setup "$dir" "$@"
}

# meson_stage STAGE DIR LOG [meson test args...]: runs meson test and records
# the counts summarize.py reads from its log, DIR/meson-logs/LOG.json (meson
# names it testlog, or testlog-<wrapper> when tests run under --wrapper).
meson_stage() {
  local stage=$1 dir=$2 log="$2/meson-logs/$3.json"
  shift 3
  rm -f "$log"
  meson test -C "$dir" --print-errorlogs --num-processes 2 "$@"
  if [ -f "$log" ]; then
    record "$stage" "$(/usr/bin/python3 tests/summarize.py "$log" | tail -n 1)"
  else
    record "$stage" ""
  fi
}

# The sanitizer build keeps line tables only (-gline-tables-only: file, line
# and inlined frames in every report, as llvm-symbolizer needs them) and no
# variable or type information, which no stage reads and which costs compile
# time.
build_sanitize() {
  CC=${MODELZIP_SANITIZE_CC:-clang} CXX=${MODELZIP_SANITIZE_CXX:-clang++} \
    setup "$sanitize_build" --buildtype=debugoptimized -Dcpp_args=-gline-tables-only \
    -Db_sanitize=address,undefined \
    -Db_lundef=false -Dfuzzing=true -Dpython=disabled -Djava=disabled &&
    ninja -C "$sanitize_build" -j "$jobs"
}

stage_normal() {
  setup "$build" --buildtype=debugoptimized && ninja -C "$build" -j "$jobs" || {
    record normal ""
    return
  }
  meson_stage normal "$build" testlog
}

stage_sanitize() {
  build_sanitize || {
    record sanitize ""
    return
  }
  meson_stage sanitize "$sanitize_build" testlog
}

stage_valgrind() {
  setup "$build" --buildtype=debugoptimized && ninja -C "$build" -j "$jobs" || {
    record valgrind ""
    return
  }
  MODELZIP_TEST_CASE_EXCLUDE=$(IFS=,; echo "${valgrind_skipped_cases[*]}") \
    meson_stage valgrind "$build" testlog-valgrind --no-rebuild --timeout-multiplier 4 \
    --wrapper "valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --track-origins=yes" \
    "${valgrind_tests[@]}"
}

stage_fuzz() {
  if [ ! -f tests/fuzz/run_fuzzers.sh ]; then
    echo "fuzz: tests/fuzz/run_fuzzers.sh not present, stage skipped"
    return
  fi
  build_sanitize || {
    record fuzz ""
    return
  }
  local out
  out=$(mktemp)
  bash tests/fuzz/run_fuzzers.sh "$sanitize_build" "$fuzz_seconds" | tee "$out"
  record fuzz "$(tail -n 1 "$out")"
  rm -f "$out"
}

for stage in $stages; do
  case $stage in
    normal | sanitize | valgrind | fuzz) ;;
    *)
      echo "unknown stage '$stage' (stages: normal sanitize valgrind fuzz)" >&2
      record "$stage" ""
      continue
      ;;
  esac
  echo "=== stage $stage ==="
  start=$SECONDS
  "stage_$stage"
  echo "=== stage $stage: $((SECONDS - start)) s ==="
done

/usr/bin/python3 tests/summarize.py --total "$results"
