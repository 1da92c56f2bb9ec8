#!/usr/bin/env bash
# tools/bench/plan_transfer.sh and plan_transfer_table.py, checked on the CPU:
#  1. the table from hand-made plans and measurements (numbers worked by hand);
#  2. a short real run of the tiny model: a row for each M, the profiled
#     sizes marked as measured in the fitted-together column;
#  3. its dry run: the commands of three profiles fitted together;
#  4. bad arguments: one line on stderr, exit 2, before anything runs;
#  5. a run that fails is named, and its output kept.
# Usage: plan_transfer_test.sh SOURCE_DIR PPLAB
set -euo pipefail
src=$1
pplab=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/tools/bench_test_lib.sh
source "$(dirname "$0")/bench_test_lib.sh"

# 1. Measured 100 ms at M=1 and 200 ms at M=4. One profile predicts 110 at
#    both (+10 %, +45 % against 200: -45 %); two predict 100 (its own size)
#    and 190 (-5 %). Candidates of another schedule, v, partition or
#    recomputation are not read.
python3 - "$tmp" << 'PY'
import json, sys
def cand(m, ms, verbatim, **other):
    c = {"schedule": "1f1b", "virtual_stages": 1, "partition": "uniform", "recompute": "none",
         "microbatches": m, "microbatch_size": 4 // m, "step_time": ms, "measured_costs": verbatim}
    c.update(other)
    return c
noise = [cand(1, 1.0, False, schedule="gpipe"), cand(1, 1.0, False, recompute="all"),
         cand(4, 1.0, False, partition="compute"), cand(4, 1.0, False, virtual_stages=2)]
one = {"costs": ["a.json"], "size_ranges": None,
       "candidates": noise + [cand(1, 110.0, False), cand(4, 110.0, False)]}
two = {"costs": ["b.json", "c.json"],
       "size_ranges": [{"microbatch_sizes": [1, 4], "fixed_ms_per_layer": {"forward": 0.5, "backward": 1.25}}],
       "candidates": [cand(1, 100.0, True), cand(4, 190.0, False)] + noise}
for name, doc in (("one", one), ("two", two)):
    json.dump(doc, open(sys.argv[1] + "/" + name + ".json", "w"))
with open(sys.argv[1] + "/measured.jsonl", "w") as f:
    f.write('{"M": 4, "step_ms": 200.0}\n{"M": 1, "step_ms": 100.0}\n')
PY
table=$(python3 "$src/tools/bench/plan_transfer_table.py" "$tmp/measured.jsonl" "$tmp/one.json" "$tmp/two.json" 1f1b)
echo "$table"
grep -qxF '| 1 | 4 | 100.0 | 110.0 | +10.0 % | 100.0* | +0.0 % |' <<< "$table" || fail "M=1 row"
grep -qxF '| 4 | 1 | 200.0 | 110.0 | -45.0 % | 190.0 | -5.0 % |' <<< "$table" || fail "M=4 row"
grep -qF 'One profile: a.json. Several: b.json, c.json; fixed ms a layer by microbatch sizes: 1-4: F 0.500, B 1.250.' \
  <<< "$table" ||
  fail "files line"
grep -qF 'Largest error: 45.0 % from one profile, 5.0 % from 2' <<< "$table" || fail "largest error line"
grep -qxF '| M | microbatch | measured ms | one profile ms | error | 2 profiles ms | error |' <<< "$table" || fail "header"
# 1b. Nothing to compare (a schedule the plans lack; a NaN step): said, not
#     "Largest error: 0.0 %", and a non-zero exit. interleaved-1f1b's rows
#     are its v = 2 candidates, the fewest stages a rank it has.
echo '{"M": 4, "step_ms": NaN}' > "$tmp/nan.jsonl"
code=0
none=$(python3 "$src/tools/bench/plan_transfer_table.py" "$tmp/nan.jsonl" "$tmp/one.json" "$tmp/two.json" 1f1b 2>&1) ||
  code=$?
[ "$code" -ne 0 ] || fail "a table with nothing compared exited 0"
grep -qF 'Largest error: none compared from one profile, none compared from 2' <<< "$none" || fail "nothing compared: $none"
grep -qxF '| 4 | ? | nan | - | - | - | - |' <<< "$none" || fail "the NaN row: $none"
python3 - "$tmp" << 'PY'
import json, sys
one = json.load(open(sys.argv[1] + "/one.json"))
for c in one["candidates"]:
    c.update(schedule="interleaved-1f1b", virtual_stages=c["virtual_stages"] + 1)
json.dump(one, open(sys.argv[1] + "/interleaved.json", "w"))
PY
v2=$(python3 "$src/tools/bench/plan_transfer_table.py" "$tmp/measured.jsonl" "$tmp/interleaved.json" \
  "$tmp/interleaved.json" interleaved-1f1b) || fail "interleaved-1f1b's v = 2 rows: $v2"
grep -qxF '| 1 | 4 | 100.0 | 110.0 | +10.0 % | 110.0 | +10.0 % |' <<< "$v2" || fail "interleaved-1f1b's M=1 row: $v2"

# 2. A real run: the tiny model, 4 x 32 a step, M = 1 and 4 (microbatches of
#    4 and 1, both profiled and fitted together), the one-profile fit at 2.
out=$(bash "$src/tools/bench/plan_transfer.sh" --pplab "$pplab" --model tiny --shape 4x32 --ms 1,4 --single 2 \
  --steps 3 --out "$tmp/run")
echo "$out"
[ "$(grep -c '^| [14] | ' <<< "$out")" -eq 2 ] || fail "expected rows for M=1 and M=4"
grep -qE '^\| 1 \| 4 \| [0-9.]+ \| [0-9.]+ \| [-+0-9.]+ % \| [0-9.]+\* \|' <<< "$out" || fail "M=1: two profiles' own size"
grep -qE '^\| 4 \| 1 \| [0-9.]+ \| [0-9.]+ \| [-+0-9.]+ % \| [0-9.]+\* \|' <<< "$out" || fail "M=4: two profiles' own size"
for s in 1 2 4; do [ -f "$tmp/run/profile-mb$s.json" ] || fail "no profile at microbatches of $s"; done

# 3. The dry run: one profile run of every size, both plans (the second with a
#    --cost for each of 1, 2 and 4), a train for each M; nothing written.
dry=$(bash "$src/tools/bench/plan_transfer.sh" --pplab /nonexistent/pplab --shape 4x32 --ms 1,2,4 --fit 4,1,2 --single 2 \
  --dry-run --out "$tmp/dry")
echo "$dry"
[ "$(grep -c ' profile .*--microbatch-size' <<< "$dry")" -eq 1 ] || fail "dry run: one profile run"
grep -qE ' profile .*--microbatch-size 1\\?,2\\?,4 -o [^ ]*/profile.json' <<< "$dry" || fail "dry run: the three sizes"
grep -q ' plan .*--cost [^ ]*profile-mb1.json --cost [^ ]*profile-mb2.json --cost [^ ]*profile-mb4.json' <<< "$dry" ||
  fail "dry run: the plan of three profiles"
[ "$(grep -c 'pplab train ' <<< "$dry")" -eq 3 ] || fail "dry run: three trains"
[ ! -e "$tmp/dry" ] || fail "the dry run wrote $tmp/dry"

# 4. Bad arguments.
bad() { refused "$src/tools/bench/plan_transfer.sh" --pplab "$pplab" -- "$@"; }
bad --shape 16by128
bad --ms 3 --shape 16x128
bad --ms 4
bad --fit 2,2
bad --fit 2
bad --steps 2
bad --device tpu
bad --single 3 --shape 16x128
bad --frobnicate
bad --tp
bad --ms 08,1
bad -k 00
bad --schedule nosuch --model tiny --shape 4x32 --ms 1,2
bad --model nosuch --shape 4x32 --ms 1,2
# 5. A run that fails: its name, its exit code and its output's path, which
#    is kept for the reader (here a stand-in pplab whose profile fails).
printf '#!/bin/sh\n[ "$1" = profile ] && { echo "stand-in profile: boom"; exit 3; }\nexit 0\n' > "$tmp/stand-in"
chmod +x "$tmp/stand-in"
code=0
err=$(bash "$src/tools/bench/plan_transfer.sh" --pplab "$tmp/stand-in" --shape 4x32 --ms 1,2 2>&1 > /dev/null) ||
  code=$?
[ "$code" -eq 1 ] || fail "a failed profile exited $code, not 1: $err"
log=$(sed -nE 's/^plan_transfer: profile at microbatches of 2,4 failed \(exit 3\); its output: (.*)$/\1/p' <<< "$err")
[ -n "$log" ] || fail "the failure does not name the run and its output: $err"
grep -qF "stand-in profile: boom" "$log" || fail "the failed run's output is gone: $log"
grep -qF "stand-in profile: boom" <<< "$err" || fail "the output's end is not shown: $err"
rm -rf "$(dirname "$log")"
# 6. Stopped from outside (gpu_session.sh's bound) while training at M=2:
#    the run going on is stopped, and the row of M=1 is still printed. The
#    stand-in is the real pplab but for that train, which stops the bench
#    and then waits, as a run cut short would.
cat > "$tmp/stopper" << EOF
#!/bin/sh
case "\$*" in *"train "*"-m 2 "*) kill -TERM "\$BENCH"; exec sleep 60 ;; esac
exec "$pplab" "\$@"
EOF
chmod +x "$tmp/stopper"
code=0
stopped=$(bash -c 'export BENCH=$$; exec bash "$0" "$@"' "$src/tools/bench/plan_transfer.sh" --pplab "$tmp/stopper" \
  --model tiny --shape 4x32 --ms 1,2 --steps 3) || code=$?
echo "$stopped"
[ "$code" -eq 143 ] || fail "a stopped bench exited $code, not 143"
grep -qF 'plan_transfer: stopped by a signal; the rows below are the M measured before it' <<< "$stopped" ||
  fail "the stop is not said"
grep -qE '^\| 1 \| 4 \| [0-9.]+ \| ' <<< "$stopped" || fail "the row of M=1, measured before the stop, is lost"
! grep -qE '^\| 2 \| ' <<< "$stopped" || fail "a row for M=2, which was stopped"
! pgrep -f "$tmp/stopper" > /dev/null || fail "the stopped run is still going"
echo "plan_transfer: all checks passed"
