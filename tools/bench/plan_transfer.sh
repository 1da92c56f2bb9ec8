#!/usr/bin/env bash
# How far plan's fitted costs carry across microbatch sizes: profiles one
# configuration at a few microbatch sizes, has `pplab plan` predict the step
# of one schedule at every microbatch count M from one profile and from
# several fitted together (--cost given again: between each two sizes, a
# fixed time a layer besides the time per FLOP, docs/planning.md "Several
# profiles"), trains each M, and prints a Markdown table of predicted
# against measured step times (median of the steps after the first 2). A
# prediction at a profiled microbatch size is marked *: plan uses that
# profile's stages as measured.
#
# Usage, from the project's root after building:
#   bash tools/bench/plan_transfer.sh [options]
#   --pplab P       the binary (default build/pplab)
#   --device D      cpu (default) or cuda
#   --model M       preset or config (default small)
#   --shape BxL     sequences a step x tokens a sequence (default 16x128)
#   -k K            pipeline ranks (default 1)
#   --tp T          tensor-parallel ranks per pipeline rank (default 1)
#   --schedule S    the schedule trained and predicted (default 1f1b)
#   --ms LIST       microbatch counts, comma-separated (default: every divisor of B)
#   --fit LIST      the microbatch sizes fitted together, two or more,
#                   comma-separated (default: the smallest and the largest of --ms's)
#   --single S      the microbatch size of the one-profile fit (default: the
#                   --ms size nearest the geometric mean of --fit's ends)
#   --steps N       training steps per M (default 12: 10 measured)
#   --run-timeout S bound each profile, plan and train (default 600 s)
#   --out DIR       keep the profiles, plans and training output there
#   --dry-run       print the commands, run nothing
set -euo pipefail
cd "$(dirname "$0")/../.."
pplab=build/pplab device=cpu model=small shape=16x128 ranks=1 tp=1 schedule=1f1b ms="" fit="" single=""
steps=12 run_timeout=600 out="" dry_run=0
die() { echo "plan_transfer: $*" >&2; exit 2; }
whole() { case $2 in ''|*[!0-9]*|0*) die "$1 '$2' is not a positive whole number" ;; esac; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || case $1 in --pplab|--device|--model|--shape|-k|--tp|--schedule|--ms|--fit|--single|--steps|--run-timeout|--out) die "$1 needs a value" ;; esac
  case $1 in
    --pplab) pplab=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;;
    -k) ranks=$2; shift 2 ;;
    --tp) tp=$2; shift 2 ;;
    --schedule) schedule=$2; shift 2 ;;
    --ms) ms=$2; shift 2 ;;
    --fit) fit=$2; shift 2 ;;
    --single) single=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --run-timeout) run_timeout=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $shape =~ ^([1-9][0-9]*)x([1-9][0-9]*)$ ]] || die "--shape '$shape' is not BxL (e.g. 16x128)"
batch=${BASH_REMATCH[1]} seq=${BASH_REMATCH[2]}
whole -k "$ranks"; whole --tp "$tp"; whole --steps "$steps"; whole --run-timeout "$run_timeout"
[ "$steps" -ge 3 ] || die "--steps '$steps': at least 3 (the first 2 are not measured)"
case $device in cpu|cuda|cuda:*) ;; *) die "--device '$device' is not cpu or cuda" ;; esac
[ "$dry_run" = 1 ] || [ -x "$pplab" ] || die "no pplab at $pplab (build it, or pass --pplab)"
if [ -z "$ms" ]; then
  for ((m = 1; m <= batch; ++m)); do ((batch % m == 0)) && ms+="${ms:+,}$m"; done
fi
IFS=, read -r -a m_list <<< "$ms"
sizes=()
for m in "${m_list[@]}"; do
  whole --ms "$m"
  ((batch % m == 0)) || die "--ms $m does not divide the $batch sequences of --shape $shape"
  sizes+=($((batch / m)))
done
sorted=($(printf '%s\n' "${sizes[@]}" | sort -n -u))
[ "${#sorted[@]}" -ge 2 ] || die "--ms '$ms': two microbatch counts at least"
[ -n "$fit" ] || fit="${sorted[0]},${sorted[-1]}"
[[ $fit =~ ^[1-9][0-9]*(,[1-9][0-9]*)+$ ]] || die "--fit '$fit' is not two or more sizes A,B[,C...]"
fit_sizes=($(tr , '\n' <<< "$fit" | sort -n -u))
[ "${#fit_sizes[@]}" -ge 2 ] || die "--fit '$fit': two different microbatch sizes at least"
if [ -z "$single" ]; then
  single=$(python3 -c 'import math,sys; a,b=int(sys.argv[1]),int(sys.argv[2]); s=[int(x) for x in sys.argv[3:]]
print(min(s, key=lambda x: (abs(math.log(x) - (math.log(a) + math.log(b)) / 2), x)))' \
    "${fit_sizes[0]}" "${fit_sizes[-1]}" "${sorted[@]}")
fi
whole --single "$single"
for s in "${fit_sizes[@]}"; do
  ((batch % s == 0)) || die "--fit $fit: $s does not divide the $batch sequences of --shape $shape"
done
((batch % single == 0)) || die "--single $single does not divide the $batch sequences of --shape $shape"

if [ "$dry_run" = 1 ]; then
  dir=${out:-WORK}
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  dir=${out:-$work}
  mkdir -p "$dir"
  # An earlier run's in a reused --out would read as this one's (a stop
  # printed its rows against its plans).
  rm -f "$dir/measured.jsonl" "$dir/plan-one.json" "$dir/plan-several.json"
fi
# `run WHAT FILE CMD...`: CMD bounded by --run-timeout, its output in FILE;
# a failure names WHAT and FILE and ends the bench. A dry run prints CMD.
run() {
  local what=$1 file=$2 code=0
  shift 2
  if [ "$dry_run" = 1 ]; then
    echo "# $what"
    printf '%q ' timeout -k 10 "$run_timeout" "$@" | sed 's/ $//'
    echo
    return 0
  fi
  # In the background, waited for: a TERM (gpu_session.sh's bound) runs the
  # trap at once, which stops the run and prints the rows that finished.
  timeout -k 10 "$run_timeout" "$@" > "$file" 2>&1 &
  child=$!
  wait "$child" || code=$?
  child=""
  if [ "$code" -ne 0 ]; then
    trap - EXIT  # the output stays for the reader
    echo "plan_transfer: $what failed (exit $code); its output: $file" >&2
    tail -3 "$file" >&2
    exit 1
  fi
}
common=(--model "$model" -k "$ranks" --tp "$tp" --seq-len "$seq" --device "$device")
# The table of the M measured so far against both plans.
table() {
  echo "$device, model $model, $shape a step, K=$ranks, T=$tp, $schedule, $steps steps ($(date -u +%Y-%m-%d))"
  echo
  python3 tools/bench/plan_transfer_table.py "$dir/measured.jsonl" "$dir/plan-one.json" "$dir/plan-several.json" \
    "$schedule"
}
# Stopped from outside (a bound, ^C): the run going on is stopped, and the
# rows measured so far are printed, where both plans were made.
child=""
stopped() {
  trap - TERM INT
  if [ -n "$child" ]; then kill -TERM "$child" 2> /dev/null || true; wait "$child" 2> /dev/null || true; fi
  echo "plan_transfer: stopped by a signal; the rows below are the M measured before it"
  if [ -s "$dir/measured.jsonl" ] && [ -s "$dir/plan-one.json" ] && [ -s "$dir/plan-several.json" ]; then
    table || true
  else
    echo "(no training run had finished)"
  fi
  exit 143
}
[ "$dry_run" = 1 ] || trap stopped TERM INT
# The model, T and the schedule, checked in a few milliseconds by an
# analytic plan before the profile, the long part on a GPU.
if [ "$dry_run" = 0 ]; then
  checked=$("$pplab" plan --model "$model" --ranks "$ranks" --tp "$tp" --global-batch "$batch" --seq-len "$seq" \
    --memory-per-rank 1TiB --schedules "$schedule" --recompute none -o "$dir/analytic-plan.json" 2>&1) ||
    { why=$(grep -m1 'error' <<< "$checked" || head -n 1 <<< "$checked")
      why=${why:-$pplab plan failed without a message}
      die "--model $model, --tp $tp, --schedule $schedule: ${why#pplab: error: }"; }
fi
# Every size in one run of the same workers: profile-mb<N>.json each.
profiled=$(printf '%s\n' "${fit_sizes[@]}" "$single" | sort -n -u | paste -sd, -)
run "profile at microbatches of $profiled" "$dir/profile.out" \
  "$pplab" profile "${common[@]}" --microbatch-size "$profiled" -o "$dir/profile.json"
plan=("$pplab" plan --model "$model" --ranks "$ranks" --global-batch "$batch" --memory-per-rank 1TiB
      --schedules "$schedule" --recompute none --top 100000 --json)
run "plan from one profile" "$dir/plan-one.json" "${plan[@]}" -o "$dir/plan-one-best.json" \
  --cost "$dir/profile-mb$single.json"
costs=()
for s in "${fit_sizes[@]}"; do costs+=(--cost "$dir/profile-mb$s.json"); done
run "plan from ${#fit_sizes[@]} profiles" "$dir/plan-several.json" "${plan[@]}" -o "$dir/plan-several-best.json" \
  "${costs[@]}"
[ "$dry_run" = 1 ] || : > "$dir/measured.jsonl"
for m in "${m_list[@]}"; do
  run "train at M=$m" "$dir/train-m$m.out" "$pplab" train -q --out '' "${common[@]}" --batch-size "$batch" -m "$m" \
    --schedule "$schedule" --steps "$steps" --json
  [ "$dry_run" = 1 ] && continue
  python3 - "$dir/train-m$m.out" "$m" >> "$dir/measured.jsonl" << 'PY'
import json, statistics, sys
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if isinstance(j, dict) and "step_times_ms" in j:
        print(json.dumps({"M": int(sys.argv[2]), "step_ms": statistics.median(j["step_times_ms"][2:])}))
        break
else:
    sys.exit("no step_times_ms in " + sys.argv[1])
PY
done
[ "$dry_run" = 1 ] && exit 0
table
