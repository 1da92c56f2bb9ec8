#!/usr/bin/env bash
# tools/bench/memory_bench.sh, checked on the CPU with the tiny model:
#  1. a real run: one row per plan and configuration, every rank's
#     predicted peak within 10 % of the measured one, and the count line;
#  2. bad arguments: one line on stderr, exit 2.
# Usage: memory_bench_test.sh SOURCE_DIR PPLAB
set -euo pipefail
src=$1
pplab=$2
fail() { echo "FAIL: $*"; exit 1; }

out=$(bash "$src/tools/bench/memory_bench.sh" --pplab "$pplab" --model tiny --seq-len 16 \
        --configs 2:4:none,2:4:all --plans 1f1b,dualpipev)
echo "$out"
[ "$(grep -c '^| 2 x 4 | ' <<< "$out")" -eq 4 ] || fail "expected 4 rows"
grep -qx 'Ranks within 10 %: 8 of 8; within 1 %: [0-8]\.' <<< "$out" || fail "every rank within 10 %"

# shellcheck source=tests/tools/bench_refusals.sh
source "$src/tests/tools/bench_refusals.sh"
refusals "$src/tools/bench/memory_bench.sh" "$pplab" "--configs 2:4:maybe" "--device tpu" "--ranks 0" "--frobnicate" "--model"
echo "memory_bench_test: ok"
