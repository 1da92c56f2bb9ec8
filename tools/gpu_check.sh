#!/usr/bin/env bash
# On a machine with a CUDA GPU: builds pplab against the LibTorch of the pip
# torch (CUDA, NCCL), runs the GPU tests (ctest label `gpu`) and prints their
# figures. Usage, from the project's root:
#   bash tools/gpu_check.sh            # build into build-cuda/ (PPLAB_BUILD overrides)
#   PPLAB_GPU_TESTS=RE bash tools/gpu_check.sh   # only the GPU tests whose name matches RE
# With .gpu/ prepared (../shared/gpu/prepare.sh) it uses .gpu/build.sh, which
# also unpacks the Debian -dev packages a bare GPU machine lacks.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PPLAB_BUILD:-$PWD/build-cuda}
if [ -f .gpu/build.sh ]; then
  if ! PPLAB_BUILD="$build" bash .gpu/build.sh > "$build.build.log" 2>&1; then
    echo "gpu_check: the build failed; the end of its log ($build.build.log):"
    tail -n 40 "$build.build.log"
    exit 1
  fi
  export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
else
  prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$build" -j "$(nproc)"
fi
grep -q "PPLAB_WITH_CUDA:INTERNAL=ON" "$build/CMakeCache.txt" 2>/dev/null ||
  echo "gpu_check: warning: the LibTorch found has no CUDA; the GPU tests will be skipped"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu_check: GPU: /' || true
# First a smoke run of two ranks over NCCL on this machine's GPU(s), 3 steps,
# bounded: if that fails or hangs, the K=2 tests would too (each up to its
# ctest bound), so it reruns with NCCL's own log and stops there.
smoke=(timeout -k 5 120 "$build/pplab" train --device cuda -k 2 -m 4 --model small --synthetic --steps 3
       --batch-size 8 --seq-len 64 --out '' -q --json --comm-timeout 30)
# (Skipped where the GPU tests will be: no CUDA build or no GPU listed.)
rc=skip
if grep -q "PPLAB_WITH_CUDA:INTERNAL=ON" "$build/CMakeCache.txt" 2>/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  set +e
  NCCL_DEBUG=WARN "${smoke[@]}" > "$build/smoke.log" 2>&1
  rc=$?
  set -e
fi
if [ "$rc" = skip ]; then
  echo "gpu_check: no CUDA build or no GPU: no K=2 NCCL smoke run"
elif [ "$rc" -ne 0 ]; then
  echo "gpu_check: the K=2 NCCL smoke run failed (exit $rc; 124: still running after 120 s):"
  tail -n 20 "$build/smoke.log"
  pkill -f "$build/pplab-train" 2>/dev/null || true
  echo "gpu_check: again with NCCL_DEBUG=INFO (last 60 lines):"
  NCCL_DEBUG=INFO "${smoke[@]}" > "$build/smoke-info.log" 2>&1 || true
  tail -n 60 "$build/smoke-info.log"
  pkill -f "$build/pplab-train" 2>/dev/null || true
  exit 1
else
  echo "gpu_check: K=2 NCCL smoke run: $(python3 -c 'import json,sys; d=json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1]); print("backend %s, losses %s, step ms %s, warm-up ms %.1f" % (d["backend"], ["%.3f" % x for x in d["losses"]], ["%.1f" % x for x in d["step_times_ms"]], d.get("warm_up_ms", 0)))' "$build/smoke.log" 2>&1 || echo "no JSON line")"
fi
# The figures are printed as each test ends (line-buffered), so a run cut
# short still shows what finished; the whole log stays in $build/gpu_check.log.
# The GPU tests together get PPLAB_GPU_CHECK_SECONDS (default 300), so that
# a hung one cannot take a device command's whole 600 s; what is left of them
# is then stopped, so nothing shares the GPU with what runs next.
log=$build/gpu_check.log
budget=${PPLAB_GPU_CHECK_SECONDS:-300}
set +e
# PPLAB_GPU_TESTS, when set, selects the GPU tests by name (ctest -R).
only=${PPLAB_GPU_TESTS:-}
timeout -k 10 "$budget" ctest --test-dir "$build" -L gpu ${only:+-R "$only"} --output-on-failure -V 2>&1 | tee "$log" |
  grep --line-buffered -E "^[0-9]+: gpu|gpu[: ]|Passed|Failed|Skipped|tests passed" |
  grep --line-buffered -vE "^[0-9]+: Test command"
rc=${PIPESTATUS[0]}
# ctest exits 0 when no test matches: a misspelt PPLAB_GPU_TESTS ran none.
if [ "$rc" = 0 ] && grep -q 'No tests were found' "$log"; then
  echo "gpu_check: no GPU test matches '${only:-(all)}' (ctest -L gpu${only:+ -R $only}); none ran"
  rc=1
fi
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "gpu_check: the GPU tests were stopped after $budget s (PPLAB_GPU_CHECK_SECONDS); the last lines of their log:"
  tail -n 15 "$log"
  pkill -f "$build/tests/pplab_gpu_tests" 2>/dev/null || true
  pkill -f "$build/pplab-train" 2>/dev/null || true
fi
exit "$rc"
