#!/usr/bin/env bash
# Runtime benchmark: tokens/s of one process against K=2 pipeline processes on
# the same cores, executor overhead per action, and the measured bubble of a
# plan against the simulator's prediction from costs measured in that run.
# Usage (after building): bash tools/bench/train_bench.sh [build/pplab]
# Prints a Markdown report; docs/runtime.md holds one.
set -euo pipefail
pplab=${1:-build/pplab}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(--model small --batch-size 16 --seq-len 128 --steps 8 --seed 1 --out '' -q --eval-every 0 --warmup-steps 0)
model=("${common[@]}" --synthetic)
tokens=$((16 * 128))

median_ms() {  # the median step time, ignoring the first (warm-up) step
  python3 -c 'import json,sys,statistics; d=json.load(sys.stdin); print("%.1f" % statistics.median(d["step_times_ms"][1:]))'
}

echo "## Tokens per second (small preset, batch 16 x 128 tokens, $(nproc) cores)"
echo
echo "| run | threads per process | median step ms | tokens/s |"
echo "|---|---|---|---|"
run() {  # label, threads, train args...
  local label=$1 threads=$2
  shift 2
  local ms
  ms=$(OMP_NUM_THREADS=$threads "$pplab" train "${model[@]}" "$@" --json | median_ms)
  echo "| $label | $threads | $ms | $(python3 -c "print(round($tokens / $ms * 1000))") |"
}
run "1 process, whole batch (-k 1 -m 1)" "$(nproc)" -k 1 -m 1
run "1 process, whole batch (-k 1 -m 1)" 1 -k 1 -m 1
run "1 process, 4 microbatches (-k 1 -m 4)" "$(nproc)" -k 1 -m 4
run "2 processes, gpipe -m 8" 1 -s gpipe -k 2 -m 8
run "2 processes, 1f1b -m 4" 1 -s 1f1b -k 2 -m 4
run "2 processes, 1f1b -m 8" 1 -s 1f1b -k 2 -m 8
run "2 processes, interleaved-1f1b -v 2 -m 8" 1 -s interleaved-1f1b -v 2 -k 2 -m 8
run "2 processes, zb-h1 -m 8" 1 -s zb-h1 -k 2 -m 8
run "DP 2 x PP 1 (plain DDP), -m 1" 1 --dp 2 -k 1 -m 1
run "DP 2 x PP 2, 1f1b -m 4 (world 4 on these cores)" 1 --dp 2 -k 2 -m 4
model=("${common[@]}")  # text: the default corpus, padded
run "2 processes, 1f1b -m 8, text (default corpus)" 1 -s 1f1b -k 2 -m 8
model=("${common[@]}" --synthetic)
echo

echo "## Executor overhead (1 process, 1f1b -m 8, last step)"
echo
OMP_NUM_THREADS=1 "$pplab" train "${model[@]}" -k 1 -m 8 --trace "$out/k1.json" > /dev/null
"$pplab" stats "$out/k1.json" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
r = d["per_rank"][0]
print("%d actions; span %.1f ms, compute %.1f ms; time between actions: %.3f ms per action" %
      (r["actions"], r["span"], r["busy"], r["gaps_per_action"]))'
echo

echo "## Measured bubble against the simulator (costs estimated from the same run)"
echo
echo "| plan | measured makespan ms | predicted makespan ms | measured bubble | predicted bubble |"
echo "|---|---|---|---|---|"
for plan in "-s gpipe -k 2 -m 8" "-s 1f1b -k 2 -m 8" "-s zb-h1 -k 2 -m 8" "-s interleaved-1f1b -v 2 -k 2 -m 8"; do
  # shellcheck disable=SC2086
  "$pplab" export $plan -o "$out/plan.json" 2> /dev/null
  OMP_NUM_THREADS=1 "$pplab" train "${model[@]}" --plan "$out/plan.json" --trace "$out/m.json" > /dev/null
  "$pplab" stats "$out/m.json" --cost-out "$out/cost.json" --json > "$out/m_stats.json"
  "$pplab" simulate --plan "$out/plan.json" --cost "$out/cost.json" --json > "$out/sim.json"
  python3 - "$plan" "$out/m_stats.json" "$out/sim.json" <<'PY'
import json, sys
plan, m, s = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
print("| %s | %.1f | %.1f | %.1f %% | %.1f %% |" % (plan, m["makespan"], s["makespan"],
      100 * m["bubble_fraction"], 100 * s["bubble_fraction"]))
PY
done
