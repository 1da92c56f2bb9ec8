#!/usr/bin/env bash
# Close the loop: profile -> simulate -> train -> diff for each plan, and the
# predicted step time against the measured one. Small preset, K=2, batch 16 x
# 128 tokens in M=8 microbatches of 2, synthetic tokens.
# Usage (after building): bash tools/bench/fidelity.sh [build/pplab] [runs]
# Prints a Markdown report; docs/fidelity.md holds one.
set -euo pipefail
pplab=${1:-build/pplab}
runs=${2:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
prof=(--model small -k 2 --microbatch-size 2 --seq-len 128 --warmup 3 --repeats 15)
train=(--model small --batch-size 16 --seq-len 128 --steps 10 --seed 1 --json --synthetic --out '' -q --eval-every 0
       --warmup-steps 0)
plans=("-s gpipe" "-s 1f1b" "-s interleaved-1f1b -v 2" "-s zb-h1")

echo "## $(date -u +%F), $(nproc) cores, $runs runs"
echo
for run in $(seq 1 "$runs"); do
  "$pplab" profile "${prof[@]}" -o "$out/cost.json" > /dev/null
  "$pplab" profile "${prof[@]}" --virtual 2 -o "$out/cost_v2.json" > /dev/null
  for plan in "${plans[@]}"; do
    cost=$out/cost.json
    [[ $plan == *"-v 2"* ]] && cost=$out/cost_v2.json
    # shellcheck disable=SC2086
    # The profile's step work and spreads are in the cost file: the prediction
    # includes the optimizer, clipping and all-reduces, and --samples gives
    # the spread of the step time. (K=2 ranks of cores/2 threads share the
    # host as 2 slots: no queueing, so no --devices here.)
    "$pplab" simulate $plan -k 2 -m 8 --cost "$cost" --samples 100 --trace "$out/sim.json" --json \
      > "$out/sim_summary.json"
    # shellcheck disable=SC2086
    "$pplab" train $plan -k 2 -m 8 "${train[@]}" --trace "$out/real.json" > "$out/train.json"
    "$pplab" diff "$out/sim.json" "$out/real.json" --json > "$out/diff.json"
    python3 - "$run" "$plan" "$out/sim_summary.json" "$out/train.json" "$out/diff.json" >> "$out/rows.txt" <<'PY'
import json, statistics, sys
run, plan = sys.argv[1], sys.argv[2]
s, t, d = (json.load(open(p)) for p in sys.argv[3:6])
step = statistics.median(t["step_times_ms"][1:])
drift = d.get("first_drift")
where = "%s on rank %d" % (drift["action"], drift["rank"]) if drift else "none"
print(json.dumps({"run": int(run), "plan": plan, "predicted": s["makespan"], "step": step,
                  "p10": s["samples"]["p10"], "p90": s["samples"]["p90"],
                  "makespan": d["measured"]["makespan"], "drift": where}))
PY
  done
done
python3 - "$out/rows.txt" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| run | plan | predicted step ms | sampled p10..p90 ms | measured median step ms | error | measured pipeline makespan ms (last step) | first drift > 5 % |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| %d | %s | %.1f | %.1f..%.1f | %.1f | %+.1f %% | %.1f | %s |" % (r["run"], r["plan"], r["predicted"],
          r["p10"], r["p90"], r["step"], 100 * (r["predicted"] - r["step"]) / r["step"], r["makespan"], r["drift"]))
print()
print("Order by predicted step time in each run, and by measured:")
for run in sorted({r["run"] for r in rows}):
    mine = [r for r in rows if r["run"] == run]
    p = [r["plan"] for r in sorted(mine, key=lambda r: r["predicted"])]
    m = [r["plan"] for r in sorted(mine, key=lambda r: r["step"])]
    print("- run %d: predicted %s; measured %s%s" % (run, " < ".join(p), " < ".join(m), "" if p == m else " (differs)"))
PY
