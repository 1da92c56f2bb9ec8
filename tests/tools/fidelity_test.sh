#!/usr/bin/env bash
# tools/bench/fidelity.sh and fidelity_table.py, checked on the CPU:
#  1. the table's figures from hand-made rows: errors, the counts against the
#     targets (5 % step time, 10 % memory) and the order of pairs of plans;
#  2. the whole loop on the tiny model (profile -> simulate -> train -> diff),
#     one row per plan and configuration; a failed run, and a stop from
#     outside that still prints the rows that finished;
#  3. --dry-run --device cuda: the GPU loop of issue 12 (2 shapes x 4
#     configurations x 5 plans), with memory measured, and flags pplab knows;
#  3b. --tp and --sequence-parallel reach the profiles and the trains;
#  4. bad arguments: one line on stderr, exit 2.
# Usage: fidelity_test.sh SOURCE_DIR PPLAB
set -euo pipefail
src=$1
pplab=$2
bench=$src/tools/bench/fidelity.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. Hand-made rows: two plans of one group 10 % apart, predicted in the wrong
#    order; a third within 5 % of the first (its order is noise's).
cat > "$tmp/rows.jsonl" << 'EOF'
{"run": 1, "shape": "16x128", "K": 2, "M": 8, "plan": "gpipe", "predicted": 105.0, "p10": 100.0, "p90": 110.0, "step": 100.0, "steps": 10, "predicted_peak": [110e6, 90e6], "measured_peak": [100e6, 100e6], "drift": "none", "trace_makespan": 96.0, "own_predicted": 96.96, "links_predicted": 102.0}
{"run": 1, "shape": "16x128", "K": 2, "M": 8, "plan": "1f1b", "predicted": 99.0, "p10": 95.0, "p90": 103.0, "step": 110.0, "steps": 10, "predicted_peak": [50e6, 50e6], "measured_peak": [50e6, 56e6], "drift": "0B3 on rank 0", "trace_makespan": 100.0, "own_predicted": 90.0, "links_predicted": 99.0}
{"run": 1, "shape": "16x128", "K": 2, "M": 8, "plan": "zb-h1", "predicted": 95.0, "p10": 90.0, "p90": 100.0, "step": 103.0, "steps": 10, "predicted_peak": [70e6, 70e6], "measured_peak": null, "drift": "none"}
EOF
table=$(python3 "$src/tools/bench/fidelity_table.py" table "$tmp/rows.jsonl")
echo "$table"
grep -qF '| 1 | 16x128 | 2 | 8 | gpipe | 105.00 | 100.0..110.0 | 100.00 | +5.0 % | 110.0/90.0 | 100.0/100.0 | +10.0 % | none | 96.96 / 96.00 (+1.0 %) |' <<< "$table" ||
  fail "gpipe row"
grep -qF '| 0B3 on rank 0 | 90.00 / 100.00 (-10.0 %) |' <<< "$table" || fail "1f1b row's own costs, -10 %"
# A row of before the own-costs column (zb-h1's) has n/a there, and no count.
grep -qF -- '- From the run'"'"'s own costs (pplab stats --cost-out of its trace), the simulated makespan is within 5 % of the trace'"'"'s in 1 of 2 rows (errors -10.0 % to +1.0 %).' <<< "$table" ||
  fail "own-costs count"
grep -qF '| -10.0 % | 50.0/50.0 | 50.0/56.0 | -10.7 % |' <<< "$table" || fail "1f1b row: -10 % step, worst rank memory -10.7 %"
# The profile's stage times with the run's links: against the measured step.
grep -qF -- "- With the profile's stage times and the run's own message times (its links in place of the profile's), the step is within 5 % in 1 of 2 rows (errors -10.0 % to +2.0 %; 16x128 K=2 gpipe +2.0 %, 16x128 K=2 1f1b -10.0 %)." <<< "$table" ||
  fail "the run's links count"
grep -qF '| 70.0/70.0 | n/a | n/a | none | n/a |' <<< "$table" || fail "zb-h1 row without measured memory or own costs"
grep -qF -- '- Step time within 5 %: 1 of 3 rows.' <<< "$table" || fail "step count (5.0 % is within)"
grep -qF -- '- Peak activation memory within 10 % (worst rank): 1 of 2 rows.' <<< "$table" || fail "memory count"
# gpipe/1f1b 10 % apart (wrong order), 1f1b/zb-h1 6.8 % apart (right), gpipe/zb-h1 3 % apart (not counted).
grep -qF 'wrong pairs apart by > 5 %: gpipe/1f1b' <<< "$table" || fail "the wrong pair"
grep -qF -- '- Pairs of plans measured more than 5 % apart: 2, predicted in the measured order: 1.' <<< "$table" ||
  fail "pair counts"

# 2. The loop on the tiny model: 2 configurations x 2 plans, 4 rows.
out=$(bash "$bench" --pplab "$pplab" --model tiny --shapes 8x16 --configs 2:4,1:2 --plans 1f1b,zb-v --steps 3 \
  --runs 1 --out "$tmp/run") || fail "the tiny loop failed: $out"
echo "$out"
[ "$(wc -l < "$tmp/run/rows.jsonl")" -eq 4 ] || fail "expected 4 rows"
[ "$(echo "$out" | grep -c '^| 1 | 8x16 | ')" -eq 4 ] || fail "expected 4 table rows"
grep -qF -- '- Step time within 5 %: ' <<< "$out" || fail "no step count"
python3 - "$tmp/run/rows.jsonl" << 'PY' || fail "rows"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [(r["K"], r["M"], r["plan"]) for r in rows] == [(2, 4, "1f1b"), (2, 4, "zb-v"), (1, 2, "1f1b"), (1, 2, "zb-v")], rows
for r in rows:
    assert r["predicted"] > 0 and r["step"] > 0 and r["steps"] == 1, r
    assert len(r["predicted_peak"]) == r["K"], r
    assert r["own_predicted"] > 0 and r["trace_makespan"] > 0, r
    # The profile with the run's links, where there are links (K > 1).
    assert (r["links_predicted"] or 0) > 0 if r["K"] > 1 else r["links_predicted"] is None, r
PY
python3 - "$tmp/run/cost-r1-8x16-k2-m4.json" "$tmp/run/own-r1-8x16-k2-m4-1f1b.json" \
  "$tmp/run/mixed-r1-8x16-k2-m4-1f1b.json" << 'PY' || fail "the mixed cost file"
import json, sys
profile, own, mixed = (json.load(open(p)) for p in sys.argv[1:])
assert mixed["stages"] == profile["stages"], "the profile's stages"
assert mixed["link"]["latency_ms"] == own["link"]["latency_ms"], "the run's link"
assert mixed.get("links") == own.get("links"), "the run's links each way"
PY
for f in cost-r1-8x16-k2-m4.json cost-r1-8x16-k2-m4-v2.json real-r1-8x16-k1-m2-zb-v.json; do
  [ -s "$tmp/run/$f" ] || fail "no $f kept in --out"
done

# 2b. A run that fails loses its row alone, named under the table, and the
#     loop goes on (a stand-in pplab whose train of zb-v exits 3).
cat > "$tmp/failing-pplab" << EOF
#!/usr/bin/env bash
if [ "\$1" = train ] && [[ " \$* " == *" -s zb-v "* ]]; then echo "pplab: injected failure" >&2; exit 3; fi
exec "$pplab" "\$@"
EOF
chmod +x "$tmp/failing-pplab"
out=$(bash "$bench" --pplab "$tmp/failing-pplab" --model tiny --shapes 8x16 --configs 1:2 --plans zb-v,1f1b --steps 3 \
  --runs 1 --out "$tmp/run-failing") || fail "one failing run ended the loop: $out"
[ "$(echo "$out" | grep -c '^| 1 | 8x16 | ')" -eq 1 ] || fail "expected the 1f1b row alone: $out"
grep -qF -- '- train, run 1, 8x16, K=1, M=2, zb-v: exit 3: pplab: injected failure' <<< "$out" ||
  fail "the failed run is not named: $out"

# 2c. Stopped from outside (gpu_session.sh's bound) during the second
#     plan's train: that run is stopped, and the table of the first row is
#     printed with the stop named under it (it was lost with the rows).
cat > "$tmp/stopping-pplab" << EOF
#!/usr/bin/env bash
if [ "\$1" = train ] && [[ " \$* " == *" -s zb-v "* ]]; then kill -TERM "\$BENCH"; exec sleep 60; fi
exec "$pplab" "\$@"
EOF
chmod +x "$tmp/stopping-pplab"
code=0
out=$(bash -c 'export BENCH=$$; exec bash "$0" "$@"' "$bench" --pplab "$tmp/stopping-pplab" --model tiny \
  --shapes 8x16 --configs 1:2 --plans 1f1b,zb-v --steps 3 --runs 1 --out "$tmp/run-stopped") || code=$?
[ "$code" -eq 143 ] || fail "a stopped loop exited $code, not 143: $out"
[ "$(echo "$out" | grep -c '^| 1 | 8x16 | 1 | 2 | 1f1b |')" -eq 1 ] || fail "the 1f1b row, finished before the stop: $out"
grep -qE -- '^- stopped by a signal after [0-9]+ s: only the rows that had finished are in the table$' <<< "$out" ||
  fail "the stop is not named: $out"

# 3. The GPU loop, as commands.
dry=$(bash "$bench" --device cuda --pplab "$pplab" --dry-run)
[ "$(echo "$dry" | grep -c ' profile ')" -eq 16 ] || fail "16 profiles: 2 shapes x 4 configurations x v = 1, 2"
[ "$(echo "$dry" | grep -c ' train ')" -eq 40 ] || fail "40 trains: 2 shapes x 4 configurations x 5 plans"
[ "$(echo "$dry" | grep -c ' simulate ')" -eq 90 ] ||
  fail "90 simulations: the profile's costs and the run's own, and at K=2 the profile with the run's links"
[ "$(echo "$dry" | grep -c ' stats .*--cost-out')" -eq 40 ] || fail "40 runs' own costs"
[ "$(echo "$dry" | grep ' train ' | grep -c -- '--device cuda .*--measure-memory')" -eq 40 ] || fail "memory on cuda"
grep ' train ' <<< "$dry" | grep -c -- '-s zb-v -k 2 -m 8 --model default --device cuda --batch-size 64 --seq-len 512' > /dev/null ||
  fail "zb-v at K=2 on 64x512"
grep ' profile ' <<< "$dry" | grep -c -- '-k 1 --device cuda --microbatch-size 16 --seq-len 128' > /dev/null || fail "M=1 profile"
# Two ranks on the one GPU are timed together (each time holds the other's
# time slices); the CPU loop keeps turns.
[ "$(echo "$dry" | grep ' profile ' | grep -c -- '--shared-device together')" -eq 16 ] ||
  fail "every GPU profile with --shared-device together"
[ "$(bash "$bench" --pplab "$pplab" --dry-run | grep -c -- '--shared-device')" -eq 0 ] ||
  fail "the CPU loop's profiles take turns"
for sub in train simulate profile stats; do
  help=$("$pplab" "$sub" --help)
  for flag in $(echo "$dry" | grep " $sub " | grep -o -- ' --[a-z-]*' | sort -u); do
    grep -q -- "$flag" <<< "$help" || fail "pplab $sub has no $flag"
  done
done

# 3b. Tensor parallelism: the profile and every train get the same flags.
dry=$(bash "$bench" --pplab "$pplab" --configs 1:4,2:8 --plans 1f1b,zb-v --tp 2 --sequence-parallel --dry-run)
[ "$(echo "$dry" | grep ' profile ' | grep -c -- '--tp 2 --sequence-parallel')" -eq 4 ] || fail "4 profiles with --tp 2"
[ "$(echo "$dry" | grep ' train ' | grep -c -- '--tp 2 --sequence-parallel')" -eq 4 ] || fail "4 trains with --tp 2"
[ "$(echo "$dry" | grep ' simulate ' | grep -c -- '--tp')" -eq 0 ] || fail "simulate takes the profile's costs"

# 4. Bad arguments.
for args in "--device tpu" "--configs 2:3" "--shapes 16by128" "--steps 2" "--runs 0" "--frobnicate" \
  "--run-timeout 0" "--deadline soon" "--tp 0" "--sequence-parallel" "--plans"; do
  set +e
  err=$(bash "$bench" --pplab "$pplab" $args 2>&1 > /dev/null)
  code=$?
  set -e
  [ "$code" -eq 2 ] || fail "$args: exit $code, expected 2"
  [ "$(echo "$err" | wc -l)" -eq 1 ] && [[ $err == fidelity:* ]] || fail "$args: expected one line, got: $err"
done
echo "PASS"
