#!/usr/bin/env bash
# How far plan's memory carries from one profile: profiles one configuration
# (the microbatch size, K ranks, the uniform partition), then for every
# schedule, partition and microbatch count asked for has `pplab plan --cost`
# write that candidate's costs as it costed them (`--pick N --cost-out`),
# predicts each rank's peak activation bytes from them (`pplab simulate
# --plan --cost`) and measures them (`pplab train --measure-memory`, 2
# synthetic steps; memory is deterministic, so one run tells). Prints a
# Markdown table of predicted against measured peaks, one row per candidate,
# and how many ranks are within 1 % and within 10 %. docs/planning.md
# ("Memory per rank") holds the CPU table.
#
# Usage, from the project's root after building:
#   bash tools/bench/plan_memory.sh [options]
#   --pplab P         the binary (default build/pplab)
#   --device D        cpu (default) or cuda
#   --model M         preset or config (default small)
#   --shape BxL       sequences a step x tokens a sequence (default 16x128)
#   --profile-mb N    the profile's microbatch size (default 2)
#   --precision P     fp32 (default) or bf16, for the profile and the runs
#   --attention A     auto (default), explicit or sdpa (train --attention)
#   --microbatches L  microbatch counts M, comma-separated (default 8)
#   --run-timeout S   bound each profile, plan, simulate and train (default 300 s); a row
#                     whose command passes it or fails says so, and the bench goes on
#   --out DIR         keep the profile, plans and costs there (default: a temporary folder)
#   --dry-run         print the profile's command and the rows, run nothing
set -euo pipefail
cd "$(dirname "$0")/../.."
pplab=build/pplab device=cpu model=small shape=16x128 profile_mb=2 precision=fp32 attention=auto
microbatches=8 out= run_timeout=300 dry_run=0
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || case $1 in --pplab|--device|--model|--shape|--profile-mb|--precision|--attention|--microbatches|--out|--run-timeout) echo "plan_memory: $1 needs a value" >&2; exit 2 ;; esac
  case $1 in
    --pplab) pplab=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;;
    --profile-mb) profile_mb=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --attention) attention=$2; shift 2 ;;
    --microbatches) microbatches=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --run-timeout) run_timeout=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "plan_memory: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case $shape in *x*) ;; *) echo "plan_memory: --shape '$shape' must be BxL, e.g. 16x128" >&2; exit 2 ;; esac
batch=${shape%x*} seq_len=${shape#*x}
for n in "$batch" "$seq_len" "$profile_mb" "$run_timeout"; do
  case $n in ''|*[!0-9]*|0) echo "plan_memory: '$n' is not a positive whole number (--shape, --profile-mb, --run-timeout)" >&2; exit 2 ;; esac
done
case $device in cpu|cuda) ;; *) echo "plan_memory: --device '$device' must be cpu or cuda" >&2; exit 2 ;; esac
case $precision in fp32|bf16) ;; *) echo "plan_memory: --precision '$precision' must be fp32 or bf16" >&2; exit 2 ;; esac
case $attention in auto|explicit|sdpa) ;; *) echo "plan_memory: --attention '$attention' must be auto, explicit or sdpa" >&2; exit 2 ;; esac
case $microbatches in ''|*[!0-9,]*) echo "plan_memory: --microbatches '$microbatches' must be counts like 4,8,16" >&2; exit 2 ;; esac
profile=("$pplab" profile --device "$device" --model "$model" -k 2 --microbatch-size "$profile_mb" --seq-len "$seq_len"
  --precision "$precision" --attention "$attention")
if [ "$dry_run" = 1 ]; then
  echo "$(printf '%q ' "${profile[@]}")-o OUT/profile.json"
  echo "then per row: plan --cost OUT/profile.json --pick N --cost-out, simulate --plan --cost, train --measure-memory;"
  echo "M = $microbatches, each command bounded by $run_timeout s"
  exit 0
fi
[ -x "$pplab" ] || { echo "plan_memory: $pplab is not built (cmake --build build)" >&2; exit 2; }
if [ -z "$out" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

# The profile: K = 2 ranks, the uniform partition, the train flags that the
# plans' train lines carry over.
if ! timeout -k 10 "$run_timeout" "${profile[@]}" -o "$out/profile.json" > "$out/profile.txt" 2>&1; then
  tail -n 5 "$out/profile.txt" >&2
  echo "plan_memory: the profile failed or passed --run-timeout $run_timeout s; no rows" >&2
  exit 1
fi

PPLAB="$pplab" OUT="$out" RUN_TIMEOUT="$run_timeout" MODEL="$model" BATCH="$batch" SEQ_LEN="$seq_len" DEVICE="$device" \
  MICROBATCHES="$microbatches" python3 - <<'EOF'
import json, os, shlex, subprocess, sys

pplab, out = os.environ["PPLAB"], os.environ["OUT"]
counts = [int(m) for m in os.environ["MICROBATCHES"].split(",") if m]
plan = [pplab, "plan", "--model", os.environ["MODEL"], "--ranks", "2", "--global-batch", os.environ["BATCH"],
        "--seq-len", os.environ["SEQ_LEN"], "--memory-per-rank", "1TiB", "--cost", f"{out}/profile.json",
        "--top", "1000000", "--json", "-o", f"{out}/plan.json", "--cost-out", f"{out}/costs.json"]
# (schedule, stages a rank, partition method, recompute)
rows = [("gpipe", 1, "uniform", "none"), ("1f1b", 1, "uniform", "none"), ("1f1b", 1, "compute", "none"),
        ("zb-h1", 1, "uniform", "none"),
        ("zb-h2", 1, "uniform", "none"), ("interleaved-1f1b", 2, "uniform", "none"),
        ("interleaved-zb", 2, "uniform", "none"), ("zb-v", 2, "uniform", "none"), ("v-half", 2, "uniform", "none"),
        ("v-min", 2, "uniform", "none"), ("dualpipev", 2, "uniform", "none"), ("dualpipe", 2, "uniform", "none"),
        ("1f1b", 1, "uniform", "all"), ("zb-h1", 1, "uniform", "all")]


timeout = int(os.environ["RUN_TIMEOUT"])


class Stopped(Exception):
    pass


def run(args, what):
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Stopped(f"{what} passed --run-timeout {timeout} s")
    if r.returncode != 0:
        last = (r.stdout + r.stderr).strip().splitlines()[-1:] or ["no message"]
        raise Stopped(f"{what} failed, exit {r.returncode}: {last[0][:160]}")
    return r.stdout


try:
    ranking = json.loads(run(plan, "plan"))["candidates"]
except Stopped as e:
    sys.exit(f"plan_memory: {e}: {shlex.join(plan)}")
print(f"| schedule | v | layers | M | recompute | rank 0 measured | error | rank 1 measured | error |")
print("|---|---|---|---|---|---|---|---|---|")
within1 = within10 = ranks = 0
for M in counts:
    for schedule, v, partition, recompute in rows:
        picks = [i for i, c in enumerate(ranking)
                 if c["schedule"] == schedule and c["virtual_stages"] == v and c["microbatches"] == M and
                 c["recompute"] == recompute and c["partition"] == partition]
        if not picks:
            print(f"| {schedule} | {v} | {partition} | {M} | {recompute} | (not a candidate) | | | |")
            continue
        try:
            row = json.loads(run(plan + ["--pick", str(picks[0] + 1)], "plan --pick"))
            picked = row["picked"]
            sim = json.loads(run([pplab, "simulate", "--plan", f"{out}/plan.json", "--cost", f"{out}/costs.json",
                                  "--json"], "simulate"))
            predicted = {r["rank"]: r["peak_activation_bytes"] for r in sim["per_rank"]}
            # The train line carries the profile's attention and precision
            # (and its device kind, when not the CPU).
            train = shlex.split(row["train_command"])
            if "--device" not in train:
                train += ["--device", os.environ["DEVICE"]]
            train += ["--synthetic", "--steps", "2", "--measure-memory", "--out", "", "--json"]
            measured = json.loads(run(train, f"train {schedule}"))["measured_peak_activation_bytes"]
        except Stopped as e:
            print(f"| {schedule} | {v} | {partition} | {M} | {recompute} | ({e}) | | | |", flush=True)
            continue
        cells = []
        for r, m in enumerate(measured):
            if not m:
                cells.append(f"{m} | n/a")  # nothing measured: no error to give
                continue
            error = (predicted[r] - m) / m
            ranks += 1
            within1 += abs(error) <= 0.01
            within10 += abs(error) <= 0.10
            cells.append(f"{m:,} | {100 * error:+.2f} %")
        print(f"| {schedule} | {v} | {picked['layers_per_stage']} | {M} | {recompute} | {' | '.join(cells)} |",
              flush=True)
print(f"\n{within1} of {ranks} ranks within 1 %, {within10} within 10 %.")
EOF
