#!/usr/bin/env bash
# A lent GPU session's measurements as one bounded command.
#
# A task lent a GPU machine gets 15 minutes of device time in all: the
# machine's start (a minute or more), each command and each idle wait. That
# leaves one command of about eight minutes. This script is that command. It
# builds pplab against the machine's LibTorch once, runs the parts asked for
# in the order given, and ends by its deadline with the tables of what
# finished, naming what it left out (docs/gpu.md, "Measuring on a lent GPU
# machine").
#
# Usage, from the project's root on the GPU machine, with .gpu/ carried along
# (`bash ../shared/gpu/prepare.sh` here first):
#   bash tools/gpu_session.sh [--deadline S] [--out DIR] [--dry-run] PART...
#   PART          run in the order given:
#     tests       issue 9: two ranks over NCCL, then the GPU tests (tools/gpu_check.sh);
#                 beside them, on the CPU, the suite but its gpu and readme labels,
#                 against this LibTorch
#     bench       issue 10: tools/bench/gpu_bench.sh (pplab against PyTorch, fp32 and
#                 bf16, traces kept), then bf16's 200-step loss curve on CUDA
#     fidelity    issue 12: tools/bench/fidelity.sh at 16x128 (K=2 M=8, then K=1 M=4, 8, 1)
#     fidelity64  issue 12: the same at 64x512
#     slice       planning a model too large for one GPU: 4 of Meta-Llama-3-8B's 32 layers
#                 profiled on 2 ranks sharing the GPU (bf16, 4096 tokens), then plan of the
#                 whole model on 8 GPUs of 80 GiB fitted to that slice
#     transfer    issue 12: tools/bench/plan_transfer.sh, the default preset at 16x128 on
#                 K=1 (M = 1, 4, 16): plan's step from one profile and from three microbatch
#                 sizes (a fixed time a layer: the launches) against train's
#     memory      issue 12: tools/bench/plan_memory.sh, one bf16 profile of the default preset
#                 at 16x128 (K=2 sharing the GPU), then every schedule's peak per rank as plan
#                 costs it from that profile against train --measure-memory (M=8)
#   --deadline S  seconds from the start by which the command has ended (default 480).
#                 A part starts only when at least its minimum is left; its runs are
#                 bounded by what is left, and each bench starts no run past its share
#   --out DIR     where the report and the logs go (default $OUT when set, else gpu-session/)
#   --bench-rows RE     only the bench rows that match RE (gpu_bench.sh --rows), e.g. the
#                 ones an earlier session did not reach
#   --bench-pplab-args "A B"  more arguments for every pplab run of the bench
#                 (gpu_bench.sh --pplab-args): an A/B of one feature, e.g.
#                 "--attention explicit" against the rows run without it
#   --fidelity-configs L  the fidelity parts' K:M list (default 2:8,1:4,1:8,1:1)
#   --gpu-tests RE  the tests part runs only the GPU tests whose ctest name matches RE
#                 (e.g. 'parity_tied|weight_casts', the ones an earlier session saw
#                 fail), and not the CPU suite beside them: a shorter part, which
#                 leaves room for the next
#   --dry-run     print the plan, each step's command with its bounds, as if each step took
#                 its estimate; run nothing (no GPU needed)
#
# What comes back: DIR/session.md (all it prints: the tables for docs/gpu.md and
# docs/fidelity.md and each step's wall time) and DIR/details.tgz (the build log,
# the test logs, traces and cost files): two files, within the device tool's 8.
set -euo pipefail
cd "$(dirname "$0")/.."

deadline=480
out=${OUT:-gpu-session}
dry_run=0
bench_rows=.
bench_pplab_args=""
fidelity_configs=2:8,1:4,1:8,1:1
gpu_tests=""
parts=()
while [ $# -gt 0 ]; do
  case $1 in
    --deadline) deadline=${2-}; shift 2 || shift ;;
    --out) out=${2-}; shift 2 || shift ;;
    --bench-rows) bench_rows=${2-}; shift 2 || shift ;;
    --bench-pplab-args) bench_pplab_args=${2-}; shift 2 || shift ;;
    --fidelity-configs) fidelity_configs=${2-}; shift 2 || shift ;;
    --gpu-tests) gpu_tests=${2-}; shift 2 || shift
      [ -n "$gpu_tests" ] || { echo "gpu_session: --gpu-tests needs a pattern of GPU test names" >&2; exit 2; } ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_session: unknown option '$1' (see --help)" >&2; exit 2 ;;
    tests|bench|fidelity|fidelity64|slice|transfer|memory) parts+=("$1"); shift ;;
    *) echo "gpu_session: unknown part '$1': tests, bench, fidelity, fidelity64, slice, transfer or memory" >&2; exit 2 ;;
  esac
done
[[ $deadline =~ ^[1-9][0-9]*$ ]] || { echo "gpu_session: --deadline must be a positive number of seconds, got '$deadline'" >&2; exit 2; }
[ -n "$out" ] || { echo "gpu_session: --out needs a folder" >&2; exit 2; }
[ ${#parts[@]} -gt 0 ] || { echo "gpu_session: name at least one part: tests, bench, fidelity, fidelity64, slice, transfer or memory" >&2; exit 2; }

# Seconds, from the H100 session of 2026-11-23 and the H200 one of
# 2026-11-27 (docs/gpu.md, "Figures") and
# the device commands' sizes before this script: what a step usually takes
# (estimate) and the least that is worth starting it with (minimum).
with_tests=0
for p in "${parts[@]}"; do [ "$p" = tests ] && with_tests=1; done
# Without the CPU suite (--gpu-tests) the build leaves out its two test
# binaries: 135 compiled units of 156 (the test binaries are unity builds).
if [ "$with_tests" = 0 ]; then
  build_estimate=100
elif [ -n "$gpu_tests" ]; then
  build_estimate=140
else
  build_estimate=170
fi
estimate() { case $1 in tests) if [ -n "$gpu_tests" ]; then echo 180; else echo 260; fi ;; bench) echo 380 ;; fidelity) echo 330 ;; fidelity64) echo 430 ;; slice) echo 90 ;; transfer) echo 120 ;; memory) echo 240 ;; esac; }
minimum() { case $1 in tests) if [ -n "$gpu_tests" ]; then echo 60; else echo 150; fi ;; bench) echo 120 ;; fidelity) echo 120 ;; fidelity64) echo 150 ;; slice) echo 60 ;; transfer) echo 90 ;; memory) echo 120 ;; esac; }
# The build is bounded at the deadline less 60 s (the report's margin).
[ "$deadline" -ge $((build_estimate + 60)) ] ||
  { echo "gpu_session: --deadline $deadline s leaves no time after the build (about $build_estimate s, and 60 s kept for the report)" >&2; exit 2; }
# The parts' own options, checked here in their dry runs, before the build
# (a K:M the fidelity loop refused, or rows the bench has not, were found
# after 100 s of the device's time).
for p in "${parts[@]}"; do
  case $p in
    bench)
      why=$(bash tools/bench/gpu_bench.sh --rows "$bench_rows" --list-rows 2>&1 > /dev/null) ||
        { echo "gpu_session: --bench-rows: $(head -n 1 <<< "$why")" >&2; exit 2; } ;;
    fidelity|fidelity64)
      shape=16x128
      [ "$p" = fidelity64 ] && shape=64x512
      why=$(bash tools/bench/fidelity.sh --device cuda --pplab build-cuda/pplab --shapes "$shape" \
        --configs "$fidelity_configs" --dry-run 2>&1 > /dev/null) ||
        { echo "gpu_session: --fidelity-configs: $(head -n 1 <<< "$why")" >&2; exit 2; } ;;
  esac
done

build=$PWD/build-cuda
pplab=$build/pplab
deps_path=/opt/deps/usr/lib/x86_64-linux-gnu

if [ "$dry_run" = 0 ]; then
  if ! command -v nvidia-smi > /dev/null || ! grep -q '^GPU ' <<< "$(nvidia-smi -L 2> /dev/null)"; then
    echo "gpu_session: no CUDA GPU on this machine (nvidia-smi lists none); nothing run" >&2
    exit 2
  fi
  [ -f .gpu/build.sh ] ||
    { echo "gpu_session: no .gpu/build.sh: run 'bash ../shared/gpu/prepare.sh' here and carry .gpu along" >&2; exit 2; }
fi

if [ "$dry_run" = 1 ]; then
  work=WORK     # what the dry run shows for the folder that becomes details.tgz
else
  mkdir -p "$out"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
clock=0         # the dry run's clock: the sum of the estimates so far
timings=()      # "step<TAB>seconds<TAB>how it ended"

elapsed() { if [ "$dry_run" = 1 ]; then echo "$clock"; else echo "$SECONDS"; fi; }
left() { echo $((deadline - $(elapsed))); }
smaller() { if [ "$1" -lt "$2" ]; then echo "$1"; else echo "$2"; fi; }
larger() { if [ "$1" -gt "$2" ]; then echo "$1"; else echo "$2"; fi; }
show() { printf '%q ' "$@" | sed 's/ $//'; echo; }

# Runs a step's command, bounded by S seconds, its output into this report
# or, when LOG is not "-", into the file LOG; records its wall time and how it
# ended ($step_rc). In a dry run, prints it and advances the clock by the
# estimate E (at most S). Usage: step NAME S E LOG COMMAND...
step_rc=0
step() {
  local name=$1 bound=$2 guess=$3 log=$4 began rc=0
  shift 4
  if [ "$dry_run" = 1 ]; then
    echo "    [at ${clock} s, bound ${bound} s] $(show "$@")${log:+$([ "$log" = - ] || echo " > ${log#"$work/"}")}"
    # A step cut short loses what it had not printed: said, not hidden in
    # a clock that advances by the bound.
    [ "$guess" -gt "$bound" ] &&
      echo "    (its estimate, ${guess} s, is past its bound: it would be cut short; give a later --deadline or fewer parts)"
    clock=$((clock + $(smaller "$guess" "$bound")))
    step_rc=0
    return 0
  fi
  began=$SECONDS
  if [ "$log" = - ]; then
    timeout -k 10 "$bound" "$@" || rc=$?
  else
    timeout -k 10 "$bound" "$@" > "$log" 2>&1 || rc=$?
  fi
  local how="exit $rc"
  [ "$rc" = 0 ] && how=ok
  { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && how="stopped at its bound of $bound s"
  timings+=("$name"$'\t'"$((SECONDS - began))"$'\t'"$how")
  step_rc=$rc
  return 0
}

# Starts a step in the background, its output into LOG; step_wait waits
# for it and records it as step does. In a dry run, prints it; step_wait
# then moves the clock to its end by the estimate. One at a time.
# Usage: step_bg NAME S E LOG COMMAND...
bg_pid="" bg_name="" bg_began=0 bg_bound=0 bg_end=0
step_bg() {
  local name=$1 bound=$2 guess=$3 log=$4
  shift 4
  if [ "$dry_run" = 1 ]; then
    echo "    [at ${clock} s, bound ${bound} s, beside what follows] $(show "$@") > ${log#"$work/"}"
    bg_end=$((clock + $(smaller "$guess" "$bound")))
    return 0
  fi
  bg_name=$name bg_began=$SECONDS bg_bound=$bound
  timeout -k 10 "$bound" "$@" > "$log" 2>&1 &
  bg_pid=$!
}
step_wait() {
  if [ "$dry_run" = 1 ]; then
    clock=$(larger "$clock" "$bg_end")
    return 0
  fi
  local rc=0 how
  wait "$bg_pid" || rc=$?
  how="exit $rc"
  [ "$rc" = 0 ] && how=ok
  { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && how="stopped at its bound of $bg_bound s"
  timings+=("$bg_name"$'\t'"$((SECONDS - bg_began))"$'\t'"$how")
}

# Processes a cut-short step leaves behind share the GPU with the next one:
# stop them, and say so under the figures taken after. Only this tree's:
# the binaries of its build, the reference the bench copied into it and the
# bench's timer of the matrix products
# (gpu_bench.sh runs both by their absolute paths). A looser pattern (any
# torch_anchor.py) once killed a concurrent test's stand-in reference,
# whose bench then stopped without a word.
reap() {
  [ "$dry_run" = 1 ] && return 0
  local pattern="$build/(pplab-train|tests/pplab_)|$PWD/tools/bench/(torch_anchor|gemm_floor)\.py" n
  n=$(pgrep -fc "$pattern" || true)
  if [ "${n:-0}" -gt 0 ]; then
    pkill -9 -f "$pattern" || true
    echo "gpu_session: stopped $n process(es) left by the last step; the GPU is clean for the next"
  fi
}

part_tests() {
  local r seconds
  r=$(left)
  # The suite but its gpu and readme labels needs the CPU alone: it runs on
  # 8 of the cores beside the GPU tests, which run one at a time.
  if [ -z "$gpu_tests" ]; then
    echo "The suite but the gpu and readme labels (against this LibTorch, on the CPU) runs beside the GPU tests."
    step_bg "tests: the suite but its gpu and readme labels" $((r - 10)) 200 "$work/suite.log" \
      ctest --test-dir "$build" -j 8 -LE 'gpu|readme'
  else
    echo "Only the GPU tests matching '$gpu_tests' (--gpu-tests), without the suite beside them."
  fi
  # gpu_check.sh: the build is done (it only checks it again), the smoke run
  # takes about 20 s (bounded at 120 s), the GPU tests get the rest.
  seconds=$(larger 60 "$(smaller 400 $((r - 60)))")
  step "tests: NCCL smoke run and GPU tests" $((r - 10)) "$(($(estimate tests) - 20))" - \
    env PPLAB_BUILD="$build" PPLAB_GPU_CHECK_SECONDS="$seconds" PPLAB_GPU_TESTS="$gpu_tests" bash tools/gpu_check.sh
  cp "$build/gpu_check.log" "$work/gpu-tests.log" 2> /dev/null || true
  [ -n "$gpu_tests" ] && { reap; return 0; }
  step_wait
  echo
  echo "The suite but the gpu and readme labels, against this LibTorch:"
  [ "$dry_run" = 1 ] || grep -E 'tests passed|tests failed|\*\*\*|Failed|Timeout' "$work/suite.log" | tail -n 40 || true
  reap
}

part_bench() {
  local r extra=()
  [ -n "$bench_pplab_args" ] && extra=(--pplab-args "$bench_pplab_args")
  r=$(left)
  step "bench: pplab against PyTorch" $((r - 20)) 320 - \
    bash tools/bench/gpu_bench.sh --pplab "$pplab" --rows "$bench_rows" --deadline "$(larger 1 $((r - 120)))" \
      --run-timeout "$(smaller 240 $((r - 60)))" --traces "$work/bench-traces" ${extra[@]+"${extra[@]}"}
  reap
  r=$(left)
  if [ "$r" -lt 30 ]; then
    echo "gpu_session: bf16's loss curve was not started: ${r} s left"
    return 0
  fi
  # 200 steps on a text larger than the repository's, which the small preset
  # would learn by heart in 200 steps.
  local text=$work/text.txt
  if [ "$dry_run" = 0 ]; then
    cat /usr/share/common-licenses/* > "$text" 2> /dev/null || true
    [ -s "$text" ] || { text=tests/data/text/fortunes.txt; echo "(no /usr/share/common-licenses: the curve trains on $text)"; }
  fi
  echo
  step "bench: bf16's loss curve" $((r - 5)) 60 - \
    bash tools/bench/precision_curve.sh --pplab "$pplab" --device cuda --data "$text" --keep "$work/curve"
  reap
}

part_fidelity() {
  local shape=$1 r
  r=$(left)
  step "fidelity at $shape" $((r - 5)) "$(estimate "$2")" - \
    bash tools/bench/fidelity.sh --pplab "$pplab" --device cuda --shapes "$shape" --configs "$fidelity_configs" \
      --deadline $((r - 60)) --run-timeout "$(smaller 200 $((r - 30)))" --out "$work/fidelity-$shape"
  reap
}

part_slice() {
  local r config=tests/data/models/llama3-8b-config.json
  r=$(left)
  step "slice: profile of 4 layers of Llama-3-8B" $((r - 20)) 70 - \
    "$pplab" profile --device cuda --model "$config" --layers 4 -k 2 --microbatch-size 1 --seq-len 4096 \
      --precision bf16 --comm-timeout 30 -o "$work/llama3-8b-slice.json"
  reap
  r=$(left)
  if [ "$dry_run" = 0 ] && [ ! -s "$work/llama3-8b-slice.json" ]; then
    echo "gpu_session: no slice profile to plan from"
    return 0
  fi
  echo
  step "slice: plan of the whole model" $((r - 5)) 5 - \
    "$pplab" plan --model "$config" --cost "$work/llama3-8b-slice.json" --gpus 8 --global-batch 64 \
      --memory-per-rank 80GiB --link-bandwidth 400 -o "$work/llama3-8b-plan.json"
}

part_transfer() {
  local r
  r=$(left)
  step "transfer: plan across microbatch sizes" $((r - 5)) "$(estimate transfer)" - \
    bash tools/bench/plan_transfer.sh --pplab "$pplab" --device cuda --model default --shape 16x128 --ms 1,4,16 \
      --fit 1,4,16 --run-timeout "$(smaller 240 $((r - 30)))" --out "$work/transfer"
  reap
}

part_memory() {
  local r
  r=$(left)
  step "memory: plan's peaks from one profile" $((r - 5)) "$(estimate memory)" - \
    bash tools/bench/plan_memory.sh --pplab "$pplab" --device cuda --model default --shape 16x128 --precision bf16 \
      --microbatches 8 --run-timeout "$(smaller 120 $((r - 30)))" --out "$work/memory"
  reap
}

session() {
  echo "# GPU session: ${parts[*]} (deadline ${deadline} s)"
  echo
  if [ "$dry_run" = 1 ]; then
    echo "Dry run: each step's command, when it would start and its bound, if every step took its estimate."
  else
    echo "$(date -u '+%F %H:%M') UTC, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)," \
      "torch $(python3 -c 'import torch; print(torch.__version__)' 2> /dev/null || echo '?')," \
      "pplab $(git rev-parse --short HEAD 2> /dev/null || echo '?')$(git diff --quiet HEAD 2> /dev/null || echo ' with changes')"
  fi
  echo
  echo "## build"
  local flags=() cpu_tests=ON
  [ -n "$gpu_tests" ] && cpu_tests=OFF  # the CPU suite does not run: its binaries are not built
  if [ "$with_tests" = 1 ]; then flags=(-DPPLAB_CPU_TESTS=$cpu_tests); else flags=(-DBUILD_TESTING=OFF); fi
  # A build of this machine configured with other tests needs them set again.
  if [ "$dry_run" = 0 ] && [ "$with_tests" = 1 ] && [ -f "$build/CMakeCache.txt" ] &&
    { grep -q 'BUILD_TESTING:BOOL=OFF' "$build/CMakeCache.txt" ||
      ! grep -q "PPLAB_CPU_TESTS:BOOL=$cpu_tests" "$build/CMakeCache.txt"; }; then
    cmake -DBUILD_TESTING=ON -DPPLAB_CPU_TESTS=$cpu_tests "$build" > /dev/null
  fi
  step build $((deadline - 60)) "$build_estimate" "$work/build.log" \
    env PPLAB_BUILD="$build" bash .gpu/build.sh ${flags[@]+"${flags[@]}"}
  if [ "$dry_run" = 0 ] && { [ "$step_rc" != 0 ] || [ ! -x "$pplab" ]; }; then
    tail -n 40 "$work/build.log"
    echo "gpu_session: the build failed (exit $step_rc; its whole log is in details.tgz); nothing else run"
    return 0
  fi
  # .gpu/build.sh filters the compiler's output and judges by the binary
  # alone: on a warm machine a compile error left the last build's pplab,
  # and its figures were credited to this tree. Ninja says whether anything
  # is left to build.
  if [ "$dry_run" = 0 ] && [ -f "$build/build.ninja" ] && command -v ninja > /dev/null &&
    ! ninja -C "$build" -n 2> /dev/null | grep -q 'no work to do'; then
    tail -n 40 "$work/build.log"
    echo "gpu_session: the build left targets out of date (a compile error? ninja -C $build -n lists them);" \
      "the binaries are an earlier tree's: nothing else run"
    return 0
  fi
  export LD_LIBRARY_PATH=$deps_path:${LD_LIBRARY_PATH:-}
  local p r
  for p in "${parts[@]}"; do
    r=$(left)
    echo
    echo "## $p"
    if [ "$r" -lt "$(minimum "$p")" ]; then
      echo "gpu_session: not started: ${r} s left, it needs at least $(minimum "$p") s (about $(estimate "$p") s in full)"
      timings+=("$p"$'\t'0$'\t'"not started")
      continue
    fi
    case $p in
      tests) part_tests ;;
      bench) part_bench ;;
      fidelity) part_fidelity 16x128 fidelity ;;
      fidelity64) part_fidelity 64x512 fidelity64 ;;
      slice) part_slice ;;
      transfer) part_transfer ;;
      memory) part_memory ;;
    esac
  done
  echo
  echo "## where the time went"
  echo
  if [ "$dry_run" = 1 ]; then
    echo "Planned: ${clock} s of the ${deadline} s."
    return 0
  fi
  echo "| step | wall s | end |"
  echo "|---|---|---|"
  local t
  for t in "${timings[@]}"; do
    IFS=$'\t' read -r name secs how <<< "$t"
    echo "| $name | $secs | $how |"
  done
  echo
  echo "All: $SECONDS s of the ${deadline} s."
}

if [ "$dry_run" = 1 ]; then
  session
  exit 0
fi
session 2>&1 | tee "$out/session.md"
tar czf "$out/details.tgz" -C "$work" . 2> /dev/null || echo "gpu_session: could not pack the logs" >&2
