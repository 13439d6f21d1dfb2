#!/usr/bin/env bash
# The device checks of the torch loading pipeline, in one call on a GPU machine (docs/torch.md,
# "Measuring on a GPU machine"): builds the Python package there, runs the CUDA tests of
# tests/python, benchmarks/torch_bench.py at 3 GiB (warm and cold, every device-load variant:
# read() against mapping staging over threads {8,16} x pieces {8,32} MiB, and the archive's
# mapping registered with CUDA (cudaHostRegister) then copied with non_blocking=True; the saves of the
# state dict from the GPU, blocking and save_async, beside .cpu() then save) and
# benchmarks/dist_save_bench.py (16 ranks x 128 MiB: modelzip.distributed.save, blocking and
# blocking=False, against raw files + fsync, DCP save and DCP async_save) and
# benchmarks/async_save_bench.py, and every test of tests/python/test_float8.py and
# test_mx_dtypes.py (torch >= 2.1 has the float8 dtypes, >= 2.7/2.8 the MX ones, which the
# CPU-only machines' torch lacks). Every step runs under `timeout`;
# the steps' limits add up to 9.75 minutes (a run
# on the H200 took 6: build 43 s, tests 34 s, torch_bench 180 s, before its registered-mapping
# rows: about 7 registrations of 3 GiB more, a few seconds). Outputs go to $OUT (the device tool's output folder;
# default /tmp/gpu_checks; it brings back 8 files at most): build.log, env.txt, cuda_tests.txt, float8_tests.txt,
# torch_bench.txt, dist_save_bench.txt, async_save_bench.txt, summary.txt.
# TORCH_BENCH_MIB and ASYNC_BENCH_MIB change the benchmarks' sizes (a dry run on a small machine).
#
# Prepared here first: `bash ../shared/device/prepare.sh` (fills .devdeps/); then the device
# tool runs, with carry [".devdeps"]: bash benchmarks/device/run_gpu_checks.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${OUT:-/tmp/gpu_checks}
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"
PY=${PY:-python3}
export PY PYTHONPATH="$root/.devdeps/pkg" PYTHONUNBUFFERED=1

# step NAME LIMIT_S LOG COMMAND...: runs COMMAND under timeout, output into $out/LOG; records
# its status and seconds in summary.txt.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$out/$log" 2>&1
  local rc=$?
  local why=""
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && why=" (timed out after ${limit}s)"
  echo "$name: exit $rc$why in $((SECONDS - start)) s -> $log" | tee -a "$summary"
  return "$rc"
}

if [ ! -f .devdeps/build_device.sh ]; then
  echo "no .devdeps/build_device.sh: run bash ../shared/device/prepare.sh here and carry .devdeps" \
    | tee -a "$summary"
  exit 2
fi
# The shared build script names the sources of src/remote that a build without libcurl
# compiles as they were when it was written; add those src/remote/meson.build now compiles
# in every build (e.g. fetch_interrupt.cpp, which the binding's SIGINT watch needs), or the
# module would fail to import on an undefined symbol.
always=$(sed -n "s/^modelzip_sources += files(\(.*\))$/\1/p" src/remote/meson.build | head -1 \
  | tr -d "',")
build_script=.devdeps/build_device_here.sh
cp .devdeps/build_device.sh "$build_script"
for f in $always; do
  grep -q "src/remote/$f" "$build_script" \
    || sed -i "s#src/remote/url.cpp#src/remote/url.cpp src/remote/$f#" "$build_script"
done
step build 60 build.log bash "$build_script" || exit 1
# The device tool brings back 8 files at most: the import check's output goes into env.txt.
step import 30 env.txt "$PY" -c 'import modelzip; print(modelzip.__file__)' || exit 1
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  "$PY" -c 'import torch, os; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "available", torch.cuda.is_available(), "cores", os.cpu_count())'
  "$PY" -c 'import safetensors; print("safetensors", safetensors.__version__)' 2>&1
  "$PY" -c 'import pytest; print("pytest", pytest.__version__)' 2>&1
  df -h /tmp | tail -1
} >> "$out/env.txt" 2>&1

# The CUDA tests (names with "cuda" or "device"); -rs lists the skipped ones with their reason.
if "$PY" -c 'import pytest' 2>/dev/null; then
  step cuda_tests 60 cuda_tests.txt "$PY" -m pytest -q -rs -p no:cacheprovider -k "cuda or device" \
    tests/python/test_torch_load.py tests/python/test_distributed.py tests/python/test_save_async.py \
    tests/python/test_device_save.py tests/python/test_complex.py
  grep -E "passed|failed|skipped|error" "$out/cuda_tests.txt" | tail -1 | sed 's/^/  /' | tee -a "$summary"
  step float8_tests 30 float8_tests.txt "$PY" -m pytest -q -rs -p no:cacheprovider \
    tests/python/test_float8.py tests/python/test_mx_dtypes.py
  grep -E "passed|failed|skipped|error" "$out/float8_tests.txt" | tail -1 | sed 's/^/  /' | tee -a "$summary"
else
  echo "cuda_tests: not run (pytest is not installed on this machine)" | tee -a "$summary"
fi

step torch_bench 225 torch_bench.txt "$PY" benchmarks/torch_bench.py \
  --size-mib "${TORCH_BENCH_MIB:-3072}" --reps 3 --dir /tmp
tail -1 "$out/torch_bench.txt" | sed 's/^/  /' | tee -a "$summary"
step dist_save_bench 135 dist_save_bench.txt "$PY" benchmarks/dist_save_bench.py \
  --ranks "${DIST_BENCH_RANKS:-16}" --mib "${DIST_BENCH_MIB:-128}" --reps 3 --dir /tmp
tail -1 "$out/dist_save_bench.txt" | sed 's/^/  /' | tee -a "$summary"
step async_save_bench 45 async_save_bench.txt "$PY" benchmarks/async_save_bench.py \
  --mib "${ASYNC_BENCH_MIB:-1024}" --reps 3 --dir /tmp
exit 0
