#!/usr/bin/env bash
# Peak memory, predicted against measured (issue 12's 10 % target): for each
# configuration, `pplab profile` at the microbatch size (once more with
# `--virtual 2` for the plans with two stages a rank), then for each plan
# `pplab simulate --cost` (the predicted peak activation bytes per rank) and
# `pplab train --measure-memory` (2 steps, synthetic tokens; what the
# executor held). Memory is deterministic, so one run tells. Prints a
# Markdown table, one row per plan and configuration, and how many ranks are
# within 10 % and within 1 %.
#
# Usage, from the project's root after building:
#   bash tools/bench/memory_bench.sh [--pplab build/pplab] [--model small] [--ranks 2] [--seq-len 128]
#                                    [--configs 2:8:none,4:4:all,4:4:none] [--plans LIST] [--device cpu|cuda]
#                                    [--run-timeout 300]
#   --configs L  comma-separated MB:M:RECOMPUTE, each: microbatch size, microbatches, and
#                --recompute none or all (default 2:8:none,4:4:all,4:4:none)
#   --plans L    comma-separated schedules (default gpipe,1f1b,interleaved-1f1b,zb-h1,zb-v,dualpipev;
#                interleaved-1f1b runs with -v 2)
#   --device D   cpu (default) or cuda (all ranks on the visible GPUs, as `train` maps them)
#   --run-timeout S  bound each profile, simulate and train (default 300 s). A command that
#                fails or passes it is named in its row (or, for a profile, on stderr for
#                the configuration's rows) and the bench goes on; it then exits 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
pplab=build/pplab model=small ranks=2 seq_len=128 device=cpu run_timeout=300
configs=2:8:none,4:4:all,4:4:none
plans=gpipe,1f1b,interleaved-1f1b,zb-h1,zb-v,dualpipev
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || case $1 in --pplab|--model|--ranks|--seq-len|--configs|--plans|--device|--run-timeout) echo "memory_bench: $1 needs a value" >&2; exit 2 ;; esac
  case $1 in
    --pplab) pplab=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --seq-len) seq_len=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --plans) plans=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --run-timeout) run_timeout=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "memory_bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for n in "$ranks" "$seq_len" "$run_timeout"; do
  case $n in ''|*[!0-9]*|0*) echo "memory_bench: '$n' is not a positive whole number (--ranks, --seq-len, --run-timeout)" >&2; exit 2 ;; esac
done
case $device in cpu|cuda) ;; *) echo "memory_bench: --device '$device' must be cpu or cuda" >&2; exit 2 ;; esac
IFS=, read -ra config_list <<< "$configs"
for c in "${config_list[@]}"; do
  [[ $c =~ ^[1-9][0-9]*:[1-9][0-9]*:(none|all)$ ]] ||
    { echo "memory_bench: --configs entry '$c' must be MB:M:none or MB:M:all" >&2; exit 2; }
done
IFS=, read -ra plan_list <<< "$plans"
[ -x "$pplab" ] || { echo "memory_bench: no pplab at $pplab (build it, or pass --pplab)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# bounded WHAT LOG COMMAND...: runs COMMAND under --run-timeout, its output in
# LOG; on failure says why in $work/why and fails.
bounded() {
  local what=$1 log=$2 rc=0 last
  shift 2
  timeout -k 10 "$run_timeout" "$@" > "$log" 2> "$log.err" || rc=$?
  case $rc in
    0) return 0 ;;
    124|137) echo "$what passed --run-timeout $run_timeout s" > "$work/why" ;;
    *) last=$(cat "$log.err" "$log" | grep -v '^\s*$' | tail -1 | cut -c1-160)
       echo "$what failed, exit $rc${last:+: $last}" > "$work/why" ;;
  esac
  return 1
}
echo "Peak activation memory, $model preset, K=$ranks, $device, sequences of $seq_len tokens"
echo
echo "| microbatch x M | recompute | plan | predicted MB by rank | measured MB by rank | error by rank |"
echo "|---|---|---|---|---|---|"
for c in "${config_list[@]}"; do
  IFS=: read -r mb m recompute <<< "$c"
  for v in 1 2; do
    cost=$work/cost_${mb}_v$v.json
    [ -f "$cost" ] || [ -f "$cost.failed" ] ||
      bounded "pplab profile (microbatch $mb, -v $v)" "$work/profile.log" "$pplab" profile --model "$model" \
        -k "$ranks" -v "$v" --microbatch-size "$mb" --seq-len "$seq_len" --device "$device" --warmup 1 \
        --repeats 3 -o "$cost" || { cp "$work/why" "$cost.failed"; echo "memory_bench: $(cat "$work/why")" >&2; }
  done
  for plan in "${plan_list[@]}"; do
    flags=(-s "$plan") v=1
    case $plan in interleaved-1f1b) flags+=(-v 2); v=2 ;; zb-v|dualpipev) v=2 ;; esac
    cost=$work/cost_${mb}_v$v.json
    if [ -f "$cost.failed" ]; then
      echo "| $mb x $m | $recompute | $plan | failed: $(cat "$cost.failed") | | |"
      continue
    fi
    if ! bounded "pplab simulate" "$work/sim.json" "$pplab" simulate "${flags[@]}" -k "$ranks" -m "$m" \
           --cost "$cost" --recompute "$recompute" --json ||
       ! bounded "pplab train" "$work/train.json" "$pplab" train "${flags[@]}" -k "$ranks" -m "$m" \
           --model "$model" --batch-size $((mb * m)) --seq-len "$seq_len" --device "$device" --steps 2 --seed 1 \
           --synthetic --measure-memory --json --out '' -q --eval-every 0 --recompute "$recompute"; then
      echo "| $mb x $m | $recompute | $plan | failed: $(cat "$work/why") | | |"
      continue
    fi
    python3 - "$mb x $m" "$recompute" "$plan" "$work/sim.json" "$work/train.json" <<'PY'
import json, sys
shape, recompute, plan = sys.argv[1:4]
sim = json.load(open(sys.argv[4]))
text = open(sys.argv[5]).read()
train = json.loads(text[text.index("{"):])
pred = [r["peak_activation_bytes"] / 1e6 for r in sim["per_rank"]]
meas = [b / 1e6 for b in train["measured_peak_activation_bytes"]]
err = [100 * (p - m) / m for p, m in zip(pred, meas)]
print("| %s | %s | %s | %s | %s | %s |" % (shape, recompute, plan, " / ".join("%.2f" % x for x in pred),
      " / ".join("%.2f" % x for x in meas), " / ".join("%+.1f %%" % x for x in err)))
PY
  done
done | tee "$work/rows.md"
python3 - "$work/rows.md" <<'PY'
import sys
errors, failed = [], 0
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if cells[3].startswith("failed: "):
        failed += 1
        continue
    errors += [abs(float(e.rstrip(" %"))) for e in cells[5].split(" / ")]
print()
print("Ranks within 10 %%: %d of %d; within 1 %%: %d." %
      (sum(e <= 10 for e in errors), len(errors), sum(e <= 1 for e in errors)))
if failed:
    print("%d row%s failed (named in the table)." % (failed, "" if failed == 1 else "s"))
    sys.exit(1)
PY
