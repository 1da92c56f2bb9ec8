#!/usr/bin/env bash
# tools/bench/plan_memory.sh, checked on the CPU with the tiny model:
#  1. a real run: one row per candidate, every rank's predicted peak (plan's
#     costs, fitted to one profile) within 10 % of the measured one, and the
#     count line;
#  2. bad arguments: one line on stderr, exit 2.
# Usage: plan_memory_test.sh SOURCE_DIR PPLAB
set -euo pipefail
src=$1
pplab=$2
fail() { echo "FAIL: $*"; exit 1; }

out=$(bash "$src/tools/bench/plan_memory.sh" --pplab "$pplab" --model tiny --shape 8x16 --microbatches 4)
echo "$out"
# 14 rows; on the tiny model the compute partition is the uniform one, and
# its row says it is not a candidate of its own.
[ "$(grep -c '^| [a-z0-9-]* | [12] | ' <<< "$out")" -eq 14 ] || fail "expected 14 rows"
rows=$(grep -c '^| [a-z0-9-]* | [12] | [0-9,]* | 4 | [a-z]* | [0-9,]* | [-+]' <<< "$out" || true)
[ "$rows" -ge 13 ] || fail "expected at least 13 measured rows, got $rows"
ranks=$((2 * rows))
grep -qx "[0-9]* of $ranks ranks within 1 %, $ranks within 10 %\." <<< "$out" || fail "every rank within 10 %"

# shellcheck source=tests/tools/bench_refusals.sh
source "$src/tests/tools/bench_refusals.sh"
refusals "$src/tools/bench/plan_memory.sh" "$pplab" "--shape 8" "--device tpu" "--precision fp16" "--microbatches x" "--profile-mb 0" "--frobnicate"
echo "plan_memory_test: ok"
