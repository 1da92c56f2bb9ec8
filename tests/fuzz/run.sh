#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/CMakeLists.txt) with clang,
# AddressSanitizer and UBSan in build-fuzz/, and runs each for a fixed budget
# from the seed corpus in tests/data/fuzz/<harness>/. Exits non-zero when a
# harness finds a crash, a sanitizer report, an exception other than
# pplab::Error, a leak or a timeout; the input that did it is left in
# build-fuzz/artifacts/ (add it to tests/data/fuzz/<harness>/, which
# tests/fuzz/seeds_test.cpp replays on every test run).
# Without clang++ or libFuzzer it says so and exits 0.
#   FUZZ_SECONDS  seconds per harness (default 10); FUZZ_CXX  the compiler (default clang++)
#   FUZZ_JOBS     harnesses run at once (default 2)
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${FUZZ_SECONDS:-10}
jobs=${FUZZ_JOBS:-2}
cxx=${FUZZ_CXX:-clang++}
harnesses=(schedule_json schedule_csv cost_model llama_config checkpoint_manifest safetensors tokenizer_json
           tokenizer_text records)

if ! command -v "$cxx" > /dev/null; then
  echo "fuzz: skipped: no $cxx (install clang to fuzz the parsers)"
  exit 0
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
# Harnesses that need a file write it here, and it goes with the probe.
export TMPDIR=$probe
echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' > "$probe/probe.cc"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/probe.cc" -o "$probe/probe" 2> /dev/null; then
  echo "fuzz: skipped: $cxx cannot link -fsanitize=fuzzer (install libFuzzer, e.g. the clang package's runtime)"
  exit 0
fi

start=$(date +%s)
mkdir -p build-fuzz
# A harness that does not build (a source the parsers now need, missing from
# tests/fuzz/CMakeLists.txt, say) fails the run with the compiler's words.
if ! { cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER="$cxx" &&
       cmake --build build-fuzz -j "$jobs"; } > build-fuzz/build.log 2>&1; then
  echo "fuzz: the harnesses do not build (tests/fuzz/CMakeLists.txt); from build-fuzz/build.log:"
  grep -E 'error|undefined reference' build-fuzz/build.log | head -n 10 || tail -n 20 build-fuzz/build.log
  exit 1
fi
echo "fuzz: built in $(($(date +%s) - start)) s; ${seconds} s per harness"
mkdir -p build-fuzz/artifacts

run_one() {
  local h=$1 corpus=build-fuzz/corpus/$1
  mkdir -p "$corpus"
  # New inputs go to the first folder; the seeds are read only.
  if build-fuzz/fuzz_"$h" "$corpus" tests/data/fuzz/"$h" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/"$h"- \
      > build-fuzz/"$h".log 2>&1; then
    echo "fuzz: $h: $(grep -o 'stat::number_of_executed_units: *[0-9]*' build-fuzz/"$h".log | grep -o '[0-9]*$') runs, no finding"
  else
    echo "fuzz: $h: FINDING (log: build-fuzz/$h.log, input: build-fuzz/artifacts/$h-*)"
    grep -m 5 -E 'ERROR|runtime error|terminate|SUMMARY' build-fuzz/"$h".log || true
    return 1
  fi
}

failed=0
pids=()
for h in "${harnesses[@]}"; do
  run_one "$h" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
echo "fuzz: done in $(($(date +%s) - start)) s"
exit $failed
