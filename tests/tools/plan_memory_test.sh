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
grep -qF '| schedule | v | layers | M | recompute | rank 0 measured | error | rank 1 measured | error |' <<< "$out" ||
  fail "the header names the error columns"

# 1b. A command that fails loses its row, named in it, and the bench goes on
#     (it ended the bench with 2 of 14 rows): a stand-in whose first
#     simulate fails (the first row's, gpipe's).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/failing" << EOF
#!/usr/bin/env bash
if [ "\$1" = simulate ] && mkdir "$tmp/failed-once" 2> /dev/null; then echo "pplab: injected failure" >&2; exit 3; fi
exec "$pplab" "\$@"
EOF
chmod +x "$tmp/failing"
out=$(bash "$src/tools/bench/plan_memory.sh" --pplab "$tmp/failing" --model tiny --shape 8x16 --microbatches 4) ||
  fail "one failed train ended the bench: $out"
echo "$out"
grep -qE '^\| gpipe \| .*\(simulate failed, exit 3: pplab: injected failure\)' <<< "$out" ||
  fail "the failed row is not named"
[ "$(grep -c '^| [a-z0-9-]* | [12] | ' <<< "$out")" -eq 14 ] || fail "expected 14 rows after a failed one"

# shellcheck source=tests/tools/bench_refusals.sh
source "$src/tests/tools/bench_refusals.sh"
refusals "$src/tools/bench/plan_memory.sh" "$pplab" "--shape 8" "--device tpu" "--precision fp16" "--microbatches x" "--profile-mb 0" "--frobnicate" "--model"
echo "plan_memory_test: ok"
