#!/usr/bin/env bash
# tools/bench/memory_bench.sh, checked on the CPU with the tiny model:
#  1. a real run: one row per plan and configuration, every rank's
#     predicted peak within 10 % of the measured one, and the count line;
#  2. failed and timed-out commands named in their rows;
#  3. bad arguments: one line on stderr, exit 2.
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

# 2. A command that fails or passes --run-timeout is named in its row and the
#    rows after it stay; a failed profile names the rows that needed it; exit 1.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/pplab" <<SH
#!/usr/bin/env bash
case " \$* " in
  *" train "*" 1f1b "*) echo "stand-in train failure" >&2; exit 3 ;;
  *" train "*" gpipe "*) exec sleep 60 ;;
  *" profile "*" -v 2 "*) exit 4 ;;
esac
exec "$pplab" "\$@"
SH
chmod +x "$tmp/pplab"
code=0
out=$(bash "$src/tools/bench/memory_bench.sh" --pplab "$tmp/pplab" --model tiny --seq-len 16 \
        --configs 2:4:none --plans 1f1b,gpipe,zb-h1,zb-v --run-timeout 2) || code=$?
echo "$out"
[ "$code" -eq 1 ] || fail "failed rows: exit $code, expected 1"
grep -qF '| 2 x 4 | none | 1f1b | failed: pplab train failed, exit 3: stand-in train failure |' <<< "$out" ||
  fail "1f1b's failure named"
grep -qF '| 2 x 4 | none | gpipe | failed: pplab train passed --run-timeout 2 s |' <<< "$out" || fail "gpipe's timeout named"
grep -q '^| 2 x 4 | none | zb-h1 | [0-9]' <<< "$out" || fail "zb-h1's row after the failures"
grep -qF '| 2 x 4 | none | zb-v | failed: pplab profile (microbatch 2, -v 2) failed, exit 4 | | |' <<< "$out" ||
  fail "zb-v's profile failure named"
grep -qx '3 rows failed (named in the table).' <<< "$out" || fail "the count of failed rows"

# 3. Bad arguments.
# shellcheck source=tests/tools/bench_refusals.sh
source "$src/tests/tools/bench_refusals.sh"
refusals "$src/tools/bench/memory_bench.sh" "$pplab" "--configs 2:4:maybe" "--device tpu" "--ranks 0" "--frobnicate" "--model" "--run-timeout 0"
echo "memory_bench_test: ok"
