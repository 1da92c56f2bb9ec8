#!/usr/bin/env bash
# tools/gpu_session.sh, checked without a GPU:
#  1. bad arguments, and a machine without a GPU: one line each, exit 2,
#     nothing written;
#  2. its plan (--dry-run), for every order of parts and several deadlines:
#     no step's bound reaches past the deadline, every bound it hands down is
#     positive, a part that cannot get its minimum is named as not started,
#     and the build has the tests exactly when the tests part is asked for;
#  3. the commands it plans are accepted by the scripts they call (each
#     bench's own --dry-run, with the flags the plan gives it).
#  4. a whole session on stand-ins;
#  5. the slice part's pplab commands use flags pplab has.
# Usage: gpu_session_test.sh SOURCE_DIR [PPLAB]
set -euo pipefail
src=$1
pplab=${2:-}
session=$src/tools/gpu_session.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. Refusals: one line on stderr, exit 2, no output folder.
refuse() {
  local why=$1 rc
  shift
  set +e
  bash "$session" --out "$tmp/out" "$@" > "$tmp/refused.txt" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$*: exit $rc, expected 2: $(cat "$tmp/refused.txt")"
  [ "$(wc -l < "$tmp/refused.txt")" -eq 1 ] || fail "$*: not one line: $(cat "$tmp/refused.txt")"
  grep -q -- "$why" "$tmp/refused.txt" || fail "$*: no '$why' in: $(cat "$tmp/refused.txt")"
  [ ! -e "$tmp/out" ] || fail "$*: the output folder was made"
}
refuse "unknown part 'benchmarks'" --dry-run benchmarks
refuse "unknown option '--budget'" --budget 400 tests
refuse "name at least one part" --dry-run
refuse "--deadline must be a positive number" --deadline 8m tests
refuse "--deadline must be a positive number" --deadline 0 tests
refuse "leaves no time after the build" --deadline 150 tests
refuse "--gpu-tests needs a pattern" --dry-run --gpu-tests '' tests
# The parts' own options, refused before the build (they were found after it).
refuse "--fidelity-configs: fidelity: --configs: '2-8' is not K:M" --dry-run --fidelity-configs 2-8 fidelity
refuse "--fidelity-configs: fidelity: batch 64 of shape 64x512 does not split into 3" --dry-run \
  --fidelity-configs 1:3 fidelity64
refuse "--bench-rows: gpu_bench: --rows 'K=3' matches no row" --dry-run --bench-rows K=3 bench
refuse "--bench-rows: gpu_bench: --rows 'K=(1' is not an extended regular expression" --dry-run --bench-rows 'K=(1' bench
if ! command -v nvidia-smi > /dev/null; then
  refuse "no CUDA GPU on this machine" tests
fi
echo "ok: refusals"

# 2. The plan. A planned step reads "    [at T s, bound B s] COMMAND".
check_plan() {
  local deadline=$1 plan=$2 at bound
  shift 2
  [ "$(grep -c '^    \[at ' "$plan")" -ge 1 ] || fail "$*: no step planned"
  while read -r at bound; do
    [ "$bound" -gt 0 ] || fail "$*, deadline $deadline: a bound of $bound s"
    [ $((at + bound)) -le "$deadline" ] || fail "$*, deadline $deadline: a step at $at s bound to $bound s"
  done < <(sed -nE 's/^    \[at ([0-9]+) s, bound (-?[0-9]+) s\].*/\1 \2/p' "$plan")
  # Whatever it hands down (deadlines, run bounds, the GPU tests' seconds) is positive.
  local handed
  for handed in $(grep -oE -- '(--deadline|--run-timeout) -?[0-9]+|SECONDS=-?[0-9]+' "$plan" | grep -oE -- '-?[0-9]+$'); do
    [ "$handed" -gt 0 ] || fail "$*, deadline $deadline: a bound of $handed handed down: $(cat "$plan")"
  done
  local build
  build=$(grep -A1 '^## build' "$plan" | tail -n 1)
  if [[ " $* " == *" tests "* ]]; then
    [[ $build != *BUILD_TESTING=OFF* ]] || fail "$*: the tests part without the tests built"
  else
    [[ $build == *BUILD_TESTING=OFF* ]] || fail "$*: the tests built for nothing"
  fi
}
orders=("tests" "bench" "fidelity" "fidelity64" "slice" "transfer" "memory" "tests bench" "bench tests"
        "fidelity fidelity64" "tests bench fidelity fidelity64 slice transfer memory" "fidelity64 fidelity bench tests"
        "slice tests" "transfer slice" "memory transfer")
for deadline in 240 300 480 600 1500; do
  for parts in "${orders[@]}"; do
    # shellcheck disable=SC2086
    bash "$session" --dry-run --deadline "$deadline" $parts > "$tmp/plan.txt" || fail "--dry-run $parts failed"
    # shellcheck disable=SC2086
    check_plan "$deadline" "$tmp/plan.txt" $parts
  done
done
# By the estimates (build 170 s with the tests, tests about 400 s), a
# 480-second command runs the tests part and has no room for the bench; the
# bench alone fits with its loss curve.
bash "$session" --dry-run tests bench > "$tmp/plan.txt"
grep -qF "ctest --test-dir" "$tmp/plan.txt" || fail "the suite is not in the tests part: $(cat "$tmp/plan.txt")"
grep -qE "^gpu_session: not started: [0-9]+ s left, it needs at least 120 s" "$tmp/plan.txt" ||
  fail "the bench is not named as not started: $(cat "$tmp/plan.txt")"
bash "$session" --dry-run bench > "$tmp/plan.txt"
grep -q "gpu_bench.sh" "$tmp/plan.txt" && grep -q "precision_curve.sh" "$tmp/plan.txt" ||
  fail "the bench part lacks a step: $(cat "$tmp/plan.txt")"
grep -q "not started" "$tmp/plan.txt" && fail "the bench alone does not fit in 480 s: $(cat "$tmp/plan.txt")"
# With --gpu-tests the tests part runs those GPU tests alone, without the
# suite, and a 540-second command has room for the bench after it.
bash "$session" --dry-run --deadline 540 --gpu-tests 'parity_tied|weight_casts' tests bench > "$tmp/plan.txt"
check_plan 540 "$tmp/plan.txt" tests bench
grep -qF "PPLAB_GPU_TESTS=parity_tied\|weight_casts" "$tmp/plan.txt" || fail "--gpu-tests not handed down: $(cat "$tmp/plan.txt")"
grep -qF "ctest --test-dir" "$tmp/plan.txt" && fail "the suite runs beside --gpu-tests: $(cat "$tmp/plan.txt")"
grep -q "gpu_bench.sh" "$tmp/plan.txt" || fail "no bench after --gpu-tests: $(cat "$tmp/plan.txt")"
# A step whose estimate passes its bound is said to be cut short (the
# dry run's clock advanced by the bound and hid it): fidelity64 at 480 s.
bash "$session" --dry-run fidelity64 > "$tmp/plan.txt"
grep -qF "(its estimate, 430 s, is past its bound: it would be cut short;" "$tmp/plan.txt" ||
  fail "fidelity64 in 480 s is not said to be cut short: $(cat "$tmp/plan.txt")"
bash "$session" --dry-run --deadline 1500 fidelity64 > "$tmp/plan.txt"
grep -qF "past its bound" "$tmp/plan.txt" && fail "a step said cut short in 1500 s: $(cat "$tmp/plan.txt")"
echo "ok: plans"

# 3. The benches accept what the plan hands them (their own dry runs).
bash "$session" --dry-run --deadline 1700 --bench-rows 'K=2' --bench-pplab-args '--attention explicit' \
  --fidelity-configs 2:8,1:4 bench fidelity fidelity64 transfer memory > "$tmp/plan.txt"
n=0
while IFS= read -r line; do
  cmd=$(sed -E 's/^    \[at [0-9]+ s, bound [0-9]+ s\] //' <<< "$line")
  eval "words=($cmd)"  # the plan prints each command shell-quoted (printf %q)
  case "${words[1]}" in
    tools/bench/gpu_bench.sh)
      [ -f "$src/../shared/gpu/torch_anchor.py" ] || [ -f "$src/.gpu/torch_anchor.py" ] || continue ;;
    tools/bench/fidelity.sh) ;;
    tools/bench/plan_transfer.sh) ;;
    tools/bench/plan_memory.sh) ;;
    *) continue ;;
  esac
  # plan_transfer.sh and plan_memory.sh bound each of their runs (--run-timeout) instead.
  [[ " $cmd " == *" --deadline "* ]] || [[ ${words[1]} == *plan_transfer.sh ]] || [[ ${words[1]} == *plan_memory.sh ]] ||
    fail "no --deadline handed to ${words[1]}: $cmd"
  (cd "$src" && "${words[@]}" --dry-run > "$tmp/child.txt" 2>&1) || fail "${words[1]} refuses the plan's flags: $(cat "$tmp/child.txt")"
  case "${words[1]}" in
    *gpu_bench.sh) grep -q "^# K=2 " "$tmp/child.txt" && ! grep -q "^# K=1" "$tmp/child.txt" ||
                     fail "--bench-rows did not reach the bench: $(cat "$tmp/child.txt")"
                   [ "$(grep -c -- ' train .* --attention explicit$' "$tmp/child.txt")" -eq "$(grep -c -- ' train ' "$tmp/child.txt")" ] ||
                     fail "--bench-pplab-args did not reach every pplab run: $(cat "$tmp/child.txt")" ;;
    *fidelity.sh) grep -q "^# run 1, .*, K=2, M=8" "$tmp/child.txt" && ! grep -q "K=1, M=8" "$tmp/child.txt" ||
                    fail "--fidelity-configs did not reach the loop: $(cat "$tmp/child.txt")" ;;
  esac
  n=$((n + 1))
done < <(grep -E "^    \[at .*tools/bench/(gpu_bench|fidelity|plan_transfer|plan_memory).sh" "$tmp/plan.txt")
[ "$n" -ge 4 ] || fail "expected the benches' commands in the plan, checked $n: $(cat "$tmp/plan.txt")"
echo "ok: $n planned bench commands accepted"

# 4. A whole session on stand-ins, in a copy of the scripts: a GPU that
# nvidia-smi lists, a build that makes build-cuda/pplab, and benches, checks
# and a ctest that print what they were given. The report holds each step's
# output and wall time; details.tgz holds the build's and the suite's logs.
tree=$tmp/tree
mkdir -p "$tree/tools/bench" "$tree/.gpu" "$tmp/bin"
cp "$session" "$tree/tools/"
printf '#!/bin/sh\n[ "$1" = -L ] && echo "GPU 0: Stand-in GPU (UUID: GPU-0)" || echo "Stand-in GPU, 1.0"\n' > "$tmp/bin/nvidia-smi"
printf '#!/bin/sh\necho "ctest $*"; echo "100%% tests passed, 0 tests failed out of 3"\n' > "$tmp/bin/ctest"
cat > "$tree/.gpu/build.sh" <<'SH'
echo "building with: $*"
[ -n "${FAIL_BUILD:-}" ] && { echo "error: stand-in failure"; exit 1; }
mkdir -p "$PPLAB_BUILD" && printf '#!/bin/sh\n' > "$PPLAB_BUILD/pplab" && chmod +x "$PPLAB_BUILD/pplab"
SH
for s in gpu_check.sh bench/gpu_bench.sh bench/precision_curve.sh bench/fidelity.sh; do
  printf '#!/bin/sh\necho "stand-in %s: $*"\n' "$s" > "$tree/tools/$s"
done
chmod +x "$tmp/bin/"*
# Another tree's reference, running beside the session: its clean-up
# between parts stops only what its own tree started.
bash -c 'exec -a "python3 /elsewhere/tools/bench/torch_anchor.py" sleep 120' &
bystander=$!
(cd "$tree" && PATH="$tmp/bin:$PATH" OUT='' bash tools/gpu_session.sh --out "$tmp/run" tests bench fidelity \
  > "$tmp/run.txt" 2>&1) || fail "the stand-in session failed: $(cat "$tmp/run.txt")"
kill -0 "$bystander" 2> /dev/null || fail "the session's clean-up killed another tree's torch_anchor.py"
kill "$bystander"
wait "$bystander" 2> /dev/null || true
report=$tmp/run/session.md
[ -f "$report" ] || fail "no session.md: $(cat "$tmp/run.txt")"
cmp -s "$report" "$tmp/run.txt" || fail "session.md is not what the session printed"
for want in "stand-in gpu_check.sh" "stand-in bench/gpu_bench.sh: --pplab $tree/build-cuda/pplab --rows ." \
            "stand-in bench/precision_curve.sh: --pplab $tree/build-cuda/pplab --device cuda" \
            "stand-in bench/fidelity.sh: --pplab $tree/build-cuda/pplab --device cuda --shapes 16x128" \
            "100% tests passed" "| build | " "| fidelity at 16x128 | "; do
  grep -qF -- "$want" "$report" || fail "no '$want' in the report: $(cat "$report")"
done
# The suite's row ended well, in whole seconds (the stand-ins take 0 or 1 s,
# as the machine's load has it).
grep -qE '^\| tests: the suite but its gpu and readme labels \| [0-9]+ \| ok \|$' "$report" ||
  fail "no ok row for the suite in the report: $(cat "$report")"
grep -qF "building with: -DBUILD_TESTING=OFF" "$tmp/run/session.md" && fail "the tests part was built without tests"
tar tzf "$tmp/run/details.tgz" > "$tmp/details.txt" || fail "details.tgz does not unpack"
grep -qx './build.log' "$tmp/details.txt" && grep -qx './suite.log' "$tmp/details.txt" ||
  fail "details.tgz lacks the build or the suite log: $(cat "$tmp/details.txt")"
[ "$(find "$tmp/run" -type f | wc -l)" -eq 2 ] || fail "expected two files back: $(ls "$tmp/run")"
# A failed build: its log's end and one line, and nothing else runs.
(cd "$tree" && rm -rf build-cuda && PATH="$tmp/bin:$PATH" FAIL_BUILD=1 bash tools/gpu_session.sh --out "$tmp/run2" bench \
  > "$tmp/run2.txt" 2>&1) || fail "the session with a failed build did not end with its report"
grep -qF "error: stand-in failure" "$tmp/run2.txt" && grep -qF "gpu_session: the build failed (exit 1;" "$tmp/run2.txt" ||
  fail "the failed build is not reported: $(cat "$tmp/run2.txt")"
grep -q "^stand-in .*\.sh:" "$tmp/run2.txt" && fail "a step ran after a failed build: $(cat "$tmp/run2.txt")"
echo "ok: a session on stand-ins"

# 5. The slice part runs pplab itself: every flag it gives is one of the
# subcommand's (its --help lists it).
if [ -n "$pplab" ]; then
  bash "$session" --dry-run slice > "$tmp/plan.txt"
  n=0
  while IFS= read -r line; do
    cmd=$(sed -E 's/^    \[at [0-9]+ s, bound [0-9]+ s\] //' <<< "$line")
    eval "words=($cmd)"
    help=$("$pplab" "${words[1]}" --help)
    for w in "${words[@]}"; do
      [[ $w == --* ]] || continue
      grep -qE -- "(^|[ ,])$w([ ,=]|$)" <<< "$help" || fail "pplab ${words[1]} has no $w: $cmd"
    done
    n=$((n + 1))
  done < <(grep -E "^    \[at .*build-cuda/pplab (profile|plan) " "$tmp/plan.txt")
  [ "$n" = 2 ] || fail "expected the slice part's profile and plan, found $n: $(cat "$tmp/plan.txt")"
  echo "ok: the slice part's flags"
fi
