#!/usr/bin/env bash
# Profile against reality: profile the small preset at K=2 (microbatch 2 x 128
# tokens, as train_bench.sh's batch 16 split into 8 microbatches), predict each
# plan's step with `pplab simulate --cost`, and compare with the median step
# time and the peak activation bytes `pplab train --measure-memory` measures.
# Usage (after building): bash tools/bench/profile_bench.sh [build/pplab]
# Prints a Markdown report; docs/profile.md holds one.
set -euo pipefail
pplab=${1:-build/pplab}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
prof=(--model small -k 2 --microbatch-size 2 --seq-len 128 --warmup 3 --repeats 15)
train=(--model small --batch-size 16 --seq-len 128 --steps 8 --seed 1 --measure-memory --json --synthetic --out '' -q
       --eval-every 0 --warmup-steps 0)

echo "## Profile (small preset, K=2, microbatch 2 x 128 tokens, $(nproc) cores)"
echo
echo '```'
"$pplab" profile "${prof[@]}" -o "$out/cost.json"
"$pplab" profile "${prof[@]}" --virtual 2 -o "$out/cost_v2.json"
echo '```'
echo
python3 - "$out/cost.json" "$out/cost_v2.json" <<'PY'
import json, sys
for path in sys.argv[1:]:
    d = json.load(open(path))
    print("%s: transient MB per stage (F above what it keeps / B above what was live):" % d["meta"]["partition"],
          ", ".join("%.2f / %.2f" % (s["forward_transient_bytes"] / 1e6, s["backward_transient_bytes"] / 1e6)
                    for s in d["meta"]["extra"]["stages"]))
PY
echo
echo "## Predicted against measured (M=8)"
echo
echo "| plan | predicted makespan ms | measured median step ms | error | measured last-step makespan ms (trace) | busy measured / predicted rank 0, 1 | predicted peak MB rank 0 / 1 | measured peak MB rank 0 / 1 |"
echo "|---|---|---|---|---|---|---|---|"
for plan in "-s gpipe" "-s 1f1b" "-s interleaved-1f1b -v 2" "-s zb-h1"; do
  cost=$out/cost.json
  [[ $plan == *"-v 2"* ]] && cost=$out/cost_v2.json
  # shellcheck disable=SC2086
  "$pplab" simulate $plan -k 2 -m 8 --cost "$cost" --json > "$out/sim.json"
  # shellcheck disable=SC2086
  "$pplab" train $plan -k 2 -m 8 "${train[@]}" --trace "$out/trace.json" > "$out/train.json"
  "$pplab" stats "$out/trace.json" --json > "$out/stats.json"
  python3 - "$plan" "$out/sim.json" "$out/train.json" "$out/stats.json" <<'PY'
import json, statistics, sys
plan, s, t, st = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
measured = statistics.median(t["step_times_ms"][1:])
pred = s["makespan"]
pp = [r["peak_activation_bytes"] / 1e6 for r in s["per_rank"]]
mp = [b / 1e6 for b in t["measured_peak_activation_bytes"]]
busy = ["%.2f" % (m["busy"] / p["busy"]) for m, p in zip(st["per_rank"], s["per_rank"])]
print("| %s | %.1f | %.1f | %+.1f %% | %.1f | %s | %.2f / %.2f | %.2f / %.2f |" %
      (plan, pred, measured, 100 * (pred - measured) / measured, st["makespan"], ", ".join(busy), pp[0], pp[1],
       mp[0], mp[1]))
PY
done
