#!/usr/bin/env bash
# On a machine with a CUDA GPU: builds pplab against the LibTorch of the pip
# torch (CUDA, NCCL), runs the GPU tests (ctest label `gpu`) and prints their
# figures. Usage, from the project's root:
#   bash tools/gpu_check.sh            # build into build-cuda/ (PPLAB_BUILD overrides)
# With .gpu/ prepared (../shared/gpu/prepare.sh) it uses .gpu/build.sh, which
# also unpacks the Debian -dev packages a bare GPU machine lacks.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PPLAB_BUILD:-$PWD/build-cuda}
if [ -f .gpu/build.sh ]; then
  PPLAB_BUILD="$build" bash .gpu/build.sh >/dev/null
  export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
else
  prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$build" -j "$(nproc)"
fi
grep -q "PPLAB_WITH_CUDA:INTERNAL=ON" "$build/CMakeCache.txt" 2>/dev/null ||
  echo "gpu_check: warning: the LibTorch found has no CUDA; the GPU tests will be skipped"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu_check: GPU: /' || true
# The figures are printed as each test ends (line-buffered), so a run cut
# short still shows what finished; the whole log stays in $build/gpu_check.log.
log=$build/gpu_check.log
set +e
ctest --test-dir "$build" -L gpu --output-on-failure -V 2>&1 | tee "$log" |
  grep --line-buffered -E "^[0-9]+: gpu|gpu[: ]|Passed|Failed|Skipped|tests passed" |
  grep --line-buffered -vE "^[0-9]+: Test command"
exit "${PIPESTATUS[0]}"
